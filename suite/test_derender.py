"""Derender: generated token IDs become OpenAI chat and completions responses (DERENDER-*)."""

from __future__ import annotations

import bisect
import json
import re
from typing import NoReturn

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from tokenspec.specs.parser_families import (
    ARGUMENTS_IN_SHAPES,
    VARIANTS,
    shapes,
    special_tokens_deleted,
    special_tokens_kept,
)
from tokenspec.suite.engine.gating import not_tested, unsupported
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import (
    TOOL,
    chat_derender,
    chat_request,
    choice,
    completions_derender,
    generate_response,
    plain_chat_request,
    stream_body,
    visible_text,
)
from tokenspec.suite.oracles.derender_checks import (
    assert_split,
    assert_tool_call_ids,
    configured_split,
    derender_choice,
    derender_request,
    plain_token,
    tool_call_shapes,
)

CHAT = "/v1/chat/completions/derender"
COMPLETIONS = "/v1/completions/derender"
#: Why a test of EOS or special ids is not tested: the ids are facts of the model's files, which no endpoint shows.
NO_TOKEN_FACTS = ("no source of {what}: no model folder, and the target's /v1/models card reports no tokenizer_version"
                  " with a golden file; pass --tokenizer DIR (the model folder)")


@pytest.mark.req("DERENDER-002", "SCHEMA-006", "SCHEMA-002", "SCHEMA-003")
def test_chat_derender_answers_a_chat_completion(api, target, codec) -> None:
    ids = codec.encode("Hello there")
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids), request_id="abc-123")))
    assert out["id"] == "abc-123"
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.req("DERENDER-003", "DERENDER-004", "DERENDER-005", "SCHEMA-007")
@given(data=st.data())
def test_usage_arithmetic(api, target, codec, data) -> None:
    vocab = codec.known_ids
    lengths = data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=3))
    choices = [choice(data.draw(strategies.token_ids(vocab, n, n)), index=i) for i, n in enumerate(lengths)]
    prompt_tokens = data.draw(st.one_of(st.none(), st.integers(0, 500)))
    body = chat_derender(target.model, generate_response(*choices), prompt_tokens=prompt_tokens)
    usage = api.post_ok(CHAT, body)["usage"]
    assert usage["completion_tokens"] == sum(lengths), f"completion_tokens for choices of {lengths} ids: {usage}"
    assert usage["prompt_tokens"] == (prompt_tokens or 0), f"prompt_tokens sent {prompt_tokens}: {usage}"
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], f"total_tokens: {usage}"


@pytest.mark.req("DERENDER-003", "DERENDER-005", "DERENDER-017")
def test_completions_usage_and_reindexing(api, target, codec) -> None:
    a, b, c = codec.encode("one"), codec.encode("two two"), codec.encode("three")
    responses = [generate_response(choice(a), choice(b, index=1)), generate_response(choice(c))]
    out = api.post_ok(COMPLETIONS, completions_derender(target.model, responses, prompt=["p1", "p2"]))
    assert [ch["index"] for ch in out["choices"]] == [0, 1, 2]
    assert [ch["text"] for ch in out["choices"]] == ["one", "two two", "three"]
    assert out["usage"]["completion_tokens"] == len(a) + len(b) + len(c)
    assert out["usage"]["prompt_tokens"] == 6
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]


@pytest.mark.req("DERENDER-006")
@pytest.mark.parametrize(
    "finish_reason,stop_reason",
    [("stop", None), ("length", None), ("abort", None), ("stop", 5), ("stop", "END")],
    ids=["eos", "length", "abort", "stop-token", "stop-string"],
)
def test_finish_and_stop_reason_pass_through(api, target, codec, finish_reason, stop_reason) -> None:
    ch = choice(codec.encode("fine"), finish_reason=finish_reason, stop_reason=stop_reason)
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(ch)))["choices"][0]
    assert out["finish_reason"] == finish_reason
    assert out.get("stop_reason") == stop_reason


@pytest.mark.req("DERENDER-007")
@given(text=strategies.text)
def test_no_replacement_character_for_valid_utf8(api, target, codec, text) -> None:
    ids = codec.encode(text)
    assert codec.decode(ids) == text, "precondition: the tokenizer round-trips this text"
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids))))
    message = out["choices"][0]["message"]
    assert "\ufffd" not in visible_text(message)
    assert visible_text(message) == text


@pytest.mark.req("DERENDER-007")
@given(text=strategies.text)
def test_completions_text_equals_the_decoded_ids(api, target, codec, text) -> None:
    ids = codec.encode(text)
    out = api.post_ok(COMPLETIONS, completions_derender(target.model, [generate_response(choice(ids))]))
    assert out["choices"][0]["text"] == text


