"""Hermes tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in the content.

Non-streaming: every region is JSON-decoded; ``arguments`` is re-serialised as a JSON string
(``json.dumps``, non-ASCII kept); content is the text before the first ``<tool_call>``. If any region is
not valid JSON the whole text stays content, with no tool calls (what vLLM does).
Streaming: the accumulated content is re-scanned on every chunk; the tool name is sent once it is complete,
then the raw argument text is sent as it grows (vLLM streams the model's own spelling, not a re-dump).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from tokenspec.harness.frontend.parsers.markup import partial_suffix

TOOL_START = "<tool_call>"
TOOL_END = "</tool_call>"
_REGION = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_ARGS_KEY = re.compile(r'"arguments"\s*:\s*')


def new_tool_call_id() -> str:
    return f"chatcmpl-tool-{secrets.token_hex(8)}"


def _is_complete_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass
class ToolCallDelta:
    """One streamed piece of a tool call, in the OpenAI delta shape."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None

    def to_json(self) -> dict[str, Any]:
        first = self.id is not None
        return {"id": self.id, "type": "function" if first else None, "index": self.index,
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class HermesToolParser:
    """Extracts tool calls from content text; ``feed`` is the streaming form."""

    MARKERS = (TOOL_START, TOOL_END)  # texts the parser must see, even when they are special tokens

    _text: str = ""
    _content_sent: int = 0
    _names: list[str | None] = field(default_factory=list)
    _args_sent: list[str] = field(default_factory=list)

    @classmethod
    def for_request(cls, chat_request: dict[str, Any], reasoning: Any) -> HermesToolParser:
        """The parser of one response (this markup needs nothing of the request)."""
        return cls()

    def extract(self, text: str) -> tuple[str | None, list[dict[str, str]]]:
        """(content, [{"name", "arguments"}]) for a whole output."""
        if TOOL_START not in text:
            return text, []
        try:
            calls = []
            for closed, open_ended in _REGION.findall(text):
                obj = json.loads(closed or open_ended)
                calls.append({"name": obj["name"],
                              "arguments": json.dumps(obj["arguments"], ensure_ascii=False)})
        except (ValueError, KeyError, TypeError):
            return text, []
        return text[: text.find(TOOL_START)], calls

    def _regions(self) -> list[tuple[str, bool]]:
        """(json text, complete?) for each <tool_call> region of the accumulated text."""
        regions, pos = [], 0
        while (start := self._text.find(TOOL_START, pos)) != -1:
            body_start = start + len(TOOL_START)
            end = self._text.find(TOOL_END, body_start)
            if end != -1:
                regions.append((self._text[body_start:end].strip(), True))
                pos = end + len(TOOL_END)
                continue
            raw = self._text[body_start:]
            raw = raw[: len(raw) - partial_suffix(raw, TOOL_END)].strip()
            regions.append((raw, bool(raw) and _is_complete_json(raw)))
            break
        return regions

    @staticmethod
    def _arguments_text(body: str, complete: bool) -> str | None:
        key = _ARGS_KEY.search(body)
        if key is None:
            return None
        raw = body[key.end():]
        if complete:
            raw = raw.rstrip()
            if raw.endswith("}"):
                raw = raw[:-1].rstrip()
        return raw

    def feed(self, delta: str, finished: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """Add streamed content text; return (plain content to send, tool-call deltas)."""
        self._text += delta
        if TOOL_START in self._text:
            sendable = self._text.index(TOOL_START)
        elif finished:
            sendable = len(self._text)
        else:
            sendable = len(self._text) - partial_suffix(self._text, TOOL_START)
        content = ""
        if sendable > self._content_sent:
            content = self._text[self._content_sent: sendable]
            self._content_sent = sendable
        deltas: list[ToolCallDelta] = []
        for i, (body, complete) in enumerate(self._regions()):
            if i >= len(self._names):
                self._names.append(None)
                self._args_sent.append("")
            if self._names[i] is None:
                name = _NAME.search(body)
                if name is None:
                    break  # a later call cannot start before this one has its name
                self._names[i] = name.group(1)
                deltas.append(ToolCallDelta(i, id=new_tool_call_id(), name=name.group(1)))
            args = self._arguments_text(body, complete)
            if args is not None and len(args) > len(self._args_sent[i]):
                deltas.append(ToolCallDelta(i, arguments=args[len(self._args_sent[i]):]))
                self._args_sent[i] = args
        return content, deltas
