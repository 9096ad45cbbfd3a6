"""The reference frontend's token-native extension (specs/token-native.yaml, TOKNAT-*).

Render and its checks run in process (Starlette's TestClient). The gateway part needs an engine behind
``/inference/v1/generate``: here that is ``fixed_engine``, a labelled TEST DOUBLE that answers every request
with the same generated ids (so expected outputs are known exactly) and records what it was sent. Both it and
the frontend run under real uvicorn servers on loopback, so the gateway's real HTTP engine hop is exercised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from frontend_server import running_app, running_frontend
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from tokenizers import Tokenizer

from tokenspec.core.fingerprint import tokenizer_fingerprint
from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.suite.oracles.render_oracle import RenderOracle

MODEL = "tokenspec-tiny"
RENDER = "/v1/chat/completions/render"
CHAT = "/v1/chat/completions"
SENTINEL = "\ue000block\ue000"


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def version(model_dir: Path) -> str:
    return tokenizer_fingerprint(model_dir)


@pytest.fixture(scope="module")
def client(model_dir: Path) -> TestClient:
    config = FrontendConfig(model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3")
    return TestClient(create_app(config))


def _user(content: Any, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], **fields}


def _block(ids: list[int], **extra: Any) -> dict[str, Any]:
    return {"type": "input_tokens", "token_ids": ids, **extra}


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == status
    return error


def _expected(model_dir: Path, tok: Tokenizer, messages: list[dict[str, Any]], ids: list[int],
              **kwargs: Any) -> list[int]:
    """Oracle: the template rendered with SENTINEL for the one block, the text around it encoded, ids between."""
    text = RenderOracle.load(model_dir).prompt_text({"messages": messages, **kwargs})
    before, after = text.split(SENTINEL)
    encode = lambda s: tok.encode(s, add_special_tokens=False).ids if s else []  # noqa: E731
    return encode(before) + ids + encode(after)


# -- discovery ------------------------------------------------------------------------------------------------


def test_models_card_reports_the_tokenizer_fingerprint(client, version) -> None:
    card = client.get("/v1/models").json()["data"][0]
    assert card["tokenizer_version"] == version


# -- render with input_tokens blocks --------------------------------------------------------------------------


def test_ordinary_requests_are_unchanged(client, model_dir, tok) -> None:
    body = _user([{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}])
    out = client.post(RENDER, json=body).json()
    text = RenderOracle.load(model_dir).prompt_text(body)
    assert out["token_ids"] == tok.encode(text, add_special_tokens=False).ids
    assert "tokenizer_version" not in out


@pytest.mark.parametrize("shape", ["alone", "single-part", "text-around", "text-before", "text-after"])
def test_block_ids_are_spliced_verbatim(client, model_dir, tok, version, shape) -> None:
    ids = [5, 6, 7, 400, 993]  # includes a special token's id: never re-tokenized
    parts = {"alone": None, "single-part": [], "text-around": ["Hi ", " there"], "text-before": ["Say: ", None],
             "text-after": [None, " then stop"]}[shape]

    def content(block: dict[str, Any]) -> Any:
        if parts is None:
            return block if block["type"] == "input_tokens" else block["text"]
        before, after = (parts + [None, None])[:2]
        texts = [{"type": "text", "text": t} for t in (before,) if t]
        return texts + [block] + [{"type": "text", "text": t} for t in (after,) if t]

    out = client.post(RENDER, json=_user(content(_block(ids)), tokenizer_version=version)).json()
    sentinel = {"type": "text", "text": SENTINEL}
    expected = _expected(model_dir, tok, [{"role": "user", "content": content(sentinel)}], ids,
                         add_generation_prompt=True)
    assert out["token_ids"] == expected
    assert out["tokenizer_version"] == version


def test_blocks_in_several_messages_and_roles(client, model_dir, tok, version) -> None:
    messages = [{"role": "system", "content": _block([11, 12])},
                {"role": "user", "content": [{"type": "text", "text": "q"}, _block([13])]},
                {"role": "assistant", "content": _block([14, 15])},
                {"role": "tool", "content": [_block([16])]},
                {"role": "user", "content": "last"}]
    out = client.post(RENDER, json={"messages": messages, "tokenizer_version": version}).json()["token_ids"]
    for ids in ([11, 12], [13], [14, 15], [16]):
        assert any(out[k:k + len(ids)] == ids for k in range(len(out))), (ids, out)
    assert tok.decode(out, skip_special_tokens=False).endswith("<|im_start|>user\nlast<|im_end|>\n"
                                                                "<|im_start|>assistant\n")


def test_continue_final_message_ends_with_the_block(client, version) -> None:
    body = {"messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": _block([21, 22])}],
            "tokenizer_version": version, "add_generation_prompt": False, "continue_final_message": True}
    assert client.post(RENDER, json=body).json()["token_ids"][-2:] == [21, 22]


def test_missing_pin_is_400_with_param(client) -> None:
    error = _error(client.post(RENDER, json=_user([_block([1])])), 400)
    assert error["param"] == "tokenizer_version"


@pytest.mark.parametrize("content", [None, "block"], ids=["without-blocks", "with-blocks"])
def test_mismatched_pin_is_409(client, version, content) -> None:
    body = _user("hi" if content is None else _block([1, 2]), tokenizer_version="other")
    error = _error(client.post(RENDER, json=body), 409)
    assert (error["type"], error["param"]) == ("tokenizer_version_mismatch", "tokenizer_version")
    assert version in error["message"]


def test_matching_pin_without_blocks_is_accepted(client, version) -> None:
    out = client.post(RENDER, json=_user("hi", tokenizer_version=version)).json()
    assert out["tokenizer_version"] == version


@pytest.mark.parametrize("block", [
    _block([1], tokenizer_version="other"),
    _block([-1]), _block([1, 1000]), _block([10 ** 12]), _block([]), _block([1.5]), _block([True]), _block("12"),
    {"type": "input_tokens"},
], ids=["block-pin", "negative", "vocab-size", "huge", "empty", "float", "bool", "string", "no-ids"])
def test_malformed_blocks_are_400(client, version, block) -> None:
    _error(client.post(RENDER, json=_user([block], tokenizer_version=version)), 400)


def test_malformed_input_is_judged_before_the_pin_and_vocabulary_after(client) -> None:
    _error(client.post(RENDER, json=_user([_block([-1])], tokenizer_version="other")), 400)
    _error(client.post(RENDER, json=_user([_block([10 ** 9])], tokenizer_version="other")), 409)


def test_a_block_as_content_must_be_an_input_tokens_block(client, version) -> None:
    _error(client.post(RENDER, json=_user({"type": "text", "text": "x"}, tokenizer_version=version)), 400)


# -- the gateway, against a test-double engine ------------------------------------------------------------------


class FixedEngine:
    """TEST DOUBLE of an engine's /inference/v1/generate: always 'generates' ``ids``, one per stream event."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self.requests: list[dict[str, Any]] = []

    async def generate(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        rid = body.get("request_id") or "r"
        if not body.get("stream"):
            return JSONResponse({"request_id": rid, "prompt_token_ids": body["token_ids"], "choices": [
                {"index": 0, "token_ids": self.ids, "finish_reason": "length", "stop_reason": None}]})

        def events() -> Iterator[bytes]:
            for k, token in enumerate(self.ids):
                last = k == len(self.ids) - 1
                choice = {"index": 0, "token_ids": [token], "finish_reason": "length" if last else None}
                yield f"data: {json.dumps({'request_id': rid, 'choices': [choice]})}\n\n".encode()
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": len(body["token_ids"]), "completion_tokens": len(self.ids)}
                yield f"data: {json.dumps({'request_id': rid, 'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def generated(tok: Tokenizer) -> list[int]:
    """Output that the qwen3 reasoning parser would split, so skipping the parsers is visible."""
    return tok.encode("<think>hmm</think>Hello there", add_special_tokens=False).ids


@pytest.fixture(scope="module")
def fixed_engine(generated: list[int]) -> FixedEngine:
    return FixedEngine(generated)


@pytest.fixture(scope="module")
def gateway(model_dir: Path, fixed_engine: FixedEngine) -> Iterator[httpx.Client]:
    app = Starlette(routes=[Route("/inference/v1/generate", fixed_engine.generate, methods=["POST"]),
                            Route("/health", lambda request: Response(), methods=["GET"])])
    with running_app(app) as engine_url:
        config = FrontendConfig(model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3",
                                engine_url=engine_url, engine_timeout=10)
        with running_frontend(config) as url, httpx.Client(base_url=url, timeout=10) as http:
            yield http


def _chunks(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", CHAT, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        lines = [line[5:].strip() for line in resp.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_gateway_ordinary_request_has_no_token_native_fields(gateway) -> None:
    out = gateway.post(CHAT, json=_user("hi")).json()
    assert "tokenizer_version" not in out
    assert out["choices"][0]["message"].get("token_ids") is None
    assert out["choices"][0]["message"]["reasoning"] == "hmm", "parsers run as before"


def test_gateway_return_token_ids(gateway, generated, version) -> None:
    out = gateway.post(CHAT, json=_user("hi", return_token_ids=True)).json()
    choice = out["choices"][0]
    assert choice["message"]["token_ids"] == generated == choice["token_ids"]
    assert choice["message"]["content"] == "Hello there", "return_token_ids alone keeps the text"
    assert out["tokenizer_version"] == version
    assert out["usage"]["completion_tokens"] == len(generated)


def test_gateway_stream_delta_token_ids(gateway, generated, version) -> None:
    chunks = _chunks(gateway, _user("hi", return_token_ids=True, stream_options={"include_usage": True}))
    deltas = [c["delta"] for chunk in chunks for c in chunk["choices"]]
    assert all(isinstance(d.get("token_ids"), list) for d in deltas)
    assert [t for d in deltas for t in d["token_ids"]] == generated
    assert {chunk.get("tokenizer_version") for chunk in chunks} == {version}
    assert chunks[-1]["usage"]["completion_tokens"] == len(generated)


def test_gateway_return_tokens_only(gateway, generated) -> None:
    out = gateway.post(CHAT, json=_user("hi", return_tokens_only=True)).json()
    message = out["choices"][0]["message"]
    assert (message["content"], message["reasoning"], message["tool_calls"]) == (None, None, None)
    assert message["token_ids"] == generated
    assert out["prompt_token_ids"] is None and out["choices"][0]["token_ids"] is None, \
        "the generated ids only: vLLM's echo comes with return_token_ids alone"
    chunks = _chunks(gateway, _user("hi", return_tokens_only=True))
    deltas = [c["delta"] for chunk in chunks for c in chunk["choices"]]
    assert all("content" not in d and not d.get("reasoning") for d in deltas), deltas
    assert [t for d in deltas for t in d["token_ids"]] == generated
    assert deltas[0]["role"] == "assistant"


def test_gateway_sends_block_ids_to_the_engine(gateway, fixed_engine, version) -> None:
    body = _user([{"type": "text", "text": "Say:"}, _block([31, 32, 33])], tokenizer_version=version,
                 return_token_ids=True)
    out = gateway.post(CHAT, json=body).json()
    sent = fixed_engine.requests[-1]["token_ids"]
    assert out["prompt_token_ids"] == sent
    assert any(sent[k:k + 3] == [31, 32, 33] for k in range(len(sent)))


def test_gateway_conflict_never_reaches_the_engine(gateway, fixed_engine) -> None:
    before = len(fixed_engine.requests)
    error = _error(gateway.post(CHAT, json=_user([_block([1])], tokenizer_version="other")), 409)
    assert error["type"] == "tokenizer_version_mismatch"
    _error(gateway.post(CHAT, json=_user([_block([1])])), 400)
    assert len(fixed_engine.requests) == before


# -- the proposal's own names (seed 002): response_format_tokens, contradictions, completions pin ---------------


def test_response_format_tokens_returns_message_and_delta_token_ids(gateway, generated, version) -> None:
    out = gateway.post(CHAT, json=_user("hi", response_format_tokens=True)).json()
    message = out["choices"][0]["message"]
    assert message["token_ids"] == generated
    assert message["content"] == "Hello there", "the proposal's flag keeps the text beside the ids"
    assert out.get("prompt_token_ids") is None and out["choices"][0].get("token_ids") is None, \
        "the proposal's flag answers the generated ids where the proposal puts them, without vLLM's echo"
    assert out["tokenizer_version"] == version
    chunks = _chunks(gateway, _user("hi", response_format_tokens=True))
    deltas = [c["delta"] for chunk in chunks for c in chunk["choices"]]
    assert [t for d in deltas for t in d["token_ids"]] == generated


def test_the_alias_and_the_proposal_name_may_agree(gateway, generated) -> None:
    body = _user("hi", response_format_tokens=True, return_token_ids=True, return_tokens_only=True)
    out = gateway.post(CHAT, json=body).json()
    assert out["choices"][0]["message"]["token_ids"] == generated
    assert out["choices"][0]["message"]["content"] is None


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"response_format_tokens": "tokens"}, "response_format_tokens", "true or false"),
    ({"response_format_tokens": 1}, "response_format_tokens", "true or false"),
    ({"response_format_tokens": True, "return_token_ids": False}, "response_format_tokens", "disagree"),
    ({"response_format_tokens": False, "return_token_ids": True}, "response_format_tokens", "disagree"),
    ({"return_tokens_only": True, "response_format_tokens": False}, "return_tokens_only", "is false"),
    ({"return_tokens_only": True, "return_token_ids": False}, "return_tokens_only", "is false"),
], ids=["string", "int", "yes-no", "no-yes", "only-but-format-off", "only-but-alias-off"])
@pytest.mark.parametrize("path", [RENDER, CHAT])
def test_contradictory_output_flags_are_400_saying_why(gateway, fixed_engine, fields, param, words, path) -> None:
    before = len(fixed_engine.requests)
    error = _error(gateway.post(path, json=_user("hi", **fields)), 400)
    assert error["param"] == param and words in error["message"], error
    assert len(fixed_engine.requests) == before, "a refused request never reaches the engine"


