"""The other request dialects render serves: Anthropic Messages and stateless Responses (RENDER-026..RENDER-033,
RENDER-038).

Each dialect's request stands for a chat request (``suite/oracles/dialects.py``, the spec's mapping); the oracle
renders that chat request with transformers, as chat render's own oracle does, so a converter that drops the system
prompt, ignores instructions, misplaces a tool result or loses a parameter gives other token_ids than the template
does.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given

from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import USER_HELLO
from tokenspec.suite.oracles.dialects import messages_as_chat, refuses_inline_system, responses_as_chat

MESSAGES = "/v1/messages/render"
RESPONSES = "/v1/responses/render"
_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


#: One of each mapping rule, so a run with few examples still reaches them.
MESSAGES_WITH_TOOLS = {
    "max_tokens": 8, "system": [{"type": "text", "text": "Use tools."}], "tools": [strategies.ANTHROPIC_TOOL],
    "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Ask the tool.", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"},
                                     {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21 C"}]}]}
RESPONSES_WITH_TOOLS = {"tools": [strategies.RESPONSES_TOOL], "input": [
    {"type": "message", "role": "user", "content": "Weather in Oslo?"},
    {"type": "reasoning", "id": "rs_1", "summary": [],
     "content": [{"type": "reasoning_text", "text": "Ask the tool."}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]}]}


def _messages(model: str, **fields: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 8, "messages": USER_HELLO, **fields}


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _renders_as(api, path: str, body: dict[str, Any], chat: dict[str, Any], render_oracle, what: str) -> None:
    """``body`` renders to the token_ids the template gives ``chat``; a conversation the template itself refuses
    (raise_exception) must be refused too."""
    try:
        expected = render_oracle.prompt_ids(chat)
    except Exception as exc:  # noqa: BLE001 - the template refuses this conversation
        status = api.post(path, body).status_code
        assert 400 <= status < 500, f"the template refuses the {what} conversation ({exc}); render answered {status}"
        return
    rendered = api.post_ok(path, body)
    ids = rendered["token_ids"]
    assert ids == expected, (f"{what} render gave {len(ids)} ids, the template oracle on the mapped conversation "
                             f"{len(expected)}: first difference at {_first_difference(ids, expected)}")


# -- Anthropic Messages ---------------------------------------------------------------------------------------------


@pytest.mark.req("RENDER-026", "RENDER-027")
@given(body=strategies.anthropic_requests())
@example(body={"max_tokens": 8, "system": "You are terse.", "messages": USER_HELLO})
@example(body=MESSAGES_WITH_TOOLS)
def test_messages_render_equals_the_template_oracle(api, target, capabilities, render_oracle, body) -> None:
    """The conversation a Messages request maps to, rendered by transformers: system first, tool results as tool
    messages before the user's own text, tool_use as tool calls, thinking as reasoning."""
    if "tools" in body and not capabilities.has("tools"):
        body.pop("tools")  # a server without a tool parser refuses any tools list, as chat render refuses "auto"
        body.pop("tool_choice", None)
    body = {"model": target.model, **body}
    _renders_as(api, MESSAGES, body, messages_as_chat(body), render_oracle, "Messages")


#: Conversations with system messages inside messages (Claude Code sends per-turn reminders so), one per RENDER-038
#: rule: in the middle, as text blocks, billing-header text, nothing left, first and last.
_INLINE_SYSTEM = {
    "middle": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
               {"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}],
    "text-blocks": [{"role": "user", "content": "Hi"},
                    {"role": "system", "content": [{"type": "text", "text": "Be "},
                                                   {"type": "text", "text": "brief."}]},
                    {"role": "user", "content": "What is 2 + 2?"}],
    "billing-header": [{"role": "user", "content": "Hi"},
                       {"role": "system", "content": [{"type": "text", "text": "x-anthropic-billing-header: cc=1"},
                                                      {"type": "text", "text": "Be brief."}]},
                       {"role": "system", "content": "x-anthropic-billing-header: cc=2"},
                       {"role": "user", "content": "What is 2 + 2?"}],
    "empty": [{"role": "user", "content": "Hi"}, {"role": "system", "content": ""},
              {"role": "user", "content": "What is 2 + 2?"}],
    "first": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}],
    "last": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "system", "content": "Answer in digits."}],
}


