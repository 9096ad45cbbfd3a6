"""Render: chat and completions requests become GenerateRequests (RENDER-*, SCHEMA-004)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tokenspec.specs import parser_families
from tokenspec.specs.openapi import component_validator, load_document, schema_validator
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import TOOL, chat_request

CHAT = "/v1/chat/completions/render"
COMPLETIONS = "/v1/completions/render"


@pytest.mark.req("RENDER-001", "SCHEMA-004", "SCHEMA-002", "SCHEMA-003")
def test_chat_render_is_a_valid_generate_request(api, target) -> None:
    out = api.post_ok(CHAT, chat_request(target.model))
    assert out["token_ids"] and all(isinstance(t, int) and t >= 0 for t in out["token_ids"])
    errors = [e.message for e in component_validator("GenerateRequest").iter_errors(out)]
    assert not errors, f"render output is not a valid generate request body: {errors[:3]}"


@pytest.mark.req("RENDER-002", "SCHEMA-004")
def test_completions_render_gives_one_generate_request_per_prompt(api, target, codec) -> None:
    prompts = ["Once upon a time", "東京 😀", "x"]
    out = api.post_ok(COMPLETIONS, {"model": target.model, "prompt": prompts, "max_tokens": 4})
    assert isinstance(out, list) and len(out) == len(prompts), f"expected {len(prompts)} requests, got {out!r:.300}"
    for prompt, request in zip(prompts, out, strict=True):
        assert request["token_ids"][-len(codec.encode(prompt)) :] == codec.encode(prompt), "prompt order changed"
        assert not list(component_validator("GenerateRequest").iter_errors(request))


def _ranges_fit(offsets: object, ids: list[int], length: int) -> None:
    assert isinstance(offsets, list) and len(offsets) == len(ids), (
        f"[RENDER-034] token_offsets {offsets!r:.200} is not one range per token id ({len(ids)} ids)")
    starts = [pair[0] for pair in offsets if pair != [0, 0]]
    assert all(isinstance(p, list) and len(p) == 2 and 0 <= p[0] <= p[1] <= length for p in offsets), (
        f"[RENDER-034] a range lies outside the {length}-character text: {offsets!r:.300}")
    assert starts == sorted(starts), f"[RENDER-034] the ranges are out of order: {offsets!r:.300}"


@pytest.mark.req("RENDER-034")
def test_completions_render_gives_each_tokens_character_range(api, target, codec) -> None:
    """The ranges of a text prompt are the tokenizer's own (checked exactly with the model folder)."""
    prompt = "Hello, world. Tokyo 東京 😀"
    out = api.post_ok(COMPLETIONS, {"model": target.model, "prompt": prompt, "max_tokens": 4,
                                    "return_token_offsets": True})
    request = out[0] if isinstance(out, list) else out
    _ranges_fit(request.get("token_offsets"), request["token_ids"], len(prompt))
    local = codec.offsets(prompt, add_special_tokens=True)
    if local is not None and local[0] == request["token_ids"]:
        assert request["token_offsets"] == local[1], (
            f"[RENDER-034] token_offsets {request['token_offsets']} are not the tokenizer's {local[1]}")


@pytest.mark.req("RENDER-034")
def test_chat_render_gives_each_tokens_character_range(api, target) -> None:
    """The ranges of a rendered chat prompt: one per id, in order, within the text; none asked, none given."""
    body = chat_request(target.model)
    plain = api.post_ok(CHAT, body)
    asked = api.post_ok(CHAT, {**body, "return_token_offsets": True})
    assert asked["token_ids"] == plain["token_ids"], "[RENDER-034] asking for offsets changed the prompt"
    offsets = asked.get("token_offsets")
    _ranges_fit(offsets, asked["token_ids"], max((end for _, end in offsets or []), default=0))
    assert max(end for _, end in offsets) > 0, f"[RENDER-034] every range is empty: {offsets!r:.200}"
    assert plain.get("token_offsets") is None, "[RENDER-034] token_offsets given without return_token_offsets"


TRANSFER = {"kv_transfer_params": {"do_remote_decode": True, "remote_engine_id": "prefill-1"},
            "ec_transfer_params": {"do_remote_encode": True}}


@pytest.mark.req("RENDER-035")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS, "/v1/responses/render"], ids=["chat", "completions", "responses"])
def test_transfer_params_become_the_generate_requests_own_fields(api, target, path) -> None:
    body = {CHAT: chat_request(target.model), COMPLETIONS: {"model": target.model, "prompt": "Hello", "max_tokens": 4},
            "/v1/responses/render": {"model": target.model, "input": "Hello"}}[path]
    out = api.post_ok(path, {**body, **TRANSFER})
    request = out[0] if isinstance(out, list) else out
    extra = (request.get("sampling_params") or {}).get("extra_args") or {}
    for name, sent in TRANSFER.items():
        assert request.get(name) == sent, f"[RENDER-035] {name} is {request.get(name)!r} at the top level, sent {sent}"
        assert name not in extra, f"[RENDER-035] {name} left in sampling_params.extra_args as well"


@pytest.mark.req("RENDER-036")
def test_reasoning_ended_follows_include_reasoning(api, target, capabilities) -> None:
    """Reasoning off is ended whatever the parsers; left on, a server without a reasoning parser (as the probe found
    it) leaves the engine to decide (null). With a parser the prompt decides, by its family's rule."""
    body = chat_request(target.model)
    ended = api.post_ok(CHAT, {**body, "include_reasoning": False}).get("reasoning_ended")
    assert ended is True, f"[RENDER-036] reasoning_ended {ended!r} with include_reasoning false, wanted true"
    decision = capabilities.decisions.get("reasoning")
    if decision is not None and decision.status == "unsupported":
        ended = api.post_ok(CHAT, body).get("reasoning_ended")
        assert ended is None, f"[RENDER-036] reasoning_ended {ended!r} without a reasoning parser, wanted null"


