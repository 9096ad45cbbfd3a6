"""Llama 3.x JSON tool calls (``llama3_json``): ``{"name": ..., "parameters"|"arguments": {...}}`` objects.

Behaviour is vLLM 0.32's ``--tool-call-parser llama3_json``, measured on its render server (see
tests/test_llama3_json_parser.py for the recorded table); this is an independent implementation.

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

Streaming (``feed``) is NOT the same function of the text; it follows vLLM's streaming state machine:
- the accumulated text must start with ``<|python_tag|>`` or ``{`` (no leading space), otherwise each delta
  is passed through as content (so "Sure. {...}" streams as content, while the whole output parses a call);
- after the optional ``<|python_tag|>``, the text is read as partial JSON objects separated by exactly two
  characters (meant to be ``; ``); anything unparsable makes the chunk emit nothing;
- a call's name is sent (with a fresh id) once complete, on a chunk AFTER the one where the call first
  appeared; argument text is sent as the common prefix of successive ``json.dumps`` of the partial
  arguments, and the rest when the object is complete; empty arguments (``{}``) are never streamed;
- on the finishing chunk, if that chunk carries a tool-call delta, the last call's unsent argument text
  is appended to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tokenspec.harness.frontend.parsers.hermes import ToolCallDelta, new_tool_call_id

BOT = "<|python_tag|>"
_SEPARATOR_LEN = len("; ")
_DECODER = json.JSONDecoder()


class _Unparsable(Exception):
    """The partial-JSON reader cannot make a value of this text (the chunk then emits nothing)."""


# -- partial JSON ------------------------------------------------------------------------------------------
# A prefix of a JSON text is read as the value it would be if it were closed now: an unfinished string is
# closed (or, when strings may not be partial, the unfinished key/value pair is dropped), a pair without a
# value is dropped, trailing "." "e" "+" "-" of a number are cut, "tr"/"nul"/"fa"/"Inf"/"Na" become the
# literal, and open arrays/objects are closed. Readers return (end, closing) where the completed text is
# text[start:end] + closing and closing is None for a finished value, or None when nothing is usable.

_BLANK = frozenset(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0")
_NUMBER_CHARS = frozenset("0123456789.-+eE")
_NUMBER_TAIL = frozenset(".-+eE")
_LITERALS = ("null", "true", "false", "Infinity")


def _skip_blank(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _backslashes_before(text: str, i: int) -> int:
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n


def _read_string(text: str, start: int, partial_strings: bool) -> tuple[int, str | None] | None:
    # An unfinished string runs to the end of the text; vLLM's reader drops its trailing whitespace.
    limit = len(text.rstrip())
    i = start + 1
    while i < limit:
        ch = text[i]
        if ch == "\\":
            if i + 1 == limit:
                break
            i += 2
            continue
        if ch == '"':
            return i + 1, None
        i += 1
    if not partial_strings:
        return None
    i = min(i, limit)
    # Do not leave half an escape sequence before the closing quote.
    for marker, width in (("\\u", 5), ("\\U", 9), ("\\x", 3)):
        at = text.rfind(marker, max(start, i - width), i)
        if at != -1 and _backslashes_before(text, at) % 2 == 0:
            return at, '"'
    return i, '"'


def _read_number(text: str, start: int, top_level: bool) -> tuple[int, str | None]:
    end = start + 1
    while end < len(text) and text[end] in _NUMBER_CHARS:
        end += 1
    cut = end
    while cut > start and text[cut - 1] in _NUMBER_TAIL:
        cut -= 1
    if cut != end or (end == len(text) and not top_level):
        return cut, ""
    return cut, None


def _read_value(text: str, i: int, partial_strings: bool, top_level: bool = False) -> tuple[int, str | None] | None:
    ch = text[i]  # IndexError at the end of the text: the enclosing container stops there
    if ch == '"':
        return _read_string(text, i, partial_strings)
    if ch in "0123456789":
        return _read_number(text, i, top_level)
    if ch in "[{":
        return _read_container(text, i, partial_strings)
    rest = text[i:]
    for word in _LITERALS:
        if rest.startswith(word):
            return i + len(word), None
        if word.startswith(rest):
            return i, word
    if ch == "-":
        if len(rest) == 1:
            return None
        if rest[1] != "I":
            return _read_number(text, i, top_level)
    for word in ("-Infinity", "NaN"):
        if rest.startswith(word):
            return i + len(word), None
        if word.startswith(rest):
            return i, word
    raise _Unparsable(f"unexpected character {ch!r}")


def _read_container(text: str, start: int, partial_strings: bool) -> tuple[int, str | None]:
    is_object = text[start] == "{"
    close = "}" if is_object else "]"
    kept = i = start + 1  # kept: end of the text made of finished members
    try:
        while True:
            i = _skip_blank(text, i)
            if text[i] == close:
                return i + 1, None
            if is_object:
                if text[i] != '"':
                    raise _Unparsable("object key is not a string")
                key = _read_string(text, i, partial_strings)
                if key is None or key[1] is not None:
                    return kept, close
                i = _skip_blank(text, key[0])
                if text[i] != ":":
                    raise _Unparsable("expected ':'")
                i = _skip_blank(text, i + 1)
            value = _read_value(text, i, partial_strings)
            if value is None:
                return kept, close
            if value[1] is not None:
                return value[0], value[1] + close
            kept = i = value[0]
            i = _skip_blank(text, i)
            if text[i] == ",":
                i += 1
            elif text[i] == close:
                return i + 1, None
            else:
                raise _Unparsable(f"expected ',' or {close!r}")
    except IndexError:
        return kept, close


def _open_value_start(text: str) -> int | None:
    """Where the last still-open top-level array/object starts (None when all are closed); brackets inside
    strings do not count, a stray closer is unparsable."""
    stack: list[tuple[int, str]] = []
    in_string = False
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append((i, ch))
        elif ch in "]}":
            if not stack or stack.pop()[1] != ("{" if ch == "}" else "["):
                raise _Unparsable("unbalanced brackets")
        i += 1
    return stack[0][0] if stack else None


def _first_bracket_token(text: str) -> str | None:
    for ch in text:
        if ch in '"[]{}':
            return ch
    return None


def partial_json(text: str, partial_strings: bool) -> tuple[Any, int]:
    """(value, characters consumed) of a possibly unfinished JSON text, as vLLM's streaming parsers read it:
    the completed text if it is one value (consumed: all of ``text``), else the first complete value
    (``raw_decode``, consumed: up to its end). Raises _Unparsable."""
    if _first_bracket_token(text) in (None, '"'):
        stripped = text.strip()
        try:
            result = _read_value(stripped, _skip_blank(stripped, 0), partial_strings, top_level=True)
        except IndexError as exc:
            raise _Unparsable("empty") from exc
        if result is None:
            raise _Unparsable("nothing usable")
        completed = text[: result[0]] + (result[1] or "")  # end counted in the stripped text, as vLLM does
    else:
        open_at = _open_value_start(text)
        completed = text
        if open_at is not None:
            result = _read_value(text, open_at, partial_strings)
            if result is None:
                raise _Unparsable("nothing usable")
            completed = text[: result[0]] + (result[1] or "")
    try:
        return json.loads(completed), len(text)
    except json.JSONDecodeError as exc:
        if "Extra data" not in exc.msg:
            raise _Unparsable(exc.msg) from exc
    try:
        return _DECODER.raw_decode(text)
    except json.JSONDecodeError as exc:
        raise _Unparsable(exc.msg) from exc


def _is_complete_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- the parser --------------------------------------------------------------------------------------------

@dataclass
class Llama3JsonToolParser:
    """``extract`` for a whole output, ``feed`` for a stream (one instance per stream, fed every chunk)."""

    MARKERS = (BOT,)  # the bot token is special in Llama 3.1; it must stay in the decoded text

    _text: str = ""
    _calls: list[Any] = field(default_factory=list)  # the partial objects of the previous chunk
    _current: int = -1
    _name_sent: bool = False
    _args_sent: list[str] = field(default_factory=list)

    def extract(self, text: str) -> tuple[str | None, list[dict[str, str]]]:
        """(content, [{"name", "arguments"}]) for a whole output."""
        if BOT not in text and "{" not in text:
            return text, []
        calls: list[dict[str, str]] = []
        decoded_end = -1
        pos = text.find("{")
        while pos != -1:
            if pos > decoded_end:
                try:
                    obj, length = _DECODER.raw_decode(text, pos)
                except json.JSONDecodeError:
                    return text, []
                decoded_end = length  # raw_decode(text, pos) answers the absolute end
                name = obj.get("name", _MISSING)
                args = obj["arguments"] if "arguments" in obj else obj.get("parameters", _MISSING)
                if name is _MISSING or args is _MISSING or not isinstance(name, str):
                    return text, []
                try:
                    calls.append({"name": name, "arguments": _dump(args)})
                except ValueError:  # circular or otherwise unserialisable: cannot come from json.loads
                    return text, []
            pos = text.find("{", pos + 1)
        if not calls:
            return text, []
        return None, calls

    def _parse_stream_text(self) -> tuple[list[Any], list[bool]]:
        calls: list[Any] = []
        complete: list[bool] = []
        start = len(BOT) if self._text.startswith(BOT) else 0
        while start < len(self._text):
            piece = self._text[start:]
            obj, used = partial_json(piece, partial_strings=self._name_sent)
            complete.append(_is_complete_json(piece[:used]))
            start += used + _SEPARATOR_LEN
            if isinstance(obj, dict) and "parameters" in obj:
                if "arguments" in obj:
                    raise _Unparsable("both parameters and arguments")
                obj["arguments"] = obj["parameters"]
            elif not isinstance(obj, (dict, list, str)):
                raise _Unparsable("not a container")  # vLLM's `in` test fails on numbers, null, booleans
            calls.append(obj)
        return calls, complete

    def _step(self) -> list[ToolCallDelta]:
        """One chunk of vLLM's state machine. Wherever vLLM's parser raises (and its caller swallows the
        error), nothing is sent and the state is left as it was: that is what _Unparsable means here."""
        try:
            return self._advance()
        except (_Unparsable, RecursionError, LookupError, TypeError, ValueError):
            return []  # vLLM's parser catches every exception of a chunk the same way

    def _advance(self) -> list[ToolCallDelta]:
        calls, complete = self._parse_stream_text()
        if not calls:
            return []
        current = calls[self._current]  # index -1 before the first call: the last one, as vLLM does
        deltas: list[ToolCallDelta] = []
        if len(calls) > self._current + 1:
            # A new call has begun: first send what the finished one still owes, then move on.
            if self._current >= 0:
                args = _get(current, "arguments")
                if args:
                    rest = _dump(args)[len(self._args_sent[self._current]):]
                    deltas.append(ToolCallDelta(self._current, arguments=rest))
                    self._args_sent[self._current] += rest
            self._current = len(calls) - 1
            self._name_sent = False
            self._args_sent.append("")
            return deltas  # the previous chunk's objects are NOT remembered on this path
        if not self._name_sent:
            name = _get(current, "name")
            if name:
                if not isinstance(name, str):
                    raise _Unparsable("tool name is not a string")
                deltas.append(ToolCallDelta(self._current, id=new_tool_call_id(), name=name))
                self._name_sent = True
        else:
            args = _get(current, "arguments")
            if args:
                sent = len(self._args_sent[self._current])
                now = _dump(args)
                if self._current >= len(self._calls):
                    raise _Unparsable("no previous objects for this call")
                previous = _get(self._calls[self._current], "arguments")
                diff = None
                if complete[self._current]:
                    diff = now[sent:]
                elif previous:
                    before = _dump(previous)
                    if now != before:
                        diff = _common_prefix(before, now)[sent:]
                if diff is not None:
                    deltas.append(ToolCallDelta(self._current, arguments=diff))
                    self._args_sent[self._current] += diff
        self._calls = calls
        return deltas

    def _unsent_arguments(self) -> str:
        if not self._calls or not isinstance(self._calls[-1], dict):
            return ""
        last = len(self._calls) - 1
        args = self._calls[last].get("arguments", {})
        expected = args if isinstance(args, str) else _dump(args)
        sent = self._args_sent[last] if last < len(self._args_sent) else ""
        return expected[len(sent):] if expected.startswith(sent) else ""

    def feed(self, delta: str, finished: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """Add streamed content text; return (plain content to send, tool-call deltas)."""
        self._text += delta
        if not (self._text.startswith(BOT) or self._text.startswith("{")):
            return delta, []
        deltas = self._step()
        if finished and deltas:
            last = deltas[-1]
            last.arguments = (last.arguments or "") + self._unsent_arguments()
        return "", deltas


_MISSING = object()


def _get(obj: Any, key: str) -> Any:
    """``obj.get(key)`` where vLLM would fail on a non-object."""
    if not isinstance(obj, dict):
        raise _Unparsable("not an object")
    return obj.get(key)
