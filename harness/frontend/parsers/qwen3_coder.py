"""Qwen3-Coder / Qwen3.5 XML tool calls (``qwen3_coder``), as vLLM 0.32's parser splits a whole output.

The markup::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

An independent implementation of the rules ``specs/parsers.yaml`` records from vLLM 0.32 (rows ``*+qwen3_coder``,
shapes ``xml-*``), read as a small machine over the literal markers ``<tool_call>``, ``</tool_call>``,
``<function=``, ``</function>``, ``<parameter=``, ``</parameter>`` and ``>``:

- text before the first call is content; a call starts at ``<tool_call>`` or at a bare ``<function=``; its name is
  the text up to the first ``>`` (stripped; an empty name drops the call); everything up to ``</function>`` (or
  the end of the output) is its argument text, ``</tool_call>`` included; text between ``<tool_call>`` and
  ``<function=`` and after ``</function>`` is dropped; ``</tool_call>`` after ``</function>`` returns to content;
- each ``<parameter=KEY>VALUE`` ends at ``</parameter>`` or at the next ``<parameter=``; a last one that does
  neither is dropped; a value loses exactly one leading and one trailing newline; a repeated key keeps its first
  place and its last value;
- values are text, converted by the declared type of the key in the request's tool of that name (no tool, no
  conversion): null, integer, number, boolean, object, array, string tried in that order (``_as_declared``);
- once any call has a name, content is the text before the first call, stripped; otherwise the text around the
  calls is all content; whitespace-only content is none;
- with a reasoning parser configured, ``</think>`` is deleted (vLLM's engine swallows it after reasoning);
  without one it is plain text, like ``<think>``;
- where the reasoning parser is not one of vLLM's engine-based ones (deepseek_r1), output with no call is left
  exactly as it came, markup and all.

Streaming (``feed``) gives, concatenated, exactly the whole answer (DERENDER-001, STREAM-008): content is sent
while no call can have started, without the whitespace the end might strip; the calls and the rest of the content
come with the finishing chunk. vLLM 0.32's own stream is a different function of the text (it streams the text
after a call and unconverted values); its expectations file records that deviation.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from tokenspec.harness.frontend.parsers.hermes import ToolCallDelta, new_tool_call_id
from tokenspec.harness.frontend.parsers.markup import partial_suffix
from tokenspec.harness.frontend.parsers.progress import FLAG, TEXT, Resumable

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNCTION_START, FUNCTION_END = "<function=", "</function>"
PARAMETER_START, PARAMETER_END = "<parameter=", "</parameter>"
THINK_END = "</think>"
_MARKERS = (TOOL_START, TOOL_END, FUNCTION_START, FUNCTION_END, PARAMETER_START, PARAMETER_END, THINK_END, ">")
_LEXER = re.compile("|".join(re.escape(m) for m in _MARKERS))
_PARAMETER = re.compile(r"<\s*parameter\s*=\s*([^>]*)>(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s*=))",
                        re.DOTALL)
_NAME_IN_ARGS = re.compile(r'"name"\s*:\s*"([^"]*)"')


@dataclass
class _Call:
    raw_name: str = ""
    raw_args: str = ""

    def name(self) -> str:
        name = self.raw_name.strip()
        if not name:
            found = _NAME_IN_ARGS.search(self.raw_args)
            name = found.group(1) if found else ""
        return name


@dataclass
class _Scan:
    """One pass over the text: content before and after the first call, and the calls' raw parts."""

    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)


