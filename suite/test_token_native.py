"""Token-native chat: token-ID input blocks, the tokenizer_version pin, token-ID output (TOKNAT-*).

Input blocks are checked through chat render, whose answer shows the prompt IDs; output (``message.token_ids``,
``delta.token_ids``, ``return_tokens_only``) needs the target's own ``/v1/chat/completions`` and is reported
unsupported on a target without it (e.g. a render-only server).

The tests under "the proposal's own text" are written from "Token-Native LLM APIs: Input and Output as Token
IDs" (Kumar Shivendu, 2026): its request shapes (a lone ``input_tokens`` object as ``content``,
``response_format_tokens: true``) and the properties it states, with only the model, pin and ids taken from
the target.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenspec.specs.openapi import schema_validator
from tokenspec.suite.oracles import strategies

RENDER = "/v1/chat/completions/render"
CHAT = "/v1/chat/completions"
GENERATE = "/inference/v1/generate"
SENTINEL = "\ue000tokenspec-input-tokens\ue000"  # stands for the block when the suite renders the template itself


@pytest.fixture
def server_version(target) -> str:
    """The target's tokenizer_version, from its /v1/models card (how clients discover it, TOKNAT-008).

    Function-scoped on purpose: the plugin's unsupported check (an autouse function fixture) must run first."""
    with target.transport.client() as client:
        cards = client.get(f"{target.url}/v1/models").json()["data"]
    card = next((c for c in cards if c.get("id") == target.model), None)
    assert card is not None, f"/v1/models has no card for {target.model}"
    version = card.get("tokenizer_version")
    assert isinstance(version, str) and version, f"the model card reports no tokenizer_version: {card}"
    return version


@pytest.fixture
def chat_api(api, capabilities):
    """The target's client, for tests that need its /v1/chat/completions."""
    capabilities.require("chat-completions")
    return api


def _block(ids: list[int], **extra: object) -> dict:
    return {"type": "input_tokens", "token_ids": ids, **extra}


def _body(target, content: object, **fields: object) -> dict:
    return {"model": target.model, "messages": [{"role": "user", "content": content}], **fields}


def _generation(target, version: str | None = None, **fields: object) -> dict:
    """A short greedy chat request, optionally pinned."""
    pin = {"tokenizer_version": version} if version is not None else {}
    return _body(target, "Hello, who are you?", **{"max_tokens": 6, "temperature": 0, **pin, **fields})


def _find(haystack: list[int], needle: list[int], start: int = 0) -> int:
    for k in range(start, len(haystack) - len(needle) + 1):
        if haystack[k : k + len(needle)] == needle:
            return k
    return -1


@pytest.fixture(params=["render", "chat"])
def endpoint(request, api):
    """The two ways a client hands input blocks to a target: render, and the target's own chat completions."""
    if request.param == "render":
        return RENDER
    request.getfixturevalue("capabilities").require("chat-completions")
    return CHAT


# -- input blocks ---------------------------------------------------------------------------------------------


@pytest.mark.req("TOKNAT-001", "TOKNAT-010")
@given(data=st.data())
def test_input_tokens_are_inserted_verbatim(api, target, codec, server_version, render_oracle, data) -> None:
    """The oracle is the model folder's template (transformers) rendered with a sentinel where the block
    sits: the prompt is the text before it, the block's IDs unchanged, then the text after it."""

    ids = data.draw(strategies.token_ids(codec.known_ids), label="token_ids")
    before = data.draw(st.one_of(st.none(), strategies.text), label="text before")
    after = data.draw(st.one_of(st.none(), strategies.text), label="text after")
    as_list = before is not None or after is not None or data.draw(st.booleans(), label="block in a list")
    pinned_block = data.draw(st.booleans(), label="block carries its own pin")

    def content(block: object) -> object:
        if not as_list:
            return block
        parts = [{"type": "text", "text": before}] if before is not None else []
        parts.append(block)
        return parts + ([{"type": "text", "text": after}] if after is not None else [])

    block = _block(ids, **({"tokenizer_version": server_version} if pinned_block else {}))
    out = api.post_ok(RENDER, _body(target, content(block), tokenizer_version=server_version))["token_ids"]
    sentinel_part = {"type": "text", "text": SENTINEL}
    expected = render_oracle.prompt_text(
        {"messages": [{"role": "user", "content": content(sentinel_part if as_list else SENTINEL)}]})
    text_before, text_after = expected.split(SENTINEL)
    k = _find(out, ids)
    while k != -1 and not (codec.decode(out[:k]) == text_before and codec.decode(out[k + len(ids):]) == text_after):
        k = _find(out, ids, k + 1)
    assert k != -1, (
        f"the block's ids {ids} are not in the prompt verbatim between {text_before!r} and {text_after!r}: {out}"
    )