@pytest.mark.req("RENDER-038")
@pytest.mark.parametrize("top_level", [True, False], ids=["with-system", "without-system"])
@pytest.mark.parametrize("shape", list(_INLINE_SYSTEM))
def test_messages_inline_system_turns(api, target, render_oracle, shape, top_level) -> None:
    """A system message inside messages stays a system turn in its place, unless the template refuses a second
    system turn (decided from the model folder's template, as vLLM decides at start-up): then its text joins the
    leading system message."""
    body = _messages(target.model, messages=_INLINE_SYSTEM[shape])
    if top_level:
        body["system"] = "You are terse."
    merge = refuses_inline_system(render_oracle.template)
    chat = messages_as_chat(body, merge_inline_system=merge)
    what = f"[RENDER-038] Messages (inline system {'merged into the leading one' if merge else 'kept in place'})"
    _renders_as(api, MESSAGES, body, chat, render_oracle, what)


def _close(expected: Any, actual: Any) -> bool:
    if isinstance(expected, float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=1e-6)
    return expected == actual


@pytest.mark.req("RENDER-028")
@pytest.mark.parametrize(("fields", "sp_field", "expected"), [
    ({"max_tokens": 7}, "max_tokens", 7),
    ({"stop_sequences": ["END", "STOP"]}, "stop", ["END", "STOP"]),
    ({"temperature": 0.25}, "temperature", 0.25),
    ({"top_p": 0.5}, "top_p", 0.5),
    ({"top_k": 5}, "top_k", 5),
    ({"max_tokens": 1500, "thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking_token_budget", 1024),
], ids=["max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "thinking-budget"])
def test_messages_sampling_fields_reach_sampling_params(api, target, fields, sp_field, expected) -> None:
    params = api.post_ok(MESSAGES, _messages(target.model, **fields))["sampling_params"]
    assert _close(expected, params.get(sp_field)), f"{fields} gave sampling_params.{sp_field}={params.get(sp_field)!r}"


@pytest.mark.req("RENDER-028")
def test_messages_max_tokens_never_exceeds_the_context(api, target, max_model_len) -> None:
    out = api.post_ok(MESSAGES, _messages(target.model, max_tokens=max_model_len))
    room = max_model_len - len(out["token_ids"])
    assert out["sampling_params"].get("max_tokens") == room, (
        f"max_tokens={max_model_len} with a {len(out['token_ids'])}-token prompt gave "
        f"{out['sampling_params'].get('max_tokens')!r}, the context leaves {room}")


@pytest.mark.req("RENDER-029", "ERROR-001")
@pytest.mark.parametrize("fault", ["no-model", "no-messages", "no-max_tokens", "zero-max_tokens", "document-block"])
def test_messages_refusals(api, target, fault) -> None:
    body = _messages(target.model)
    if fault.startswith("no-"):
        body.pop(fault[3:])
    elif fault == "zero-max_tokens":
        body["max_tokens"] = 0
    else:
        body["messages"] = [{"role": "user", "content": [
            {"type": "text", "text": "Summarise this."},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "A short text."}}]}]
    resp = api.post(MESSAGES, body)
    assert resp.status_code == 400, f"{fault}: answered {resp.status_code}: {resp.text[:300]}"


@pytest.mark.req("RENDER-029", "ERROR-001")
def test_messages_image_block_is_refused_by_a_text_only_model(api, target, render_oracle) -> None:
    if render_oracle.multimodal:
        not_tested("the model folder is multimodal (it has a processor configuration): images are its input")
    body = _messages(target.model, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PIXEL}}]}])
    resp = api.post(MESSAGES, body)
    assert resp.status_code == 400, f"an image block on a text-only model was answered {resp.status_code}"


# -- Responses ------------------------------------------------------------------------------------------------------


