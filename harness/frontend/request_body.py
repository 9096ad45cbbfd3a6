"""Reading a request body the way every endpoint must: bounded before parsing, JSON only.

413 past the limit (the declared Content-Length is checked first, then bytes are counted while reading, so
an oversized body is refused before any parsing), 400 "Unsupported Media Type" for a non-JSON content type
(as vLLM answers), 400 for bytes that are not JSON or not UTF-8. JSON is read strictly: ``NaN`` and ``Infinity``
are Python's extensions, not JSON (RFC 8259), and are refused like any other bad token.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from tokenspec.harness.frontend.errors import ApiError, payload_too_large


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
    try:
        return json.loads(b"".join(chunks), parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"JSON decode error: {exc}", status=400, err_type="Bad Request") from exc


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")
