"""What of the generated tokens a client sees as text, given why generation stopped.

The engine returns every generated id, including the stop token and the token that completed a stop
string; a standard serve never shows those in ``content``/``text``. Derender must reproduce that from the
ids plus ``finish_reason``/``stop_reason`` (DERENDER-022, DERENDER-024), or a split deployment answers
differently from a coupled one. vLLM 0.32's own derender does neither (see the committed vLLM report).
"""

from __future__ import annotations

from typing import Any


def include_stop(request: dict[str, Any] | None) -> bool:
    return bool((request or {}).get("include_stop_str_in_output"))


def text_ids(ids: list[int], choice: dict[str, Any], special_ids: frozenset[int], keep_stop: bool) -> list[int]:
    """``ids`` without a final EOS or stop token, which ends generation but is never text."""
    if keep_stop or not ids or choice.get("finish_reason") != "stop":
        return ids
    reason = choice.get("stop_reason")
    if (reason is None and ids[-1] in special_ids) or (isinstance(reason, int) and ids[-1] == reason):
        return ids[:-1]
    return ids


def cut_at_stop_string(text: str, stop_reason: Any, keep_stop: bool) -> str:
    """Text up to the first occurrence of the matched stop string (the engine stops right there)."""
    if not isinstance(stop_reason, str) or not stop_reason:
        return text
    at = text.find(stop_reason)
    if at < 0:
        return text
    return text[: at + len(stop_reason)] if keep_stop else text[:at]


def holdback(request: dict[str, Any] | None) -> int:
    """Characters a stream must hold back so a stop string split across chunks is never emitted."""
    stop = (request or {}).get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if include_stop(request) or not stops:
        return 0
    return max(len(s) for s in stops) - 1


def top_logprobs_wanted(request: dict[str, Any] | None, chat: bool) -> int | None:
    """How many alternatives per position the client asked for (None: keep what the engine sent)."""
    request = request or {}
    value = request.get("top_logprobs") if chat else request.get("logprobs")
    if chat and request.get("logprobs") and value is None:
        return 0
    return value if isinstance(value, int) and value >= 0 else None
