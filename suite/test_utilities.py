"""Utilities: /tokenize, /detokenize, /v1/models, /health and /version (UTIL-*)."""

from __future__ import annotations

import pytest
from hypothesis import example, given

from tokenspec.suite.engine.client import check_schema
from tokenspec.suite.oracles import strategies


@pytest.mark.req("UTIL-001")
@given(text=strategies.text)
def test_tokenize_count_equals_the_number_of_tokens(api, target, text) -> None:
    out = api.post_ok("/tokenize", {"model": target.model, "prompt": text})
    assert out["count"] == len(out["tokens"])


@pytest.mark.req("UTIL-001")
def test_tokenize_count_for_messages(api, target) -> None:
    out = api.post_ok("/tokenize", {"model": target.model, "messages": [{"role": "user", "content": "Hi"}]})
    assert out["count"] == len(out["tokens"]) > 0


@pytest.mark.req("UTIL-003")
@given(text=strategies.text)
@example(text="  leading spaces, ﬁ Ａ① and a trailing space ")
def test_detokenize_inverts_tokenize(api, target, text) -> None:
    tokens = api.post_ok("/tokenize", {"model": target.model, "prompt": text, "add_special_tokens": False})["tokens"]
    assert api.post_ok("/detokenize", {"model": target.model, "tokens": tokens})["prompt"] == text


@pytest.mark.req("UTIL-004", "ERROR-001")
@pytest.mark.parametrize("tokens", [[-1], [5, -7, 9]], ids=["only", "middle"])
def test_detokenize_negative_ids_rejected(api, target, tokens) -> None:
    resp = api.post("/detokenize", {"model": target.model, "tokens": tokens})
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("UTIL-005")
def test_models_lists_the_served_model(api, target) -> None:
    resp = api.get("/v1/models")
    assert resp.status_code == 200, resp.text[:300]
    ids = [card["id"] for card in resp.json()["data"]]
    assert target.model in ids, f"{target.model!r} not in {ids}"


@pytest.mark.req("UTIL-006")
def test_health_answers_200(api) -> None:
    resp = api.get("/health")
    assert resp.status_code == 200, resp.text[:300]


@pytest.mark.req("UTIL-007")
def test_version_is_an_object_with_a_version_string(api) -> None:
    """A server without the route fails UTIL-007 itself (not only ERROR-001 for a 404 without the error object), so
    an implementation's missing /version is one cause its expectations can name."""
    resp = api.get("/version", validate=False)
    assert resp.status_code == 200, f"[UTIL-007] GET /version answered {resp.status_code}: {resp.text[:300]!r}"
    check_schema("GET", "/version", resp)
    out = resp.json()
    assert isinstance(out, dict) and isinstance(out.get("version"), str) and out["version"]


@pytest.mark.req("UTIL-008")
def test_model_card_reports_max_model_len(api, target) -> None:
    cards = {card["id"]: card for card in api.get("/v1/models").json()["data"]}
    length = cards.get(target.model, {}).get("max_model_len")
    assert isinstance(length, int) and length >= 1, f"model card has max_model_len {length!r}"