@pytest.mark.req("DERENDER-035")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@given(text=strategies.text)
@example(text=" there, output")  # a leading space: what a decode without the prompt's context loses
def test_derendered_text_encodes_back_to_the_ids(api, target, codec, path, streamed, text) -> None:
    """Decoded after the prompt it followed, an output's text is the text those ids were made from, so encoding it
    gives the ids back (vLLM's own derender tests check both, a Metaspace tokenizer's leading space included)."""
    prompt = codec.encode("Hello, who are you?")
    ids = codec.encode(text)
    assume(ids and codec.decode(ids) == text and codec.decode(prompt + ids) == codec.decode(prompt) + text)
    ch = {"index": 0, "token_ids": ids, "finish_reason": "length"}
    if streamed:
        body = stream_body(target.model, path, {"request_id": "tokenspec-stream", "choices": [ch]},
                           prompt_token_ids=prompt, prompt="Hello, who are you?")
        out = api.post_ok(path, body)["chunk"]["choices"][0]
        got = visible_text(out.get("delta") or {}) if path == CHAT else out.get("text") or ""
    elif path == CHAT:
        body = chat_derender(target.model, generate_response(ch), prompt_tokens=len(prompt))
        body["prompt_token_ids"] = prompt
        got = visible_text(api.post_ok(CHAT, body)["choices"][0]["message"])
    else:
        body = completions_derender(target.model, [generate_response(ch)], prompt_token_ids=[prompt])
        got = api.post_ok(COMPLETIONS, body)["choices"][0]["text"]
    assert (got, codec.encode(got)) == (text, ids), (
        f"[DERENDER-035] ids {ids} after the prompt {prompt}: derendered {got!r}, which encodes to "
        f"{codec.encode(got)}; expected {text!r}")


@pytest.mark.req("DERENDER-036")
@pytest.mark.parametrize("missing", ["chat_request", "streamed-chat_request", "streamed-prompt_token_ids"])
def test_a_parser_needs_the_request_it_parses_for(api, target, codec, capabilities, missing) -> None:
    """With a parser configured, decoding without the chat request (or, streamed, without the prompt) would leak
    raw markup into content or split it wrongly; the server must say so instead."""
    configured = {k: v for k, v in capabilities.parsers.items() if v}
    if not configured:
        unsupported("the target runs no tool or reasoning parser: a body without chat_request is plain decoding")
    ids = codec.encode("Hello there")
    if missing == "chat_request":
        body = chat_derender(target.model, generate_response(choice(ids)))
        body.pop("chat_request", None)
    else:
        body = stream_body(target.model, CHAT, {"request_id": "tokenspec-stream", "choices": [choice(ids, 0, None)]})
        body.pop(missing.removeprefix("streamed-"))
    resp = api.post(CHAT, body)
    assert resp.status_code == 400, (
        f"[DERENDER-036] parsers {configured}, a chat derender without {missing.removeprefix('streamed-')}"
        f"{' (streamed)' if missing.startswith('streamed') else ''} answered {resp.status_code}: {resp.text[:200]}")


@pytest.mark.req("DERENDER-008", "ERROR-012")
def test_token_ids_longer_than_context_rejected(api, target, max_model_len) -> None:
    body = chat_derender(target.model, generate_response(choice([5] * (max_model_len + 1))))
    resp = api.post(CHAT, body)
    assert resp.status_code == 400, resp.text[:300]
    assert str(max_model_len) in resp.json()["error"]["message"], "the message should state the limit"


@pytest.mark.req("DERENDER-009")
def test_prompt_token_ids_longer_than_context_rejected(api, target, codec, capabilities, max_model_len) -> None:
    capabilities.require_fields("prompt_token_ids")
    body = chat_derender(target.model, generate_response(choice(codec.encode("x"))))
    body["prompt_token_ids"] = [5] * (max_model_len + 1)
    resp = api.post(CHAT, body)
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-010")
def test_too_many_top_logprobs_rejected(api, target, codec) -> None:
    ids = codec.encode("x")[:1]
    top = [{"token_id": i, "logprob": -1.0, "rank": i + 1} for i in range(1000)]
    logprobs = {"content": [{"token_id": ids[0], "logprob": -1.0, "rank": 1, "top_logprobs": top}]}
    body = chat_derender(target.model, generate_response(choice(ids, logprobs=logprobs)))
    resp = api.post(CHAT, body)
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-011")
def test_too_many_choices_rejected(api, target) -> None:
    choices = [choice([5], index=i) for i in range(20_000)]
    resp = api.post(CHAT, chat_derender(target.model, generate_response(*choices)))
    assert resp.status_code in (400, 413), resp.text[:300]


@pytest.mark.req("DERENDER-012")
@pytest.mark.parametrize("token_ids", [[], None], ids=["empty", "null"])
def test_empty_choice_rejected(api, target, token_ids) -> None:
    resp = api.post(CHAT, chat_derender(target.model, generate_response(choice(token_ids))))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-013")
@pytest.mark.parametrize("where", ["token_ids", "prompt_token_ids"])
def test_negative_ids_rejected(api, target, capabilities, where) -> None:
    if where == "prompt_token_ids":
        capabilities.require_fields("prompt_token_ids")
    body = chat_derender(target.model, generate_response(choice([5, -3, 7] if where == "token_ids" else [5])))
    if where == "prompt_token_ids":
        body["prompt_token_ids"] = [1, -1]
    resp = api.post(CHAT, body)
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-014")
def test_duplicate_choice_indexes_rejected(api, target, codec) -> None:
    ids = codec.encode("x")
    resp = api.post(CHAT, chat_derender(target.model, generate_response(choice(ids), choice(ids))))
    assert resp.status_code == 400, f"two choices with index 0 were accepted: {resp.text[:300]}"


@pytest.mark.req("DERENDER-015")
def test_empty_generate_responses_rejected(api, target) -> None:
    resp = api.post(COMPLETIONS, completions_derender(target.model, []))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-016")