@pytest.mark.req("RENDER-003")
@given(body=strategies.conversations())
def test_chat_render_is_deterministic(api, target, capabilities, body) -> None:
    if "tools" in body and not capabilities.has("tools"):
        body.pop("tools")
    request = {"model": target.model, **body}
    first, second = api.post_ok(CHAT, request), api.post_ok(CHAT, request)
    assert first["token_ids"] == second["token_ids"], "two renders of one request gave different token_ids"
    assert first["sampling_params"] == second["sampling_params"], "two renders gave different sampling_params"


@pytest.mark.req("RENDER-004")
@given(data=st.data())
def test_token_id_prompts_pass_through_unchanged(api, target, codec, data) -> None:
    vocab = codec.known_ids
    shape = data.draw(st.sampled_from(["ids", "list-of-ids"]))
    if shape == "ids":
        prompt = data.draw(strategies.token_ids(vocab))
        expected = [prompt]
    else:
        prompt = data.draw(st.lists(strategies.token_ids(vocab), min_size=1, max_size=3))
        expected = prompt
    out = api.post_ok(COMPLETIONS, {"model": target.model, "prompt": prompt, "max_tokens": 2})
    assert [r["token_ids"] for r in out] == expected


#: A conversation every render must keep whole: a system turn, history, compatibility characters, spaces.
EXAMPLE_CONVERSATION = {"messages": [
    {"role": "system", "content": " You are ﬁne: answer in Ａ① style. "},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": [{"type": "text", "text": "two  spaces ½"}]},
]}


@pytest.mark.req("RENDER-005", "UTIL-002")
@given(body=strategies.conversations(with_tools=False))
@example(body=EXAMPLE_CONVERSATION)
def test_chat_render_equals_tokenize_of_the_same_messages(api, target, body) -> None:
    rendered = api.post_ok(CHAT, {"model": target.model, **body})
    tokenized = api.post_ok("/tokenize", {"model": target.model, **body, "add_generation_prompt": True})
    assert rendered["token_ids"] == tokenized["tokens"]


@pytest.mark.req("RENDER-005", "RENDER-023")
@given(body=st.one_of(strategies.conversations(), strategies.rich_conversations()))
@example(body={**EXAMPLE_CONVERSATION, "tools": [TOOL]})
def test_render_equals_the_template_oracle(api, target, capabilities, render_oracle, body) -> None:
    """The oracle is transformers' apply_chat_template on the model folder (RENDER-023's conversation),
    never the server's own /tokenize nor the bundled frontend's template code. Conversations reach every
    RENDER-023 rule (developer turns, reasoning history, tool calls with malformed arguments, content parts)."""
    if "tools" in body and not capabilities.has("tools"):
        body.pop("tools")
    try:
        expected = render_oracle.prompt_ids(body)
    except Exception as exc:  # noqa: BLE001 - the template itself refuses this conversation (raise_exception)
        status = api.post(CHAT, {"model": target.model, **body}).status_code
        assert 400 <= status < 500, f"[RENDER-005] the template refuses this conversation ({exc}); render answered " \
                                    f"{status}"
        return
    rendered = api.post_ok(CHAT, {"model": target.model, **body})
    assert rendered["token_ids"] == expected, (
        f"render gave {len(rendered['token_ids'])} ids, the template oracle {len(expected)}: "
        f"first difference at {_first_difference(rendered['token_ids'], expected)}")


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


