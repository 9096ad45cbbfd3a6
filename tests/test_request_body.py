"""The frontend's body reader (orjson first, Python's ``json`` for what orjson refuses) reads every body exactly as
``json.loads`` with NaN and Infinity refused: the same value, type for type (``1`` is not ``1.0``, ``-0.0`` keeps
its sign, a 30-digit integer stays an integer), or the same 400 with ``json``'s own message. The oracle is the
standard library, called here, not the reader under test."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenspec.harness.frontend.errors import ApiError
from tokenspec.harness.frontend.request_body import parse_json

SETTINGS = settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


def _oracle(raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", json.loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        return "400", f"JSON decode error: {exc}"
    except RecursionError:
        return "RecursionError", None


def _read(raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", parse_json(raw)
    except ApiError as err:
        assert err.status == 400
        return "400", err.message
    except RecursionError:
        return "RecursionError", None


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (``==`` alone takes ``1 == 1.0 == True`` and ``0.0 == -0.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _check(raw: bytes) -> None:
    want, got = _oracle(raw), _read(raw)
    assert want[0] == got[0] and (_same(want[1], got[1]) if want[0] == "ok" else want[1] == got[1]), (raw, want, got)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**18, 10**19, -(10**19)])
    | st.floats() | st.text(st.characters(codec=None)),  # lone surrogates included
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=5),
    max_leaves=20)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """JSON texts as clients write them (any escaping, spacing, a byte order mark, Python's NaN/Infinity), then
    sometimes damaged: a byte dropped, changed or added."""
    text = json.dumps(draw(VALUES), ensure_ascii=draw(st.booleans()), allow_nan=True,
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        raw = b"\xef\xbb\xbf" + raw
    if raw and draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(raw) - 1))
        edit = draw(st.sampled_from(["drop", "change", "add"]))
        byte = bytes([draw(st.integers(0, 255))])
        raw = raw[:at] + (b"" if edit == "drop" else byte) + raw[at + (edit != "add"):]
    return raw


@SETTINGS
@given(raw=bodies())
def test_generated_bodies_read_as_python_reads_them(raw: bytes) -> None:
    _check(raw)


@SETTINGS
@given(raw=st.binary(max_size=64))
def test_arbitrary_bytes_read_as_python_reads_them(raw: bytes) -> None:
    _check(raw)


@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":2}', b"123456789012345678901234567890", b"-9223372036854775809", b"18446744073709551616",
    b'{"token_ids":[1,2,99999999999999999999]}', b'"12345678901234567890"', b"1e400", b"-1e400", b"1e-400",
    b'"\\ud800"', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b"NaN", b"[Infinity]", b"-Infinity", b"[" * 3000 + b"]" * 3000,
    b"0.30000000000000004", b"2.5e-324", b"1.7976931348623157e308", b'{"a":"\x01"}', b"\x00", b"",
])
def test_edge_cases_read_as_python_reads_them(raw: bytes) -> None:
    _check(raw)
