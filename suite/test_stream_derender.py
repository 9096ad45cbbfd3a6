"""Streaming derender: one JSON POST per generate chunk, the client carrying stream_state (STREAM-007..019)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenspec.specs.openapi import component_validator, load_document
from tokenspec.specs.parser_families import shapes
from tokenspec.suite.engine.gating import not_tested, unsupported
from tokenspec.suite.engine.probe import WINDOWS
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import (
    CHAT_DERENDER,
    STREAM_PROMPT,
    chat_derender,
    chat_request,
    choice,
    completions_derender,
    generate_response,
    plain_chat_request,
    stream_body,
    visible_text,
)
from tokenspec.suite.oracles.derender_checks import derender_request, plain_token, tool_call_shapes

CHAT = CHAT_DERENDER
COMPLETIONS = "/v1/completions/derender"
PROMPT = STREAM_PROMPT
# Characters whose UTF-8 bytes the byte-level tokenizers split over several tokens.
MULTI_TOKEN_CANDIDATES = ["😀", "🚀", "👍🏽", "🇫🇷", "✨", "東", "語", "é"]


def gen_chunk(token_ids: list[int], finish_reason: str | None = None, index: int = 0) -> dict[str, Any]:
    """One generate SSE event's payload with a single choice."""
    ch = {"index": index, "token_ids": token_ids, "finish_reason": finish_reason, "stop_reason": None}
    return {"request_id": "tokenspec-stream", "choices": [ch]}