@pytest.mark.req("RENDER-005", "RENDER-023")
def test_continue_final_message_continues_the_last_assistant_turn(api, target, codec, render_oracle) -> None:
    """With continue_final_message the prompt ends inside the final assistant turn, as the template defines it
    (a frontend that drops the flag closes that turn and opens a new one)."""
    messages = [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two,"}]
    body = {"messages": messages, "add_generation_prompt": False, "continue_final_message": True}
    expected = render_oracle.prompt_text(body)
    rendered = api.post_ok(CHAT, {"model": target.model, **body})
    assert codec.decode(rendered["token_ids"]) == expected
    assert expected.endswith("One, two,"), "the oracle itself must end inside the assistant turn"


# (request field, sampling_params field, value equal to the usual engine default, a non-default value)
SAMPLING_FIELDS = [
    ("RENDER-006", "temperature", "temperature", 1.0, 0.7),
    ("RENDER-006", "top_p", "top_p", 1.0, 0.9),
    ("RENDER-006", "top_k", "top_k", 0, 7),
    ("RENDER-006", "min_p", "min_p", 0.0, 0.05),
    ("RENDER-007", "presence_penalty", "presence_penalty", 0.0, 0.5),
    ("RENDER-007", "frequency_penalty", "frequency_penalty", 0.0, -0.5),
    ("RENDER-007", "repetition_penalty", "repetition_penalty", 1.0, 1.2),
    ("RENDER-008", "n", "n", 1, 3),
    # 16 is SamplingParams' own default: an engine that sees no max_tokens fills the context instead.
    ("RENDER-011", "max_tokens", "max_tokens", 16, 7),
    ("RENDER-008", "seed", "seed", 0, 1234),
    ("RENDER-008", "stop", "stop", [], ["END", "\n\n"]),
    ("RENDER-008", "stop_token_ids", "stop_token_ids", [], [5, 9]),
    ("RENDER-008", "ignore_eos", "ignore_eos", False, True),
    ("RENDER-008", "min_tokens", "min_tokens", 0, 2),
    ("RENDER-009", "skip_special_tokens", "skip_special_tokens", True, False),
    ("RENDER-009", "spaces_between_special_tokens", "spaces_between_special_tokens", True, False),
    ("RENDER-009", "include_stop_str_in_output", "include_stop_str_in_output", False, True),
    ("RENDER-009", "bad_words", "bad_words", [], ["zebra"]),
    ("RENDER-009", "allowed_token_ids", "allowed_token_ids", None, [1, 2, 3]),
]


def _same(expected: object, actual: object) -> bool:
    if isinstance(expected, float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=1e-6, abs_tol=1e-9)
    return expected == actual


def _sampling_cases() -> list:
    cases = []
    for req, field, sp_field, default, other in SAMPLING_FIELDS:
        for kind, value in (("default", default), ("non-default", other)):
            if value is None:
                continue
            cases.append(pytest.param(field, sp_field, value, id=f"{field}-{kind}", marks=pytest.mark.req(req)))
    return cases


@pytest.mark.parametrize(("field", "sp_field", "value"), _sampling_cases())
def test_sampling_parameter_survives_chat_render(api, target, capabilities, field, sp_field, value) -> None:
    """Frontend and engine may run different versions with different defaults: a value the client set, even
    one equal to today's default, must reach the engine explicitly."""
    out = api.post_ok(CHAT, chat_request(target.model, **{field: value}))
    params = out["sampling_params"]
    if field == "skip_special_tokens" and (capabilities.has("tools") or capabilities.has("reasoning")):
        value = params.get(sp_field, value) if params.get(sp_field) is False else value  # RENDER-009 exception
    assert sp_field in params, f"{field}={value!r} was set but sampling_params has no {sp_field}: {params}"
    if field == "stop_token_ids":
        assert set(value) <= set(params[sp_field]), f"{value} not all in {params[sp_field]}"
    else:
        assert _same(value, params[sp_field]), f"{field}: sent {value!r}, sampling_params has {params[sp_field]!r}"


@pytest.mark.req("RENDER-008")
@pytest.mark.parametrize("field,value", [("stop", ["END"]), ("seed", 99), ("max_tokens", 5), ("n", 2)])
def test_sampling_parameter_survives_completions_render(api, target, field, value) -> None:
    out = api.post_ok(COMPLETIONS, {"model": target.model, "prompt": "Hello", field: value})
    assert out[0]["sampling_params"].get(field) == value


@pytest.mark.req("RENDER-010")
def test_top_logprobs_become_sampling_logprobs(api, target) -> None:
    out = api.post_ok(CHAT, chat_request(target.model, logprobs=True, top_logprobs=3))
    assert out["sampling_params"].get("logprobs") == 3


@pytest.mark.req("RENDER-011")
@pytest.mark.parametrize(
    "fields,expected",
    [({"max_tokens": 9}, 9), ({"max_completion_tokens": 7}, 7), ({"max_completion_tokens": 7, "max_tokens": 9}, 7)],
    ids=["max_tokens", "max_completion_tokens", "max_completion_tokens-wins"],
)
def test_max_tokens_rule(api, target, fields, expected) -> None:
    out = api.post_ok(CHAT, chat_request(target.model, **fields))
    assert out["sampling_params"]["max_tokens"] == expected


@pytest.mark.req("RENDER-012")
def test_default_max_tokens_fits_the_context(api, target, max_model_len) -> None:
    out = api.post_ok(CHAT, chat_request(target.model))
    room = max_model_len - len(out["token_ids"])
    max_tokens = out["sampling_params"].get("max_tokens")
    assert max_tokens is not None and 1 <= max_tokens <= room, f"max_tokens {max_tokens}, room {room}"


@pytest.mark.req("RENDER-013")
def test_completions_max_tokens_defaults_to_16(api, target) -> None:
    out = api.post_ok(COMPLETIONS, {"model": target.model, "prompt": "Hello"})
    assert out[0]["sampling_params"]["max_tokens"] == 16


@pytest.mark.req("RENDER-014")
def test_logit_bias_keys_become_ints_and_values_are_clamped(api, target) -> None:
    out = api.post_ok(CHAT, chat_request(target.model, logit_bias={"5": 150, "9": -3.5, "11": -300}))
    bias = {int(k): v for k, v in (out["sampling_params"].get("logit_bias") or {}).items()}
    assert bias == {5: 100, 9: -3.5, 11: -100}


@pytest.mark.req("RENDER-015", "ERROR-001")
def test_prompt_longer_than_context_is_rejected(api, target, max_model_len) -> None:
    resp = api.post(CHAT, chat_request(target.model, messages=[{"role": "user", "content": "a b " * max_model_len}]))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("RENDER-016", "ERROR-001")
@pytest.mark.parametrize("prompt", [[], [[]]], ids=["empty-list", "empty-inner-list"])
def test_empty_completions_prompt_is_rejected(api, target, prompt) -> None:
    resp = api.post(COMPLETIONS, {"model": target.model, "prompt": prompt})
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("RENDER-017", "ERROR-001")
def test_negative_token_id_prompt_is_rejected(api, target) -> None:
    resp = api.post(COMPLETIONS, {"model": target.model, "prompt": [5, -1, 7]})
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("RENDER-018", "ERROR-001")
def test_beam_search_is_rejected(api, target) -> None:
    resp = api.post(CHAT, chat_request(target.model, use_beam_search=True, n=2))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("RENDER-019", "ERROR-001")
def test_greedy_with_several_choices_is_rejected(api, target) -> None:
    resp = api.post(CHAT, chat_request(target.model, temperature=0, n=2))
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("RENDER-020")
def test_request_level_fields_are_copied(api, target) -> None:
    out = api.post_ok(CHAT, chat_request(target.model, cache_salt="salt-1", priority=0, stream=False))
    assert out.get("cache_salt") == "salt-1"
    assert out.get("stream") in (False, None)


@pytest.mark.req("RENDER-021")
def test_output_mode_is_tokens(api, target) -> None:
    out = api.post_ok(CHAT, chat_request(target.model))
    assert out.get("output_mode", "tokens") == "tokens"


@pytest.mark.req("RENDER-005")
def test_tools_render(api, target, capabilities, render_oracle) -> None:
    """The tool list reaches the prompt exactly where the model's template renders it: some templates
    (DeepSeek-R1's) never mention tools, and there a render that adds them is as wrong as one that drops them."""
    capabilities.require("tools")
    plain_body, tools_body = chat_request(target.model), chat_request(target.model, tools=[TOOL])
    plain = api.post_ok(CHAT, plain_body)
    with_tools = api.post_ok(CHAT, tools_body)
    if render_oracle.prompt_ids(tools_body) != render_oracle.prompt_ids(plain_body):
        assert len(with_tools["token_ids"]) > len(plain["token_ids"]), (
            "[RENDER-005] the tool list must reach the prompt")
    else:
        assert with_tools["token_ids"] == plain["token_ids"], (
            "[RENDER-005] the template does not render tools, yet the render with tools differs from the one without")
    assert with_tools["token_ids"] == render_oracle.prompt_ids(tools_body), (
        "[RENDER-005] the render with tools differs from the template oracle")


_PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAAB"
          "JRU5ErkJggg==")


