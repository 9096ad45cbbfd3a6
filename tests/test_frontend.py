"""The reference CPU frontend (tokenspec.harness.frontend) on the embedded tiny model.

Fast tests use Starlette's TestClient in process; the HTTP tests run the app under a real uvicorn server
on a free loopback port (one per session). No vLLM is needed. Derender inputs are token ids built here
from text with the model's own tokenizer, so expected content/reasoning/tool_calls are known exactly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from starlette.responses import JSONResponse as StarletteJSONResponse
from starlette.testclient import TestClient
from tokenizers import Tokenizer

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.frontend.responses import JSONResponse
from tokenspec.harness.models.tiny import build

MODEL = "tokenspec-tiny"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny")
    build(path)
    return path


@pytest.fixture(scope="session")
def tok(model_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="session")
def client(model_dir: Path) -> TestClient:
    config = FrontendConfig(model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3",
                            max_body_bytes=64 * 1024)
    return TestClient(create_app(config))


@pytest.fixture(scope="session")
def plain_client(model_dir: Path) -> TestClient:
    return TestClient(create_app(FrontendConfig(model_dir, MODEL)))


@pytest.fixture(scope="session")
def server_url(model_dir: Path):
    """A real uvicorn server in a thread, on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = FrontendConfig(model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3",
                            max_body_bytes=64 * 1024)
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def assert_error(response: httpx.Response, status: int, param: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status
    if param is not None:
        assert error["param"] == param
    return error


def prompt_ids(tok: Tokenizer) -> list[int]:
    return tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n").ids


def derender(client: TestClient, tok: Tokenizer, ids: list[int], chat: dict[str, Any]) -> dict[str, Any]:
    body = {"model": MODEL, "prompt_token_ids": prompt_ids(tok), "chat_request": chat,
            "generate_response": {"request_id": "r1", "choices": [{"index": 0, "token_ids": ids}]}}
    r = client.post("/v1/chat/completions/derender", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def stream(client: TestClient, tok: Tokenizer, ids: list[int], chat: dict[str, Any], k: int,
           path: str = "/v1/chat/completions/derender") -> list[dict[str, Any]]:
    """Derender ids in chunks of k tokens, threading stream_state; returns the chunks' choices."""
    state, choices = None, []
    for start in range(0, len(ids), k):
        last = start + k >= len(ids)
        body = {"stream": True, "model": MODEL, "prompt_token_ids": prompt_ids(tok), "stream_state": state,
                "chat_request": chat, "completion_request": None,
                "generate_chunk": {"request_id": "r1", "choices": [{
                    "index": 0, "token_ids": ids[start:start + k], "finish_reason": "stop" if last else None}]}}
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
        state = json.loads(json.dumps(r.json()["stream_state"]))  # it must survive a JSON round trip
        choices += r.json()["chunk"]["choices"]
    return choices


def assemble(choices: list[dict[str, Any]]) -> dict[str, Any]:
    content, reasoning, calls, finish = "", "", {}, None
    for c in choices:
        delta = c["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning") or ""
        for call in delta.get("tool_calls") or []:
            entry = calls.setdefault(call["index"], {"name": "", "arguments": "", "id": call["id"]})
            entry["name"] += call["function"].get("name") or ""
            entry["arguments"] += call["function"].get("arguments") or ""
        finish = c["finish_reason"] or finish
    return {"content": content or None, "reasoning": reasoning or None, "tool_calls": list(calls.values()),
            "finish_reason": finish}


# -- render ---------------------------------------------------------------------------------------------


def test_chat_render_is_deterministic_and_ends_in_the_generation_prompt(client, tok):
    first = client.post("/v1/chat/completions/render", json={"model": MODEL, **CHAT}).json()
    second = client.post("/v1/chat/completions/render", json={"model": MODEL, **CHAT}).json()
    assert first["token_ids"] == second["token_ids"]
    assert tok.decode(first["token_ids"], skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    assert first["request_id"].startswith("chatcmpl-")
    assert first["sampling_params"]["max_tokens"] == 2048 - len(first["token_ids"])


def test_request_id_header_wins(client):
    r = client.post("/v1/chat/completions/render", json={**CHAT, "request_id": "body"},
                    headers={"X-Request-Id": "hdr"})
    assert r.json()["request_id"] == "chatcmpl-hdr"
    r = client.post("/v1/completions/render", json={"prompt": "a", "request_id": "body"})
    assert r.json()[0]["request_id"] == "cmpl-body"


def test_completions_token_id_prompts_pass_through(client):
    r = client.post("/v1/completions/render", json={"prompt": [[5, 6, 7], [8]], "request_id": "x"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert [g["token_ids"] for g in out] == [[5, 6, 7], [8]]
    assert [g["request_id"] for g in out] == ["cmpl-x-0", "cmpl-x-1"]
    assert out[0]["sampling_params"].get("max_tokens", 16) == 16


def test_sampling_params_are_carried(client):
    body = {**CHAT, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "n": 2, "seed": 7, "stop": "END",
            "max_completion_tokens": 7, "max_tokens": 9, "logprobs": True, "top_logprobs": 3,
            "logit_bias": {"5": 300}, "stop_token_ids": [4], "presence_penalty": 0.0, "stream": True,
            "stream_options": {"include_usage": True}}
    out = client.post("/v1/chat/completions/render", json=body).json()
    sp = out["sampling_params"]
    assert sp["temperature"] == 0.5 and sp["top_p"] == 0.9 and sp["top_k"] == 5
    assert sp["n"] == 2 and sp["seed"] == 7 and sp["stop"] == ["END"] and sp["stop_token_ids"] == [4]
    assert sp["max_tokens"] == 7  # max_completion_tokens wins over max_tokens
    assert sp["logprobs"] == 3 and sp["logit_bias"] == {"5": 100.0}
    assert sp["presence_penalty"] == 0.0  # set to its default, still carried
    assert sp["output_kind"] == 1 and out["stream"] is True
    assert out["stream_options"] == {"include_usage": True, "continuous_usage_stats": False}


@pytest.mark.parametrize("body, message", [
    ({**CHAT, "use_beam_search": True}, "Beam search is not supported"),
    ({**CHAT, "temperature": 0, "n": 2}, "n must be 1 when using greedy sampling, got 2."),
    ({**CHAT, "temperature": 3}, "temperature"),
    ({**CHAT, "max_tokens": 0}, "max_tokens must be at least 1, got 0."),
    ({**CHAT, "stream_options": {"include_usage": True}}, "stream=True"),
])
def test_render_rejections(client, body, message):
    error = assert_error(client.post("/v1/chat/completions/render", json=body), 400)
    assert message in error["message"]


def test_prompt_longer_than_the_context_is_rejected(client):
    error = assert_error(client.post("/v1/completions/render", json={"prompt": [1] * 2049}), 400, "input_tokens")
    assert "2049" in error["message"]


def test_shape_errors_look_like_vllm_validation_errors(client):
    error = assert_error(client.post("/v1/chat/completions/render", json={"messages": "nope"}), 400,
                         "body.messages")
    assert error["type"] == "Bad Request" and "validation error" in error["message"]
    assert_error(client.post("/v1/completions/render", json={"prompt": []}), 400, "prompt")


def test_multi_part_and_unicode_content(client, tok):
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "héllo "},
                                                       {"type": "text", "text": "🎉"}]}]}
    ids = client.post("/v1/chat/completions/render", json=parts).json()["token_ids"]
    assert "<|im_start|>user\nhéllo 🎉<|im_end|>" in tok.decode(ids, skip_special_tokens=False)