def stream_derender(
    api, model: str, path: str, chunks: list[dict], prompt_token_ids: list[int] = PROMPT,
    chat_request: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Derender a generate stream chunk by chunk, threading stream_state; the list of {chunk, stream_state}."""
    state, answers = None, []
    for chunk in chunks:
        answer = api.post_ok(path, stream_body(model, path, chunk, state, prompt_token_ids, chat_request))
        assert set(answer) >= {"chunk", "stream_state"}, f"expected {{chunk, stream_state}}, got {sorted(answer)}"
        state = answer["stream_state"]
        answers.append(answer)
    return answers


def streamed_text(path: str, answers: list[dict]) -> list[str]:
    """The text delta of each answer: visible chat delta text, or completions text."""
    pieces = []
    for answer in answers:
        for ch in answer["chunk"]["choices"]:
            pieces.append(visible_text(ch.get("delta") or {}) if path == CHAT else ch.get("text") or "")
    return pieces


def split(ids: list[int], cuts: list[int], separate_final: bool) -> list[dict]:
    bounds = [0, *sorted(set(cuts)), len(ids)]
    pieces = [ids[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    chunks = [gen_chunk(p) for p in pieces]
    if separate_final:
        chunks.append(gen_chunk([], "stop"))
    else:
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
    return chunks


@st.composite
def split_text(draw: st.DrawFn, codec) -> tuple[str, list[int], list[dict]]:
    text = draw(strategies.text)
    ids = codec.encode(text)
    cuts = draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=6)) if len(ids) > 1 else []
    return text, ids, split(ids, cuts, draw(st.booleans()))


@pytest.mark.req("STREAM-007", "STREAM-015", "SCHEMA-006")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_answers_are_json_with_a_valid_stream_state(api, target, codec, path) -> None:
    ids = codec.encode("Hello there, friend")
    chunks = [gen_chunk(ids[:2]), gen_chunk(ids[2:]), gen_chunk([], "stop")]
    state = None
    validator = component_validator("DerenderStreamState")
    for chunk in chunks:
        resp = api.post(path, stream_body(target.model, path, chunk, state))
        assert resp.status_code == 200, resp.text[:300]
        assert resp.headers.get("content-type", "").startswith("application/json"), "expected plain JSON, not SSE"
        answer = resp.json()
        errors = [e.message for e in validator.iter_errors(answer["stream_state"])]
        assert not errors, f"stream_state is not a DerenderStreamState: {errors[:3]}"
        state = answer["stream_state"]


@pytest.mark.req("STREAM-008")
@given(data=st.data())
def test_chat_deltas_concatenate_to_the_non_stream_content(api, target, codec, data) -> None:
    _, ids, chunks = data.draw(split_text(codec))
    whole = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids))))
    streamed = "".join(streamed_text(CHAT, stream_derender(api, target.model, CHAT, chunks)))
    assert streamed == visible_text(whole["choices"][0]["message"]), "streamed deltas != the non-stream answer"


@pytest.mark.req("STREAM-008")
@given(data=st.data())
def test_chat_stream_splits_reasoning_like_the_whole_answer(api, target, codec, capabilities, data) -> None:
    """With a reasoning parser, a think block streamed in any chunking gives the non-stream answer's content and
    reasoning, each in its own field (visible text alone cannot see reasoning delivered as content)."""
    capabilities.require("reasoning")
    reasoning, content = data.draw(strategies.text, label="reasoning"), data.draw(strategies.text, label="content")
    ids = codec.encode(f"<think>{reasoning}</think>{content}")
    cuts = data.draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=6), label="cuts")
    whole = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)),
                                            chat_request=chat_request(target.model)))["choices"][0]["message"]
    answers = stream_derender(api, target.model, CHAT, split(ids, cuts, data.draw(st.booleans())),
                              chat_request=chat_request(target.model))
    deltas = [ch.get("delta") or {} for a in answers for ch in a["chunk"]["choices"]]
    streamed_content = "".join(d.get("content") or "" for d in deltas)
    streamed_reasoning = "".join(d.get("reasoning") or d.get("reasoning_content") or "" for d in deltas)
    assert streamed_content == (whole.get("content") or ""), (
        f"streamed content {streamed_content!r} != non-stream content {whole.get('content')!r}")
    assert streamed_reasoning == (whole.get("reasoning") or whole.get("reasoning_content") or ""), (
        f"streamed reasoning {streamed_reasoning!r} != non-stream reasoning")


def _calls(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name, arguments as canonical JSON, or as sent where they are not JSON) of each call."""
    out = []
    for name, arguments in calls:
        try:
            arguments = json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
        out.append((name, arguments))
    return out


@pytest.mark.req("STREAM-018")
@given(data=st.data())
def test_chat_stream_gives_the_whole_answers_tool_calls(api, target, codec, capabilities, data) -> None:
    """Each table shape the target's parsers turn into tool calls (specs/parsers.yaml), streamed in drawn chunks
    under the table's request: the calls assembled from the deltas, and the content and reasoning, are the
    non-stream answer's."""
    capabilities.require("chat-stream-derender", "tool-parsing")
    cases = tool_call_shapes(capabilities)
    if not cases:
        not_tested("specs/parsers.yaml specifies no tool call for the target's parser configuration")
    shape, variant = data.draw(st.sampled_from(cases), label="shape")
    ids = codec.encode(shapes()[shape])
    cuts = data.draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=6), label="cuts")
    request = derender_request(capabilities, target.model, variant)
    whole = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)),
                                            chat_request=request))["choices"][0]["message"]
    answers = stream_derender(api, target.model, CHAT, split(ids, cuts, data.draw(st.booleans())),
                              chat_request=request)
    content, reasoning, calls = "", "", {}
    for delta in (ch.get("delta") or {} for a in answers for ch in a["chunk"]["choices"]):
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning") or delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls") or []:
            function = call.get("function") or {}
            name, arguments = calls.get(call.get("index"), ("", ""))
            calls[call.get("index")] = (name + (function.get("name") or ""),
                                        arguments + (function.get("arguments") or ""))
    streamed = _calls([calls[i] for i in sorted(calls, key=lambda i: (i is None, i or 0))])
    wanted = _calls([(c["function"]["name"], c["function"]["arguments"]) for c in whole.get("tool_calls") or []])
    assert streamed == wanted, f"{shape!r} ({variant}) streamed tool calls {streamed} != non-stream {wanted}"
    assert (content, reasoning) == (whole.get("content") or "", whole.get("reasoning") or whole.get(
        "reasoning_content") or ""), f"{shape!r} ({variant}) streamed content/reasoning {(content, reasoning)!r} !="\
        f" non-stream {(whole.get('content'), whole.get('reasoning'))!r}"