def _scan(text: str, drop_think_end: bool) -> _Scan:
    scan = _Scan()
    state = "content"
    pos = 0
    for match in (*_LEXER.finditer(text), None):
        gap = text[pos: match.start() if match else len(text)]
        if gap:
            _text(scan, state, gap)
        if match is None:
            break
        pos = match.end()
        marker = match.group()
        if marker == THINK_END and drop_think_end:
            continue
        if state == "content" and marker in (TOOL_START, FUNCTION_START):
            scan.calls.append(_Call())
            state = "preamble" if marker == TOOL_START else "name"
        elif state == "preamble" and marker == TOOL_END:
            state = "content"
        elif state == "preamble" and marker == FUNCTION_START:
            state = "name"
        elif state == "name" and marker == ">":
            state = "args"
        elif state in ("name", "args") and marker == FUNCTION_END:
            state = "between"
        elif state == "between" and marker == TOOL_END:
            state = "content"
        elif state == "between" and marker in (TOOL_START, FUNCTION_START):
            scan.calls.append(_Call())
            state = "preamble" if marker == TOOL_START else "name"
        else:
            _text(scan, state, marker)
    return scan


def _text(scan: _Scan, state: str, text: str) -> None:
    if state == "content":
        (scan.after if scan.calls else scan.before).append(text)
    elif state == "name":
        scan.calls[-1].raw_name += text
    elif state == "args":
        scan.calls[-1].raw_args += text
    # preamble and between: dropped


