"""Generate: token IDs in, token IDs out on the engine (GENERATE-*)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.engine.target import card_max_model_len
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import generate_request
from tokenspec.suite.oracles.pipeline import generate_prompt
from tokenspec.suite.oracles.prompt_logprobs import prompt_logprobs_problem

GENERATE = "/inference/v1/generate"
FINISH_REASONS = {"stop", "length", "abort"}


@pytest.fixture
def prompt(request, api, target, capabilities) -> list[int]:
    """A realistic prompt: the target's render of a one-turn chat, else its words encoded (oracles/pipeline.py)."""
    codec = request.getfixturevalue("codec") if capabilities.has("codec") else None
    return generate_prompt(api, target.model, capabilities, codec)


@pytest.fixture(scope="session")
def engine_context(target, max_model_len) -> int:
    """The engine's own context length (its /v1/models card), which may differ from the render target's."""
    reported = card_max_model_len(target.generate_url, target.transport, "engine" if target.engine_url else "target")
    return max_model_len if reported is None else reported


def _choice(out: dict) -> dict:
    assert len(out["choices"]) == 1, f"expected one choice, got {len(out['choices'])}"
    return out["choices"][0]


@pytest.mark.req("GENERATE-001", "GENERATE-002", "GENERATE-003")
def test_one_choice_with_index_zero(engine, codec, prompt) -> None:
    out = engine.post_ok(GENERATE, generate_request(prompt, n=1, temperature=0, max_tokens=8))
    ch = _choice(out)
    assert ch["index"] == 0
    assert ch["token_ids"] and all(0 <= t < codec.vocab_size for t in ch["token_ids"])
    assert ch["finish_reason"] in FINISH_REASONS


@pytest.mark.req("GENERATE-001", "GENERATE-007")
def test_several_choices_are_indexed_once_each(engine, capabilities, prompt) -> None:
    capabilities.require("multi-choice")
    out = engine.post_ok(GENERATE, generate_request(prompt, n=3, temperature=1.0, seed=3, max_tokens=5))
    assert sorted(ch["index"] for ch in out["choices"]) == [0, 1, 2]
    assert out["usage"]["completion_tokens"] == sum(len(ch["token_ids"]) for ch in out["choices"])


@pytest.mark.req("GENERATE-002", "GENERATE-003", "GENERATE-006", "GENERATE-007", "SCHEMA-007", "GENERATE-021")
@given(data=st.data())
def test_sampled_ids_and_usage(engine, codec, data) -> None:
    prompt = data.draw(strategies.token_ids(codec.known_ids, 1, 40))
    params = {
        "temperature": data.draw(st.sampled_from([0.0, 0.7, 1.0, 1.5])),
        "seed": data.draw(st.integers(0, 2**31 - 1)),
        "max_tokens": data.draw(st.integers(1, 12)),
    }
    out = engine.post_ok(GENERATE, generate_request(prompt, **params))
    ch = _choice(out)
    assert all(0 <= t < codec.vocab_size for t in ch["token_ids"]), f"id outside 0..{codec.vocab_size - 1}"
    assert ch["finish_reason"] in FINISH_REASONS
    usage = out["usage"]
    assert usage["prompt_tokens"] == len(prompt)
    assert usage["completion_tokens"] == len(ch["token_ids"])
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.req("GENERATE-004", "GENERATE-005")
@pytest.mark.parametrize("max_tokens", [1, 7])
def test_length_finish_holds_exactly_max_tokens(engine, prompt, max_tokens) -> None:
    params = {"temperature": 0, "max_tokens": max_tokens, "ignore_eos": True}
    ch = _choice(engine.post_ok(GENERATE, generate_request(prompt, **params)))
    assert ch["finish_reason"] == "length"
    assert len(ch["token_ids"]) == max_tokens
    assert ch.get("stop_reason") is None, f"stop_reason must be null for length, got {ch.get('stop_reason')!r}"