@pytest.mark.parametrize("field", ["prompt_tokens", "prompt_token_ids"])
def test_completions_length_mismatch_rejected(api, target, codec, capabilities, field) -> None:
    if field == "prompt_token_ids":
        capabilities.require_fields("prompt_token_ids")
    body = completions_derender(target.model, [generate_response(choice(codec.encode("x")))])
    body[field] = [3, 4] if field == "prompt_tokens" else [[1], [2]]
    resp = api.post(COMPLETIONS, body)
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-018")
def test_tokens_logprobs_become_chat_logprobs(api, target, codec) -> None:
    ids = codec.encode("Hello 😀")
    entries = [
        {"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": [{"token_id": t, "logprob": -0.5, "rank": 1}]}
        for t in ids
    ]
    body = chat_derender(target.model, generate_response(choice(ids, logprobs={"content": entries})))
    content = _logprobs_content(api.post_ok(CHAT, body), "DERENDER-018")
    assert len(content) == len(ids)
    assert all(e["logprob"] == -0.5 and isinstance(e["token"], str) for e in content)
    assert "".join(e["token"] for e in content) == "Hello 😀", "decoded token strings must spell the text"


def _logprobs_content(answer: dict, requirement: str) -> list:
    logprobs = answer["choices"][0].get("logprobs")
    assert isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list), (
        f"[{requirement}] the generate response carried tokens-mode logprobs; the answer's logprobs are {logprobs!r}")
    return logprobs["content"]


@pytest.mark.req("DERENDER-019")
def test_text_output_mode_response_rejected(api, target, codec) -> None:
    response = generate_response(choice(codec.encode("x")), output_mode="text")
    resp = api.post(CHAT, chat_derender(target.model, response))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("DERENDER-020")
@pytest.mark.parametrize("flag", [True, False])
def test_token_ids_echoed_only_on_request(api, target, codec, capabilities, flag) -> None:
    capabilities.require_fields("return_token_ids")
    ids = codec.encode("Hi")
    request = chat_request(target.model, return_token_ids=flag, chat_template_kwargs={"enable_thinking": False})
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)), chat_request=request))
    echoed = out["choices"][0].get("token_ids")
    assert echoed == (ids if flag else None)


@pytest.mark.req("DERENDER-021")
def test_passed_through_fields_are_unchanged(api, target, codec) -> None:
    """May pass kv_transfer_params and metrics through: a server that does must pass them unchanged."""
    extra = {"kv_transfer_params": {"remote_engine_id": "e-1", "do_remote_decode": False},
             "metrics": {"arrival_time": 1.5, "num_generation_tokens": 2}}
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(codec.encode("ok")), **extra)))
    for key, sent in extra.items():
        got = out.get(key)
        if isinstance(got, dict):  # a typed object may add its unset fields as null (vLLM's metrics does)
            got = {k: v for k, v in got.items() if k in sent or v is not None}
        if got is not None:
            assert got == sent, f"[DERENDER-021] {key} passed through changed: sent {sent}, got {out[key]}"


#: vLLM's PerRequestMetrics fields (0.32-0.34), which a derendered answer's metrics carries each of.
METRICS_FIELDS = ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second",
                  "speculative_decoding")


