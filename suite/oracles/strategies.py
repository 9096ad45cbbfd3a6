"""Hypothesis strategies for requests the suite sends: conversations, prompts, token IDs, sampling values.

Text strategies avoid lone surrogates (not encodable as UTF-8 JSON) and NUL, and mix ASCII with accented
Latin, CJK, emoji and compatibility characters, because UTF-8 characters split across byte-level tokens are
where detokenizers break, and Unicode normalisation is where renderers quietly change a prompt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import strategies as st

from tokenspec.specs.samples import WEATHER_TOOL
from tokenspec.suite.oracles.builders import TOOL

PIECES = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.sampled_from(list("éèàçüöñßøåÉ")),
    st.sampled_from(list("東京日本語中文字漢")),
    st.sampled_from(["😀", "🚀", "👍🏽", "🇫🇷", "✨"]),
    st.sampled_from(list("ﬁＡ①½ｶ")),  # compatibility characters: NFKC would change them, a tokenizer must not
    st.sampled_from(["\n", " ", "  "]),
)
text = st.lists(PIECES, min_size=1, max_size=24).map("".join)

def content() -> st.SearchStrategy[Any]:
    parts = st.lists(text.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=3)
    return st.one_of(text, parts)


@st.composite
def conversations(draw: st.DrawFn, with_tools: bool | None = None) -> dict[str, Any]:
    """A chat request body: optional system turn, 1-3 user/assistant exchanges, optional tools."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(text)})
    for turn in range(draw(st.integers(1, 3))):
        if turn:
            messages.append({"role": "assistant", "content": draw(text)})
        messages.append({"role": "user", "content": draw(content())})
    body: dict[str, Any] = {"messages": messages}
    if with_tools if with_tools is not None else draw(st.booleans()):
        body["tools"] = [TOOL]
    return body


_KEY_OR_STRING = text.map(lambda t: t.replace("<", "")).filter(bool)  # "<" could close the markup around it
_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.sampled_from([0, -1, 0.5, -0.0, 1e-7, 1.5e300]),
    st.floats(allow_nan=False, allow_infinity=False, width=64), _KEY_OR_STRING,
    st.sampled_from(['say "hi"', "back\\slash", "tab\tand\nnewline", "{not json}", "", "true", "3"]),
)
#: A tool call's arguments object with values of every JSON type, nested (what DERENDER-027 compares).
json_arguments = st.dictionaries(
    _KEY_OR_STRING,
    st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY_OR_STRING, inner,
                                                                                             max_size=3),
                 max_leaves=8),
    min_size=1, max_size=4,
)

_ARGUMENTS = st.one_of(
    st.fixed_dictionaries({"city": text}).map(lambda a: json.dumps(a, ensure_ascii=False)),
    st.sampled_from(['{"city": "Paris"', "[1, 2]", "", "null", '"Oslo"']),  # malformed or not an object
)
_BARE_TOOL = {"type": "function", "function": {"name": "get_time"}}  # no description, no parameters


@st.composite
def _tool_call(draw: st.DrawFn, index: int) -> dict[str, Any]:
    return {"id": f"call_{index}", "type": "function",
            "function": {"name": draw(st.sampled_from(["get_weather", "get_time"])), "arguments": draw(_ARGUMENTS)}}


@st.composite
def rich_conversations(draw: st.DrawFn) -> dict[str, Any]:
    """Chat bodies that reach every RENDER-023 rule: developer and system turns, names, content parts,
    assistant reasoning and tool calls (arguments as strings, mappings, malformed), tool results as text or
    parts, tools without description, thinking switches, continue_final_message."""
    messages: list[dict[str, Any]] = []
    first = draw(st.sampled_from(["none", "system", "developer"]))
    if first != "none":
        messages.append({"role": first, "content": draw(content())})
    calls = 0
    for turn in range(draw(st.integers(1, 3))):
        user: dict[str, Any] = {"role": "user", "content": draw(content())}
        if draw(st.integers(0, 5)) == 0:
            user["name"] = "alice"
        messages.append(user)
        if turn == 0 and draw(st.booleans()):
            continue
        reply: dict[str, Any] = {"role": "assistant", "content": draw(st.one_of(st.none(), content()))}
        if draw(st.booleans()):
            reply["reasoning"] = draw(text)
        n_calls = draw(st.integers(0, 2))
        if n_calls:
            reply["tool_calls"] = [draw(_tool_call(calls + i)) for i in range(n_calls)]
            messages.append(reply)
            for i in range(n_calls):
                result = draw(content())
                messages.append({"role": "tool", "tool_call_id": f"call_{calls + i}", "content": result})
            calls += n_calls
        else:
            if reply["content"] is None:
                reply["content"] = draw(text)
            messages.append(reply)
    if draw(st.integers(0, 4)) == 0:
        messages.append({"role": "developer", "content": draw(text)})
        messages.append({"role": "user", "content": draw(text)})
    body: dict[str, Any] = {"messages": messages}
    if draw(st.booleans()):
        body["tools"] = draw(st.sampled_from([[TOOL], [TOOL, _BARE_TOOL]]))
    thinking = draw(st.sampled_from([None, True, False]))
    if thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": thinking}
    if messages[-1]["role"] == "user" and draw(st.integers(0, 4)) == 0:
        body["messages"].append({"role": "assistant", "content": draw(text)})
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    return body