@pytest.mark.req("TOKNAT-010")
def test_blocks_and_text_parts_mix_in_one_message(api, target, codec, server_version) -> None:
    first, second = [7, 8, 9], [11, 12]
    content = [{"type": "text", "text": "A"}, _block(first), {"type": "text", "text": "B"}, _block(second)]
    out = api.post_ok(RENDER, _body(target, content, tokenizer_version=server_version))["token_ids"]
    at = _find(out, first)
    assert at != -1, f"first block {first} missing from {out}"
    assert _find(out, second, at + len(first)) != -1, f"second block {second} missing after the first: {out}"


@pytest.mark.req("TOKNAT-002", "ERROR-001")
def test_block_without_tokenizer_version_is_rejected(api, target, endpoint) -> None:
    resp = api.post(endpoint, _body(target, [_block([1, 2])], max_tokens=2))
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["error"].get("param") == "tokenizer_version", resp.text[:300]


@pytest.mark.req("TOKNAT-003")
def test_mismatched_tokenizer_version_is_a_conflict(api, target, server_version, endpoint) -> None:
    wrong = "0" * 64 if server_version != "0" * 64 else "1" * 64
    resp = api.post(endpoint, _body(target, [_block([1, 2])], tokenizer_version=wrong, max_tokens=2))
    assert resp.status_code == 409, resp.text[:300]
    body = resp.json()
    problems = [e.message for e in schema_validator("token-native.yaml", "/components/schemas/TokenizerVersionMismatch")
                .iter_errors(body)]
    assert not problems, f"409 body is not the mismatch error: {problems[:3]}"
    error = body["error"]
    expected = ("tokenizer_version_mismatch", "tokenizer_version", 409)
    assert (error["type"], error.get("param"), error["code"]) == expected
    assert server_version in error["message"], "the message must name the server's tokenizer_version"


@pytest.mark.req("TOKNAT-004", "ERROR-001")
@pytest.mark.parametrize("where", ["negative", "vocab-size", "far-out"])
def test_invalid_ids_in_a_block_are_rejected(api, target, codec, server_version, endpoint, where) -> None:
    bad = {"negative": -1, "vocab-size": codec.vocab_size, "far-out": codec.vocab_size + 100_000}[where]
    resp = api.post(endpoint, _body(target, [_block([1, bad, 2])], tokenizer_version=server_version, max_tokens=2))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("TOKNAT-009", "ERROR-001")
def test_block_pin_must_equal_the_top_level_pin(api, target, server_version, endpoint) -> None:
    block = _block([1, 2], tokenizer_version=server_version + "-other")
    resp = api.post(endpoint, _body(target, [block], tokenizer_version=server_version, max_tokens=2))
    assert resp.status_code == 400, resp.text[:300]


# -- output through the target's /v1/chat/completions ---------------------------------------------------------


@pytest.mark.req("TOKNAT-001")
def test_input_tokens_reach_generation(chat_api, target, server_version) -> None:
    content = [{"type": "text", "text": "Say:"}, _block([7, 8, 9])]
    rendered = chat_api.post_ok(RENDER, _body(target, content, tokenizer_version=server_version))
    out = chat_api.post_ok(CHAT, _body(target, content, tokenizer_version=server_version, max_tokens=2,
                                       temperature=0, return_token_ids=True))
    assert out["usage"]["prompt_tokens"] == len(rendered["token_ids"])
    if out.get("prompt_token_ids") is not None:
        assert out["prompt_token_ids"] == rendered["token_ids"]


@pytest.mark.req("TOKNAT-005")
def test_message_token_ids_are_the_generated_ids(chat_api, engine, target) -> None:
    out = chat_api.post_ok(CHAT, _generation(target, return_token_ids=True))
    choice = out["choices"][0]
    ids = choice["message"].get("token_ids")
    assert isinstance(ids, list) and ids, f"message.token_ids missing: {choice['message']}"
    assert len(ids) == out["usage"]["completion_tokens"]
    if choice.get("token_ids") is not None:
        assert choice["token_ids"] == ids, "choices[].token_ids and message.token_ids disagree"
    # the same greedy request, rendered and run on the engine directly, generates the same ids
    rendered = chat_api.post_ok(RENDER, _generation(target))
    generated = engine.post_ok(GENERATE, {**rendered, "stream": False})
    assert generated["choices"][0]["token_ids"] == ids


