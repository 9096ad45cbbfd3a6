"""The frontend where vLLM releases differ: the streaming state's window per API generation, and, in front of an
engine, output_mode derender (whole and streamed), abort forwarding and weight versions passed through.

The engine is a labelled test double (``scripted_engine``): it answers every generate with the ids of one fixed
text and a weight-version span, in chunks when streamed, and records the aborts it is sent, so what the frontend
makes of an engine answer is known exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from tokenizers import Tokenizer

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.loopback import running_app
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.specs.parser_families import keeps_special_tokens, special_tokens_deleted, special_tokens_kept

MODEL = DEFAULT_MODEL_NAME
TEXT = "<think>Let me see.</think>The answer is 4."
SPANS = [{"version": "v7", "start": 0, "end": 0}]


def scripted_engine(ids: list[int], aborted: list[Any]) -> Starlette:
    """Test double: a generate that always produces ``ids`` (one chunk per id when streamed)."""
    spans = [{**SPANS[0], "end": len(ids)}]

    def choice(token_ids: list[int], finish: str | None) -> dict[str, Any]:
        return {"index": 0, "token_ids": token_ids, "finish_reason": finish, "stop_reason": None,
                "weight_versions": spans if finish else None, "logprobs": None}

    async def generate(request: Request) -> Response:
        body = await request.json()
        if body.get("output_mode", "tokens") != "tokens":
            return JSONResponse({"error": {"message": "a 0.32 engine", "type": "BadRequestError", "param": None,
                                           "code": 400}}, status_code=400)
        if not body.get("stream"):
            return JSONResponse({"request_id": "generate-tokens-x", "output_mode": "tokens",
                                 "usage": {"prompt_tokens": len(body["token_ids"]), "completion_tokens": len(ids),
                                           "total_tokens": len(body["token_ids"]) + len(ids)},
                                 "choices": [choice(ids, "stop")]})

        def events() -> Iterator[bytes]:
            for i, token in enumerate(ids):
                event = {"request_id": "generate-tokens-x", "output_mode": "tokens",
                         "choices": [choice([token], "stop" if i == len(ids) - 1 else None)]}
                yield f"data: {json.dumps(event)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        aborted.append((await request.json())["request_ids"])
        return Response(status_code=200)

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(routes=[Route("/inference/v1/generate", generate, methods=["POST"]),
                             Route("/inference/v1/abort_requests", abort, methods=["POST"]),
                             Route("/health", health, methods=["GET"])])


@pytest.fixture(scope="module")
def tok(tiny_model) -> Tokenizer:
    return Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def engine(tok) -> Iterator[tuple[str, list[Any]]]:
    aborted: list[Any] = []
    with running_app(scripted_engine(tok.encode(TEXT).ids, aborted)) as url:
        yield url, aborted


def _frontend(tiny_model, engine_url: str | None = None, **overrides: Any) -> TestClient:
    """The frontend in process; used as a context manager, so its engine client lives on one event loop."""
    config = FrontendConfig(tiny_model.model_dir, MODEL, tool_parser="hermes", reasoning_parser="qwen3",
                            engine_url=engine_url, **overrides)
    return TestClient(create_app(config))


def _generate_body(**top: Any) -> dict[str, Any]:
    context = {"tools": None, "tool_choice": "none", "parallel_tool_calls": True, "include_reasoning": True,
               "chat_template_kwargs": {}, "history_tool_call_cnt": 0}
    return {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 16, "detokenize": True},
            "output_mode": "derender", "parse_context": context, **top}


def _events(response) -> list[dict[str, Any]]:
    lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.parametrize(("generation", "window"), [("0.34", "prev_token_ids"), ("0.33", "prev_tokens")])
def test_the_state_keeps_the_window_of_the_declared_generation(tiny_model, tok, generation, window) -> None:
    client = _frontend(tiny_model, api_generation=generation)
    ids = tok.encode("a🎉b and some more words").ids
    state, text = None, ""
    for i, token in enumerate(ids):
        body = {"stream": True, "model": MODEL, "stream_state": state, "completion_request": None,
                "generate_chunk": {"request_id": "r", "choices": [
                    {"index": 0, "token_ids": [token], "finish_reason": "stop" if i == len(ids) - 1 else None}]}}
        answer = client.post("/v1/completions/derender", json=body)
        assert answer.status_code == 200, answer.text
        state = answer.json()["stream_state"]
        assert window in state and not {"prev_tokens", "prev_token_ids"} - {window} & set(state), state
        text += answer.json()["chunk"]["choices"][0]["text"]
    assert text == "a🎉b and some more words"
    other = "prev_tokens" if window == "prev_token_ids" else "prev_token_ids"
    stale = {k: v for k, v in state.items() if k != window} | {other: []}
    refused = client.post("/v1/completions/derender", json={**body, "stream_state": stale})
    assert refused.status_code == 400 and window in refused.json()["error"]["message"], refused.text


def test_derender_mode_answers_the_parsed_message(tiny_model, engine, tok) -> None:
    url, _ = engine
    answer = _frontend(tiny_model, url).post("/inference/v1/generate", json=_generate_body())
    assert answer.status_code == 200, answer.text
    out = answer.json()
    (choice,) = out["choices"]
    assert out["output_mode"] == "derender"
    assert choice["message"] == {"role": "assistant", "content": "The answer is 4.", "reasoning": "Let me see."}
    assert choice["token_ids"] == tok.encode(TEXT).ids and choice["weight_versions"][0]["version"] == "v7"


def test_derender_mode_hides_ids_with_reasoning_hidden(tiny_model, engine) -> None:
    url, _ = engine
    body = _generate_body()
    body["parse_context"]["include_reasoning"] = False
    (choice,) = _frontend(tiny_model, url).post("/inference/v1/generate", json=body).json()["choices"]
    assert choice["message"]["reasoning"] is None and choice["message"]["content"] == "The answer is 4."
    assert choice["token_ids"] is None and choice["logprobs"] is None


def test_a_streamed_derender_mode_joins_to_the_whole_answer(tiny_model, engine, tok) -> None:
    url, _ = engine
    client = _frontend(tiny_model, url)
    events = _events(client.post("/inference/v1/generate", json=_generate_body(stream=True)))
    choices = [c for e in events for c in e["choices"]]
    assert choices[0]["delta"]["role"] == "assistant" and all("role" not in c["delta"] for c in choices[1:])
    assert "".join(c["delta"].get("reasoning", "") for c in choices) == "Let me see."
    assert "".join(c["delta"].get("content", "") for c in choices) == "The answer is 4."
    assert [t for c in choices for t in c["token_ids"]] == tok.encode(TEXT).ids
    assert choices[-1]["finish_reason"] == "stop" and choices[-1]["weight_versions"][0]["version"] == "v7"


@pytest.mark.parametrize("case", ["detokenize-false", "no-parse-context", "unknown-key", "stream-at-0.33"])
def test_derender_mode_refusals(tiny_model, engine, case) -> None:
    url, _ = engine
    body = _generate_body()
    if case == "detokenize-false":
        body["sampling_params"]["detokenize"] = False
    elif case == "no-parse-context":
        del body["parse_context"]
    elif case == "unknown-key":
        body["parse_context"]["newer"] = 1
    else:
        body["stream"] = True
    client = _frontend(tiny_model, url, api_generation="0.33" if case == "stream-at-0.33" else "0.34")
    answer = client.post("/inference/v1/generate", json=body)
    assert answer.status_code == 400 and set(answer.json()["error"]) == {"message", "type", "param", "code"}, \
        answer.text


def test_abort_is_checked_then_forwarded(tiny_model, engine) -> None:
    url, aborted = engine
    with _frontend(tiny_model, url) as client:
        _abort_checks(client)
    assert aborted[-2:] == [["a"], ["b", "c"]]


def _abort_checks(client: TestClient) -> None:
    assert client.post("/inference/v1/abort_requests", json={"request_ids": "a"}).status_code == 200
    assert client.post("/inference/v1/abort_requests", json={"request_ids": ["b", "c"]}).status_code == 200
    for bad in ({}, "x", [1], {"request_ids": 7}):
        assert client.post("/inference/v1/abort_requests", json=bad).status_code == 400


@pytest.mark.parametrize("stream", [False, True])
def test_weight_versions_reach_the_coupled_answer_only_when_asked(tiny_model, engine, tok, stream) -> None:
    url, _ = engine
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with _frontend(tiny_model, url) as client:
        answers = {asked: client.post("/v1/chat/completions", json={**body, "return_weight_versions": asked})
                   for asked in (True, False)}
    choices = {}
    for asked, answer in answers.items():
        assert answer.status_code == 200, answer.text
        choices[asked] = [c for e in _events(answer) for c in e["choices"]] if stream else answer.json()["choices"]
    assert choices[True][-1]["weight_versions"] == [{"version": "v7", "start": 0, "end": len(tok.encode(TEXT).ids)}]
    assert all(c.get("weight_versions") is None for c in choices[True][:-1] + choices[False])


@pytest.mark.parametrize(("generation", "kept"), [("0.33", False), ("0.34", True)])
def test_llama3_json_keeps_special_tokens_with_tools_from_0_34(families, generation, kept) -> None:
    """vLLM 0.34's llama3_json tool parser became an adapter of its parser engine, whose adjust_request turns
    skip_special_tokens off while tools are in play (specs/parsers.yaml keeps_special_tokens); 0.33's leaves it on.
    The engine then drops every special token that is not its markup (deletes_special_tokens), so derender's text
    shows none in either generation; render's sampling params follow the generation the frontend speaks."""
    model = families["llama3"].model_dir
    name = families.served_name("llama3")
    client = TestClient(create_app(FrontendConfig(model, name, tool_parser="llama3_json", api_generation=generation)))
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    special = "<|start_header_id|>"
    ids = tok.encode("Alpha", add_special_tokens=False).ids + [tok.token_to_id(special)] + tok.encode(
        "Beta", add_special_tokens=False).ids
    with_tools = {"model": name, "messages": [{"role": "user", "content": "Hi"}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    for request, keeps in ((with_tools, kept), ({**with_tools, "tools": None}, False)):
        params = client.post("/v1/chat/completions/render", json=request).json()["sampling_params"]
        assert params.get("skip_special_tokens", True) is not keeps, params
        out = client.post("/v1/chat/completions/derender", json={
            "model": name, "chat_request": request,
            "generate_response": {"request_id": "r", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "length"}]}})
        assert out.status_code == 200, out.text
        assert special not in out.json()["choices"][0]["message"]["content"], out.json()
    # Messages without tools leaves tool_choice null, so 0.34's renderer still asks llama3_json (as vLLM 0.34 does).
    messages = client.post("/v1/messages/render", json={"model": name, "max_tokens": 4,
                                                         "messages": [{"role": "user", "content": "Hi"}]})
    assert messages.status_code == 200, messages.text
    assert messages.json()["sampling_params"].get("skip_special_tokens", True) is not kept, messages.json()