def token_ids(pool: tuple[int, ...], min_size: int = 1, max_size: int = 24) -> st.SearchStrategy[list[int]]:
    """Lists of ids drawn from ``pool``: ids surely inside the real vocabulary (``Codec.known_ids``)."""
    return st.lists(st.sampled_from(pool), min_size=min_size, max_size=max_size)


_WEATHER = WEATHER_TOOL["function"]
#: Anthropic's and Responses' spellings of the suite's weather tool.
ANTHROPIC_TOOL = {"name": _WEATHER["name"], "description": _WEATHER["description"],
                  "input_schema": _WEATHER["parameters"]}
RESPONSES_TOOL = {"type": "function", "name": _WEATHER["name"], "description": _WEATHER["description"],
                  "parameters": _WEATHER["parameters"]}
_CITY = st.fixed_dictionaries({"city": text})
_blocks = st.lists(text.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=3)


@st.composite
def anthropic_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Anthropic Messages bodies that reach every rule of RENDER-026 and RENDER-027: system as a string or text
    blocks, content as a string or blocks, assistant thinking and tool_use, user tool_result (text or blocks, before
    or after the user's own text), tools and tool_choice, thinking switched by the template's kwargs."""
    body: dict[str, Any] = {"max_tokens": draw(st.integers(1, 64)), "messages": []}
    system = draw(st.sampled_from(["none", "string", "blocks"]))
    if system != "none":
        body["system"] = draw(text) if system == "string" else draw(_blocks)
    calls = 0
    for turn in range(draw(st.integers(1, 3))):
        if turn:
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append({"type": "thinking", "thinking": draw(text), "signature": "sig"})
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": draw(text)})
            n_calls = draw(st.integers(0 if blocks else 1, 2))
            ids = [f"toolu_{calls + i}" for i in range(n_calls)]
            blocks += [{"type": "tool_use", "id": i, "name": _WEATHER["name"], "input": draw(_CITY)} for i in ids]
            calls += n_calls
            body["messages"].append({"role": "assistant", "content": blocks})
            results = [{"type": "tool_result", "tool_use_id": i, "content": draw(st.one_of(text, _blocks))}
                       for i in ids]
            own = draw(st.one_of(st.just([]), _blocks))
            user = draw(st.sampled_from([results + own, own + results])) if results else own
            body["messages"].append({"role": "user", "content": user or draw(text)})
        else:
            body["messages"].append({"role": "user", "content": draw(st.one_of(text, _blocks))})
    if calls or draw(st.booleans()):
        body["tools"] = [ANTHROPIC_TOOL]
        choice = draw(st.sampled_from([None, "auto", "any", "none", "tool"]))
        if choice is not None:
            body["tool_choice"] = {"type": choice, **({"name": _WEATHER["name"]} if choice == "tool" else {})}
    thinking = draw(st.sampled_from([None, True, False]))
    if thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": thinking}
    return body


@st.composite
def responses_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Stateless Responses bodies that reach every rule of RENDER-030 and RENDER-031: instructions, a string input or
    items (messages with string or part content, reasoning, assistant messages, function calls and their outputs),
    function tools, thinking switched by the template's kwargs. Items carry every field vLLM 0.32's parsing needs."""
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["instructions"] = draw(text)
    if draw(st.integers(0, 3)) == 0:
        body["input"] = draw(text)
    else:
        items: list[dict[str, Any]] = []
        calls = 0
        for turn in range(draw(st.integers(1, 3))):
            if turn:
                if draw(st.booleans()):
                    items.append({"type": "reasoning", "id": f"rs_{turn}", "summary": [],
                                  "content": [{"type": "reasoning_text", "text": draw(text)}]})
                if draw(st.booleans()):
                    items.append({"type": "message", "role": "assistant", "id": f"msg_{turn}", "status": "completed",
                                  "content": [{"type": "output_text", "text": draw(text), "annotations": []}]})
                for _ in range(draw(st.integers(0, 2))):
                    items.append({"type": "function_call", "call_id": f"call_{calls}", "name": _WEATHER["name"],
                                  "arguments": json.dumps(draw(_CITY), ensure_ascii=False)})
                    items.append({"type": "function_call_output", "call_id": f"call_{calls}", "output": draw(text)})
                    calls += 1
            parts = st.lists(text.map(lambda t: {"type": "input_text", "text": t}), min_size=1, max_size=2)
            role = draw(st.sampled_from(["user", "user", "developer", "system"])) if turn == 0 else "user"
            items.append({"type": "message", "role": role, "content": draw(st.one_of(text, parts))})
        if items[-1]["role"] != "user":
            items.append({"type": "message", "role": "user", "content": draw(text)})
        body["input"] = items
    if draw(st.booleans()):
        body["tools"] = [RESPONSES_TOOL]
    thinking = draw(st.sampled_from([None, True, False]))
    if thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": thinking}
    return body


# -- parameter-element tool calls (qwen3_coder's XML markup) ------------------------------------------------------

_ENDS_A_VALUE = re.compile(r"<\s*/?\s*parameter\s*[=>]|</function>|</think>|<\|")


def _value_text(value: str) -> bool:
    """Text that stays one parameter's value: no closing or next parameter tag, no end of the call, no end of a
    think block (deleted where a reasoning parser runs), no special-token spelling."""
    return not _ENDS_A_VALUE.search(value)


_PARAMETER_TEXT = st.one_of(text, st.sampled_from(["<b>Paris</b> & <i>Lyon</i>", "a > b", "  padded  ", "\n\nx\n"]))
#: get_forecast's parameters (specs/parsers.yaml's request): name -> (text written in the markup, expected value).
#: The expectation is DERENDER-028's reading of the text as the declared type, written out per type here.
#: Every declared type in every example (DERENDER-028): a key left out would leave its type's reading unjudged.
forecast_parameters = st.fixed_dictionaries(
    {
        "city": _PARAMETER_TEXT.filter(_value_text).map(lambda t: (t, t)),
        "days": st.integers(-10**12, 10**12).map(lambda n: (str(n), n)),
        "ratio": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-999, 999)).map(
            lambda x: (repr(x), int(x) if float(x).is_integer() else x)),
        "metric": st.sampled_from([("true", True), ("false", False), ("True", True), ("FALSE", False),
                                   ("1", True), ("0", False)]),
        "hours": st.lists(st.integers(0, 23), max_size=4).map(lambda h: (json.dumps(h), h)),
        "options": st.dictionaries(st.sampled_from(["unit", "lang", "days"]),
                                   st.one_of(st.integers(), st.booleans(), text), max_size=3).map(
            lambda d: (json.dumps(d, ensure_ascii=False), d)),
        "note": st.one_of(st.sampled_from(["null", "NULL", "Null"]).map(lambda t: (t, None)),
                          _PARAMETER_TEXT.filter(_value_text).filter(lambda t: t.lower() != "null").map(
                              lambda t: (t, t))),
    },
)