@pytest.mark.req("TOKNAT-006")
def test_stream_deltas_carry_their_token_ids(chat_api, target) -> None:
    whole = chat_api.post_ok(CHAT, _generation(target, return_token_ids=True))["choices"][0]["message"]["token_ids"]
    body = _generation(target, return_token_ids=True, stream=True, stream_options={"include_usage": True})
    streamed, usage = [], None
    for event in chat_api.stream_events(CHAT, body):
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            ids = choice["delta"].get("token_ids")
            assert isinstance(ids, list), f"a delta without token_ids: {choice}"
            streamed += ids
    assert streamed == whole, "the deltas' token_ids do not concatenate to message.token_ids"
    if usage is not None:
        assert usage["completion_tokens"] == len(streamed)


@pytest.mark.req("TOKNAT-007")
def test_return_tokens_only_sends_no_text(chat_api, target) -> None:
    out = chat_api.post_ok(CHAT, _generation(target, return_tokens_only=True))
    message = out["choices"][0]["message"]
    assert message.get("content") is None, f"content must be null: {message}"
    assert message.get("reasoning") is None and not message.get("tool_calls"), f"parsers must not run: {message}"
    ids = message.get("token_ids")
    assert isinstance(ids, list) and len(ids) == out["usage"]["completion_tokens"] > 0, message
    streamed = []
    for event in chat_api.stream_events(CHAT, _generation(target, return_tokens_only=True, stream=True)):
        for choice in event.get("choices") or []:
            assert choice["delta"].get("content") is None, f"a delta with text: {choice['delta']}"
            streamed += choice["delta"].get("token_ids") or []
    assert streamed == ids


@pytest.mark.req("TOKNAT-008")
def test_token_native_answers_report_tokenizer_version(chat_api, target, server_version) -> None:
    out = chat_api.post_ok(CHAT, _generation(target, server_version, return_token_ids=True))
    assert out.get("tokenizer_version") == server_version
    body = _generation(target, server_version, return_token_ids=True, stream=True)
    versions = {event.get("tokenizer_version") for event in chat_api.stream_events(CHAT, body)}
    assert versions == {server_version}, f"stream chunks report {versions}"


# -- the proposal's own text: its field names and the properties it states ---------------------------------------

PROPOSAL_TEXT = "Summarize the attached document."  # the proposal's example message
# Markup the parser families of specs/parsers.yaml move out of content; "modulo parsed markup" drops it.
PARSER_MARKUP = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|python_tag|>")


def _proposal_body(target, version: str, ids: list[int], **fields: object) -> dict:
    """The proposal's request: content is one input_tokens object, the top-level pin, its output flag."""
    return {"model": target.model, "tokenizer_version": version,
            "messages": [{"role": "user", "content": _block(ids)}], **fields}


@pytest.mark.req("TOKNAT-001")
def test_equal_ids_in_equal_ids_out_through_render(api, target, codec, server_version, render_oracle) -> None:
    """The proposal's lone input_tokens object: its ids are the prompt's ids at that place, unchanged."""
    ids = codec.encode(PROPOSAL_TEXT)
    out = api.post_ok(RENDER, _proposal_body(target, server_version, ids))["token_ids"]
    expected = render_oracle.prompt_text({"messages": [{"role": "user", "content": SENTINEL}]})
    text_before, text_after = expected.split(SENTINEL)
    k = _find(out, ids)
    while k != -1 and not (codec.decode(out[:k]) == text_before and codec.decode(out[k + len(ids):]) == text_after):
        k = _find(out, ids, k + 1)
    assert k != -1, f"the block's ids {ids} are not the prompt's ids between {text_before!r} and {text_after!r}: {out}"
    again = api.post_ok(RENDER, _proposal_body(target, server_version, ids))["token_ids"]
    assert again == out, "equal ids in must give equal ids out"


@pytest.mark.req("TOKNAT-011", "TOKNAT-001")
def test_proposal_request_answers_message_token_ids(chat_api, target, codec, server_version) -> None:
    ids = codec.encode(PROPOSAL_TEXT)
    body = _proposal_body(target, server_version, ids, response_format_tokens=True, max_tokens=6, temperature=0)
    rendered = chat_api.post_ok(RENDER, _proposal_body(target, server_version, ids))["token_ids"]
    out = chat_api.post_ok(CHAT, body)
    message = out["choices"][0]["message"]
    token_ids = message.get("token_ids")
    assert isinstance(token_ids, list) and token_ids, f"response_format_tokens gave no message.token_ids: {message}"
    assert all(type(t) is int and 0 <= t < codec.vocab_size for t in token_ids), token_ids
    assert len(token_ids) == out["usage"]["completion_tokens"]
    assert out["usage"]["prompt_tokens"] == len(rendered), "the prompt is the rendered ids, nothing re-tokenized"