def test_completions_refuse_return_tokens_only(gateway) -> None:
    error = _error(gateway.post("/v1/completions", json={"prompt": [1, 2, 3], "return_tokens_only": True}), 400)
    assert error["param"] == "return_tokens_only"


@pytest.mark.parametrize("path", ["/v1/completions/render", "/v1/completions"])
def test_completions_honour_the_pin(gateway, version, path) -> None:
    error = _error(gateway.post(path, json={"prompt": [5, 6, 7], "tokenizer_version": "other", "max_tokens": 2}),
                   409)
    assert (error["type"], error["param"]) == ("tokenizer_version_mismatch", "tokenizer_version")
    assert version in error["message"]
    assert gateway.post(path, json={"prompt": [5, 6, 7], "max_tokens": 2}).status_code == 200, "no pin needed"


def test_completions_token_prompt_pinned_with_token_output(gateway, fixed_engine, generated, version) -> None:
    body = {"prompt": [5, 6, 7], "tokenizer_version": version, "response_format_tokens": True, "max_tokens": 2}
    rendered = gateway.post("/v1/completions/render", json=body).json()
    assert rendered[0]["token_ids"] == [5, 6, 7] and rendered[0]["tokenizer_version"] == version
    out = gateway.post("/v1/completions", json=body).json()
    assert fixed_engine.requests[-1]["token_ids"] == [5, 6, 7], "token-id prompts are sent as given"
    assert out["choices"][0]["token_ids"] == generated and out["tokenizer_version"] == version
    assert out["choices"][0].get("prompt_token_ids") is None, "no echo of the prompt the client sent"
    echoed = gateway.post("/v1/completions", json={**body, "return_token_ids": True}).json()["choices"][0]
    assert echoed["prompt_token_ids"] == [5, 6, 7], "vLLM's name keeps vLLM's echo"
    assert isinstance(out["choices"][0]["text"], str)