@pytest.mark.req("RENDER-030", "RENDER-031")
@given(body=strategies.responses_requests())
@example(body={"instructions": "You are terse.", "input": "Hello"})
@example(body=RESPONSES_WITH_TOOLS)
def test_responses_render_equals_the_template_oracle(api, target, render_oracle, body) -> None:
    """The conversation a Responses request maps to, rendered by transformers: instructions first, function calls
    merged into the assistant turn before them, their outputs as tool messages, reasoning as the turn's reasoning."""
    body = {"model": target.model, **body}
    _renders_as(api, RESPONSES, body, responses_as_chat(body), render_oracle, "Responses")


@pytest.mark.req("RENDER-030")
def test_responses_partial_assistant_item_is_continued(api, target, render_oracle) -> None:
    """An assistant message whose status is incomplete is the prompt's end: the model continues it."""
    body = {"model": target.model, "input": [
        {"type": "message", "role": "user", "content": "Count to five."},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "incomplete",
         "content": [{"type": "output_text", "text": "One, two,", "annotations": []}]}]}
    _renders_as(api, RESPONSES, body, responses_as_chat(body), render_oracle, "Responses")


@pytest.mark.req("RENDER-031")
@pytest.mark.parametrize(("fields", "sp_field", "expected"), [
    ({"max_output_tokens": 7}, "max_tokens", 7),
    ({"temperature": 0.25}, "temperature", 0.25),
    ({"top_p": 0.5}, "top_p", 0.5),
    ({"stop": ["END"]}, "stop", ["END"]),
], ids=["max_output_tokens", "temperature", "top_p", "stop"])
def test_responses_sampling_fields_reach_sampling_params(api, target, fields, sp_field, expected) -> None:
    params = api.post_ok(RESPONSES, {"model": target.model, "input": "Hello", **fields})["sampling_params"]
    assert _close(expected, params.get(sp_field)), f"{fields} gave sampling_params.{sp_field}={params.get(sp_field)!r}"


@pytest.mark.req("RENDER-031")
def test_responses_max_output_tokens_never_exceeds_the_context(api, target, max_model_len) -> None:
    out = api.post_ok(RESPONSES, {"model": target.model, "input": "Hello", "max_output_tokens": max_model_len})
    room = max_model_len - len(out["token_ids"])
    assert out["sampling_params"].get("max_tokens") == room, (
        f"max_output_tokens={max_model_len} gave {out['sampling_params'].get('max_tokens')!r}, the context leaves "
        f"{room}")


@pytest.mark.req("RENDER-032", "ERROR-001")
def test_previous_response_id_is_refused(api, target) -> None:
    resp = api.post(RESPONSES, {"model": target.model, "input": "And then?", "previous_response_id": "resp_0001"})
    assert resp.status_code == 400, f"previous_response_id answered {resp.status_code}: {resp.text[:300]}"
    error = resp.json()["error"]
    assert error.get("type") == "invalid_request_error" and error.get("param") == "previous_response_id", error


# -- request ids ----------------------------------------------------------------------------------------------------


@pytest.mark.req("RENDER-033")
def test_messages_request_id_follows_the_header(api, target) -> None:
    out = api.request("POST", MESSAGES, json_body=_messages(target.model), headers={"X-Request-Id": "tokenspec-rid"})
    assert out.status_code == 200, out.text[:300]
    assert out.json()["request_id"] == "chatcmpl-tokenspec-rid", out.json()["request_id"]
    assert api.post_ok(MESSAGES, _messages(target.model))["request_id"].startswith("chatcmpl-")


@pytest.mark.req("RENDER-033")
def test_responses_request_id_is_the_bodys(api, target) -> None:
    given_id = api.post_ok(RESPONSES, {"model": target.model, "input": "Hello", "request_id": "tokenspec-rid"})
    assert given_id["request_id"] == "tokenspec-rid", given_id["request_id"]
    assert api.post_ok(RESPONSES, {"model": target.model, "input": "Hello"})["request_id"].startswith("resp_")