@pytest.mark.req("TOKNAT-011")
def test_proposal_stream_delta_token_ids_concatenate(chat_api, target, server_version) -> None:
    body = _generation(target, server_version, response_format_tokens=True)
    whole = chat_api.post_ok(CHAT, body)["choices"][0]["message"]["token_ids"]
    streamed = []
    for event in chat_api.stream_events(CHAT, {**body, "stream": True}):
        for choice in event.get("choices") or []:
            ids = choice["delta"].get("token_ids")
            assert isinstance(ids, list), f"a delta without token_ids: {choice}"
            streamed += ids
    assert streamed == whole, "the deltas' token_ids do not concatenate to message.token_ids"


@pytest.mark.req("TOKNAT-014")
def test_decoded_token_ids_agree_with_the_text(chat_api, target, codec, server_version) -> None:
    """decode(message.token_ids) is the answer's text (reasoning then content), less special tokens and the
    markup the parsers consume; whitespace is not compared (parsers trim around markers)."""
    # sampled with a seed: greedy output of a random-weights model is often only whitespace, which says nothing
    body = _generation(target, server_version, response_format_tokens=True, max_tokens=24, temperature=1.0, seed=0)
    out = chat_api.post_ok(CHAT, body)
    message = out["choices"][0]["message"]
    assert not message.get("tool_calls"), "no tools were offered, so nothing may be parsed as a tool call"

    def bare(text: str) -> str:
        for markup in (*codec.special_texts, *PARSER_MARKUP, "\ufffd"):
            text = text.replace(markup, "")
        return "".join(text.split())

    said = (message.get("reasoning") or "") + (message.get("content") or "")
    decoded = codec.decode(message["token_ids"])
    assert bare(said) == bare(decoded), f"the text {said!r} is not the decoding {decoded!r} of the token_ids"


@pytest.mark.req("TOKNAT-007", "TOKNAT-011")
def test_tokens_only_answer_carries_no_text(chat_api, target, server_version) -> None:
    body = _generation(target, server_version, response_format_tokens=True, return_tokens_only=True)
    out = chat_api.post_ok(CHAT, body)
    message = out["choices"][0]["message"]
    texts = {k: message.get(k) for k in ("content", "reasoning", "refusal", "tool_calls")}
    assert not any(texts.values()), f"a tokens-only answer carries text: {texts}"
    assert isinstance(message.get("token_ids"), list) and message["token_ids"], message
    streamed = []
    for event in chat_api.stream_events(CHAT, {**body, "stream": True}):
        for choice in event.get("choices") or []:
            delta = choice["delta"]
            assert not delta.get("content") and not delta.get("reasoning") and not delta.get("tool_calls"), delta
            streamed += delta.get("token_ids") or []
    assert streamed == message["token_ids"]


@pytest.mark.req("TOKNAT-012", "ERROR-001")
@pytest.mark.parametrize("fields", [
    {"response_format_tokens": "tokens"},
    {"response_format_tokens": True, "return_token_ids": False},
    {"response_format_tokens": False, "return_tokens_only": True},
], ids=["not-a-boolean", "alias-disagrees", "tokens-only-but-off"])
def test_contradictory_output_flags_are_refused(api, target, endpoint, fields) -> None:
    resp = api.post(endpoint, _body(target, "Hello", max_tokens=2, **fields))
    assert resp.status_code == 400, f"answered {resp.status_code} instead of saying why: {resp.text[:300]}"


@pytest.mark.req("TOKNAT-013")
def test_mismatched_pin_is_refused_on_completions(api, target, codec, server_version) -> None:
    ids = codec.encode(PROPOSAL_TEXT)
    wrong = "0" * 64 if server_version != "0" * 64 else "1" * 64
    resp = api.post("/v1/completions/render", {"model": target.model, "prompt": ids, "tokenizer_version": wrong})
    assert resp.status_code == 409, resp.text[:300]
    error = resp.json()["error"]
    assert (error["type"], error.get("param")) == ("tokenizer_version_mismatch", "tokenizer_version"), error
    pinned = api.post_ok("/v1/completions/render", {"model": target.model, "prompt": ids,
                                                    "tokenizer_version": server_version})
    assert pinned[0]["token_ids"] == ids, "a pinned token-id prompt is passed through unchanged"