#: What a plain-text output opens with so that each reasoning family's rules (specs/parsers.yaml) decide its text as
#: it arrives: deepseek_r1 drops the text before a later ``<think>``, and gemma4 reads text before a later
#: ``<|channel>`` as reasoning or content only once it has seen one, so until then nothing is decided.
DECIDING_OPENER = {None: "", "qwen3": "", "deepseek_r1": "<think>", "gemma4": "<|channel>thought\n"}
#: Tool families whose rules decide nothing until the output ends, even for a request without tools (gemma4's pass
#: runs on every request, and a late marker changes the text before it).
UNDECIDED_TOOLS = ("gemma4",)
STATE_GROWTH = 256  # bytes the state may gain from token 200 to token 2,000 (counters, an open tail)


def _state_bytes(state: Any) -> int:
    return len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.req("STREAM-019")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_stream_state_does_not_grow_with_the_output(api, target, codec, capabilities, max_model_len, path) -> None:
    """Plain words streamed 20 tokens a chunk: the state returned after token 2,000 is no more than STATE_GROWTH
    bytes larger than after token 200 (a state that carries the output history grows by several bytes a token)."""
    opener = ""
    if path == CHAT:
        reasoning, tool = capabilities.parsers.get("reasoning"), capabilities.parsers.get("tool")
        if reasoning not in DECIDING_OPENER:
            not_tested(f"the target's reasoning parser is {reasoning}: specs/parsers.yaml has no rule for when it "
                       "decides its text (declare its family with --profile)")
        if tool == "unknown" or tool in UNDECIDED_TOOLS:
            not_tested(f"the target's tool parser ({tool}) decides no text before the output ends")
        opener = DECIDING_OPENER[reasoning]
    length = min(2000, max_model_len - len(PROMPT) - 1)
    if length < 1000:
        not_tested(f"max_model_len {max_model_len} leaves no room for a 1,000-token stream")
    words = " ".join(["the model weighs each option before it answers"] * (length // 3))
    ids = codec.encode(opener + words)[:length]
    chunks = [gen_chunk(ids[i:i + 20]) for i in range(0, len(ids), 20)]
    answers = stream_derender(api, target.model, path, chunks)
    early = _state_bytes(answers[200 // 20 - 1]["stream_state"])
    late = _state_bytes(answers[-1]["stream_state"])
    assert late <= early + STATE_GROWTH, (
        f"stream_state grew from {early} bytes after token 200 to {late} bytes after token {len(ids)}: it carries"
        f" what grows with the output (keys: {', '.join(sorted(answers[-1]['stream_state']))})")


@pytest.mark.req("STREAM-009")
@given(data=st.data())
def test_completions_deltas_concatenate_to_the_non_stream_text(api, target, codec, data) -> None:
    _, ids, chunks = data.draw(split_text(codec))
    whole = api.post_ok(COMPLETIONS, completions_derender(target.model, [generate_response(choice(ids))]))
    streamed = "".join(streamed_text(COMPLETIONS, stream_derender(api, target.model, COMPLETIONS, chunks)))
    assert streamed == whole["choices"][0]["text"], "streamed text deltas != the non-stream text"


@pytest.mark.req("STREAM-010")
def test_role_is_sent_once_on_the_first_chunk(api, target, codec) -> None:
    ids = codec.encode("one two three four")
    chunks = [gen_chunk([t]) for t in ids] + [gen_chunk([], "stop")]
    answers = stream_derender(api, target.model, CHAT, chunks)
    roles = [(ch.get("delta") or {}).get("role") for a in answers for ch in a["chunk"]["choices"]]
    assert roles[0] == "assistant", f"the first chunk must carry role assistant, roles: {roles}"
    assert [r for r in roles if r] == ["assistant"], f"role must be sent exactly once, roles: {roles}"


@pytest.mark.req("STREAM-011")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_chunk_with_two_choices_rejected(api, target, codec, path) -> None:
    ids = codec.encode("hi")
    chunk = gen_chunk(ids)
    chunk["choices"].append({**chunk["choices"][0], "index": 1})
    resp = api.post(path, stream_body(target.model, path, chunk, None))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("STREAM-012")
def test_delta_beyond_the_context_rejected(api, target, max_model_len) -> None:
    resp = api.post(CHAT, stream_body(target.model, CHAT, gen_chunk([5] * (max_model_len + 1)), None))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("STREAM-012")
def test_accumulated_output_counts_towards_the_context(api, target, max_model_len) -> None:
    prompt = [5] * (max_model_len - 4)
    first = api.post_ok(CHAT, stream_body(target.model, CHAT, gen_chunk([5, 5, 5]), None, prompt))
    resp = api.post(CHAT, stream_body(target.model, CHAT, gen_chunk([5, 5, 5]), first["stream_state"], prompt))
    assert resp.status_code == 400, f"prompt + accumulated + delta exceed max_model_len: {resp.text[:300]}"


_GENUINE: dict[tuple[str, str], dict[str, Any]] = {}


def genuine_state(api, target, codec, path: str) -> dict[str, Any]:
    """The stream_state the target itself returns after a first chunk ("hi"), asked once per target and route:
    every tamper and every fuzzed state starts from it, whatever its keys."""
    key = (target.url, path)
    if key not in _GENUINE:
        _GENUINE[key] = api.post_ok(path, stream_body(target.model, path, gen_chunk(codec.encode("hi")),
                                                      None))["stream_state"]
    return _GENUINE[key]


def window_key(state: Any) -> str:
    """The decode-window key of a state the target returned. A state with neither generation's window is not a
    DerenderStreamState (STREAM-015): a failure here, since a renamed field must never pass as "not tested"."""
    key = next((k for k in WINDOWS if isinstance(state, dict) and k in state), None)
    assert key is not None, (f"the target's stream_state has no decode window ({' or '.join(WINDOWS)}) with its"
                             f" offsets: keys {sorted(state) if isinstance(state, dict) else state!r}")
    return key


def _tampered(name: str, state: dict[str, Any], window: str) -> Any:
    size = len(state[window]) if isinstance(state[window], list) else 0
    return {
        "window-not-a-list": lambda: {**state, window: 5},
        "negative-offsets": lambda: {**state, "prefix_offset": -1, "read_offset": -3},
        "offsets-past-the-window": lambda: {**state, "prefix_offset": size + 8, "read_offset": size + 9},
        "chunk-lens-disagree": lambda: {**state, "output_token_ids": [1, 2], "output_chunk_lens": [5]},
        "state-not-an-object": lambda: [1, 2, 3],
    }[name]()


TAMPERS = ["window-not-a-list", "negative-offsets", "offsets-past-the-window", "chunk-lens-disagree",
           "state-not-an-object"]


@pytest.mark.req("STREAM-013", "STREAM-015")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("name", TAMPERS)
def test_tampered_stream_state_rejected(api, target, codec, path, name) -> None:
    """Tampering is done on the target's own state, in the window generation it speaks. The chunk-length
    history is optional (vLLM's parser path carries it): a state without it has nothing to contradict."""
    genuine = genuine_state(api, target, codec, path)
    if name == "chunk-lens-disagree" and not {"output_token_ids", "output_chunk_lens"} <= set(genuine):
        not_tested("the target's stream_state carries no output_token_ids/output_chunk_lens history to contradict")
    window = window_key(genuine)  # named in the message too: a renamed window is a changed cause between two runs
    tampered = _tampered(name, genuine, window)
    resp = api.post(path, stream_body(target.model, path, gen_chunk(codec.encode("hi")), tampered))
    shown = {k: v for k, v in tampered.items() if k not in genuine or genuine[k] != v} \
        if isinstance(tampered, dict) else tampered
    held = genuine[window]
    size = f"{len(held)} entries" if isinstance(held, list) else repr(held)[:40]
    assert resp.status_code == 400, (f"tampered stream_state {shown} (window {window}: {size})"
                                     f" answered {resp.status_code}: {resp.text[:200]}")


@pytest.mark.req("STREAM-013")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_every_key_of_the_state_is_checked(api, target, codec, path) -> None:
    """Each key of the target's own state, given a value of another JSON type, is refused: a server reads back
    what it wrote, and a malformed value it accepts is one it never checked (the keys come from the target)."""
    genuine = genuine_state(api, target, codec, path)
    accepted = []
    for key, value in genuine.items():
        wrong = {"not": "a list"} if isinstance(value, list) else [value]
        resp = api.post(path, stream_body(target.model, path, gen_chunk(codec.encode("hi")), {**genuine, key: wrong}))
        assert resp.status_code < 500, f"stream_state {key}={wrong!r} answered {resp.status_code}: {resp.text[:200]}"
        if resp.status_code != 400:
            accepted.append(f"{key}={wrong!r} ({resp.status_code})")
    assert not accepted, f"malformed stream_state values accepted: {'; '.join(accepted)}"


STATE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-3, 2000), st.text(max_size=3)), max_size=5),
)
SPEC_STATE_KEYS = sorted(load_document("components.yaml")["components"]["schemas"]["DerenderStreamState"]["properties"])


