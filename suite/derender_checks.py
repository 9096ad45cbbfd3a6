"""The parser-family expectation of a chat derender, shared by the family tests and the golden cases.

The expectation is never the target's own code: it is the row of ``specs/parsers.yaml`` for the parser
configuration the target runs (profile or probe). A failure names the requirement of the field that broke:
content / reasoning / tool calls are DERENDER-001, finish_reason is DERENDER-006.
"""

from __future__ import annotations

from typing import Any

from tokenspec.specs.parser_families import Split, expected, shapes
from tokenspec.suite.builders import TOOL, chat_derender, chat_request, choice, generate_response
from tokenspec.suite.gating import Capabilities, not_tested

CHAT_DERENDER = "/v1/chat/completions/derender"


def configured_split(caps: Capabilities, shape: str, variant: str, text: str | None = None) -> Split:
    """The specified split of ``shape`` (or of ``text`` split as ``shape`` is) for the target's configuration."""
    reasoning, tool = caps.parsers.get("reasoning"), caps.parsers.get("tool")
    unknown = [k for k, v in (("reasoning", reasoning), ("tool", tool)) if v == "unknown"]
    if unknown:
        not_tested(f"the target's {' and '.join(unknown)} parser is not a family specs/parsers.yaml describes"
                   " (declare it with --profile)")
    want = expected(reasoning, tool, shape, variant)
    if want is None:
        not_tested(f"specs/parsers.yaml has no {shape!r} row for {reasoning or 'none'}+{tool or 'none'}")
    if text is None:
        return want
    model = shapes()[shape]
    def swap(value: str | None) -> str | None:
        return text if value == model else value
    return Split(swap(want.content), swap(want.reasoning), want.tool_calls, want.finish_reason)


def derender_request(caps: Capabilities, model: str, variant: str) -> dict[str, Any]:
    """The chat request the table was recorded with: the weather tool iff a tool parser runs."""
    fields: dict[str, Any] = {}
    if caps.parsers.get("tool"):
        fields["tools"] = [TOOL]
    if variant == "thinking-off":
        fields["chat_template_kwargs"] = {"enable_thinking": False}
    return chat_request(model, [{"role": "user", "content": "Weather in Paris?"}], **fields)


def assert_split(api, model: str, caps: Capabilities, ids: list[int], want: Split, variant: str,
                 requirement: str = "DERENDER-001") -> None:
    """Derender ``ids`` and compare field by field; the message names ``requirement`` for the split and
    DERENDER-006 for finish_reason."""
    body = chat_derender(model, generate_response(choice(ids)), chat_request=derender_request(caps, model, variant))
    out = api.post_ok(CHAT_DERENDER, body)["choices"][0]
    diffs = want.differences(out["message"], out["finish_reason"])
    parts = [d for d in diffs if not d.startswith("finish_reason")]
    config = f"{caps.parsers.get('reasoning') or 'none'}+{caps.parsers.get('tool') or 'none'}"
    assert not parts, f"[{requirement}] split differs from {config} ({variant}) in specs/parsers.yaml: " + "; ".join(
        parts)
    assert not diffs, f"[DERENDER-006] {'; '.join(diffs)}"