def test_tools_need_a_tool_parser(plain_client):
    assert_error(plain_client.post("/v1/chat/completions/render", json={**CHAT, "tools": TOOLS}), 400)


# -- derender -------------------------------------------------------------------------------------------


def test_plain_derender_without_parsers(plain_client, tok):
    out = derender(plain_client, tok, tok.encode("hello world").ids, CHAT)
    message = out["choices"][0]["message"]
    assert message["content"] == "hello world" and message["reasoning"] is None
    assert out["id"] == "r1" and out["usage"]["completion_tokens"] == len(tok.encode("hello world").ids)


def test_reasoning_and_content_are_split(client, tok):
    message = derender(client, tok, tok.encode("<think>abc</think>hello").ids, CHAT)["choices"][0]["message"]
    assert (message["reasoning"], message["content"]) == ("abc", "hello")


def test_reasoning_markers_spelled_with_byte_pieces_are_found(client, tok):
    # "</think>" built from ordinary pieces, not the added token: parsers must work on text
    ids = tok.encode("abc").ids + tok.encode("</").ids + tok.encode("think>").ids + tok.encode("ok").ids
    assert tok.token_to_id("</think>") not in ids
    message = derender(client, tok, ids, CHAT)["choices"][0]["message"]
    assert (message["reasoning"], message["content"]) == ("abc", "ok")