@pytest.mark.req("STREAM-013", "STREAM-015", "ERROR-003")
@given(data=st.data())
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_random_stream_state_never_a_server_error(api, target, codec, path, data) -> None:
    """Garbage in the keys the target's own state carries (and the spec's), on top of that state or alone, is
    rejected with 400 or, if the server coerces it (pydantic's lax mode turns "5" into 5 and false into 0),
    answered with a state that validates; never a 5xx."""
    genuine = genuine_state(api, target, codec, path)
    keys = st.sampled_from(sorted(set(SPEC_STATE_KEYS) | set(genuine)))
    base = data.draw(st.sampled_from([{}, genuine]), label="base")
    state = {**base, **data.draw(st.dictionaries(keys, STATE_VALUES, min_size=1, max_size=5), label="garbage")}
    resp = api.post(path, stream_body(target.model, path, gen_chunk([70, 71]), state))
    assert resp.status_code in (200, 400), f"stream_state {state} answered {resp.status_code}: {resp.text[:200]}"
    if resp.status_code == 200:
        validator = component_validator("DerenderStreamState")
        errors = [e.message for e in validator.iter_errors(resp.json()["stream_state"])]
        assert not errors, f"stream_state {state} was accepted and answered an invalid state: {errors[:3]}"


@pytest.mark.req("STREAM-014")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("finish_reason", ["stop", "length"])
def test_final_empty_chunk_carries_finish_reason(api, target, codec, path, finish_reason) -> None:
    chunks = [gen_chunk(codec.encode("done")), gen_chunk([], finish_reason)]
    answers = stream_derender(api, target.model, path, chunks)
    reasons = [ch["finish_reason"] for a in answers for ch in a["chunk"]["choices"]]
    assert reasons and reasons[-1] == finish_reason, f"finish reasons per chunk: {reasons}"
    assert all(r is None for r in reasons[:-1])