# -- the safety hook: a pluggable text filter sees every prompt as text -----------------------------------------


FORBIDDEN = "bananas"


def refuse_bananas(text: str) -> str | None:
    """A blocking filter plugged in by import path (this module) for the tests below."""
    return f"mentions {FORBIDDEN}" if FORBIDDEN in text else None


@pytest.fixture(scope="module")
def filtered(model_dir: Path, fixed_engine: FixedEngine) -> Iterator[httpx.Client]:
    app = Starlette(routes=[Route("/inference/v1/generate", fixed_engine.generate, methods=["POST"]),
                            Route("/health", lambda request: Response(), methods=["GET"])])
    with running_app(app) as engine_url:
        config = FrontendConfig(model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3",
                                engine_url=engine_url, engine_timeout=10,
                                text_filter=f"{__name__}:refuse_bananas")
        with running_frontend(config) as url, httpx.Client(base_url=url, timeout=10) as http:
            yield http


def _refused_by_filter(resp: httpx.Response, param: str) -> None:
    error = _error(resp, 400)
    assert (error["type"], error["param"]) == ("content_filter", param), error
    assert f"mentions {FORBIDDEN}" in error["message"], "the filter's own reason reaches the client"


def _forbidden_shapes(tok: Tokenizer, version: str) -> dict[str, dict[str, Any]]:
    ids = tok.encode(f"I like {FORBIDDEN}", add_special_tokens=False).ids
    head = tok.encode("I like ban", add_special_tokens=False).ids
    tail = tok.encode("anas", add_special_tokens=False).ids
    return {
        "text": _user(f"I like {FORBIDDEN}"),
        "block": _user(_block(ids), tokenizer_version=version),
        "split-text-then-block": _user([{"type": "text", "text": "I like ban"}, _block(tail)],
                                       tokenizer_version=version),
        "split-block-then-text": _user([_block(head), {"type": "text", "text": "anas"}], tokenizer_version=version),
    }