TOOL_TEXT = 'hmm</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_tool_calls_are_parsed(client, tok):
    choice = derender(client, tok, tok.encode(TOOL_TEXT).ids, {**CHAT, "tools": TOOLS})["choices"][0]
    calls = choice["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["id"].startswith("chatcmpl-tool-") and calls[0]["type"] == "function"
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert choice["message"]["reasoning"] == "hmm" and choice["message"]["content"] is None
    assert choice["finish_reason"] == "tool_calls"


def test_tool_markup_stays_content_when_tools_are_off(client, tok):
    message = derender(client, tok, tok.encode(TOOL_TEXT).ids, CHAT)["choices"][0]["message"]
    assert "tool_calls" not in message and "<tool_call>" in message["content"]


@pytest.mark.parametrize("k", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("text, tools", [
    (TOOL_TEXT, True), ("<think>a b</think>héllo 🎉 world", False), ("no end marker", False),
    ('</think>Sure. <tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", '
     '"arguments": {"x": [1, 2]}}</tool_call>', True)])
def test_streaming_in_k_chunks_equals_non_streaming(client, tok, k, text, tools):
    chat = {**CHAT, "tools": TOOLS} if tools else CHAT
    ids = tok.encode(text).ids
    whole = derender(client, tok, ids, chat)["choices"][0]
    streamed = assemble(stream(client, tok, ids, chat, k))
    message = whole["message"]
    assert streamed["reasoning"] == message["reasoning"]
    assert streamed["finish_reason"] == whole["finish_reason"]
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed["tool_calls"]] == \
        [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
    if not streamed["tool_calls"]:
        assert streamed["content"] == message["content"]


def test_streamed_tool_call_ids_are_stable(client, tok):
    choices = stream(client, tok, tok.encode(TOOL_TEXT).ids, {**CHAT, "tools": TOOLS}, 1)
    ids = [call["id"] for c in choices for call in c["delta"].get("tool_calls") or [] if call["id"]]
    assert len(ids) == 1  # the id is sent once, with the name
    assert choices[0]["delta"]["role"] == "assistant"
    assert all(c["delta"]["role"] is None for c in choices[1:])


def test_emoji_split_across_tokens_never_yields_a_replacement_char(plain_client, tok):
    ids = tok.encode("a🎉b😀").ids
    assert len(ids) > 4, "the emoji should take several byte-level tokens"
    for k in (1, 2, 3):
        pieces = [c["delta"].get("content") or "" for c in stream(plain_client, tok, ids, CHAT, k)]
        assert all("\ufffd" not in p for p in pieces)
        assert "".join(pieces) == "a🎉b😀"
    texts = [c["text"] for c in stream(plain_client, tok, ids, CHAT, 1, path="/v1/completions/derender")]
    assert all("\ufffd" not in t for t in texts) and "".join(texts) == "a🎉b😀"


def test_completions_derender_flattens_choices(plain_client, tok):
    ids = tok.encode("one two").ids
    body = {"generate_responses": [{"request_id": "a", "choices": [{"index": 0, "token_ids": ids}]},
                                   {"request_id": "b", "choices": [{"index": 0, "token_ids": ids[:1]},
                                                                   {"index": 1, "token_ids": ids}]}],
            "prompt_tokens": [3, 4]}
    out = plain_client.post("/v1/completions/derender", json=body).json()
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert out["choices"][0]["text"] == "one two" and out["id"] == "a"
    assert out["usage"] == {"prompt_tokens": 7, "completion_tokens": 2 * len(ids) + 1,
                            "total_tokens": 7 + 2 * len(ids) + 1,
                            "prompt_tokens_details": None, "completion_tokens_details": None}


# -- bounds and errors ------------------------------------------------------------------------------------


def _gen(ids: list[int], **choice: Any) -> dict[str, Any]:
    return {"request_id": "r", "choices": [{"index": 0, "token_ids": ids, **choice}]}


@pytest.mark.parametrize("body, message", [
    ({"generate_response": _gen([5] * 2049), "chat_request": CHAT},
     "token_ids length (2049) in choice 0 exceeds max_model_len (2048)."),
    ({"generate_response": _gen([5], logprobs={"content": [{"token_id": 5, "logprob": -1.0, "top_logprobs": [
        {"token_id": 5, "logprob": -1.0}] * 21}]}), "chat_request": CHAT},
     "top_logprobs count (21) in choice 0 exceeds max_logprobs (20)."),
    ({"generate_response": _gen([5]), "prompt_token_ids": [1] * 2049, "chat_request": CHAT},
     "prompt_token_ids length (2049) exceeds max_model_len (2048)."),
    ({"generate_response": _gen([]), "chat_request": CHAT}, "choice 0 has empty or null token_ids"),
    ({"generate_response": _gen([5])}, "chat_request is required"),
    ({"generate_response": _gen([5], logprobs={"content": [{"logprob": -1.0, "top_logprobs": []}]}),
      "chat_request": CHAT}, "a required field is missing: 'token_id'"),
    ({"stream": True, "generate_chunk": _gen([5] * 3000), "prompt_token_ids": [], "chat_request": CHAT},
     "prompt_token_ids length (0) plus output_token_ids length (0) plus delta (3000) exceeds max_model_len (2048)."),
])
def test_derender_bounds(client, body, message):
    error = assert_error(client.post("/v1/chat/completions/derender", json=body), 400)
    assert message in error["message"]


def test_empty_generate_responses(client):
    error = assert_error(client.post("/v1/completions/derender", json={"generate_responses": []}), 400)
    assert error["message"] == "generate_responses must not be empty"


def test_unknown_model_is_404(client):
    error = assert_error(client.post("/v1/chat/completions/render", json={**CHAT, "model": "nope"}), 404, "model")
    assert error["type"] == "NotFoundError"


def test_malformed_json_and_content_type(client):
    assert_error(client.post("/v1/chat/completions/render", content=b"{not json",
                             headers={"content-type": "application/json"}), 400)
    error = assert_error(client.post("/v1/chat/completions/render", content=b"{}",
                                     headers={"content-type": "text/plain"}), 400)
    assert "Unsupported Media Type" in error["message"]


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_python_json_extensions_are_not_json(client, word):
    """NaN and Infinity parse in Python's json but are not JSON: refused on input, so no answer can hold one."""
    raw = json.dumps(CHAT)[:-1] + f', "temperature": {word}}}'
    error = assert_error(client.post("/v1/chat/completions/render", content=raw.encode(),
                                     headers={"content-type": "application/json"}), 400)
    assert word.lstrip("-") in error["message"]


def test_answers_are_the_json_python_would_write(client):
    """orjson writes the answers (harness/frontend/responses.py): the same JSON values as Python's encoder; what
    orjson refuses goes through Python's."""
    answer = client.post("/v1/chat/completions/render", json=CHAT)
    assert answer.status_code == 200
    assert json.loads(answer.content) == json.loads(json.dumps(answer.json(), ensure_ascii=False))
    assert b", " not in answer.content[:200], "compact separators, as Starlette writes them"
    odd = {7: [2 ** 70], "x": 1e-05}  # orjson refuses a non-string key and an int past 64 bits
    assert JSONResponse(odd).body == StarletteJSONResponse(odd).body
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate fails as it does in Starlette's (a 400 upstream)
        JSONResponse({"text": "a\ud800"})


def test_garbage_stream_state_is_a_400_not_a_500(client, tok):
    body = {"stream": True, "prompt_token_ids": [1], "chat_request": CHAT, "generate_chunk": _gen([5]),
            "stream_state": {"output_token_ids": [1, 2], "output_chunk_lens": [5]}}
    assert_error(client.post("/v1/chat/completions/derender", json=body), 400)


# -- over real HTTP ---------------------------------------------------------------------------------------


def test_oversized_body_is_413_before_parsing(server_url):
    big = b'{"messages": "' + b"x" * (128 * 1024) + b'"'  # not even valid JSON: never parsed
    r = httpx.post(server_url + "/v1/chat/completions/render", content=big,
                   headers={"content-type": "application/json"}, timeout=10)
    assert_error(r, 413)

    def chunks():  # no Content-Length: the limit must hold while reading
        for _ in range(200):
            yield b"x" * 1024
    r = httpx.post(server_url + "/v1/chat/completions/render", content=chunks(),
                   headers={"content-type": "application/json"}, timeout=10)
    assert_error(r, 413)


def test_service_endpoints(server_url):
    with httpx.Client(base_url=server_url, timeout=10) as http:
        assert http.get("/health").status_code == 200
        assert http.get("/version").json() == {"version": "0.32.0"}
        assert http.get("/v1/models").json()["data"][0]["id"] == MODEL
        paths = http.get("/openapi.json").json()["paths"]
        assert "/v1/chat/completions/derender" in paths
        ids = http.post("/tokenize", json={"prompt": "hello world"}).json()["tokens"]
        assert http.post("/detokenize", json={"tokens": ids}).json() == {"prompt": "hello world"}
        # an integral float is that integer, as vLLM's pydantic reads it (schemathesis found a TypeError here)
        assert http.post("/detokenize", json={"tokens": [float(i) for i in ids]}).json() == {"prompt": "hello world"}
        assert_error(http.post("/detokenize", json={"tokens": [10**6]}), 400)


def test_whole_output_decode_equals_the_incremental_loop() -> None:
    """decode_all's one-call fast path must give exactly the incremental decoder's text."""
    import random
    import tempfile
    from pathlib import Path

    from tokenspec.harness.frontend.detokenize import decode_all, decode_tokens, seed_window
    from tokenspec.harness.frontend.model_files import ModelFiles
    from tokenspec.harness.models.tiny import build

    with tempfile.TemporaryDirectory() as tmp:
        model = ModelFiles.load(build(Path(tmp) / "m").model_dir)
    rng = random.Random(7)
    texts = ["Hello 😀 wörld", "東京 👍🏽 🇫🇷", "plain ascii", "<think>x</think>y", "a\ufffdb"]
    for _ in range(400):
        ids = model.encode(rng.choice(texts) + rng.choice(texts), add_special_tokens=False)
        cut = rng.randrange(len(ids) + 1)
        ids = ids[:cut] + [rng.randrange(model.vocab_size)] * rng.randrange(3)
        prompt = model.encode(rng.choice(texts), add_special_tokens=False) if rng.random() < 0.7 else None
        for skip in (model.all_special_ids, frozenset()):
            slow = decode_tokens(model, seed_window(model, prompt, skip), ids, skip)
            fast = decode_all(model, seed_window(model, prompt, skip), ids, skip)
            assert fast == slow, (ids, prompt, skip)



@pytest.fixture(scope="session")
def model_files(model_dir: Path) -> ModelFiles:
    return ModelFiles.load(model_dir)


@given(text=st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["<|im_start|>", "<|im_end|>", "<think>",
                                                                      "</think>", "<tool_call>", "\n", " "])),
                     max_size=12).map("".join),
       add_special=st.booleans())
def test_the_fast_encode_gives_the_ids_of_encode(model_files, tok, text, add_special):
    """ModelFiles.encode takes tokenizers' offsets-free path: the ids must be exactly those of ``encode``."""
    assert model_files.encode(text, add_special) == tok.encode(text, add_special_tokens=add_special).ids
