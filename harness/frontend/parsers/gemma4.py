"""Gemma 4 channels and tool calls (``--reasoning-parser gemma4 --tool-call-parser gemma4``), as vLLM 0.32 splits
a whole decoded output (the parser turns ``skip_special_tokens`` off, so the markers are in the text)::

    <|channel>thought
    ...reasoning...<channel|>Answer text
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

An independent implementation of the behaviour recorded in tests/data/gemma4_parser_oracle.json (vLLM 0.32's real
parsers run on a drawn corpus by tests/data/record_gemma4_oracle.py; every recorded answer is matched).
The text is read left to right as literal markers: ``<|channel>``, ``<channel|>``, ``<|tool_call>``,
``<tool_call|>``, the other 19 special tokens of the Gemma 4 tokenizer (``DELETED``: ``<turn|>``, ``<|turn>``,
``<|tool_response>``, ``<eos>``, ...), which are deleted wherever they stand, and, inside a call, ``call:``, ``:``,
``{`` and ``(``. Everything else is text.

Reasoning (``Gemma4ReasoningParser.split``), whatever ``enable_thinking`` says:

- the output starts in content, except that one with no ``<|channel>`` that contains ``<channel|>``, starts with
  ``thought\\n`` or is exactly ``thought`` starts in reasoning (the opener is taken as already written);
- ``<|channel>`` opens reasoning (again: the text between two blocks is content, later blocks add to the same
  reasoning); ``<channel|>`` ends it; a stray ``<channel|>`` in content and a repeated ``<|channel>`` are deleted;
- ``<|tool_call>`` also ends reasoning and stays in the content; a ``<tool_call|>`` stays in the content only as the
  closer of such a call (or, in reasoning, as reasoning text); a stray one in content is deleted;
- reasoning loses its trailing whitespace, then a leading ``thought\\n`` (a bare ``thought`` is no reasoning);
  empty parts are none.

Tool calls (``Gemma4ToolParser.extract``), on that content:

- a call is ``<|tool_call>`` PREAMBLE ``call:`` (or just ``:``) NAME ``{`` (or ``(``) ARGS ``<tool_call|>``; the
  preamble is dropped; a missing closer ends the call at the end of the output; ``<tool_call|>`` right after the
  opener or the name ends an argument-less call; the name is stripped, a call without one is dropped (unless its
  arguments hold a ``"name": "..."``, or are a JSON object naming it); names are not checked against the tools;
- the arguments are Gemma's ``key:value`` list (``_arguments``), every bare value a string, then read by the
  declared type of the key in the request's tool of that name (nested ``properties`` and ``items`` too; no such tool:
  strings stay strings), and written with ``json.dumps(..., ensure_ascii=False)``;
- once any call has a name, content is the text before the first call, stripped, and text after or between calls
  is lost; otherwise all of the text outside calls is content; whitespace-only content is none;
- the content gets the same start-in-reasoning rule, ``<|channel>`` ... ``<channel|>`` inside it is dropped; with no
  reasoning parser configured the channel markers are plain text, and a start-in-reasoning output gets a literal
  ``<|channel>`` in front (what vLLM does).

Streaming (``feed``) gives, concatenated, exactly the whole answer (DERENDER-001, STREAM-008). Reasoning streams once
a ``<|channel>`` has been seen (until then a later ``<channel|>`` could turn the text before it into reasoning),
without trailing whitespace and an undecided ``thought`` prefix; the tool parser sends its content and calls with the
finishing chunk, because a late marker can still change what came before it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tokenspec.harness.frontend.parsers.hermes import ToolCallDelta, new_tool_call_id
from tokenspec.harness.frontend.parsers.markup import partial_suffix
from tokenspec.harness.frontend.parsers.progress import FLAG, TEXT, Resumable
from tokenspec.harness.frontend.parsers.qwen3_coder import _as_declared, _declared_types
from tokenspec.harness.frontend.parsers.think import ThinkReasoningParser

CHANNEL_OPEN, CHANNEL_CLOSE = "<|channel>", "<channel|>"
CALL_OPEN, CALL_CLOSE = "<|tool_call>", "<tool_call|>"
QUOTE = '<|"|>'
THOUGHT = "thought\n"
#: the real Gemma 4 tokenizer's other special tokens: vLLM's engine deletes them from the text in every state
DELETED = ("<bos>", "<eos>", "<unk>", "<pad>", "<mask>", "<|turn>", "<turn|>", "<|tool>", "<tool|>",
           "<|tool_response>", "<tool_response|>", "<|think|>", "<|image>", "<image|>", "<|image|>", "<|audio>",
           "<audio|>", "<|audio|>", "<|video|>")
_MARKUP = (CHANNEL_OPEN, CHANNEL_CLOSE, CALL_OPEN, CALL_CLOSE, *DELETED)
_CALL_WORDS = ("call:", ":", "{", "(")


def _lexer(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))


_MARKUP_LEXER = _lexer(_MARKUP)
_CALL_LEXER = _lexer(_MARKUP + _CALL_WORDS)
_NAME_IN_ARGS = re.compile(r'"name"\s*:\s*"([^"]*)"')


def _pieces(text: str, lexer: re.Pattern[str]) -> list[tuple[str, bool]]:
    """``text`` as (piece, is it a marker) in order."""
    out, pos = [], 0
    for match in lexer.finditer(text):
        if match.start() > pos:
            out.append((text[pos: match.start()], False))
        out.append((match.group(), True))
        pos = match.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def _starts_in_reasoning(text: str) -> bool:
    """Whether an output is read as if ``<|channel>`` came before it."""
    return bool(text) and CHANNEL_OPEN not in text and (
        CHANNEL_CLOSE in text or text.startswith(THOUGHT) or text == THOUGHT.strip())


def _held_tail(text: str) -> int:
    return max(partial_suffix(text, marker) for marker in _MARKUP)


def _channels(text: str, starts_in_reasoning: bool) -> tuple[str, str]:
    """(raw reasoning, content) of the reasoning pass."""
    raw, content, _, _ = _read_channels(text, starts_in_reasoning, False)
    return raw, content


def _read_channels(text: str, thinking: bool, in_call: bool) -> tuple[str, str, bool, bool]:
    """The reasoning pass over ``text`` from the given state: (raw reasoning, content, thinking, in a call)."""
    reasoning: list[str] = []
    content: list[str] = []
    for piece, marker in _pieces(text, _MARKUP_LEXER):
        if not marker:
            (reasoning if thinking else content).append(piece)
        elif piece == CHANNEL_OPEN:
            thinking = True
        elif piece == CHANNEL_CLOSE:
            thinking = False
        elif piece == CALL_OPEN:
            thinking, in_call = False, True
            content.append(piece)
        elif piece == CALL_CLOSE:
            if thinking or in_call:
                (reasoning if thinking else content).append(piece)
            in_call = False
    return "".join(reasoning), "".join(content), thinking, in_call


def _finish_reasoning(raw: str) -> str:
    reasoning = raw.rstrip()
    if reasoning.startswith(THOUGHT):
        return reasoning[len(THOUGHT):]
    return "" if reasoning == THOUGHT.strip() else reasoning


class Gemma4ReasoningParser(ThinkReasoningParser):
    """Splits text into (reasoning, content); ``feed`` gives the same split incrementally."""

    MARKERS = (CHANNEL_OPEN, CHANNEL_CLOSE)  # texts the parser must see, even when they are special tokens
    ENGINE_BASED = True
    TURN_BOUNDARIES = ("<|turn>", "<|tool_response>")

    PROGRESS = {"_mode": {"enum": ["opening", "open"]}, "_pending": TEXT, "_thinking": FLAG, "_in_call": FLAG,
                "_reasoning_held": TEXT, "_prefix_decided": FLAG}

    def __init__(self, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        # enable_thinking does not change the split; it only decides an unmarked prompt (``prompt_left_reasoning``)
        self.thinking = bool((chat_template_kwargs or {}).get("enable_thinking", False))
        self._mode = "opening"  # no <|channel> seen: a later <channel|> may still make the text reasoning
        self._pending = ""  # opening: all the text so far; open: a tail that may still become a marker
        self._thinking = False
        self._in_call = False
        self._reasoning_held = ""  # reasoning not sent yet: an undecided "thought" prefix, trailing whitespace
        self._prefix_decided = False

    def prompt_left_reasoning(self, prompt_ids: list[int], vocab: dict[str, int]) -> bool:
        """Whether generation starts after reasoning (render's ``reasoning_ended``), from the prompt's ids.

        vLLM 0.32: scanning back through the current turn, ``<channel|>`` or ``<|tool_call>`` says ended,
        ``<|channel>`` says not; a turn (``<|turn>``, ``<|tool_response>``) or prompt without either is ended unless
        ``enable_thinking`` is on. So the template's thinking-off prompt (``<|turn>model\\n<|channel>thought\\n
        <channel|>``) is ended and its thinking-on prompt (``<|turn>model\\n``) is not.
        """
        end = vocab.get(CHANNEL_CLOSE)
        ends = {end, vocab.get(CALL_OPEN)} - {None} if end is not None else set()
        start = vocab.get(CHANNEL_OPEN)
        boundaries = {vocab[t] for t in self.TURN_BOUNDARIES if t in vocab}
        for token in reversed(prompt_ids):
            if token in ends:
                return True
            if token == start:
                return False
            if token in boundaries:
                break
        return not self.thinking

    def split(self, text: str) -> tuple[str | None, str | None]:
        """Non-streaming split of a whole output."""
        raw, content = _channels(text, _starts_in_reasoning(text))
        return _finish_reasoning(raw) or None, content or None

    def feed(self, delta: str, finished: bool = False) -> tuple[str, str]:
        """Add streamed text; return (new reasoning, new content) safe to emit now."""
        text = self._pending + delta
        if self._mode == "opening":
            if CHANNEL_OPEN not in text:
                self._pending = "" if finished else text
                if not finished:
                    return "", ""
                reasoning, content = self.split(text)
                return reasoning or "", content or ""
            self._mode = "open"
        hold = 0 if finished else _held_tail(text)
        self._pending = text[len(text) - hold:]
        raw, content, self._thinking, self._in_call = _read_channels(text[: len(text) - hold], self._thinking,
                                                                     self._in_call)
        return self._reasoning(raw, finished), content

    def _reasoning(self, raw: str, finished: bool) -> str:
        """What of the raw reasoning may be sent: never trailing whitespace (the whole answer strips it) nor a
        ``thought`` prefix that may still turn out to be the dropped ``thought\n``."""
        text = self._reasoning_held + raw
        if not self._prefix_decided:
            trimmed = text.rstrip()
            if THOUGHT.strip().startswith(trimmed) and not finished:
                self._reasoning_held = text
                return ""
            self._prefix_decided = True
            if trimmed.startswith(THOUGHT):
                text = text[len(THOUGHT):]
            elif trimmed == THOUGHT.strip():
                text = ""
        sendable = text.rstrip()
        self._reasoning_held = "" if finished else text[len(sendable):]
        return sendable


# -- the key:value argument language ------------------------------------------------------------------------------

_SEPARATORS = " ,\n\t"
_BLANKS = " \n\t"


def _closing(text: str, i: int, opener: str, closer: str) -> tuple[int, bool]:
    """From the opener at ``i``: (index after its closer, or len(text); was it closed). Quoted strings are skipped."""
    depth, j = 1, i + 1
    while j < len(text) and depth:
        if text.startswith(QUOTE, j):
            end = text.find(QUOTE, j + len(QUOTE))
            j = len(text) if end < 0 else end + len(QUOTE)
            continue
        depth += {opener: 1, closer: -1}.get(text[j], 0)
        j += 1
    return j, depth == 0


class _Reader:
    """One pass over Gemma's ``key:value`` text. ``open_ended``: the text was cut off (an unclosed ``{``/``[``), so
    a value that runs into its end is left out, as is a bare value ending in ``.`` or a key with no value."""

    def __init__(self, text: str, open_ended: bool) -> None:
        self.text, self.open_ended, self.i = text, open_ended, 0

    def _skip(self, chars: str) -> None:
        while self.i < len(self.text) and self.text[self.i] in chars:
            self.i += 1

    def _nested(self) -> Any:
        opener = self.text[self.i]
        closer, read = ("}", _Reader.object) if opener == "{" else ("]", _Reader.array)
        end, closed = _closing(self.text, self.i, opener, closer)
        inner = self.text[self.i + 1: end - 1 if closed else end]
        self.i = end
        return read(_Reader(inner, not closed))

    def _bare(self, stops: str) -> str | None:
        """A bare value up to a stop character, stripped; None: end the list here."""
        start = self.i
        while self.i < len(self.text) and self.text[self.i] not in stops:
            self.i += 1
        if self.i == start or (self.open_ended and self.i >= len(self.text)):
            return None
        value = self.text[start: self.i].strip()
        return None if self.open_ended and value.endswith(".") else value

    def object(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        text = self.text
        if not text.strip():
            return out
        while True:
            self._skip(_SEPARATORS)
            colon = text.find(":", self.i)
            if self.i >= len(text) or colon < 0:
                return out
            key = text[self.i: colon].strip()
            if key.startswith(QUOTE) and key.endswith(QUOTE):
                key = key[len(QUOTE): -len(QUOTE)]
            self.i = colon + 1
            self._skip(_BLANKS)
            if self.i >= len(text):
                if not self.open_ended:
                    out[key] = ""
                return out
            if text.startswith(QUOTE, self.i):
                start = self.i + len(QUOTE)
                end = text.find(QUOTE, start)
                if end < 0:
                    value = text[start:]
                    out[key] = value[: len(value) - partial_suffix(value, QUOTE)] if self.open_ended else value
                    return out
                out[key] = text[start:end]
                self.i = end + len(QUOTE)
            elif text[self.i] in "{[":
                out[key] = self._nested()
            else:
                value = self._bare(",}]")
                if value is None:
                    return out
                out[key] = value

    def array(self) -> list[Any]:
        out: list[Any] = []
        text = self.text
        while True:
            self._skip(_SEPARATORS)
            if self.i >= len(text):
                return out
            if text.startswith(QUOTE, self.i):
                start = self.i + len(QUOTE)
                end = text.find(QUOTE, start)
                if end < 0:
                    out.append(text[start:])
                    return out
                out.append(text[start:end])
                self.i = end + len(QUOTE)
            elif text[self.i] in "{[":
                out.append(self._nested())
            else:
                value = self._bare(",]")
                if value is None:
                    return out
                out.append(value)


def _arguments(raw: str) -> dict[str, Any]:
    """A call's argument text (after its ``{``) as a dict of strings, dicts and lists."""
    text = raw.strip()
    if text.endswith("}") or (text.endswith(")") and text.count("(") < text.count(")")):
        text = text[:-1]
    return _Reader(text, False).object()