def _with_metrics(target, codec, path: str, streamed: bool, metrics: dict) -> dict:
    """A derender body of path, whole or one streamed chunk, whose generate answer carries ``metrics``."""
    ids = codec.encode("ok")
    if streamed:
        chunk = {"request_id": "tokenspec-stream", "metrics": metrics,
                 "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
        return stream_body(target.model, path, chunk)
    if path == CHAT:
        return chat_derender(target.model, generate_response(choice(ids), metrics=metrics))
    return completions_derender(target.model, [generate_response(choice(ids), metrics=metrics)])


@pytest.mark.req("DERENDER-031")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_metrics_come_back_in_their_typed_shape(api, target, codec, path, streamed) -> None:
    """The generate answer's timing, handed on with every field named: the value sent, null where none was."""
    sent = {"time_to_first_token_ms": 12.5, "tokens_per_second": 40.0}
    answer = api.post_ok(path, _with_metrics(target, codec, path, streamed, sent))
    got = (answer["chunk"] if streamed else answer).get("metrics")
    if got is None:
        unsupported("the target does not hand the generate answer's metrics on (DERENDER-021 is a MAY)")
    expected = {key: sent.get(key) for key in METRICS_FIELDS}
    assert {key: got.get(key, "(absent)") for key in METRICS_FIELDS} == expected, (
        f"[DERENDER-031] metrics {sent} sent; the answer's metrics are {got}, not every field with the value sent or"
        " null")


@pytest.mark.req("DERENDER-031")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_metrics_of_the_wrong_type_are_refused(api, target, codec, path, streamed) -> None:
    """A timing that is not a number is a client's error, not something to hand on; a server that hands no metrics
    on (DERENDER-021 is a MAY) may ignore them whatever their type."""
    answer = api.post_ok(path, _with_metrics(target, codec, path, streamed, {"time_to_first_token_ms": 12.5}))
    if (answer["chunk"] if streamed else answer).get("metrics") is None:
        unsupported("the target does not hand the generate answer's metrics on (DERENDER-021 is a MAY)")
    resp = api.post(path, _with_metrics(target, codec, path, streamed, {"time_to_first_token_ms": "soon"}))
    assert resp.status_code == 400, (
        f"[DERENDER-031] metrics.time_to_first_token_ms 'soon' answered {resp.status_code}: {resp.text[:300]}")


@pytest.mark.req("DERENDER-001", "DERENDER-006")
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", list(shapes()))
def test_parser_family_split(api, target, codec, capabilities, shape, variant) -> None:
    """Each shape of markup splits as specs/parsers.yaml says for the parsers the target runs (profile or probe);
    with no parser configured that is the decoded text, verbatim, as content. Runs with or without a tool
    parser (without one, tool-call markup must stay content); the ids of parsed calls are checked below."""
    want = configured_split(capabilities, shape, variant)
    assert_split(api, target.model, capabilities, codec.encode(shapes()[shape]), want, variant, check_ids=False)


@pytest.mark.req("DERENDER-006")
@pytest.mark.parametrize("tool_choice", ["auto", "named"])
def test_a_parsed_call_turns_stop_into_tool_calls_unless_a_function_is_named(api, target, codec, capabilities,
                                                                             tool_choice) -> None:
    """The same generated call under tool_choice "auto" finishes with tool_calls; under a tool_choice naming the
    function it keeps stop (the coupled server then answers the named call without a parser's finish)."""
    cases = [case for case in tool_call_shapes(capabilities) if case[1] == "thinking"] or tool_call_shapes(capabilities)
    if not cases:
        not_tested("specs/parsers.yaml specifies no tool call for the target's parser configuration")
    shape, variant = cases[0]
    request = derender_request(capabilities, target.model, variant)
    if tool_choice == "named":
        request["tool_choice"] = {"type": "function", "function": {"name": request["tools"][0]["function"]["name"]}}
    body = chat_derender(target.model, generate_response(choice(codec.encode(shapes()[shape]))), chat_request=request)
    finish = api.post_ok(CHAT, body)["choices"][0]["finish_reason"]
    wanted = "tool_calls" if tool_choice == "auto" else "stop"
    assert finish == wanted, f"[DERENDER-006] {shape!r} under tool_choice {request.get('tool_choice', 'auto')!r}:" \
        f" finish_reason {finish!r}, not {wanted!r}"


#: The ids a coupled vLLM server gives tool calls: chatcmpl-tool-<hex> (make_tool_call_id's random form), or Kimi
#: K2's functions.<name>:<index>.
COUPLED_TOOL_CALL_ID = re.compile(r"chatcmpl-tool-[0-9a-f]+|functions\.[^:\s]+:\d+")


@pytest.mark.req("DERENDER-032")
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_tool_call_ids_take_the_coupled_servers_form(api, target, codec, capabilities, streamed) -> None:
    """A client (or a proxy routing tool results) that works with a coupled server's ids works with derender's."""
    cases = tool_call_shapes(capabilities)
    if not cases:
        not_tested("specs/parsers.yaml specifies no tool call for the target's parser configuration")
    shape, variant = cases[0]
    request = derender_request(capabilities, target.model, variant)
    ids = codec.encode(shapes()[shape])
    if streamed:
        chunk = {"request_id": "tokenspec-stream", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
        body = stream_body(target.model, CHAT, chunk, chat=request)
        calls = [c for ch in api.post_ok(CHAT, body)["chunk"]["choices"] for c in (ch.get("delta") or {}).get(
            "tool_calls") or []]
    else:
        body = chat_derender(target.model, generate_response(choice(ids)), chat_request=request)
        calls = api.post_ok(CHAT, body)["choices"][0]["message"].get("tool_calls") or []
    named = [c.get("id") for c in calls if c.get("id") is not None]
    if not named:  # whether the call is found at all is DERENDER-001's and STREAM-018's to judge
        not_tested(f"the {'streamed' if streamed else 'whole'} derender of {shape!r} gave no tool call whose id could"
                   " be judged (DERENDER-001 and STREAM-018 judge whether it should have)")
    odd = [i for i in named if not isinstance(i, str) or not COUPLED_TOOL_CALL_ID.fullmatch(i)]
    assert not odd, (f"[DERENDER-032] tool call ids {odd} are not chatcmpl-tool-<hex> (or Kimi K2's"
                     " functions.<name>:<index>) as a coupled server's are")


@pytest.mark.req("DERENDER-026")
def test_parsed_tool_calls_carry_unique_ids(api, target, codec, capabilities) -> None:
    """Every shape the target's tool parser turns into tool calls (two-tools among them) gives each call an id."""
    cases = tool_call_shapes(capabilities)
    if not cases:
        not_tested("specs/parsers.yaml specifies no tool call for the target's parser configuration")
    for shape, variant in cases:
        message = derender_choice(api, target.model, capabilities, codec.encode(shapes()[shape]), variant)["message"]
        assert message.get("tool_calls"), f"[DERENDER-026] {shape!r} ({variant}) gave no tool call to check"
        assert_tool_call_ids(message)


def _no_markup_of_this_kind(capabilities, markup: str) -> NoReturn:
    """No table shape of this markup gives a call under the target's parsers: unsupported where the tool family is
    known (its markup is another), not tested where it is unknown (declaring it would settle which)."""
    tool = capabilities.parsers.get("tool")
    if tool and tool != "unknown":
        unsupported(f"the target's tool parser ({tool}) reads no {markup} into a call (specs/parsers.yaml)")
    not_tested(f"specs/parsers.yaml specifies no call of {markup} for the target's parser configuration")


@pytest.mark.req("DERENDER-027")
@given(arguments=strategies.json_arguments, ascii_escapes=st.booleans())
def test_tool_call_arguments_keep_every_json_type(api, target, codec, capabilities, arguments, ascii_escapes) -> None:
    """The markup of a shape the configured tool parser turns into one call, carrying arguments of every JSON type;
    the oracle is the markup's own JSON (compared with types: 1, 1.0, true and "1" are four different answers)."""
    cases = [(s, v) for s, v in tool_call_shapes(capabilities) if shapes()[s].count(ARGUMENTS_IN_SHAPES) == 1]
    if not cases:
        _no_markup_of_this_kind(capabilities, "JSON arguments (one call carrying " + ARGUMENTS_IN_SHAPES + ")")
    shape, variant = cases[0]
    written = json.dumps(arguments, ensure_ascii=ascii_escapes)
    text = shapes()[shape].replace(ARGUMENTS_IN_SHAPES, written)
    ids = codec.encode(text)
    assume(codec.decode(ids) == text)  # the tokenizer round-trips the markup (else it is not this markup)
    message = derender_choice(api, target.model, capabilities, ids, variant)["message"]
    calls = message.get("tool_calls") or []
    assert len(calls) == 1, f"[DERENDER-027] {shape!r} ({variant}) with arguments {written} gave {len(calls)} calls"
    raw = calls[0]["function"].get("arguments")
    assert isinstance(raw, str), f"[DERENDER-027] arguments must be a JSON string, got {raw!r}"
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = {"<not JSON>": raw}
    want = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    got = json.dumps(parsed, sort_keys=True, ensure_ascii=False)
    assert got == want, f"[DERENDER-027] the markup's arguments {written} came back as {raw}"


def _assert_typed_call(api, target, codec, capabilities, shape: str, markup: str, requirement: str, text: str,
                       drawn: dict[str, tuple[str, object]]) -> None:
    """Derender ``text`` (one get_forecast call written in ``shape``'s markup) where the configured tool parser reads
    that shape as one call; its arguments must be the drawn values (``drawn``: key -> (written, value))."""
    cases = [(s, v) for s, v in tool_call_shapes(capabilities) if s == shape]
    if not cases:
        _no_markup_of_this_kind(capabilities, f"{markup} ({shape})")
    _, variant = cases[0]
    ids = codec.encode(text)
    assume(codec.decode(ids) == text)
    message = derender_choice(api, target.model, capabilities, ids, variant)["message"]
    calls = message.get("tool_calls") or []
    assert len(calls) == 1, f"[{requirement}] {text!r} ({variant}) gave {len(calls)} calls"
    raw = calls[0]["function"].get("arguments")
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        parsed = {"<not JSON>": raw}
    want = json.dumps({key: value for key, (_, value) in drawn.items()}, sort_keys=True, ensure_ascii=False)
    assert json.dumps(parsed, sort_keys=True, ensure_ascii=False) == want, (
        f"[{requirement}] arguments {want} came back as {raw}")


@pytest.mark.req("DERENDER-028")
@given(parameters=strategies.forecast_parameters)
def test_parameter_elements_take_their_declared_types(api, target, codec, capabilities, parameters) -> None:
    """Where the configured tool parser reads xml-typed (parameter elements) as one call, a call of get_forecast
    with drawn values of every declared type comes back with each value read as its type (DERENDER-028; the
    expectation is the drawn value, never the target's reading of the text)."""
    assume(all(strategies._value_text(written) for written, _ in parameters.values()))
    body = "".join(f"<parameter={key}>\n{written}\n</parameter>\n" for key, (written, _) in parameters.items())
    _assert_typed_call(api, target, codec, capabilities, "xml-typed", "parameter elements", "DERENDER-028",
                       f"<tool_call>\n<function=get_forecast>\n{body}</function>\n</tool_call>", parameters)


@pytest.mark.req("DERENDER-029")
@given(arguments=strategies.gemma_forecast_arguments)
def test_key_value_calls_take_their_declared_types(api, target, codec, capabilities, arguments) -> None:
    """Where the configured tool parser reads Gemma 4's key:value call (g4-typed) as one call, a call of get_forecast
    with drawn values of every declared type comes back with each value as drawn (DERENDER-029; the expectation is
    the drawn value, never the target's reading of the text)."""
    body = ",".join(f"{key}:{written}" for key, (written, _) in arguments.items())
    assume(not any(special in body for special in codec.special_texts if special != '<|"|>'))
    _assert_typed_call(api, target, codec, capabilities, "g4-typed", "Gemma 4's key:value calls", "DERENDER-029",
                       f"<|tool_call>call:get_forecast{{{body}}}<tool_call|>", arguments)


@pytest.mark.req("DERENDER-022")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
@pytest.mark.parametrize("keep", [False, True], ids=["cut", "include_stop_str"])
def test_text_ends_at_the_stop_string(api, target, codec, path, keep) -> None:
    """The engine returns the token that completed the stop string; the text must still end before it."""
    ids = codec.encode("hello there friend")
    ch = choice(ids, stop_reason="th")
    if path == CHAT:
        request = chat_request(target.model, stop=["th"], include_stop_str_in_output=keep,
                               chat_template_kwargs={"enable_thinking": False})
        out = api.post_ok(CHAT, chat_derender(target.model, generate_response(ch), chat_request=request))
        text = visible_text(out["choices"][0]["message"])
    else:
        body = completions_derender(target.model, [generate_response(ch)])
        body["completion_request"].update(stop=["th"], include_stop_str_in_output=keep)
        text = api.post_ok(COMPLETIONS, body)["choices"][0]["text"]
    assert text == ("hello th" if keep else "hello ")


@pytest.mark.req("DERENDER-022")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
@given(data=st.data())
def test_stop_string_cut_anywhere(api, target, codec, path, data) -> None:
    """A stop string drawn from the text itself (at its start, middle or end, across token boundaries and inside
    multi-byte characters' tokens); the generate response ends at the token whose whole characters completed its
    first occurrence, as an engine's incremental detokenizer sees it, and the oracle is the tokenizer's decode of
    those ids cut there."""
    text = data.draw(strategies.text.filter(lambda t: len(t) >= 2), label="text")
    start = data.draw(st.integers(0, len(text) - 1), label="start")
    stop = text[start:data.draw(st.integers(start + 1, min(len(text), start + 6)), label="end")]
    keep = data.draw(st.booleans(), label="include_stop_str_in_output")
    ids = codec.encode(text)
    assume(codec.decode(ids) == text)

    def emitted(k: int) -> str:
        """The text an incremental detokenizer has let out after k ids: it holds back every id whose decode still
        ends inside a character, so a stop string is seen only once its characters are whole."""
        text = codec.decode(ids[:k]) if k else ""
        while text.endswith("\ufffd"):
            k -= 1
            text = codec.decode(ids[:k]) if k else ""
        return text

    cut = bisect.bisect_left(range(len(ids) + 1), True, key=lambda k: stop in emitted(k))
    decoded = emitted(cut)
    end = decoded.index(stop) + (len(stop) if keep else 0)
    ch = choice(ids[:cut], stop_reason=stop)
    if path == CHAT:
        request = chat_request(target.model, stop=[stop], include_stop_str_in_output=keep,
                               chat_template_kwargs={"enable_thinking": False})
        out = api.post_ok(CHAT, chat_derender(target.model, generate_response(ch), chat_request=request))
        got = visible_text(out["choices"][0]["message"])
    else:
        body = completions_derender(target.model, [generate_response(ch)])
        body["completion_request"].update(stop=[stop], include_stop_str_in_output=keep)
        got = api.post_ok(COMPLETIONS, body)["choices"][0]["text"]
    assert got == decoded[:end], (
        f"[DERENDER-022] stop string {stop!r} (include_stop_str_in_output={keep}) in {decoded!r}")


#: Stops a host left unreported, as (request fields, the text the ids decode to, the text a client sees, the
#: stop_reason settled). ``{stop_id}`` is a plain word's id the request names in stop_token_ids.
UNREPORTED_STOPS = {
    "stop-string": ({"stop": ["three"]}, "one two three", "one two ", "three"),
    "stop-string-kept": ({"stop": ["three"], "include_stop_str_in_output": True}, "one two three", "one two three",
                         "three"),
    "earliest-completing": ({"stop": ["three", "two"]}, "one two three", "one ", "two"),
    "stop-token": ({"stop_token_ids": ["{stop_id}"]}, "one two{stop}", "one two", "{stop_id}"),
    "no-match": ({"stop": ["seven"]}, "one two three", "one two three", None),
}


def _unreported_stop_case(codec, case: str) -> tuple[dict, list[int], str, int | str | None]:
    """The request fields, generated ids, visible text and stop_reason of one UNREPORTED_STOPS case."""
    fields, generated, shown, reason = UNREPORTED_STOPS[case]
    stop_ids = plain_token(codec) if "{stop}" in generated else [-1]
    stop_id = stop_ids[0]
    ids = codec.encode(generated.replace("{stop}", "")) + ([stop_id] if "{stop}" in generated else [])
    fields = {k: [stop_id] if v == ["{stop_id}"] else v for k, v in fields.items()}
    return fields, ids, shown, stop_id if reason == "{stop_id}" else reason


@pytest.mark.req("DERENDER-030")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("case", list(UNREPORTED_STOPS))
def test_an_unreported_stop_is_settled_from_the_request(api, target, codec, path, case) -> None:
    """A choice that finished with stop but carries no stop_reason (older generate hosts never send one): the
    request's stop_token_ids and stop strings say why, as the engine's stop check would have (vLLM 0.33 on)."""
    fields, ids, shown, reason = _unreported_stop_case(codec, case)
    if path == CHAT:
        request = plain_chat_request(target.model, **fields)
        out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)), chat_request=request))
        got = out["choices"][0]
        text = visible_text(got["message"])
    else:
        body = completions_derender(target.model, [generate_response(choice(ids))])
        body["completion_request"].update(fields)
        got = api.post_ok(COMPLETIONS, body)["choices"][0]
        text = got["text"]
    assert (text, got.get("stop_reason")) == (shown, reason), (
        f"[DERENDER-030] request {fields}, ids of {codec.decode(ids)!r} finished with stop and no stop_reason: "
        f"expected text {shown!r} and stop_reason {reason!r}, got {text!r} and {got.get('stop_reason')!r}")


