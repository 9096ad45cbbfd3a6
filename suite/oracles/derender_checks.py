"""The parser-family expectation of a chat derender, shared by the family tests and the golden cases.

The expectation is never the target's own code: it is the row of ``specs/parsers.yaml`` for the parser
configuration the target runs (profile or probe). A failure names the requirement of the field that broke:
content / reasoning / tool calls are DERENDER-001, finish_reason is DERENDER-006.
"""

from __future__ import annotations

from typing import Any

from tokenspec.specs.parser_families import (
    REASONING_FAMILIES,
    TOOL_FAMILIES,
    VARIANTS,
    Split,
    configurations,
    expected_in,
    shapes,
    table_request,
)
from tokenspec.suite.engine.gating import Capabilities, not_tested
from tokenspec.suite.oracles.builders import chat_derender, choice, generate_response

CHAT_DERENDER = "/v1/chat/completions/derender"


def _specified(caps: Capabilities, shape: str, variant: str) -> set[Split | None]:
    """Every split the table specifies for ``shape`` under the configurations the target may run."""
    reasoning, tool = caps.parsers.get("reasoning"), caps.parsers.get("tool")
    # An unknown family (a parser acts, but like none the spec describes) is held to what every described family
    # it may still be (those acting on the markup the target acted on) agrees on for this shape: a derender that
    # moves reasoning into content fails where they all agree.
    specified = configurations()
    reasonings = caps.candidates.get("reasoning") or REASONING_FAMILIES if reasoning == "unknown" else (reasoning,)
    tools = caps.candidates.get("tool") or TOOL_FAMILIES if tool == "unknown" else (tool,)
    options = [(r, t) for r in reasonings for t in tools
               if (r, t) in specified or "unknown" not in (reasoning, tool)]
    return {split for r, t in options for split in expected_in(r, t, shape, variant, caps.generations)}


def tool_call_shapes(caps: Capabilities) -> list[tuple[str, str]]:
    """(shape, variant) pairs the target's configuration specifies, unambiguously, as giving tool calls."""
    out = []
    for shape in shapes():
        for variant in VARIANTS:
            wants = _specified(caps, shape, variant)
            if len(wants) == 1 and (want := next(iter(wants))) is not None and want.tool_calls:
                out.append((shape, variant))
    return out


def configured_split(caps: Capabilities, shape: str, variant: str, text: str | None = None) -> Split:
    """The specified split of ``shape`` (or of ``text`` split as ``shape`` is) for the target's configuration."""
    reasoning, tool = caps.parsers.get("reasoning"), caps.parsers.get("tool")
    wants = _specified(caps, shape, variant)
    if None in wants:
        not_tested(f"specs/parsers.yaml has no {shape!r} row for {reasoning or 'none'}+{tool or 'none'}")
    if len(wants) > 1:
        not_tested(f"the families or the API generations the target may run disagree on {shape!r} (specs/parsers.yaml;"
                   f" generation {' or '.join(caps.generations) or 'unknown'}: declare the parser family and the"
                   " generation with --profile)")
    (want,) = wants
    if text is None:
        return want
    model = shapes()[shape]
    def swap(value: str | None) -> str | None:
        return text if value == model else value
    return Split(swap(want.content), swap(want.reasoning), want.tool_calls, want.finish_reason)


def derender_request(caps: Capabilities, model: str, variant: str) -> dict[str, Any]:
    """The chat request the table was recorded with: its tools iff a tool parser runs."""
    return table_request(model, bool(caps.parsers.get("tool")), variant)


def derender_choice(api, model: str, caps: Capabilities, ids: list[int], variant: str) -> dict[str, Any]:
    """The one choice a chat derender of ``ids`` answers, under the request the table was recorded with."""
    body = chat_derender(model, generate_response(choice(ids)), chat_request=derender_request(caps, model, variant))
    return api.post_ok(CHAT_DERENDER, body)["choices"][0]


def assert_tool_call_ids(message: dict[str, Any]) -> None:
    ids_of_calls = [call.get("id") for call in message.get("tool_calls") or []]
    assert all(isinstance(i, str) and i for i in ids_of_calls) and len(set(ids_of_calls)) == len(ids_of_calls), (
        f"[DERENDER-026] tool call ids must be non-empty and unique: {ids_of_calls}")


def assert_split(api, model: str, caps: Capabilities, ids: list[int], want: Split, variant: str,
                 requirement: str = "DERENDER-001", check_ids: bool = True) -> None:
    """Derender ``ids`` and compare field by field; the message names ``requirement`` for the split,
    DERENDER-026 for tool call ids (unless ``check_ids`` is false) and DERENDER-006 for finish_reason."""
    out = derender_choice(api, model, caps, ids, variant)
    diffs = want.differences(out["message"], out["finish_reason"])
    parts = [d for d in diffs if not d.startswith("finish_reason")]
    config = f"{caps.parsers.get('reasoning') or 'none'}+{caps.parsers.get('tool') or 'none'}"
    assert not parts, f"[{requirement}] split differs from {config} ({variant}) in specs/parsers.yaml: " + "; ".join(
        parts)
    if check_ids:
        assert_tool_call_ids(out["message"])
    assert not diffs, f"[DERENDER-006] {'; '.join(diffs)}"


#: Words of which every tokenizer the suite meets writes at least one as a single ordinary token.
PLAIN_WORDS = (" four", " the", " and", ".", "!", "?", ",", "e")


def plain_token(codec: Any) -> list[int]:
    """One ordinary token's id, as a list: a stop token that is not special, so only the request can make it a
    stop (DERENDER-030)."""
    for word in PLAIN_WORDS:
        ids = codec.encode(word)
        if len(ids) == 1 and ids[0] not in codec.special_ids:
            return list(ids)
    not_tested(f"none of {PLAIN_WORDS} is one ordinary token in this tokenizer")
