"""Reading a request body the way every endpoint must: bounded before parsing, JSON only.

413 past the limit (the declared Content-Length is checked first, then bytes are counted while reading, so
an oversized body is refused before any parsing), 400 "Unsupported Media Type" for a non-JSON content type
(as vLLM answers), 400 for bytes that are not JSON or not UTF-8. JSON is read strictly: ``NaN`` and ``Infinity``
are Python's extensions, not JSON (RFC 8259), and are refused like any other bad token.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.requests import Request

from tokenspec.harness.frontend.errors import ApiError, payload_too_large

# Every digit becomes "0": nineteen zeros in a row then mark a number orjson would not read as Python does.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19


async def read_json(request: Request, limit: int) -> Any:
    """The parsed body; 413 past ``limit`` bytes (declared or actually sent), 400 for non-JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise payload_too_large(limit)
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError("Unsupported Media Type: Only 'application/json' is allowed", status=400,
                       err_type="Bad Request")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise payload_too_large(limit)
        chunks.append(chunk)
    return parse_json(b"".join(chunks))


def parse_json(raw: bytes) -> Any:
    """``raw`` read as Python's ``json.loads`` reads it (with NaN and Infinity refused), or a 400.

    orjson reads a derender body's few hundred token ids in a quarter of the time; whatever it refuses (a byte
    order mark, a lone surrogate, an exponent past a float's range, nesting past 1024) is read by ``json``
    instead, which accepts it or names the error as before. orjson turns an integer outside 64 bits into a float,
    so a body with a number of 19 digits or more never reaches it. ``tests/test_request_body.py`` holds both readers
    to one result on generated bodies.
    """
    if _LONG_NUMBER not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"JSON decode error: {exc}", status=400, err_type="Bad Request") from exc


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")