# -- key:value tool calls (Gemma 4's markup) --------------------------------------------------------------------

_G4_QUOTE = '<|"|>'


def _g4_string(value: str) -> bool:
    """Text that stays one quoted string: no delimiter or marker spelling (``<|``, ``|>``) inside, and not one a
    string-or-null property would read as null."""
    return "<|" not in value and "|>" not in value and value.strip().lower() != "null"


_G4_TEXT = st.one_of(text, st.sampled_from(["Paris, France", "a:b", "{x}", "[1, 2]", "  padded  ", "line\nbreak"]))
#: get_forecast's arguments in Gemma 4's markup: name -> (text written after ``KEY:``, expected value), the expected
#: value being DERENDER-029's reading (a quoted string as written; a bare value by the declared type, as in
#: DERENDER-028; list items by the declared item type).
#: Every bare-valued key is always there, so each example (a mutant campaign draws three) reads every declared type.
gemma_forecast_arguments = st.fixed_dictionaries(
    {
        "city": _G4_TEXT.filter(_g4_string).map(lambda t: (f"{_G4_QUOTE}{t}{_G4_QUOTE}", t)),
        "days": st.integers(-10**12, 10**12).map(lambda n: (str(n), n)),
        "ratio": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-999, 999)).map(
            lambda x: (repr(x), int(x) if float(x).is_integer() else x)),
        "metric": st.sampled_from([("true", True), ("false", False), ("True", True), ("FALSE", False)]),
        "hours": st.lists(st.integers(0, 23), min_size=1, max_size=4).map(
            lambda h: ("[" + ",".join(map(str, h)) + "]", h)),
    },
    optional={
        "options": st.dictionaries(st.sampled_from(["unit", "lang", "days"]), _G4_TEXT.filter(_g4_string),
                                   max_size=3).map(lambda d: (
                                       "{" + ",".join(f"{k}:{_G4_QUOTE}{v}{_G4_QUOTE}" for k, v in d.items()) + "}",
                                       d)),
        "note": st.one_of(st.just(("null", None)), _G4_TEXT.filter(_g4_string).map(
            lambda t: (f"{_G4_QUOTE}{t}{_G4_QUOTE}", t))),
    },
)