@pytest.mark.req("RENDER-024")
def test_image_part_is_refused_not_dropped(api, target, render_oracle) -> None:
    """A text-only model cannot see an image: rendering the text around it as if it were not there gives the
    engine a prompt the client did not send."""
    if render_oracle.multimodal:
        not_tested("the model folder is multimodal (it has a processor configuration): images are its input")
    body = chat_request(target.model, [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": _PIXEL}}]}])
    response = api.post(CHAT, body)
    assert 400 <= response.status_code < 500, (
        f"[RENDER-024] an image_url part on a text-only model was answered {response.status_code}")


@pytest.mark.req("RENDER-025")
def test_parse_context_defaults_without_tools(api, target) -> None:
    """A plain chat request's parse context: no tools, nothing to count, reasoning included."""
    context = api.post_ok(CHAT, chat_request(target.model)).get("parse_context")
    assert isinstance(context, dict), f"[RENDER-025] chat render wrote no parse_context: {context!r}"
    expected = {"tools": None, "tool_choice": "none", "parallel_tool_calls": True, "include_reasoning": True,
                "history_tool_call_cnt": 0}
    differences = {k: context.get(k) for k, v in expected.items() if context.get(k) != v}
    assert not differences, f"[RENDER-025] parse_context differs from the request: {differences}"


@pytest.mark.req("RENDER-025")
def test_parse_context_carries_tools_reasoning_and_history(api, target, capabilities) -> None:
    """A request with tools, a tool-call history, no parallel calls and no reasoning: each reaches the parse context
    a derendering generate server parses with."""
    capabilities.require("tools")
    call = {"id": "call_1", "type": "function", "function": {"name": TOOL["function"]["name"],
                                                             "arguments": '{"city": "Oslo"}'}}
    messages = [{"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "user", "content": "And tomorrow?"}]
    body = chat_request(target.model, messages, tools=[TOOL], parallel_tool_calls=False, include_reasoning=False,
                        chat_template_kwargs={"enable_thinking": False})
    context = api.post_ok(CHAT, body).get("parse_context")
    assert isinstance(context, dict), f"[RENDER-025] chat render wrote no parse_context: {context!r}"
    names = [(t.get("function") or {}).get("name") for t in context.get("tools") or [] if isinstance(t, dict)]
    assert names == [TOOL["function"]["name"]], f"[RENDER-025] parse_context tools {context.get('tools')!r}"
    expected = {"tool_choice": "auto", "parallel_tool_calls": False, "include_reasoning": False,
                "history_tool_call_cnt": 1}
    differences = {k: context.get(k) for k, v in expected.items() if context.get(k) != v}
    assert not differences, f"[RENDER-025] parse_context differs from the request: {differences}"
    kwargs = context.get("chat_template_kwargs") or {}
    assert kwargs.get("enable_thinking") is False, (
        f"[RENDER-025] parse_context chat_template_kwargs {kwargs} lost the request's enable_thinking: false")


# -- request ids (RENDER-037) ---------------------------------------------------------------------------------------

_PREFIX = {CHAT: "chatcmpl-", COMPLETIONS: "cmpl-"}
#: (X-Request-Id header or None, body request_id or None, the suffix vLLM's rule gives; None: a random one)
_ID_CASES = {
    "header": ("tokenspec-h", None, "tokenspec-h"),
    "body": (None, "tokenspec-b", "tokenspec-b"),
    "header-over-body": ("tokenspec-h", "tokenspec-b", "tokenspec-h"),
    "empty-header": ("", "tokenspec-b", ""),
    "empty-body": (None, "", ""),
    "neither": (None, None, None),
}


def _render_ids(api, path: str, body: dict, header: str | None) -> list[str]:
    response = api.request("POST", path, json_body=body,
                           headers=None if header is None else {"X-Request-Id": header})
    assert response.status_code == 200, f"{path} answered {response.status_code}: {response.text[:300]}"
    out = response.json()
    return [r.get("request_id") for r in (out if isinstance(out, list) else [out])]


@pytest.mark.req("RENDER-037")
@pytest.mark.parametrize("case", list(_ID_CASES))
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_request_id_follows_the_client(api, target, path, case) -> None:
    """The client's id reaches the generate request (and so the engine's logs and abort) behind the route's prefix:
    the header first, then the body's id, each verbatim; a random one only when the client gave none."""
    header, body_id, suffix = _ID_CASES[case]
    body = chat_request(target.model) if path == CHAT else {"model": target.model, "prompt": "Hello", "max_tokens": 4}
    if body_id is not None:
        body["request_id"] = body_id
    [got] = _render_ids(api, path, body, header)
    prefix = _PREFIX[path]
    if suffix is not None:
        assert got == prefix + suffix, f"[RENDER-037] request_id {got!r}, wanted {prefix + suffix!r}"
        return
    [again] = _render_ids(api, path, body, header)
    assert isinstance(got, str) and got.startswith(prefix) and len(got) > len(prefix), (
        f"[RENDER-037] request_id {got!r} is not {prefix!r} and a random suffix")
    assert got != again, f"[RENDER-037] two requests without an id were both given {got!r}"


@pytest.mark.req("RENDER-037")
def test_completions_request_ids_number_the_prompts(api, target) -> None:
    body = {"model": target.model, "prompt": ["Hello", "world", "again"], "max_tokens": 4,
            "request_id": "tokenspec-b"}
    ids = _render_ids(api, COMPLETIONS, body, "tokenspec-h")
    wanted = [f"cmpl-tokenspec-h-{i}" for i in range(3)]
    assert ids == wanted, f"[RENDER-037] three prompts got request ids {ids}, wanted {wanted}"


# -- the engine's reasoning parser (RENDER-039, RENDER-040) ----------------------------------------------------------


def _without_reasoning_parser(capabilities) -> bool | None:
    """True when the probe found no reasoning parser, False when it found one, None when it could not tell."""
    if capabilities.has("reasoning"):
        return False
    decision = capabilities.decisions.get("reasoning")
    return True if decision is not None and decision.status == "unsupported" else None


@pytest.mark.req("RENDER-039", "RENDER-025")
def test_reasoning_parser_kwargs_are_the_templates_arguments(api, target, capabilities) -> None:
    """The engine builds its reasoning parser (which decides when structured outputs start) with these arguments: the
    request's own, null and "auto" ones unset, the generation-prompt flags as the request set them."""
    given = {"enable_thinking": False, "tokenspec_flag": [1, 2], "tokenspec_unset": None, "tokenspec_auto": "auto"}
    out = api.post_ok(CHAT, chat_request(target.model, chat_template_kwargs=given))
    absent = _without_reasoning_parser(capabilities)
    if absent is None:
        not_tested("the probe could not tell whether the target runs a reasoning parser")
    if absent:
        assert out.get("reasoning_parser_kwargs") is None, (
            f"[RENDER-039] reasoning_parser_kwargs {out.get('reasoning_parser_kwargs')!r} without a reasoning parser")
        return
    kwargs = (out.get("reasoning_parser_kwargs") or {}).get("chat_template_kwargs")
    assert isinstance(kwargs, dict), f"[RENDER-039] reasoning_parser_kwargs {out.get('reasoning_parser_kwargs')!r}"
    wanted = {"enable_thinking": False, "tokenspec_flag": [1, 2], "add_generation_prompt": True,
              "continue_final_message": False}
    wrong = {k: kwargs.get(k, "<absent>") for k, v in wanted.items() if kwargs.get(k, "<absent>") != v}
    assert not wrong, f"[RENDER-039] the engine's parser would get {wrong} (wanted {wanted}) in {kwargs}"
    unset = sorted(k for k in ("tokenspec_unset", "tokenspec_auto") if k in kwargs)
    assert not unset, f"[RENDER-039] {unset} are set in {kwargs}, though null and \"auto\" leave a kwarg unset"
    context = out.get("parse_context")
    if isinstance(context, dict):  # since 0.33: the derendering generate server parses with the same arguments
        assert context.get("chat_template_kwargs") == kwargs, (
            f"[RENDER-025] parse_context chat_template_kwargs {context.get('chat_template_kwargs')} differ from "
            f"reasoning_parser_kwargs' {kwargs}")
    continued = api.post_ok(CHAT, chat_request(target.model, [
        {"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "One, two,"}],
        add_generation_prompt=False, continue_final_message=True))
    kwargs = (continued.get("reasoning_parser_kwargs") or {}).get("chat_template_kwargs") or {}
    flags = {k: kwargs.get(k) for k in ("add_generation_prompt", "continue_final_message")}
    assert flags == {"add_generation_prompt": False, "continue_final_message": True}, (
        f"[RENDER-039] a continued final message gave the engine's parser {flags}")


#: The reasoning markers of each described family (specs/parsers.yaml's rules: <think>...</think>, Gemma 4's
#: <|channel>thought ... <channel|>).
REASONING_MARKERS = {"qwen3": ("<think>", "</think>"), "deepseek_r1": ("<think>", "</think>"),
                     "gemma4": ("<|channel>", "<channel|>")}


@pytest.mark.req("RENDER-040")
@pytest.mark.parametrize("variant", parser_families.VARIANTS)
def test_reasoning_ended_is_the_parsers_verdict_on_the_prompt(api, target, capabilities, codec, variant) -> None:
    """What the template wrote after the user's turn decides: a reasoning block it closed has ended, one it opened
    has not; with neither, the family's rule for output without markup under this thinking setting (specs/parsers.yaml,
    its plain shape) says whether the model starts in reasoning."""
    capabilities.require("reasoning")
    family = capabilities.parsers.get("reasoning")
    split = parser_families.expected(family, None, "plain", variant) if family in REASONING_MARKERS else None
    if split is None:
        not_tested(f"the target's reasoning family ({family}) has no markers or plain-shape row in specs/parsers.yaml")
    body = parser_families.table_request(target.model, False, variant)
    out = api.post_ok(CHAT, body)
    text = codec.decode(out["token_ids"])
    question = body["messages"][-1]["content"]
    if question not in text:
        not_tested(f"the rendered prompt does not show the user's turn verbatim: {text[-200:]!r}")
    tail = text[text.rindex(question) + len(question):]
    opening, closing = REASONING_MARKERS[family]
    if max(tail.rfind(opening), tail.rfind(closing)) >= 0:
        wanted, why = tail.rfind(closing) > tail.rfind(opening), f"the prompt ends {tail!r}"
    else:
        wanted = split.reasoning is None
        into = "content" if wanted else "reasoning"
        why = f"the prompt ends {tail!r} and {family} splits unmarked output into {into}"
    ended = out.get("reasoning_ended")
    assert ended is wanted, (
        f"[RENDER-040] reasoning_ended {ended!r} with thinking {'off' if variant == 'thinking-off' else 'on'}; {why}, "
        f"so wanted {wanted}")


# -- fields at the edges of their range (RENDER-041, RENDER-042, RENDER-043, RENDER-044) -----------------------------

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _edge_body(path: str, model: str, fields: dict) -> dict:
    base = chat_request(model) if path == CHAT else {"model": model, "prompt": "Hello, who are you?"}
    return {**base, **fields}


def _sampling(field: str, value: object):
    def check(out: dict, full: list[int], max_model_len: int) -> str | None:
        params = out["sampling_params"]
        if field not in params:
            return f"sampling_params has no {field}: {params}"
        if field == "stop_token_ids":
            return None if isinstance(params[field], list) and set(value) <= set(params[field]) else \
                f"stop_token_ids {params[field]!r}"
        return None if _same(value, params[field]) else f"sampling_params.{field} is {params[field]!r}"
    return check


def _top_level(field: str, value: object):
    def check(out: dict, full: list[int], max_model_len: int) -> str | None:
        return None if out.get(field) == value else f"{field} is {out.get(field)!r}"
    return check


def _one_token(out: dict, full: list[int], max_model_len: int) -> str | None:
    """One id kept (which one, with a tokenizer that adds a BOS, is not this requirement's business)."""
    return None if len(out["token_ids"]) == 1 else f"token_ids {out['token_ids']} are not one id"


def _whole_prompt(out: dict, full: list[int], max_model_len: int) -> str | None:
    return None if out["token_ids"] == full else "token_ids are not the whole prompt"


def _room(out: dict, full: list[int], max_model_len: int) -> str | None:
    room = max_model_len - len(out["token_ids"])
    got = out["sampling_params"].get("max_tokens")
    return None if got == room else f"max_tokens {got!r}, the context leaves {room}"


CONTEXT = "<context length>"  # a value the test replaces with the target's max_model_len
#: (id, routes (None: both), request fields, the check of the answer) for values at the ends of a field's range
INSIDE = [
    ("temperature-0", None, {"temperature": 0.0}, _sampling("temperature", 0.0)),
    ("temperature-2", None, {"temperature": 2.0}, _sampling("temperature", 2.0)),
    ("top_p-1", None, {"top_p": 1.0}, _sampling("top_p", 1.0)),
    ("top_p-tiny", None, {"top_p": 1e-6}, _sampling("top_p", 1e-6)),
    ("top_k--1", None, {"top_k": -1}, _sampling("top_k", -1)),
    ("min_p-0", None, {"min_p": 0.0}, _sampling("min_p", 0.0)),
    ("min_p-1", None, {"min_p": 1.0}, _sampling("min_p", 1.0)),
    ("presence_penalty--2", None, {"presence_penalty": -2.0}, _sampling("presence_penalty", -2.0)),
    ("presence_penalty-2", None, {"presence_penalty": 2.0}, _sampling("presence_penalty", 2.0)),
    ("frequency_penalty--2", None, {"frequency_penalty": -2.0}, _sampling("frequency_penalty", -2.0)),
    ("frequency_penalty-2", None, {"frequency_penalty": 2.0}, _sampling("frequency_penalty", 2.0)),
    ("repetition_penalty-tiny", None, {"repetition_penalty": 0.01}, _sampling("repetition_penalty", 0.01)),
    ("seed-int64-min", None, {"seed": INT64_MIN}, _sampling("seed", INT64_MIN)),
    ("seed-int64-max", None, {"seed": INT64_MAX}, _sampling("seed", INT64_MAX)),
    ("priority-int64-min", None, {"priority": INT64_MIN}, _top_level("priority", INT64_MIN)),
    ("priority-int64-max", None, {"priority": INT64_MAX}, _top_level("priority", INT64_MAX)),
    ("max_tokens-1", None, {"max_tokens": 1}, _sampling("max_tokens", 1)),
    ("max_tokens-context", None, {"max_tokens": CONTEXT}, _room),
    ("min_tokens-max_tokens", None, {"min_tokens": 5, "max_tokens": 5}, _sampling("min_tokens", 5)),
    ("top_logprobs-0", CHAT, {"logprobs": True, "top_logprobs": 0}, _sampling("logprobs", 0)),
    ("top_logprobs--1", CHAT, {"logprobs": True, "top_logprobs": -1}, _sampling("logprobs", -1)),
    ("logprobs-0", COMPLETIONS, {"logprobs": 0}, _sampling("logprobs", 0)),
    ("logprobs--1", COMPLETIONS, {"logprobs": -1}, _sampling("logprobs", -1)),
    ("prompt_logprobs-0", None, {"prompt_logprobs": 0}, _sampling("prompt_logprobs", 0)),
    ("prompt_logprobs--1", None, {"prompt_logprobs": -1}, _sampling("prompt_logprobs", -1)),
    ("thinking_token_budget-0", None, {"thinking_token_budget": 0}, _sampling("thinking_token_budget", 0)),
    ("stop-four", None, {"stop": ["END", "STOP", "\n\n", "###"]}, _sampling("stop", ["END", "STOP", "\n\n", "###"])),
    ("stop-empty", None, {"stop": []}, _sampling("stop", [])),
    ("stop_token_ids-empty", None, {"stop_token_ids": []}, _sampling("stop_token_ids", [])),
    ("bad_words-empty", None, {"bad_words": []}, _sampling("bad_words", [])),
    ("allowed_token_ids-empty", None, {"allowed_token_ids": []}, _sampling("allowed_token_ids", [])),
    ("logit_bias-empty", None, {"logit_bias": {}}, _sampling("logit_bias", {})),
    ("cache_salt-1", None, {"cache_salt": "s"}, _top_level("cache_salt", "s")),
    ("cache_salt-128", None, {"cache_salt": "s" * 128}, _top_level("cache_salt", "s" * 128)),
    ("truncate_prompt_tokens-1", None, {"truncate_prompt_tokens": 1}, _one_token),
    ("truncate_prompt_tokens-context", None, {"truncate_prompt_tokens": CONTEXT}, _whole_prompt),
]
#: (id, routes (None: both), request fields) for values just outside a field's range
OUTSIDE = [
    ("temperature-negative", None, {"temperature": -0.01}),
    ("temperature-above-2", None, {"temperature": 2.01}),
    ("top_p-0", None, {"top_p": 0.0}),
    ("top_p-above-1", None, {"top_p": 1.01}),
    ("top_k--2", None, {"top_k": -2}),
    ("min_p-negative", None, {"min_p": -0.01}),
    ("min_p-above-1", None, {"min_p": 1.01}),
    ("presence_penalty-below--2", None, {"presence_penalty": -2.01}),
    ("presence_penalty-above-2", None, {"presence_penalty": 2.01}),
    ("frequency_penalty-below--2", None, {"frequency_penalty": -2.01}),
    ("frequency_penalty-above-2", None, {"frequency_penalty": 2.01}),
    ("repetition_penalty-0", None, {"repetition_penalty": 0.0}),
    ("n-0", None, {"n": 0}),
    ("max_tokens-0", None, {"max_tokens": 0}),
    ("max_tokens-past-context", None, {"max_tokens": CONTEXT}),
    ("min_tokens-negative", None, {"min_tokens": -1}),
    ("min_tokens-above-max_tokens", None, {"min_tokens": 6, "max_tokens": 5}),
    ("seed-above-int64", None, {"seed": INT64_MAX + 1}),
    ("seed-below-int64", None, {"seed": INT64_MIN - 1}),
    ("priority-above-int64", None, {"priority": INT64_MAX + 1}),
    ("priority-below-int64", None, {"priority": INT64_MIN - 1}),
    ("stop-empty-string", None, {"stop": ["END", ""]}),
    ("stop-five", None, {"stop": ["a", "b", "c", "d", "e"]}),
    ("cache_salt-empty", None, {"cache_salt": ""}),
    ("cache_salt-129", None, {"cache_salt": "s" * 129}),
    ("truncate_prompt_tokens-0", None, {"truncate_prompt_tokens": 0}),
    ("truncate_prompt_tokens--2", None, {"truncate_prompt_tokens": -2}),
    ("truncate_prompt_tokens-past-context", None, {"truncate_prompt_tokens": CONTEXT}),
    ("stream_interval-0", None, {"stream_interval": 0}),
    ("top_logprobs--2", CHAT, {"logprobs": True, "top_logprobs": -2}),
    ("logprobs--2", COMPLETIONS, {"logprobs": -2}),
    ("prompt_logprobs--2", None, {"prompt_logprobs": -2}),
    ("thinking_token_budget--2", None, {"thinking_token_budget": -2}),
    ("messages-empty", CHAT, {"messages": []}),
    ("prompt-empty-string", COMPLETIONS, {"prompt": ""}),
    ("structured_outputs-no-constraint", None, {"structured_outputs": {}}),
]


def _routes(cases: list, width: int) -> list:
    out = []
    for case in cases:
        for path, name in ((CHAT, "chat"), (COMPLETIONS, "completions")):
            if case[1] in (None, path):
                out.append(pytest.param(path, *case[2:width], id=f"{name}-{case[0]}"))
    return out


def _at_context(fields: dict, max_model_len: int, past: int = 0) -> dict:
    return {k: max_model_len + past if v == CONTEXT else v for k, v in fields.items()}


@pytest.mark.req("RENDER-041")
@pytest.mark.parametrize(("path", "fields", "check"), _routes(INSIDE, 4))
def test_field_at_the_end_of_its_range_is_rendered(api, target, max_model_len, path, fields, check) -> None:
    """Each end of a field's range is a value like any other: accepted, and carried where render carries it."""
    full = api.post_ok(path, _edge_body(path, target.model, {}))
    full = full[0] if isinstance(full, list) else full
    out = api.post_ok(path, _edge_body(path, target.model, _at_context(fields, max_model_len)))
    out = out[0] if isinstance(out, list) else out
    problem = check(out, full["token_ids"], max_model_len)
    assert problem is None, f"[RENDER-041] {_at_context(fields, max_model_len)} rendered, but {problem}"


@pytest.mark.req("RENDER-042", "ERROR-001")
@pytest.mark.parametrize(("path", "fields"), _routes(OUTSIDE, 3))
def test_field_just_outside_its_range_is_refused(api, target, max_model_len, path, fields) -> None:
    fields = _at_context(fields, max_model_len, past=1)
    response = api.post(path, _edge_body(path, target.model, fields))
    assert response.status_code == 400, (
        f"[RENDER-042] {json.dumps(fields)[:200]} answered {response.status_code}: {response.text[:300]}")
    error = response.json().get("error")
    assert isinstance(error, dict) and error.get("message") and error.get("code") == 400, (
        f"[RENDER-042] the 400 carries no OpenAI error object: {response.text[:300]}")


@pytest.mark.req("RENDER-043")
@pytest.mark.parametrize("choice", [None, "auto", "required", "none"], ids=["no-choice", "auto", "required", "none"])
def test_empty_tools_list_is_no_tools(api, target, choice) -> None:
    """An empty tools list offers nothing to call: the prompt is that of a request without tools, and a choice that
    would need a tool falls back to none."""
    fields = {"tools": []} if choice is None else {"tools": [], "tool_choice": choice}
    plain = api.post_ok(CHAT, chat_request(target.model))
    response = api.post(CHAT, chat_request(target.model, **fields))
    assert response.status_code == 200, f"[RENDER-043] {fields} answered {response.status_code}: {response.text[:300]}"
    out = response.json()
    assert out["token_ids"] == plain["token_ids"], "[RENDER-043] the prompt with tools: [] differs from the one without"
    context = out.get("parse_context")
    if isinstance(context, dict):
        assert context.get("tool_choice") == "none" and not context.get("tools"), (
            f"[RENDER-043] parse_context tools {context.get('tools')!r}, tool_choice {context.get('tool_choice')!r}")


def _nullable(schema: str) -> list[str]:
    """The request fields whose schema in the spec allows null (model aside: ERROR-009 selects the served model)."""
    pointer = f"/components/schemas/{schema}/properties"
    names = load_document("components.yaml")["components"]["schemas"][schema]["properties"]
    return [n for n in names if n != "model" and schema_validator("components.yaml", f"{pointer}/{n}").is_valid(None)]


@pytest.mark.req("RENDER-044")
@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
def test_null_field_renders_as_an_absent_one(api, target, path) -> None:
    """null is the default of every nullable field: sent, it renders exactly as the request without it does."""
    schema = "ChatCompletionRequest" if path == CHAT else "CompletionRequest"
    base = _edge_body(path, target.model, {})
    absent = api.post_ok(path, base)
    absent = absent[0] if isinstance(absent, list) else absent
    wrong = {}
    for name in _nullable(schema):
        response = api.post(path, {**base, name: None})
        if response.status_code != 200:
            wrong[name] = f"answered {response.status_code}: {response.text[:120]}"
            continue
        out = response.json()
        out = out[0] if isinstance(out, list) else out
        for part in ("token_ids", "sampling_params"):
            got, want = out.get(part), absent.get(part)
            if got != want:
                if isinstance(got, dict) and isinstance(want, dict):
                    keys = sorted(k for k in {*got, *want} if got.get(k, "<absent>") != want.get(k, "<absent>"))
                    got, want = ({k: d.get(k, "<absent>") for k in keys} for d in (got, want))
                wrong[name] = f"{part} {got!r}, without the field {want!r}"
    if wrong:
        api.post(path, {**base, next(iter(wrong)): None})  # the report's curl replays a failing request
    assert not wrong, f"[RENDER-044] fields sent as null rendered unlike the request without them: {wrong}"


@pytest.mark.req("RENDER-011")
@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_above_the_room_is_lowered_to_it(api, target, max_model_len, field) -> None:
    """A value inside the context but past what the prompt leaves is not an error: render lowers it to the room,
    as it does every value (RENDER-041 holds the context length itself, RENDER-042 one past it)."""
    prompt = api.post_ok(CHAT, chat_request(target.model, max_tokens=1))["token_ids"]
    room = max_model_len - len(prompt)
    if room < 1:
        not_tested(f"the {len(prompt)}-token prompt leaves no room in a {max_model_len}-token context")
    asked = min(room + 2, max_model_len)
    out = api.post_ok(CHAT, chat_request(target.model, **{field: asked}))
    got = out["sampling_params"].get("max_tokens")
    assert got == room, (f"[RENDER-011] {field} {asked} with a {len(out['token_ids'])}-token prompt in a"
                         f" {max_model_len}-token context rendered to max_tokens {got!r}, not the room {room}")


# -- structured outputs reach the engine as the request names them (RENDER-046) -------------------------------------

COUPLED_CHAT = "/v1/chat/completions"
GENERATE = "/inference/v1/generate"
#: (id, request fields, the optional request field the case needs): constraints whose first allowed characters
#: differ from a reasoning block's, so a constraint loosened to allow one (an optional <think> before it) shows.
STRUCTURED = [
    ("regex", {"structured_outputs": {"regex": r"Hello there\."}}, "structured_outputs"),
    ("choice", {"structured_outputs": {"choice": ["Hello there.", "Goodbye."]}}, "structured_outputs"),
    ("response_format-json_schema", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "weather", "schema": {"enum": ["sunny", "rainy"]}}}}, None),
    ("response_format-json_object", {"response_format": {"type": "json_object"}}, None),
]


@pytest.mark.req("RENDER-046")
@pytest.mark.parametrize(("fields", "needs"), [pytest.param(f, n, id=i) for i, f, n in STRUCTURED])
def test_structured_outputs_constrain_generate_as_the_coupled_endpoint(api, engine, reference, target, capabilities,
                                                                       fields, needs) -> None:
    """Render -> generate, greedy, against the coupled endpoint on the same engine: the ids differ only where
    render handed the engine another constraint than the request's (the engine is the same, so is the prompt)."""
    if needs:
        capabilities.require_fields(needs)
    request = chat_request(target.model, messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                           temperature=0, max_tokens=24, **fields)
    coupled = reference.post_ok(COUPLED_CHAT, {**request, "return_token_ids": True})
    rendered = api.post_ok(CHAT, request)
    if rendered["token_ids"] != coupled.get("prompt_token_ids"):
        not_tested("render's prompt is not the coupled endpoint's (PARITY-005 judges that), so the generated ids"
                   " cannot be compared")
    generated = engine.post_ok(GENERATE, rendered)["choices"][0]["token_ids"]
    theirs = coupled["choices"][0]["token_ids"]
    if generated != theirs:
        api.post(CHAT, request)  # the report's curl replays the render request
    assert generated == theirs, (
        f"[RENDER-046] render -> generate of {json.dumps(fields)} gave other ids than the coupled endpoint:"
        f" {generated[:16]} vs {theirs[:16]}; render handed the engine"
        f" {json.dumps(rendered['sampling_params'].get('structured_outputs'))[:300]}")