@pytest.mark.parametrize("shape", ["text", "block", "split-text-then-block", "split-block-then-text"])
@pytest.mark.parametrize("path", [RENDER, CHAT])
def test_text_filter_refuses_text_and_token_input_alike(filtered, fixed_engine, tok, version, shape, path) -> None:
    before = len(fixed_engine.requests)
    _refused_by_filter(filtered.post(path, json=_forbidden_shapes(tok, version)[shape]), "messages")
    assert len(fixed_engine.requests) == before, "a refused prompt never reaches the engine"


def test_text_filter_guards_completions_and_generate(filtered, tok) -> None:
    ids = tok.encode(f"I like {FORBIDDEN}", add_special_tokens=False).ids
    _refused_by_filter(filtered.post("/v1/completions", json={"prompt": ids, "max_tokens": 2}), "prompt")
    _refused_by_filter(filtered.post("/v1/completions/render", json={"prompt": f"x {FORBIDDEN}"}), "prompt")
    body = {"token_ids": ids, "sampling_params": {"max_tokens": 2}}
    _refused_by_filter(filtered.post("/inference/v1/generate", json=body), "token_ids")


def test_text_filter_lets_other_prompts_through(filtered, tok, version) -> None:
    assert filtered.post(CHAT, json=_user("I like apples")).status_code == 200
    ids = tok.encode("I like apples", add_special_tokens=False).ids
    assert filtered.post(CHAT, json=_user(_block(ids), tokenizer_version=version)).status_code == 200


@pytest.mark.parametrize("spec", ["no-such-filter", "json:no_such_attribute", "no_such_module_xyz:f", "json:__doc__"])
def test_a_text_filter_that_cannot_load_stops_start_up(model_dir, spec) -> None:
    from tokenspec.core.errors import UsageError

    with pytest.raises(UsageError, match="--text-filter"):
        FrontendConfig(model_dir, MODEL, text_filter=spec)
