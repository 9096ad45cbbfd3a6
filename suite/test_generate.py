"""Generate: token IDs in, token IDs out on the engine (GENERATE-*)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.engine.target import card_max_model_len
from tokenspec.suite.oracles import strategies
from tokenspec.suite.oracles.builders import generate_request
from tokenspec.suite.oracles.pipeline import generate_prompt

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