@pytest.mark.req("DERENDER-030")
def test_a_stop_string_inside_min_tokens_does_not_count(api, target, codec) -> None:
    """The engine only looks for a stop string past the first min_tokens tokens; neither may derender."""
    head = codec.encode("one two")
    ids = codec.encode("one two one two")
    if ids[:len(head)] != head or codec.decode(head) != "one two":
        not_tested("'one two' does not tokenize the same at the start of 'one two one two' in this tokenizer")
    body = completions_derender(target.model, [generate_response(choice(ids))])
    body["completion_request"].update(stop=["two"], min_tokens=len(head))
    got = api.post_ok(COMPLETIONS, body)["choices"][0]
    assert (got["text"], got.get("stop_reason")) == ("one two one ", "two"), (
        f"[DERENDER-030] stop 'two' with min_tokens {len(head)} over 'one two one two': the first 'two' ends inside "
        f"the first min_tokens tokens; expected 'one two one ' and 'two', got {got['text']!r} and "
        f"{got.get('stop_reason')!r}")


@pytest.mark.req("DERENDER-033")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_an_id_the_tokenizer_lacks_is_no_text(api, target, codec, path, streamed) -> None:
    """An engine may sample a padded row of the model's vocabulary; the coupled detokenizer gives it no text and
    counts it, and so must derender. The ids: the first past the tokenizer's (when the folder says where that is)
    and one far past any vocabulary. A negative id is no id at all."""
    odd = [i for i in (codec.tokenizer_size, 1 << 20) if i is not None]
    head, tail = codec.encode("Hello"), codec.encode(" there")
    ids = head + odd + tail
    expected = codec.decode(head + tail)
    if streamed:
        usage = {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)}
        chunk = {"request_id": "tokenspec-stream", "usage": usage,
                 "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}]}
        body = stream_body(target.model, path, chunk)
        out = api.post_ok(path, body)["chunk"]
        got = "".join(visible_text(c.get("delta") or {}) if path == CHAT else c.get("text") or ""
                      for c in out["choices"])
    else:
        ch = choice(ids, finish_reason="length")
        body = (chat_derender(target.model, generate_response(ch)) if path == CHAT
                else completions_derender(target.model, [generate_response(ch)]))
        out = api.post_ok(path, body)
        got = visible_text(out["choices"][0]["message"]) if path == CHAT else out["choices"][0]["text"]
    assert got == expected, f"[DERENDER-033] ids {odd} between {head} and {tail}: text {got!r}, not {expected!r}"
    assert (out.get("usage") or {}).get("completion_tokens") == len(ids), (
        f"[DERENDER-033] the ids {odd} must still count as generated: usage {out.get('usage')}")
    ch = choice(head + [-1], finish_reason="length")
    body = (chat_derender(target.model, generate_response(ch)) if path == CHAT
            else completions_derender(target.model, [generate_response(ch)]))
    resp = api.post(path, body)
    assert resp.status_code == 400, f"[DERENDER-033] a negative id answered {resp.status_code}: {resp.text[:200]}"


@pytest.mark.req("DERENDER-034")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_a_generate_answer_without_choices_derenders_to_none(api, target, path) -> None:
    """A generate answer with no choices (its usage-only tail) derenders to an answer with none, its usage intact."""
    body = (chat_derender(target.model, generate_response(), prompt_tokens=4) if path == CHAT
            else completions_derender(target.model, [generate_response()]))
    out = api.post_ok(path, body)
    prompt = 4 if path == CHAT else 3
    assert out["choices"] == [], f"[DERENDER-034] choices [] derendered to {out['choices']}"
    usage = out.get("usage") or {}
    assert (usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")) == (
        prompt, 0, prompt), f"[DERENDER-034] usage of a prompt of {prompt} and no choices: {usage}"


@pytest.mark.req("DERENDER-023")
@pytest.mark.parametrize("wanted", [0, 1, 2])
def test_top_logprobs_count_is_what_was_asked(api, target, codec, wanted) -> None:
    ids = codec.encode("Hi there")
    top = [{"token_id": t, "logprob": -1.0 - i, "rank": i + 1} for i, t in enumerate(ids[:1] + [5, 6])]
    entries = [{"token_id": t, "logprob": -1.0, "rank": 1, "top_logprobs": top[: max(wanted, 1)]} for t in ids]
    request = chat_request(target.model, logprobs=True, top_logprobs=wanted,
                           chat_template_kwargs={"enable_thinking": False})
    body = chat_derender(target.model, generate_response(choice(ids, logprobs={"content": entries})),
                         chat_request=request)
    content = _logprobs_content(api.post_ok(CHAT, body), "DERENDER-023")
    assert [len(e["top_logprobs"]) for e in content] == [wanted] * len(ids)


@pytest.mark.req("DERENDER-024")
@pytest.mark.parametrize("parsed", [False, True], ids=["plain", "with-parsers"])
def test_final_eos_is_not_text(api, target, codec, capabilities, parsed) -> None:
    """The EOS id comes from the model folder's files (generation_config.json / tokenizer_config.json), or from
    the golden file of the tokenizer_version the target reports; never from a token's name."""
    if not codec.eos_ids:
        not_tested(NO_TOKEN_FACTS.format(what="an eos_token_id"))
    eos = codec.eos_ids[0]
    ids = codec.encode("The answer is 4.") + [eos]
    kwargs = {} if parsed else {"chat_template_kwargs": {"enable_thinking": False}}
    request = chat_request(target.model, tools=[TOOL] if parsed and capabilities.has("tools") else None, **kwargs)
    request = {k: v for k, v in request.items() if v is not None}
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)), chat_request=request))
    text = visible_text(out["choices"][0]["message"])
    assert text.endswith("The answer is 4."), f"the final EOS id {eos} shows in the text: {text!r}"
    assert out["usage"]["completion_tokens"] == len(ids), "the EOS token still counts as generated"