def _trim_newlines(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _parameters(raw_args: str) -> dict[str, Any]:
    return {m.group(1): _trim_newlines(m.group(2)) for m in _PARAMETER.finditer(raw_args)}


def _declared_types(schema: Any) -> set[str]:
    """The JSON types a property schema allows: ``type``, the kinds of its ``enum`` values, and the same of each
    ``anyOf``/``oneOf``/``allOf`` branch; a schema that says none allows a string."""
    if not isinstance(schema, dict):
        return {"string"}
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else {t for t in declared if isinstance(t, str)} if isinstance(
        declared, list) else set()
    for value in schema.get("enum") or [] if isinstance(schema.get("enum"), list) else []:
        types.add(_kind(value))
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for branch in schema[key]:
                types |= _declared_types(branch)
    return types or {"string"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, cls in (("integer", int), ("number", float), ("string", str), ("array", list), ("object", dict)):
        if isinstance(value, cls):
            return kind
    return "string"


_ALIASES = {**dict.fromkeys(("str", "text", "varchar", "char", "enum"), "string"),
            **dict.fromkeys(("int", "int32", "int64", "uint", "uint32", "uint64", "long", "short", "unsigned"),
                            "integer"),
            **dict.fromkeys(("float", "float32", "float64", "double"), "number"),
            "bool": "boolean", "dict": "object", **dict.fromkeys(("arr", "list", "sequence"), "array")}
_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")
_NO = object()


def _finite_json(text: str) -> Any:
    try:
        value = json.loads(text)
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return _NO
    return value


def _as_declared(value: str, types: set[str]) -> Any:
    """The text of one parameter as the first of its declared types it reads as; JSON, else the text."""
    names = {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for kind in _ORDER:
        if kind not in names:
            continue
        if kind == "null" and value.lower() == "null":
            return None
        if kind == "string":
            return value
        if kind == "integer":
            try:
                return int(value)
            except ValueError:
                continue
        if kind == "number":
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                return int(number) if number == int(number) else number
        if kind == "boolean" and value.strip().lower() in ("true", "1", "false", "0"):
            return value.strip().lower() in ("true", "1")
        if kind in ("object", "array") and (parsed := _finite_json(value)) is not _NO:
            return parsed
    parsed = _finite_json(value)
    return value if parsed is _NO else parsed


class Qwen3CoderToolParser(Resumable):
    """Extracts XML tool calls from content text; ``feed`` is the streaming form.

    The stream keeps only the text it has not sent: a whitespace tail until a call starts, then the text from there
    to the end (the whole answer reads the calls, and strips the content around them, only at the end)."""

    PROGRESS = {"_mode": {"enum": ["open", "held"]}, "_pending": TEXT, "_sent_any": FLAG}

    MARKERS = (TOOL_START, TOOL_END)  # texts the parser must see, even when they are special tokens

    def __init__(self, tools: list[dict[str, Any]] | None = None, reasoning_configured: bool = False,
                 engine_based: bool = True) -> None:
        self.properties = {}
        for tool in tools or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                params = function.get("parameters")
                props = params.get("properties") if isinstance(params, dict) else None
                self.properties.setdefault(function["name"], props if isinstance(props, dict) else {})
        self.drop_think_end = reasoning_configured
        self.engine_based = engine_based
        self._mode = "open"  # "held" once a call starts, or where the content starts with whitespace
        self._pending = ""  # the text not sent yet
        self._sent_any = False  # content has been sent (it began with no whitespace and held no call)

    @classmethod
    def for_request(cls, chat_request: dict[str, Any], reasoning: Any) -> Qwen3CoderToolParser:
        """The parser of one response: the request's tools type the values; the reasoning parser (a class or
        None) decides what happens to ``</think>`` and to content without calls."""
        return cls(chat_request.get("tools"), reasoning is not None, getattr(reasoning, "ENGINE_BASED", True))

    def _arguments(self, name: str, raw_args: str) -> str:
        values = _parameters(raw_args)
        properties = self.properties.get(name) or {}
        for key, value in values.items():
            if isinstance(properties.get(key), dict):
                values[key] = _as_declared(value, _declared_types(properties[key]))
        return json.dumps(values, ensure_ascii=False)

    def extract(self, text: str, after_content: bool = False) -> tuple[str | None, list[dict[str, str]]]:
        """(content, [{"name", "arguments"}]) for a whole output; ``after_content``: for the rest of one whose
        content so far (sent while streaming) was non-empty, began with no whitespace and held no call, so that
        only the rest's right end is stripped."""
        scan = _scan(text, self.drop_think_end)
        calls = [{"name": name, "arguments": self._arguments(name, call.raw_args)}
                 for call in scan.calls if (name := call.name())]
        if not calls and not self.engine_based:
            return text, []
        named = any(call.raw_name or call.name() for call in scan.calls)
        content = "".join(scan.before) if named else "".join(scan.before + scan.after)
        if calls:
            content = content.rstrip() if after_content else content.strip()
        elif scan.calls and not content.strip() and not after_content:
            content = ""
        return content or None, calls

    def feed(self, delta: str, finished: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """Add streamed content text; return (content to send now, tool-call deltas).

        Until a call starts, the content is sent as it comes, less its trailing whitespace (calls strip it) and a
        tail that may become a marker; only that unsent tail is kept. Text that starts with whitespace may lose it,
        and a call decides the text after it only at the end, so from either on the text is kept until it ends."""
        text = self._pending + delta
        if finished:
            self._pending = ""
            content, calls = self.extract(text, after_content=self._sent_any)
            deltas = []
            for index, call in enumerate(calls):
                deltas += [ToolCallDelta(index, id=new_tool_call_id(), name=call["name"]),
                           ToolCallDelta(index, arguments=call["arguments"])]
            return content or "", deltas
        if self._mode == "held":
            self._pending = text
            return "", []
        body = text[: len(text) - max(partial_suffix(text, m) for m in (TOOL_START, FUNCTION_START, THINK_END))]
        # Beside a reasoning parser that is not engine-based, a </think> in the content is deleted if a call follows
        # and kept if none does: undecided until the end.
        undecided = body.find(THINK_END) if self.drop_think_end and not self.engine_based else -1
        if undecided >= 0:
            body = body[:undecided]
        scan = _scan(body, self.drop_think_end)
        before = "".join(scan.before)
        if scan.calls or (not self._sent_any and before[:1].isspace()):
            self._mode, self._pending = "held", text
            return "", []
        cut = len(body)  # after the last character that is neither whitespace nor part of a deleted </think>
        while cut:
            if body[cut - 1].isspace():
                cut -= 1
            elif self.drop_think_end and body[:cut].endswith(THINK_END):
                cut -= len(THINK_END)
            else:
                break
        self._pending = text[cut:]
        if undecided >= 0:
            self._mode = "held"
        sendable = before.rstrip()
        self._sent_any = self._sent_any or bool(sendable)
        return sendable, []
