"""Llama 3.x JSON tool calls (``llama3_json``): ``{"name": ..., "parameters"|"arguments": {...}}`` objects.

The whole-output semantics are vLLM 0.32's ``--tool-call-parser llama3_json``, measured on its render server
(see tests/test_llama3_json_parser.py for the recorded table; specs/parsers.yaml); this is an independent
implementation.

Whole output (``extract``):
- no ``{`` and no ``<|python_tag|>`` in the text: all content, no calls;
- otherwise every ``{`` that is not inside an object already decoded starts a JSON object (decoded with
  Python's ``json``, so NaN/Infinity are accepted and the last duplicate key wins). Each object needs
  ``name`` (a string) and ``arguments`` (preferred) or ``parameters``; one ``{`` that does not decode, or an
  object missing those keys, leaves the WHOLE text as content with no calls. Text around the objects
  (``<|python_tag|>``, ``; `` separators, prose before or after) is dropped: content is null.
- arguments are re-serialised with ``json.dumps(value, ensure_ascii=False)`` (default ", " / ": "
  separators, non-ASCII kept), whatever spelling the model used.
- a ``{`` right after the closing ``}`` of a decoded object is skipped (so ``{...}{...}`` decodes the second
  object's inner braces instead, and usually falls back to content).

Streaming (``feed``) gives, concatenated, exactly the whole-output answer of the same text (STREAM-008,
DERENDER-001), whatever the chunk boundaries. Since a ``{`` anywhere later can turn everything before it
into dropped text, nothing is sent while the text may still parse as tool calls:
- as soon as the text can no longer parse as calls whatever follows (a ``{`` that starts no possible JSON
  object, or a complete object without a string name and arguments/parameters), all of it is content and
  is streamed from then on;
- otherwise the decision waits for the finishing chunk, which carries either all the content or every call
  (id, name and complete arguments in one delta each).
vLLM 0.32's own streaming parser is a different function of the text (it parses only output that starts
with ``{`` or ``<|python_tag|>``); reports/expectations/vllm-0.32.0-cpu.yaml records that deviation.

vLLM 0.34 reads the whole output that way too (``Llama3JsonEngineToolParser``, the frontend's parser from API
generation 0.34; specs/parsers.yaml ``changed``): calls only where the output starts with them.
"""

from __future__ import annotations

import json
from typing import Any

from tokenspec.harness.frontend.parsers.hermes import ToolCallDelta, new_tool_call_id
from tokenspec.harness.frontend.parsers.progress import COUNT, FLAG, TEXT, Resumable

BOT = "<|python_tag|>"
_DECODER = json.JSONDecoder()
_MISSING = object()


# -- can this text still become a JSON object? -------------------------------------------------------------
# A recursive reader of Python's json grammar (NaN, Infinity, -Infinity; no control characters inside
# strings) that raises _Incomplete when the text ends where more could follow and _Invalid on a character
# no continuation can fix.

class _Incomplete(Exception):
    pass


class _Invalid(Exception):
    pass


_WS = " \t\n\r"
_ESCAPES = '"\\/bfnrtu'
_HEX = "0123456789abcdefABCDEF"
_DIGITS = "0123456789"


class _PrefixReader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def peek(self) -> str:
        if self.i >= len(self.text):
            raise _Incomplete
        return self.text[self.i]

    def expect(self, chars: str) -> str:
        ch = self.peek()
        if ch not in chars:
            raise _Invalid(ch)
        self.i += 1
        return ch

    def blank(self) -> None:
        while self.peek() in _WS:
            self.i += 1

    def word(self, word: str) -> None:
        for ch in word:
            self.expect(ch)

    def string(self) -> None:
        self.expect('"')
        while True:
            ch = self.peek()
            self.i += 1
            if ch == '"':
                return
            if ch < " ":
                raise _Invalid("control character in a string")
            if ch == "\\":
                if self.expect(_ESCAPES) == "u":
                    for _ in range(4):
                        self.expect(_HEX)

    def digits(self) -> None:
        self.expect(_DIGITS)
        while self.i < len(self.text) and self.text[self.i] in _DIGITS:
            self.i += 1

    def number(self) -> None:
        """Inside a container, so a number always needs a following character to be finished."""
        if self.peek() == "-":
            self.i += 1
            if self.peek() == "I":
                self.word("Infinity")
                return
        if self.peek() == "0":
            self.i += 1
        else:
            self.digits()
        if self.peek() == ".":
            self.i += 1
            self.digits()
        if self.peek() in "eE":
            self.i += 1
            if self.peek() in "+-":
                self.i += 1
            self.digits()
        self.peek()  # the end of the text may still continue the number

    def value(self) -> None:
        ch = self.peek()
        if ch == '"':
            self.string()
        elif ch == "{":
            self.container("}")
        elif ch == "[":
            self.container("]")
        elif ch in "-0123456789":
            self.number()
        else:
            for word in ("null", "true", "false", "NaN", "Infinity"):
                if word[0] == ch:
                    self.word(word)
                    return
            raise _Invalid(ch)

    def container(self, close: str) -> None:
        self.i += 1
        self.blank()
        if self.peek() == close:
            self.i += 1
            return
        while True:
            if close == "}":
                self.string()
                self.blank()
                self.expect(":")
                self.blank()
            self.value()
            self.blank()
            if self.expect("," + close) == close:
                return
            self.blank()


def _may_become_object(text: str) -> bool:
    """Whether some continuation of ``text`` (which starts with ``{`` and does not decode yet) decodes."""
    try:
        _PrefixReader(text).container("}")
    except _Incomplete:
        return True
    except _Invalid:
        return False
    except RecursionError:
        return True  # undecided: wait for the end of the output
    return True  # complete here: only reached when decoding failed for a reason this reader does not know