def _typed(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` read by its property schema: strings by the declared types, objects by ``properties``, lists by
    ``items``."""
    if isinstance(value, str):
        return _as_declared(value, _declared_types(schema))
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        return _typed_object(value, schema["properties"])
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_typed(item, schema["items"]) for item in value]
    return value


def _typed_object(values: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    return {key: _typed(value, properties[key]) if isinstance(properties.get(key), dict) else value
            for key, value in values.items()}


# -- the tool-call pass ----------------------------------------------------------------------------------------


class _Call:
    def __init__(self) -> None:
        self.raw_name = ""
        self.raw_args = ""

    def named(self) -> str:
        """The name vLLM gives the call while parsing: the raw name, else one found in the arguments."""
        if self.raw_name:
            return self.raw_name
        found = _NAME_IN_ARGS.search(self.raw_args)
        return found.group(1) if found else ""


def _scan(text: str, channels_are_markup: bool) -> tuple[str, str, list[_Call]]:
    """(content before the first call, content after it, the calls' raw parts)."""
    if _starts_in_reasoning(text) and not channels_are_markup:
        text = CHANNEL_OPEN + text
    state = "reasoning" if _starts_in_reasoning(text) and channels_are_markup else "content"
    before: list[str] = []
    after: list[str] = []
    calls: list[_Call] = []
    for piece, marker in _pieces(text, _CALL_LEXER):
        if marker and piece in DELETED:
            continue
        if marker and channels_are_markup and state in ("content", "reasoning") and piece in (
                CHANNEL_OPEN, CHANNEL_CLOSE):
            state = "reasoning" if piece == CHANNEL_OPEN else "content"
            continue
        if marker and piece == CALL_OPEN and state in ("content", "reasoning"):
            calls.append(_Call())
            state = "preamble"
        elif marker and piece == CALL_CLOSE and state in ("preamble", "name", "args"):
            state = "content"
        elif marker and piece == CALL_CLOSE and state == "content":
            pass  # a stray closer is deleted
        elif marker and piece in ("call:", ":") and state == "preamble":
            state = "name"
        elif marker and piece in ("{", "(") and state == "name":
            state = "args"
        elif state == "content":
            (after if calls else before).append(piece)
        elif state == "name":
            calls[-1].raw_name += piece
        elif state == "args":
            calls[-1].raw_args += piece
        # reasoning and preamble text: dropped
    return "".join(before), "".join(after), calls


class Gemma4ToolParser(Resumable):
    """Extracts Gemma 4 tool calls from content text; ``feed`` is the streaming form.

    A late marker can change everything before it, so the stream keeps the whole text until it ends."""

    PROGRESS = {"_text": TEXT}

    MARKERS = (CALL_OPEN, CALL_CLOSE, QUOTE)  # texts the parser must see, even when they are special tokens
    #: vLLM runs Gemma 4's tool pass on requests without tools (or with tool_choice "none") too, keeping only its
    #: content: call markup is removed, and text after a call is lost.
    RUNS_WITHOUT_TOOLS = True

    def __init__(self, tools: list[dict[str, Any]] | None = None, reasoning_configured: bool = True,
                 suppressed: bool = False) -> None:
        self.properties: dict[str, Any] = {}
        for tool in tools or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                params = function.get("parameters")
                self.properties.setdefault(function["name"], params.get("properties") if isinstance(params, dict)
                                           else None)
        self.channels_are_markup = reasoning_configured
        #: tool_choice "none" with tools: vLLM still removes the call markup but keeps all other text, unstripped
        self.suppressed = suppressed
        self._text = ""

    @classmethod
    def for_request(cls, chat_request: dict[str, Any], reasoning: Any) -> Gemma4ToolParser:
        """The parser of one response: the request's tools type the values; without a reasoning parser (None)
        the channel markers are plain text. vLLM 0.32 also runs this pass when the request allows no calls (no
        tools, or tool_choice "none"), keeping only its content: ``extract`` then returns no calls."""
        tools = chat_request.get("tools")
        return cls(tools, reasoning is not None, suppressed=bool(tools) and chat_request.get("tool_choice") == "none")

    def _call(self, call: _Call) -> dict[str, str] | None:
        name, body = call.named().strip(), call.raw_args
        if not name and body.strip():
            name, arguments = _named_json(body)
        elif body.strip():
            arguments = json.dumps(_arguments(body), ensure_ascii=False)
        else:
            arguments = "{}"
        if not name:
            return None
        properties = self.properties.get(name)
        if isinstance(properties, dict) and properties:
            try:
                values = json.loads(arguments)
            except ValueError:
                values = None
            if isinstance(values, dict):
                arguments = json.dumps(_typed_object(values, properties), ensure_ascii=False)
        return {"name": name, "arguments": arguments}

    def extract(self, text: str) -> tuple[str | None, list[dict[str, str]]]:
        """(content, [{"name", "arguments"}]) for a whole output."""
        before, after, scanned = _scan(text, self.channels_are_markup)
        if self.suppressed:
            return before + after or None, []
        named = any(call.named() for call in scanned)
        content = before if named else before + after
        if scanned and not content.strip():
            content = ""
        calls = [found for call in scanned if (call.raw_name or call.raw_args) and (found := self._call(call))]
        if calls:
            content = content.strip()
        return content or None, calls

    def feed(self, delta: str, finished: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """Add streamed content text; return (content to send now, tool-call deltas): all with the last chunk."""
        self._text += delta
        if not finished:
            return "", []
        content, calls = self.extract(self._text)
        deltas = []
        for index, call in enumerate(calls):
            deltas += [ToolCallDelta(index, id=new_tool_call_id(), name=call["name"]),
                       ToolCallDelta(index, arguments=call["arguments"])]
        return content or "", deltas


def _named_json(body: str) -> tuple[str, str]:
    """A nameless call whose arguments are a JSON object naming it: (name, arguments), else ("", ...)."""
    text = body.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return "", text
    if not isinstance(parsed, dict):
        return "", text
    name = parsed.get("name", "")
    name = name if isinstance(name, str) else ""
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return name, json.dumps({k: v for k, v in parsed.items() if k != "name"}, ensure_ascii=False)