@pytest.fixture
def split_character(codec) -> str:
    """A character whose encoding takes several tokens, the first of which is not a whole character."""
    for candidate in MULTI_TOKEN_CANDIDATES:
        ids = codec.encode(candidate)
        if len(ids) > 1 and codec.decode(ids[:1]) != candidate:
            return candidate
    not_tested(f"the tokenizer encodes each of {MULTI_TOKEN_CANDIDATES} as one token; nothing to split")


@pytest.mark.req("STREAM-016")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_no_replacement_character_across_chunks(api, target, codec, split_character, path) -> None:
    text = f"A{split_character}B{split_character}"
    ids = codec.encode(text)
    chunks = [gen_chunk([t]) for t in ids] + [gen_chunk([], "stop")]
    pieces = streamed_text(path, stream_derender(api, target.model, path, chunks))
    assert not any("\ufffd" in p for p in pieces), f"U+FFFD in deltas {pieces}"
    assert "".join(pieces) == text


#: Streamed stops, as (request fields, generated text with ``{stop}`` for a plain stop token, what the client sees,
#: the stop_reason of the last chunk; ``{stop_id}`` is that token's id).
STREAMED_STOPS = {
    "stop-string": ({"stop": ["three"]}, "one two three", "one two ", "three"),
    "stop-string-kept": ({"stop": ["three"], "include_stop_str_in_output": True}, "one two three", "one two three",
                         "three"),
    "stop-token": ({"stop_token_ids": ["{stop_id}"]}, "one two{stop}", "one two", "{stop_id}"),
}


