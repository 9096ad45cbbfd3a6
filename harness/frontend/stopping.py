"""What of the generated tokens a client sees as text, given why generation stopped.

The engine returns every generated id, including the stop token and the token that completed a stop
string; a standard serve never shows those in ``content``/``text``. Derender must reproduce that from the
ids plus ``finish_reason``/``stop_reason`` (DERENDER-022, DERENDER-024), or a split deployment answers
differently from a coupled one. A host that reports no ``stop_reason`` (older generate hosts never do) still
stopped for a reason the request names: from vLLM 0.33 derender infers it the way the engine's stop check
does, from the request's ``stop_token_ids`` and ``stop`` strings (DERENDER-030).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def include_stop(request: dict[str, Any] | None) -> bool:
    return bool((request or {}).get("include_stop_str_in_output"))


def stop_strings(request: dict[str, Any] | None) -> list[str]:
    """The request's ``stop`` as a list of non-empty strings, as sampling parameters normalise it."""
    stop = (request or {}).get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    return [s for s in stops if isinstance(s, str) and s]


@dataclass(frozen=True)
class Stop:
    """Why one choice stopped, settled: the ids that are text, the stop_reason to report, and the stop strings
    the text is cut at."""

    ids: list[int]
    reason: int | str | None
    strings: list[str]


def settle(ids: list[int], choice: dict[str, Any], request: dict[str, Any] | None, special_ids: frozenset[int],
           eos_ids: frozenset[int], primary_eos: int | None) -> Stop:
    """Drop a final EOS or stop token (unless the request keeps it), and name the stop reason a host left out.

    A reported int names the stop token; a reported string is the stop string to cut at. With none reported and
    ``finish_reason`` stop (its default), a final id in the request's ``stop_token_ids`` or among the model's EOS
    ids other than the primary one becomes the reason, and the request's stop strings are the ones to cut at."""
    reported = choice.get("stop_reason")
    if choice.get("finish_reason", "stop") != "stop":
        return Stop(ids, reported, [])
    keep = include_stop(request)
    if isinstance(reported, str):
        return Stop(ids, reported, [reported])
    if isinstance(reported, int):
        return Stop(ids if keep or not ids or ids[-1] != reported else ids[:-1], reported, [])
    if not ids:
        return Stop(ids, None, stop_strings(request))
    last = ids[-1]
    honor_eos = not (request or {}).get("ignore_eos")
    reason: int | None = None
    if last in ((request or {}).get("stop_token_ids") or ()) or (
            honor_eos and last in eos_ids and last != primary_eos):
        reason, stopped = last, True
    else:
        stopped = honor_eos and last in special_ids
    return Stop(ids[:-1] if stopped and not keep else ids, reason, stop_strings(request))


def cut(text: str, new_chars: int, stop: Stop, keep: bool) -> tuple[str, int | str | None]:
    """``text`` ended at the stop string that completes earliest within its last ``new_chars`` characters (those
    past ``min_tokens``; ties go to the request's order), and the stop_reason then reported."""
    best: tuple[int, int, str] | None = None
    for string in stop.strings:
        at = text.find(string, max(len(text) - new_chars - len(string) + 1, 0))
        if at >= 0 and (best is None or at + len(string) < best[0] + len(best[2])):
            best = (at, at + len(string), string)
    if best is None:
        return text, stop.reason
    at, end, string = best
    return text[:end] if keep else text[:at], string


def hold_back(text: str, request: dict[str, Any] | None, past_min_tokens: bool = True) -> tuple[str, str]:
    """Split a chunk's text before the stream's end into what may be sent now and what must wait: everything from
    a stop string already whole (the engine stops there, and the last chunk settles the cut and the stop_reason;
    not while the output is still within min_tokens, where the engine ignores one), else the tail that could still
    begin one. Held with include_stop_str_in_output too, so the last chunk can name a stop string the host did not
    report."""
    stops = stop_strings(request)
    if not stops:
        return text, ""
    whole = [(at + len(s), at) for s in stops if past_min_tokens and (at := text.find(s)) >= 0]
    at = min(whole)[1] if whole else max(len(text) - max(len(s) for s in stops) + 1, 0)
    return text[:at], text[at:]


def top_logprobs_wanted(request: dict[str, Any] | None, chat: bool) -> int | None:
    """How many alternatives per position the client asked for (None: keep what the engine sent)."""
    request = request or {}
    value = request.get("top_logprobs") if chat else request.get("logprobs")
    if chat and request.get("logprobs") and value is None:
        return 0
    return value if isinstance(value, int) and value >= 0 else None