@pytest.mark.req("DERENDER-025")
@pytest.mark.parametrize("thinking", [None, False], ids=["default-template", "thinking-off"])
@pytest.mark.parametrize("skip", [None, False], ids=["skip-default", "skip-false"])
def test_special_tokens_are_not_text_unless_asked(api, target, codec, capabilities, thinking, skip) -> None:
    """The special id comes from the tokenizer's own special flags (the folder's, or those the golden file of the
    target's tokenizer_version recorded), not from a token name; parser markers are left out because a parser
    must see them. Where a configured parser turns skip_special_tokens off (specs/parsers.yaml, read from vLLM's
    source), the coupled server shows the token whatever the request asked, and so must derender."""
    fields = {}
    if thinking is not None:
        fields["chat_template_kwargs"] = {"enable_thinking": thinking}
    if skip is not None:
        fields["skip_special_tokens"] = skip
    _check_special_token_text(api, target, codec, capabilities, chat_request(target.model, **fields))


@pytest.mark.req("DERENDER-025")
def test_special_tokens_with_tools_follow_the_tool_parser(api, target, codec, capabilities) -> None:
    """With tools in play vLLM's renderer asks the tool parser to adjust the request, and whether that turns
    skip_special_tokens off is the parser's and the release's (vLLM 0.34's llama3_json does, 0.32's and 0.33's
    do not: specs/parsers.yaml keeps_special_tokens), so a target is held to the rule of the generation it speaks."""
    capabilities.require("tools")
    _check_special_token_text(api, target, codec, capabilities, chat_request(target.model, tools=[TOOL]))