@pytest.mark.req("STREAM-020")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("case", list(STREAMED_STOPS))
@pytest.mark.parametrize("chunking", ["token-by-token", "one-chunk", "separate-final"])
def test_a_streamed_answer_stops_where_the_whole_one_does(api, target, codec, path, case, chunking) -> None:
    """The stop cut is judged on the streamed answer too: no delta may show a character past the stop string (or
    the stop token) the host reported, and the last chunk carries that stop_reason. A server may instead refuse
    stop strings on the stream with a 400 before it sends anything (vLLM 0.33 on does: text already sent cannot be
    cut)."""
    _assert_streamed_stop(api, target, codec, path, case, chunking, reported=True)


@pytest.mark.req("DERENDER-030")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("case", list(STREAMED_STOPS))
@pytest.mark.parametrize("chunking", ["token-by-token", "separate-final"])
def test_an_unreported_stop_is_settled_on_the_stream_too(api, target, codec, path, case, chunking) -> None:
    """DERENDER-030 on the streamed answer: the host left stop_reason out, so the request says why it stopped."""
    _assert_streamed_stop(api, target, codec, path, case, chunking, reported=False)


def _assert_streamed_stop(api, target, codec, path: str, case: str, chunking: str, reported: bool) -> None:
    requirement = "STREAM-020" if reported else "DERENDER-030"
    fields, generated, shown, reason = STREAMED_STOPS[case]
    stop_ids = plain_token(codec) if "{stop}" in generated else [-1]
    ids = codec.encode(generated.replace("{stop}", "")) + ([stop_ids[0]] if "{stop}" in generated else [])
    fields = {k: [stop_ids[0]] if v == ["{stop_id}"] else v for k, v in fields.items()}
    reason = stop_ids[0] if reason == "{stop_id}" else reason
    if chunking == "token-by-token":
        chunks = [gen_chunk([t]) for t in ids]
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
    elif chunking == "separate-final" and "{stop}" in generated:  # the engine ends on the chunk of its stop token
        chunks = [gen_chunk(ids[:-1]), gen_chunk(ids[-1:], "stop")]
    else:
        chunks = split(ids, [], separate_final=chunking == "separate-final")
    if reported:
        chunks[-1]["choices"][0]["stop_reason"] = reason
    chat = plain_chat_request(target.model, **fields)
    state, pieces, last_reason = None, [], None
    for number, chunk in enumerate(chunks):
        body = stream_body(target.model, path, chunk, state, chat=chat)
        if path == COMPLETIONS:
            body["completion_request"].update(fields)
        answer = api.post(path, body)
        if answer.status_code == 400 and number == 0 and "stop" in fields:
            unsupported(f"the target refuses stop strings on a streamed derender: {answer.text[:200]}")
        assert answer.status_code == 200, (
            f"[{requirement}] chunk {number} of {len(chunks)} answered {answer.status_code}: {answer.text[:300]}")
        state = answer.json()["stream_state"]
        for ch in answer.json()["chunk"]["choices"]:
            pieces.append(visible_text(ch.get("delta") or {}) if path == CHAT else ch.get("text") or "")
            if ch.get("finish_reason") is not None:
                last_reason = ch.get("stop_reason")
    assert ("".join(pieces), last_reason) == (shown, reason), (
        f"[{requirement}] request {fields}, ids of {codec.decode(ids)!r} streamed {chunking} with the stop_reason "
        f"{'reported' if reported else 'left out'}: expected the deltas to give {shown!r} and the last chunk the "
        f"stop_reason {reason!r}, got {''.join(pieces)!r} (deltas {pieces}) and {last_reason!r}")
