"""Send the same requests to vLLM's render server and to this frontend; print every difference.

Usage: python -m tokenspec.harness.frontend.compare_vllm VLLM_URL OUR_URL MODEL_DIR
Both servers must serve MODEL_DIR as ``tokenspec-tiny`` with the hermes tool parser and the qwen3 reasoning
parser. Random parts (request ids, tool-call ids, ``created``) are normalised before comparing. A quick
manual parity check; the suite's hypothesis-driven comparison is the thorough one.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import httpx
from tokenizers import Tokenizer

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
RENDER_CASES: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Hello"}]},
    "system_unicode": {"messages": [{"role": "system", "content": "Be brief ✓"},
                                    {"role": "user", "content": "héllo 🎉 世界"}]},
    "multipart": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]}]},
    "tools": {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS},
    "multi_turn_tools": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny.", "reasoning": "look"},
        {"role": "user", "content": "Thanks"}], "tools": TOOLS},
    "no_thinking": {"messages": [{"role": "user", "content": "x"}],
                    "chat_template_kwargs": {"enable_thinking": False}},
    "sampling": {"messages": [{"role": "user", "content": "x"}], "temperature": 0.5, "top_p": 0.9, "n": 2,
                 "seed": 7, "stop": ["END"], "max_completion_tokens": 7, "max_tokens": 9, "logprobs": True,
                 "top_logprobs": 3, "logit_bias": {"5": 300}, "stream": True,
                 "stream_options": {"include_usage": True}},
    "defaults_set": {"messages": [{"role": "user", "content": "x"}], "n": 1, "top_k": 0, "max_tokens": 16,
                     "temperature": 1, "ignore_eos": False, "min_tokens": 0},
    "greedy_n2": {"messages": [{"role": "user", "content": "x"}], "temperature": 0, "n": 2},
    "beam": {"messages": [{"role": "user", "content": "x"}], "use_beam_search": True},
    "unknown_model": {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
    "bad_messages": {"messages": "nope"},
}
COMPLETION_CASES: dict[str, dict[str, Any]] = {
    "one": {"prompt": "Hello world"},
    "several": {"prompt": ["a", "b"], "max_tokens": 3, "echo": True, "logprobs": 2},
    "ids": {"prompt": [[1, 2, 3], [4]]},
    "empty": {"prompt": []},
}
DERENDER_TEXTS = {
    "plain": ("hello world", {}),
    "think": ("<think>abc</think>hello", {}),
    "tool": ("abc</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
             "</tool_call>", {"tools": TOOLS}),
    "tool_choice_none": ("</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                         {"tools": TOOLS, "tool_choice": "none"}),
    "bad_json": ("</think><tool_call>{\"name\": \"f\", \"arguments\": {]}</tool_call>", {"tools": TOOLS}),
    "emoji": ("</think>héllo 🎉 ok", {}),
    "no_thinking": ("<think>a</think>b", {"chat_template_kwargs": {"enable_thinking": False}}),
    "partial_end": ("abc</thin", {}),
}


def _normalise(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    text = re.sub(r'"(created)": \d+', r'"\1": 0', text)
    text = re.sub(r"(chatcmpl|cmpl|chatcmpl-tool)-[0-9a-f]{16}", r"\1-X", text)
    text = re.sub(r'"id": "[0-9a-f]{16}"', '"id": "X"', text)
    text = text.replace('"cohere_format": "cmd4", ', "")  # a default vLLM leaks into every request
    return json.loads(text)


def _post(base: str, path: str, body: Any) -> tuple[int, Any]:
    r = httpx.post(base + path, json=body, timeout=30)
    return r.status_code, _normalise(r.json())


def _derender_bodies(tok: Tokenizer) -> dict[str, list[tuple[str, Any]]]:
    prompt = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n").ids
    out: dict[str, list[tuple[str, Any]]] = {}
    for name, (text, extra) in DERENDER_TEXTS.items():
        ids = tok.encode(text).ids
        chat = {"messages": [{"role": "user", "content": "hi"}], **extra}
        whole = {"generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids}]},
                 "prompt_token_ids": prompt, "prompt_tokens": len(prompt), "chat_request": chat}
        out[name] = [("whole", whole)] + [
            ("stream", {"stream": True, "prompt_token_ids": prompt, "chat_request": chat,
                        "generate_chunk": {"request_id": "r", "choices": [{
                            "index": 0, "token_ids": ids[i:i + 2],
                            "finish_reason": "stop" if i + 2 >= len(ids) else None}]}})
            for i in range(0, len(ids), 2)]
    return out


def compare(vllm: str, ours: str, model_dir: str) -> int:
    differences = 0

    def check(label: str, path: str, body: Any) -> Any:
        nonlocal differences
        a, b = _post(vllm, path, body), _post(ours, path, body)
        if a[0] >= 400 and b[0] >= 400:
            a, b = (a[0], a[1]["error"]["type"] if "error" in a[1] else a[1]), (b[0], b[1]["error"]["type"])
        if a != b:
            differences += 1
            print(f"DIFF {label}\n  vllm: {json.dumps(a, ensure_ascii=False)[:1500]}\n"
                  f"  ours: {json.dumps(b, ensure_ascii=False)[:1500]}")
        return a

    for name, body in RENDER_CASES.items():
        check(f"chat render {name}", "/v1/chat/completions/render", body)
    for name, body in COMPLETION_CASES.items():
        check(f"completions render {name}", "/v1/completions/render", body)
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    for name, steps in _derender_bodies(tok).items():
        states: dict[str, Any] = {"vllm": None, "ours": None}
        for i, (kind, body) in enumerate(steps):
            if kind == "whole":
                check(f"derender {name}", "/v1/chat/completions/derender", body)
                continue
            # each server continues from its own state; the chunks themselves are compared
            results = {}
            for who, base in (("vllm", vllm), ("ours", ours)):
                r = httpx.post(base + "/v1/chat/completions/derender",
                               json={**body, "stream_state": states[who]}, timeout=30).json()
                states[who] = r.get("stream_state")
                results[who] = _normalise(r.get("chunk", r))
            if results["vllm"] != results["ours"]:
                differences += 1
                print(f"DIFF derender stream {name} chunk {i}\n  vllm: {results['vllm']}\n  ours: {results['ours']}")
    print(f"{differences} difference(s)")
    return differences


if __name__ == "__main__":
    sys.exit(1 if compare(*sys.argv[1:4]) else 0)
