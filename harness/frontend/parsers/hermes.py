"""Hermes tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in the content.

Non-streaming: every region is JSON-decoded; ``arguments`` is re-serialised as a JSON string
(``json.dumps``, non-ASCII kept); content is the text before the first ``<tool_call>``. If any region is
not valid JSON the whole text stays content, with no tool calls (what vLLM does).
Streaming: only the unfinished call's text is kept and re-read; the tool name is sent once it is complete,
then the raw argument text is sent as it grows (vLLM streams the model's own spelling, not a re-dump).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from tokenspec.harness.frontend.parsers.markup import partial_suffix
from tokenspec.harness.frontend.parsers.progress import COUNT, FLAG, TEXT, Resumable

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


class HermesToolParser(Resumable):
    """Extracts tool calls from content text; ``feed`` is the streaming form."""

    MARKERS = (TOOL_START, TOOL_END)  # texts the parser must see, even when they are special tokens
    PROGRESS = {"_mode": {"enum": ["content", "calls", "stuck"]}, "_pending": TEXT, "_index": COUNT,
                "_named": FLAG, "_args_sent": COUNT}

    def __init__(self) -> None:
        self._mode = "content"  # then "calls" from the first <tool_call>; "stuck" after a call with no name
        self._pending = ""  # content: a tail that may become <tool_call>; calls: the unfinished call's text
        self._index = 0  # the call being read
        self._named = False  # its name has been sent
        self._args_sent = 0  # characters of its argument text sent

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
        """Add streamed content text; return (plain content to send, tool-call deltas).

        Content is the text before the first ``<tool_call>``; after it, calls are read one at a time and only the
        unfinished one's text is kept (a later call cannot start before this one has its name)."""
        text = self._pending + delta
        content = ""
        if self._mode == "content":
            start = text.find(TOOL_START)
            if start < 0:
                hold = 0 if finished else partial_suffix(text, TOOL_START)
                self._pending = text[len(text) - hold:]
                return text[: len(text) - hold], []
            content, text, self._mode = text[:start], text[start:], "calls"
        deltas: list[ToolCallDelta] = []
        while self._mode == "calls":
            start = text.find(TOOL_START)
            if start < 0:  # text between calls is dropped
                text = text[len(text) - partial_suffix(text, TOOL_START):]
                break
            text = text[start:]
            end = text.find(TOOL_END, len(TOOL_START))
            if end >= 0:
                body, complete = text[len(TOOL_START): end].strip(), True
            else:
                raw = text[len(TOOL_START):]
                body = raw[: len(raw) - partial_suffix(raw, TOOL_END)].strip()
                complete = bool(body) and _is_complete_json(body)
            if not self._named:
                name = _NAME.search(body)
                if name is None:
                    if end >= 0:  # a finished call without a name: no later call is ever read
                        self._mode, text = "stuck", ""
                    break
                self._named = True
                deltas.append(ToolCallDelta(self._index, id=new_tool_call_id(), name=name.group(1)))
            args = self._arguments_text(body, complete)
            if args is not None and len(args) > self._args_sent:
                deltas.append(ToolCallDelta(self._index, arguments=args[self._args_sent:]))
                self._args_sent = len(args)
            if end < 0:
                break
            text = text[end + len(TOOL_END):]
            self._index, self._named, self._args_sent = self._index + 1, False, 0
        self._pending = text if self._mode == "calls" else ""
        return content, deltas