@pytest.mark.req("GENERATE-016", "GENERATE-004")
def test_stop_token_id_ends_the_choice(engine, prompt) -> None:
    greedy = {"temperature": 0, "max_tokens": 12, "ignore_eos": True}
    free = _choice(engine.post_ok(GENERATE, generate_request(prompt, **greedy)))["token_ids"]
    stop_id = free[1]
    end = free.index(stop_id) + 1
    ch = _choice(engine.post_ok(GENERATE, generate_request(prompt, **greedy, stop_token_ids=[stop_id])))
    assert ch["finish_reason"] == "stop"
    assert ch["stop_reason"] == stop_id and isinstance(ch["stop_reason"], int)
    assert ch["token_ids"][-1] == stop_id, "the choice must end at the stop token"
    assert ch["token_ids"] == free[:end], "greedy generation must stop at the first occurrence of the stop token"


@pytest.mark.req("GENERATE-008", "ERROR-001", "GENERATE-021")
@pytest.mark.parametrize("kind", ["empty", "negative", "out-of-vocabulary"])
def test_bad_prompt_ids_rejected(engine, codec, kind) -> None:
    token_ids = {"empty": [], "negative": [5, -1, 7], "out-of-vocabulary": [5, codec.vocab_size + 5]}[kind]
    resp = engine.post(GENERATE, generate_request(token_ids, temperature=0, max_tokens=2))
    assert resp.status_code == 400, resp.text[:300]
    assert "error" in resp.json()


@pytest.mark.req("GENERATE-009")
def test_prompt_filling_the_context_rejected(engine, engine_context) -> None:
    resp = engine.post(GENERATE, generate_request([5] * engine_context, temperature=0))
    assert resp.status_code == 400, resp.text[:300]


OUT_OF_RANGE = [
    ("temperature", -1.0),
    ("top_p", 0.0),
    ("top_p", 1.5),
    ("top_k", -2),
    ("min_p", 2.0),
    ("presence_penalty", 3.0),
    ("frequency_penalty", -3.0),
    ("repetition_penalty", 0.0),
    ("max_tokens", 0),
    ("min_tokens", 9),
]


@pytest.mark.req("GENERATE-010", "ERROR-001")
@pytest.mark.parametrize("field,value", OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_out_of_range_sampling_parameter_rejected(engine, prompt, field, value) -> None:
    params = {"temperature": 1.0, "max_tokens": 4, field: value}
    resp = engine.post(GENERATE, generate_request(prompt, **params))
    assert resp.status_code == 400, f"{field}={value} was not rejected: {resp.text[:300]}"


@pytest.mark.req("GENERATE-011")
@pytest.mark.parametrize("field", ["n", "logprobs"])
def test_n_and_logprobs_above_server_limits_rejected(engine, codec, prompt, field) -> None:
    # Both values are beyond any limit a server can have: more sequences than VLLM-style caps allow, and
    # more logprobs than the vocabulary holds.
    value = 100_000 if field == "n" else codec.vocab_size + 1
    resp = engine.post(GENERATE, generate_request(prompt, temperature=1.0, max_tokens=1, **{field: value}))
    assert resp.status_code == 400, f"{field}={value} was not rejected: {resp.text[:300]}"


@pytest.mark.req("GENERATE-012", "GENERATE-013", "GENERATE-014")
@pytest.mark.parametrize("k", [0, 1, 4])
def test_logprobs_shape(engine, prompt, k) -> None:
    # temperature 1 so the sampled token is often not the most likely one, which is where order matters.
    params = {"temperature": 1.0, "seed": 11, "max_tokens": 10, "ignore_eos": True, "logprobs": k}
    ch = _choice(engine.post_ok(GENERATE, generate_request(prompt, **params)))
    content = (ch.get("logprobs") or {}).get("content")
    assert content is not None, "logprobs were requested but the choice has none"
    assert [e["token_id"] for e in content] == ch["token_ids"], "one logprobs entry per generated id, in order"
    for i, entry in enumerate(content):
        top = entry["top_logprobs"]
        assert 1 <= len(top) <= k + 1, f"entry {i}: {len(top)} top_logprobs for logprobs={k}"
        assert top[0]["token_id"] == entry["token_id"], f"entry {i}: the sampled token must come first"
        values = [entry["logprob"], *(t["logprob"] for t in top)]
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in values), f"entry {i}: {values}"


