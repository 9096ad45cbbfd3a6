"""The compiled validator (jsonschema-rs) and jsonschema give the same verdict on every body the suite generates:
schemathesis' positive and negative cases of every request schema, and arbitrary JSON, through the spec's
request schemas and the frontend's own shapes. A difference would make the fast path accept what the spec refuses
(or the reverse), so it is a failure here, never a tolerance."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_openapi_tools import GENERATOR_LIMITS

from tokenspec.harness.frontend import validation
from tokenspec.specs.openapi import SpecValidator, request_schema
from tokenspec.suite.test_fuzz import OPERATIONS, _operation

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.sampled_from([0, 1, -1, 1.0, 2.5, "", "model", "messages", "token_ids", "tokens", 2**63, 2**64]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["model", "messages", "prompt", "tokens", "token_ids", "sampling_params", "generate_response",
                         "choices", "index", "finish_reason", "role", "content", "max_tokens", "stream", "n", "x"]),
        inner, max_size=5),
    max_leaves=12)
SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
BODIES = [(path, method) for document, method, path, mode in OPERATIONS if mode == "negative"]


def _same(validator: SpecValidator, body: object) -> None:
    try:
        compiled = validator.compiled.is_valid(body)
    except (ValueError, TypeError, OverflowError):
        return  # SpecValidator answers these with jsonschema itself
    assert compiled == validator.python.is_valid(body), f"jsonschema-rs says {compiled} for {body!r}"


@pytest.mark.parametrize("mode", ["positive", "negative"])
@pytest.mark.parametrize("path,method", BODIES, ids=[f"{m} {p}" for p, m in BODIES])
def test_generated_cases_get_the_same_verdict(path, method, mode) -> None:
    from schemathesis import GenerationMode
    from schemathesis.core.errors import InvalidSchema

    document = next(d for d, m, p, _ in OPERATIONS if (p, m) == (path, method))
    validator = request_schema(path, method.lower())

    @SETTINGS
    @given(case=_operation(document, method, path).as_strategy(generation_mode=GenerationMode(mode)))
    def check(case) -> None:
        _same(validator, case.body)

    try:
        check()
    except InvalidSchema as exc:  # the generator's limit on some draws (see suite/test_fuzz.py), not a verdict
        assert any(limit in str(exc) for limit in GENERATOR_LIMITS), exc


@pytest.mark.parametrize("path,method", BODIES, ids=[f"{m} {p}" for p, m in BODIES])
@SETTINGS
@given(body=JSON)
def test_arbitrary_json_gets_the_same_verdict(path, method, body) -> None:
    _same(request_schema(path, method.lower()), body)


SHAPES = {name: value for name, value in vars(validation).items()
          if name.isupper() and isinstance(value, dict) and value.get("type") == "object"}


@pytest.mark.parametrize("name", sorted(SHAPES))
@SETTINGS
@given(body=JSON)
def test_the_frontend_shapes_get_the_same_verdict(name, body) -> None:
    _same(SpecValidator(SHAPES[name]), body)


def test_the_check_can_fail() -> None:
    """A validator pair that disagrees (the compiled one reading another schema) is caught."""
    pair = SpecValidator({"type": "integer"})
    pair.compiled = SpecValidator({"type": "string"}).compiled
    with pytest.raises(AssertionError, match="jsonschema-rs says"):
        _same(pair, 3)