# -- the parser --------------------------------------------------------------------------------------------

def _call_of(obj: Any) -> dict[str, str] | None:
    """The tool call a decoded object is, or None when it is not one."""
    name = obj.get("name", _MISSING)
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters", _MISSING)
    if name is _MISSING or args is _MISSING or not isinstance(name, str):
        return None
    try:
        return {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}
    except ValueError:  # circular or otherwise unserialisable: cannot come from json.loads
        return None


def _scan(text: str) -> list[dict[str, str]] | None:
    """The calls of a whole ``text`` (an empty list when there is no object), or None when the text is content."""
    calls: list[dict[str, str]] = []
    decoded_end = -1
    pos = text.find("{")
    while pos != -1:
        if pos > decoded_end:
            try:
                obj, decoded_end = _DECODER.raw_decode(text, pos)  # the absolute end of the object
            except json.JSONDecodeError:
                return None
            call = _call_of(obj)
            if call is None:
                return None
            calls.append(call)
        pos = text.find("{", pos + 1)
    return calls


def _is_content_from(text: str, pos: int, decoded_end: int) -> tuple[bool, int, int]:
    """For a text that may still grow: (it is content whatever follows, where the next scan
    starts, the end of the last decoded object). A scan stops at a ``{`` that does not decode yet and starts there
    next time; everything before it is decided, so each call reads only the undecided object and the new text."""
    pos = text.find("{", pos)
    while pos != -1:
        if pos > decoded_end:
            try:
                obj, end = _DECODER.raw_decode(text, pos)
            except json.JSONDecodeError:
                return not _may_become_object(text[pos:]), pos, decoded_end
            if _call_of(obj) is None:
                return True, pos, decoded_end
            decoded_end = end
        pos = text.find("{", pos + 1)
    return False, len(text), decoded_end


#: What may follow the last object of a 0.34 output besides whitespace: one of Llama's end-of-output tokens.
_OUTPUT_ENDS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")


def _scan_from_start(text: str) -> list[dict[str, str]] | None:
    """vLLM 0.34's reading of a whole output (its parser engine's llama_json): the output starts with ``{`` or
    ``<|python_tag|>``, then tool-call objects joined by ``;`` and whitespace, then at most an end-of-output token;
    anything else (text before the first object, prose after one) leaves the whole text as content (None)."""
    if text.startswith(BOT):
        text = text[len(BOT):]
    elif not text.startswith("{"):
        return None
    calls: list[dict[str, str]] = []
    pos = 0
    while True:
        pos = len(text) - len(text[pos:].lstrip())
        if pos == len(text):
            return calls or None
        try:
            obj, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        call = _call_of(obj) if isinstance(obj, dict) else None
        if call is None:
            return None
        calls.append(call)
        rest = text[pos:].strip()
        if not rest or rest in _OUTPUT_ENDS:
            return calls
        if not rest.startswith(";"):
            return None
        pos = text.index(";", pos) + 1


class Llama3JsonToolParser(Resumable):
    """``extract`` for a whole output, ``feed`` for a stream (one instance per stream, fed every chunk).

    Until the text is decided to be content, a later ``{`` can still turn all of it into calls, so the stream keeps
    it whole; once decided, nothing is kept."""

    MARKERS = (BOT,)  # the bot token is special in Llama 3.1; it must stay in the decoded text
    #: vLLM 0.34's reading (``Llama3JsonEngineToolParser``): calls only from an output that starts with them.
    FROM_START = False
    PROGRESS = {"_text": TEXT, "_is_content": FLAG, "_scan_from": COUNT,
                "_decoded_end": {"type": "integer", "minimum": -1}}

    def __init__(self) -> None:
        self._text = ""  # the undecided text
        self._is_content = False  # decided: the text can no longer parse as tool calls
        self._scan_from = 0
        self._decoded_end = -1

    @classmethod
    def for_request(cls, chat_request: dict[str, Any], reasoning: Any) -> Llama3JsonToolParser:
        """The parser of one response (this markup needs nothing of the request)."""
        return cls()

    def extract(self, text: str) -> tuple[str | None, list[dict[str, str]]]:
        """(content, [{"name", "arguments"}]) for a whole output."""
        if self.FROM_START:
            calls = _scan_from_start(text)
            return (None, calls) if calls else (text, [])
        if BOT not in text and "{" not in text:
            return text, []
        calls = _scan(text)
        if not calls:
            return text, []
        return None, calls

    def feed(self, delta: str, finished: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """Add streamed content text; return (content to send now, tool-call deltas)."""
        if self._is_content:
            return delta, []
        self._text += delta
        if not finished and self.FROM_START:
            self._is_content = not (self._text.startswith(("{", BOT)) or BOT.startswith(self._text))
        elif not finished:
            self._is_content, self._scan_from, self._decoded_end = _is_content_from(
                self._text, self._scan_from, self._decoded_end)
        else:
            content, calls = self.extract(self._text)
            if calls:
                self._text = ""
                return "", [ToolCallDelta(i, id=new_tool_call_id(), name=c["name"], arguments=c["arguments"])
                            for i, c in enumerate(calls)]
            self._is_content = True
        if not self._is_content:
            return "", []
        text, self._text = self._text, ""
        return text, []


class Llama3JsonEngineToolParser(Llama3JsonToolParser):
    """``llama3_json`` as vLLM 0.34 reads it (an adapter of its parser engine): calls only where the output starts
    with ``{`` or ``<|python_tag|>`` (``_scan_from_start``); a stream is content as soon as it cannot start so."""

    FROM_START = True