@pytest.mark.req("GENERATE-015")
def test_seed_reproduces_token_ids(engine, target, prompt) -> None:
    params = {"temperature": 1.0, "seed": target.seed % (2**31), "max_tokens": 16, "ignore_eos": True}
    first = _choice(engine.post_ok(GENERATE, generate_request(prompt, **params)))["token_ids"]
    second = _choice(engine.post_ok(GENERATE, generate_request(prompt, **params)))["token_ids"]
    assert first == second


@pytest.mark.req("GENERATE-017")
def test_text_mode_decodes_token_ids(engine, codec, prompt) -> None:
    params = {"temperature": 0, "max_tokens": 10, "ignore_eos": True, "detokenize": True}
    ch = _choice(engine.post_ok(GENERATE, generate_request(prompt, top={"output_mode": "text"}, **params)))
    assert isinstance(ch.get("text"), str), "output_mode text must add a text field"
    assert ch["text"] == codec.decode(ch["token_ids"], skip_special_tokens=True)


@pytest.mark.req("GENERATE-017")
@pytest.mark.parametrize("include", [False, True], ids=["stop-removed", "stop-kept"])
def test_text_mode_stop_string(engine, capabilities, prompt, include) -> None:
    capabilities.require("stop-strings")
    params = {"temperature": 0, "max_tokens": 10, "ignore_eos": True, "detokenize": True}
    free = _choice(engine.post_ok(GENERATE, generate_request(prompt, top={"output_mode": "text"}, **params)))["text"]
    if not free:
        not_tested("the greedy continuation decodes to no text; no stop string to pick")
    stop = free[len(free) // 2]
    at = free.index(stop)
    expected = free[: at + len(stop)] if include else free[:at]
    params |= {"stop": [stop], "include_stop_str_in_output": include}
    ch = _choice(engine.post_ok(GENERATE, generate_request(prompt, top={"output_mode": "text"}, **params)))
    assert ch["finish_reason"] == "stop" and ch["stop_reason"] == stop
    assert ch["text"] == expected


@pytest.mark.req("GENERATE-018")
def test_text_mode_without_detokenize_rejected(engine, prompt) -> None:
    body = generate_request(prompt, top={"output_mode": "text"}, temperature=0, max_tokens=2, detokenize=False)
    resp = engine.post(GENERATE, body)
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("GENERATE-019")
def test_return_token_ids_echoes_the_prompt(engine, prompt) -> None:
    body = generate_request(prompt, top={"return_token_ids": True}, temperature=0, max_tokens=2)
    out = engine.post_ok(GENERATE, body)
    assert out.get("prompt_token_ids") == prompt


@pytest.mark.req("GENERATE-020", "GENERATE-005")
def test_max_tokens_beyond_the_context(engine, engine_context) -> None:
    room = 6
    body = generate_request([5] * (engine_context - room), temperature=0, ignore_eos=True, max_tokens=room + 50)
    resp = engine.post(GENERATE, body)
    if resp.status_code == 400:
        return  # rejecting is allowed; lowering is the MAY
    assert resp.status_code == 200, resp.text[:300]
    ch = _choice(resp.json())
    assert ch["finish_reason"] == "length"
    assert len(ch["token_ids"]) == room, f"the context limit leaves room for {room} ids"


#: Room the max_tokens tests leave after the prompt: more than SamplingParams' default of 16, so a server that
#: caps an omitted max_tokens there is caught, and few enough ids to generate quickly.
ROOM = 40


def _generation_config_cap(target) -> int | None:
    """The max_new_tokens default of the model folder's generation config, which lowers an omitted max_tokens."""
    folder = target.tokenizer_dir
    if folder is None or not (folder / "generation_config.json").exists():
        return None
    value = json.loads((folder / "generation_config.json").read_text()).get("max_new_tokens")
    return value if isinstance(value, int) and value > 0 else None


@pytest.mark.req("GENERATE-029", "GENERATE-005")
@pytest.mark.parametrize("max_tokens", ["omitted", None, 16, ROOM], ids=["omitted", "null", "16", "whole-room"])
def test_max_tokens_default_is_the_room_left(engine, target, engine_context, max_tokens) -> None:
    """vLLM's own test_generate_defaults_max_tokens_when_omitted: an omitted max_tokens is not SamplingParams' 16.
    The prompt leaves ROOM ids; greedy with ignore_eos, nothing but the cap or the context ends the choice."""
    params: dict[str, Any] = {"temperature": 0, "ignore_eos": True}
    if max_tokens != "omitted":
        params["max_tokens"] = max_tokens
    ch = _choice(engine.post_ok(GENERATE, generate_request([5] * (engine_context - ROOM), **params)))
    expected = max_tokens if isinstance(max_tokens, int) else ROOM
    if max_tokens == "omitted":
        cap = _generation_config_cap(target)
        if cap is not None:
            expected = min(ROOM, cap)
        elif target.tokenizer_dir is None and len(ch["token_ids"]) < ROOM:
            not_tested(f"an omitted max_tokens gave {len(ch['token_ids'])} of the {ROOM} ids of room, and without"
                       " --tokenizer the model's generation-config default, which may lower it, is unknown")
    assert ch["finish_reason"] == "length", f"finish_reason {ch['finish_reason']!r} with max_tokens {max_tokens}"
    assert len(ch["token_ids"]) == expected, (
        f"[GENERATE-029] max_tokens {max_tokens}: {len(ch['token_ids'])} ids generated where the prompt left room"
        f" for {ROOM} and {expected} were due")


HUGE_MAX_TOKENS = [2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 1e18]


@pytest.mark.req("GENERATE-030", "ERROR-001")
@pytest.mark.parametrize("max_tokens", HUGE_MAX_TOKENS,
                         ids=["2^31-1", "2^31", "2^63-1", "2^63", "2^64-1", "2^64", "1e18-float"])
def test_huge_max_tokens_is_clipped_or_refused(engine, engine_context, max_tokens) -> None:
    """vLLM's own test_generate_rejects_unbounded_max_tokens: a max_tokens past int32 once killed the engine. The
    prompt leaves 8 ids of room, so a clipped answer is quick."""
    room = 8
    body = generate_request([5] * (engine_context - room), temperature=0, ignore_eos=True, max_tokens=max_tokens)
    resp = engine.post(GENERATE, body)
    assert resp.status_code in (200, 400), f"max_tokens {max_tokens} answered {resp.status_code}: {resp.text[:300]}"
    if resp.status_code == 200:
        ch = _choice(resp.json())
        assert 1 <= len(ch["token_ids"]) <= room and ch["finish_reason"] == "length", (
            f"max_tokens {max_tokens}: {len(ch['token_ids'])} ids, finish_reason {ch['finish_reason']!r}, where"
            f" the context left room for {room}")
    after = engine.post(GENERATE, generate_request([5, 6, 7], temperature=0, max_tokens=2))
    assert after.status_code == 200, (
        f"[GENERATE-030] the engine stopped serving after max_tokens {max_tokens}: a plain generate then answered"
        f" {after.status_code}: {after.text[:300]}")


@pytest.mark.req("GENERATE-031", "ERROR-001")
@pytest.mark.parametrize("stop", ["x", ["x", "y"], [], None], ids=["string", "list", "empty-list", "null"])
def test_stop_strings_need_detokenize(engine, prompt, stop) -> None:
    """vLLM's own test_stop_string_workflow: stop strings are matched on text, which detokenize false never makes."""
    resp = engine.post(GENERATE, generate_request(prompt, temperature=0, max_tokens=3, detokenize=False, stop=stop))
    if stop:
        assert resp.status_code == 400, f"stop {stop!r} with detokenize false answered {resp.status_code}:" \
                                        f" {resp.text[:300]}"
    else:
        assert resp.status_code == 200, f"stop {stop!r} (no stop string) with detokenize false answered" \
                                        f" {resp.status_code}: {resp.text[:300]}"


TRANSFER_PARAMS = {
    "kv-null": {"kv_transfer_params": None},
    "kv-empty": {"kv_transfer_params": {}},
    "kv-no-transfer": {"kv_transfer_params": {"do_remote_prefill": False, "do_remote_decode": False}},
    "ec-empty": {"ec_transfer_params": {}},
}


@pytest.mark.req("GENERATE-032")
@pytest.mark.parametrize("fields", list(TRANSFER_PARAMS.values()), ids=list(TRANSFER_PARAMS))
def test_transfer_params_that_ask_for_nothing_change_nothing(engine, prompt, fields) -> None:
    """Render (0.33 on) sends kv/ec_transfer_params at the top level of every GenerateRequest it writes."""
    params = {"temperature": 1.0, "seed": 17, "max_tokens": 6, "ignore_eos": True}
    plain = _choice(engine.post_ok(GENERATE, generate_request(prompt, **params)))["token_ids"]
    resp = engine.post(GENERATE, generate_request(prompt, top=fields, **params))
    assert resp.status_code == 200, f"{fields} answered {resp.status_code}: {resp.text[:300]}"
    assert _choice(resp.json())["token_ids"] == plain, f"{fields} changed the ids the same seeded request generates"


@pytest.mark.req("GENERATE-033", "GENERATE-014")
@pytest.mark.parametrize("k", [0, 1, 5])
def test_prompt_logprobs_score_each_prompt_token(engine, prompt, k) -> None:
    out = engine.post_ok(GENERATE, generate_request(prompt, temperature=0, max_tokens=2, prompt_logprobs=k))
    problem = prompt_logprobs_problem(out.get("prompt_logprobs"), prompt, k)
    assert problem is None, f"[GENERATE-033] prompt_logprobs {k}: {problem}"


@pytest.mark.req("GENERATE-033", "ERROR-001")
@pytest.mark.parametrize("case", ["null", "whole-vocabulary", "past-the-vocabulary"])
def test_prompt_logprobs_edges(engine, codec, prompt, case) -> None:
    value = {"null": None, "whole-vocabulary": -1, "past-the-vocabulary": codec.vocab_size + 1}[case]
    resp = engine.post(GENERATE, generate_request(prompt, temperature=0, max_tokens=2, prompt_logprobs=value))
    if case == "null":
        assert resp.status_code == 200, resp.text[:300]
        assert resp.json().get("prompt_logprobs") is None, "prompt_logprobs answered where none were asked"
    elif case == "past-the-vocabulary":
        assert resp.status_code == 400, f"prompt_logprobs {value} answered {resp.status_code}: {resp.text[:300]}"
    elif resp.status_code != 400:  # -1 is the whole vocabulary: refused past max_logprobs, else every id scored
        assert resp.status_code == 200, resp.text[:300]
        entries = resp.json().get("prompt_logprobs")
        assert isinstance(entries, list) and len(entries) == len(prompt) and entries[0] is None, f"{entries!r:.300}"
        whole = codec.tokenizer_size or 1  # every id the tokenizer has, at least (the model may pad past them)
        for i, entry in enumerate(entries[1:], start=1):
            assert str(prompt[i]) in entry and len(entry) >= whole, \
                f"entry {i} of the whole vocabulary has {len(entry)} keys for a tokenizer of {whole} ids"
