"""A stream resumed from the carried parser progress on every chunk gives what one parser fed every chunk gives.

Streaming derender rebuilds its parsers from ``stream_state`` on each call (STREAM-019); these tests hold every
pairing of reasoning and tool parser to the uninterrupted stream, whatever the cuts, with the progress sent through
JSON as a client would carry it. (The uninterrupted stream is held to the whole answer by each parser's own tests.)
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenspec.harness.frontend.parsers import REASONING_PARSERS, TOOL_PARSERS, OutputParser
from tokenspec.harness.frontend.parsers.progress import InvalidProgress

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
REQUEST = {"tools": TOOLS, "tool_choice": "auto"}
PAIRINGS = [(r, t) for r in (None, *REASONING_PARSERS) for t in (None, *TOOL_PARSERS) if r or t]

#: whole constructs of each family's markup, so that random cuts fall inside them
CONSTRUCTS = ["<think>Let me see.</think>", "Checking.</think>",
              '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</tool_call>',
              "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
              '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
              "<|channel>thought\nPlanning.<channel|>",
              '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>']
PIECES = st.one_of(
    st.sampled_from(CONSTRUCTS),
    st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", '{"name": "get_weather", ',
                     '"arguments": {"city": "Paris"}}', "<function=get_weather>", "<parameter=city>", "\nParis\n",
                     "</parameter>", "</function>", "<|python_tag|>", '{"name": "get_weather", "parameters": {}}',
                     "<|channel>", "thought\n", "<channel|>", "<|tool_call>", "<tool_call|>", "call:get_weather{",
                     'city:<|"|>Paris<|"|>}', "<thi", "nk>", "</thi", "<tool", "_call>", "\n", "  ", "Hello", "{"]),
    st.text(alphabet='ab <>/{}":\n', max_size=6),
)
OUTPUTS = st.lists(PIECES, min_size=1, max_size=10).map("".join)


def _collect(deltas: list) -> tuple[str, str, list[tuple[str, str]]]:
    reasoning, content, calls = "", "", {}
    for delta in deltas:
        reasoning += delta.reasoning
        content += delta.content
        for call in delta.tool_calls:
            name, arguments = calls.get(call.index, ("", ""))
            calls[call.index] = (name + (call.name or ""), arguments + (call.arguments or ""))
    return reasoning, content, [calls[i] for i in sorted(calls)]


def _pieces(text: str, cuts: list[int]) -> list[tuple[str, bool]]:
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    return [(text[a:b], i == len(bounds) - 2) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]


def _parser(reasoning: str | None, tool: str | None) -> OutputParser:
    return OutputParser(REASONING_PARSERS.get(reasoning or ""), TOOL_PARSERS.get(tool or ""), REQUEST)


@pytest.mark.parametrize("pairing", PAIRINGS, ids=lambda p: f"{p[0]}-{p[1]}")
@settings(max_examples=150, deadline=None)
@given(text=OUTPUTS, cuts=st.lists(st.integers(0, 300), max_size=12))
def test_resumed_on_every_chunk_is_the_uninterrupted_stream(pairing, text, cuts) -> None:
    one = _parser(*pairing)
    continuous = [one.feed(piece, finished) for piece, finished in _pieces(text, cuts)]
    resumed, carried = [], None
    for piece, finished in _pieces(text, cuts):
        parser = _parser(*pairing)
        if carried is not None:
            parser.resume(json.loads(carried))
        resumed.append(parser.feed(piece, finished))
        carried = json.dumps(parser.progress())
    assert _collect(resumed) == _collect(continuous)


@pytest.mark.parametrize("pairing", PAIRINGS, ids=lambda p: f"{p[0]}-{p[1]}")
@pytest.mark.parametrize("tamper", [
    lambda p: {**p, "extra": None},
    lambda p: {k: v for k, v in p.items() if k != "tools"},
    lambda p: {**p, "reasoning": {"_mode": "sideways", "_pending": ""}} if p["reasoning"] else {**p, "reasoning": {}},
    lambda p: {**p, "tools": {"_pending": 3}} if p["tools"] else {**p, "tools": {"_pending": ""}},
    lambda p: [p],
], ids=["unknown key", "missing part", "bad reasoning", "bad tools", "not an object"])
def test_a_progress_this_parser_could_not_have_written_is_refused(pairing, tamper) -> None:
    genuine = _parser(*pairing)
    genuine.feed("Hello <thi")
    with pytest.raises(InvalidProgress):
        _parser(*pairing).resume(tamper(genuine.progress()))