def _check_special_token_text(api, target, codec, capabilities, request: dict) -> None:
    """Derender text, a special token, text under ``request``: the token shows exactly where skip_special_tokens
    resolves to false for it."""
    if not codec.special_ids:
        not_tested(NO_TOKEN_FACTS.format(what="special-token flags"))
    markers = {"<think>", "</think>", "<tool_call>", "</tool_call>"}
    candidates = [i for i in codec.special_ids if i not in codec.eos_ids and codec.decode([i]) not in markers]
    if not candidates:
        not_tested("the tokenizer marks no special token other than EOS and parser markers")
    special = candidates[0]
    ids = codec.encode("Alpha") + [special] + codec.encode("Beta")
    skip = request.get("skip_special_tokens")
    reasoning, tool = capabilities.parsers.get("reasoning"), capabilities.parsers.get("tool")
    if "unknown" in (reasoning, tool):
        not_tested("the target's parser is no family specs/parsers.yaml describes, so whether it keeps special "
                   "tokens is unknown (declare the family with --profile)")
    kept = special_tokens_kept(reasoning, tool, request, capabilities.generations)
    deleted = special_tokens_deleted(reasoning, tool, capabilities.generations)
    if kept is None or deleted is None:
        not_tested(f"whether the {reasoning or tool} parser keeps or deletes special tokens differs between the "
                   f"generations the target may speak ({' or '.join(capabilities.generations) or 'unknown'}: "
                   f"{capabilities.generation_evidence}; specs/parsers.yaml keeps_special_tokens and "
                   "deletes_special_tokens); declare the generation with --profile")
    kept_by = (reasoning or tool) if kept else None
    deleted_by = (reasoning or tool) if deleted else None
    if skip is False and (reasoning or tool) and not kept_by:
        not_tested("with a parser configured, which special tokens stay is its markup's business: DERENDER-001's "
                   "parity decides")
    out = api.post_ok(CHAT, chat_derender(target.model, generate_response(choice(ids)), chat_request=request))
    text = visible_text(out["choices"][0]["message"])
    special_text = codec.decode([special])
    if deleted_by:
        assert special_text not in text, (
            f"the {deleted_by} parser deletes special tokens other than its markup, so the coupled server shows no"
            f" {special_text!r} (specs/parsers.yaml deletes_special_tokens), and derender must not either: {text!r}")
        assert "Alpha" in text and "Beta" in text
    elif kept_by:
        assert special_text in text, (
            f"the {kept_by} parser turns skip_special_tokens off, so the coupled server shows {special_text!r} "
            f"(specs/parsers.yaml keeps_special_tokens), and derender must too: {text!r}")
    elif skip is False:
        assert special_text in text, f"skip_special_tokens=false must keep {special_text!r}: {text!r}"
    else:
        assert special_text not in text, f"{special_text!r} leaked into the text: {text!r}"
        assert "Alpha" in text and "Beta" in text