def test_a_rule_that_changed_between_releases_is_undecided_until_the_generation_is_known() -> None:
    tools = {"tools": [{"type": "function", "function": {"name": "f"}}]}
    assert special_tokens_kept(None, "llama3_json", tools, ["0.34"]) is True
    assert special_tokens_kept(None, "llama3_json", tools, ["0.32", "0.33"]) is False
    assert special_tokens_kept(None, "llama3_json", tools, ["0.33", "0.34"]) is None
    assert special_tokens_kept(None, "llama3_json", {**tools, "tool_choice": "none"}, ["0.33", "0.34"]) is False
    assert special_tokens_kept("qwen3", None, {}, []) is True  # the same in every generation of the spec
    # 0.34's llama3_json turns it off whenever the renderer asks the parser: a reasoning parser is configured, or the
    # tool_choice is not "none" (in chat null is the absent field, RENDER-044; Messages leaves it null without tools).
    assert special_tokens_kept("deepseek_r1", "llama3_json", {}, ["0.34"]) is True
    assert special_tokens_kept("deepseek_r1", "llama3_json", {}, []) is None
    assert special_tokens_kept("deepseek_r1", None, {}, []) is False
    assert special_tokens_kept(None, "llama3_json", {"tool_choice": None}, ["0.34"]) is False
    assert keeps_special_tokens(None, "llama3_json", {"tool_choice": None}, "0.34", dialect="messages") is True
    assert keeps_special_tokens(None, "llama3_json", {"tool_choice": None}, "0.33", dialect="messages") is False
    assert keeps_special_tokens(None, "qwen3_coder", {"tool_choice": None}, "0.32", dialect="messages") is True
    assert keeps_special_tokens(None, "hermes", {"tool_choice": None}, "0.32", dialect="messages") is False
    assert special_tokens_deleted(None, "llama3_json", ["0.33", "0.34"]) is None
    assert special_tokens_deleted(None, "llama3_json", ["0.34"]) is True
    assert special_tokens_deleted("gemma4", "gemma4", []) is True
