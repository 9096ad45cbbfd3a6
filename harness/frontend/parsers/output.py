"""The configured parsers composed: decoded output text -> content, reasoning and tool calls.

Reasoning is split off first; the remaining content goes to the tool parser when the request allows tool
calls (it has ``tools`` and ``tool_choice`` is not "none"), or always for a parser that says it runs without them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenspec.harness.frontend.parsers.hermes import HermesToolParser, ToolCallDelta, new_tool_call_id
from tokenspec.harness.frontend.parsers.progress import InvalidProgress
from tokenspec.harness.frontend.parsers.think import ThinkReasoningParser


@dataclass
class ParsedMessage:
    content: str | None
    reasoning: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StreamDelta:
    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)


class OutputParser:
    """One request's parsers; build one per response, or per streamed chunk resumed from the carried progress."""

    def __init__(self, reasoning_cls: type[ThinkReasoningParser] | None,
                 tool_cls: type[HermesToolParser] | None, chat_request: dict[str, Any]) -> None:
        kwargs = chat_request.get("chat_template_kwargs") or {}
        self.reasoning = reasoning_cls(kwargs) if reasoning_cls is not None else None
        self.calls_on = bool(chat_request.get("tools")) and chat_request.get("tool_choice") != "none"
        # A parser that edits content even where no call may be made (Gemma 4's removes call markup) runs then too,
        # and its calls are dropped.
        runs = tool_cls is not None and (self.calls_on or getattr(tool_cls, "RUNS_WITHOUT_TOOLS", False))
        self.tools = tool_cls.for_request(chat_request, reasoning_cls) if runs else None

    def progress(self) -> dict[str, Any]:
        """What a stream needs to continue on the next call (STREAM-019): the parsers' modes and undecided text."""
        return {"reasoning": self.reasoning.progress() if self.reasoning else None,
                "tools": self.tools.progress() if self.tools is not None else None}

    def resume(self, saved: Any) -> None:
        """Continue from a ``progress()`` of the same request's parsers; InvalidProgress when it cannot be one."""
        if not isinstance(saved, dict) or set(saved) != {"reasoning", "tools"}:
            raise InvalidProgress("parser progress must be an object with reasoning and tools")
        for part, name in ((self.reasoning, "reasoning"), (self.tools, "tools")):
            if (part is None) != (saved[name] is None):
                raise InvalidProgress(f"parser progress has {'no' if saved[name] is None else 'a'} {name} part "
                                      "where this request's parsers have the opposite")
            if part is not None:
                part.resume(saved[name])

    def parse(self, text: str) -> ParsedMessage:
        reasoning, content = self.reasoning.split(text) if self.reasoning else (None, text)
        calls: list[dict[str, Any]] = []
        if self.tools is not None and content is not None:
            content, found = self.tools.extract(content)
            calls = [{"id": new_tool_call_id(), "type": "function", "function": f} for f in found if self.calls_on]
            if calls and content is not None and not content.strip():
                content = None
        return ParsedMessage(content=content or None, reasoning=reasoning, tool_calls=calls)

    def feed(self, delta: str, finished: bool = False) -> StreamDelta:
        """Streamed text in; what may be sent now out. ``finished`` flushes held-back tails."""
        reasoning, content = self.reasoning.feed(delta, finished) if self.reasoning else ("", delta)
        if self.tools is None:
            return StreamDelta(reasoning=reasoning, content=content)
        content, calls = self.tools.feed(content, finished)
        return StreamDelta(reasoning=reasoning, content=content, tool_calls=calls if self.calls_on else [])
