"""The frontend's qwen3_coder parser (harness/frontend/parsers/qwen3_coder.py) in process.

The whole-output oracle is specs/parsers.yaml (rows recorded from vLLM 0.32; the suite holds the frontend to every
one of them, and tests/test_families_vs_vllm.py compares it with vLLM's render server on drawn outputs). Here: a
stream, cut anywhere and fed in any chunks, adds up to exactly the whole answer (DERENDER-001, STREAM-008), with
and without a reasoning parser in front of it; and the declared-type reading of values, rule by rule.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenspec.harness.frontend.parsers import OutputParser
from tokenspec.harness.frontend.parsers.qwen3_coder import Qwen3CoderToolParser, _as_declared
from tokenspec.harness.frontend.parsers.think import DeepSeekR1ReasoningParser, ThinkReasoningParser
from tokenspec.specs.parser_families import shapes, table_request

REQUEST = table_request("m", True, "thinking")
PIECES = st.one_of(
    st.sampled_from([text for name, text in shapes().items() if name.startswith(("xml-", "think"))]),
    st.sampled_from(["<tool_call>", "</tool_call>", "<function=get_forecast>", "<function=", "</function>", ">",
                     "<parameter=days>", "\n3\n", "</parameter>", "<think>", "</think>", "\n", "  ", "<tool",
                     "_call>"]),
    st.text(alphabet="ab <>/=\n", max_size=6),
)
OUTPUTS = st.lists(PIECES, min_size=1, max_size=8).map("".join)
REASONING = [None, ThinkReasoningParser, DeepSeekR1ReasoningParser]


def _whole(text: str, reasoning: type | None) -> tuple:
    parsed = OutputParser(reasoning, Qwen3CoderToolParser, REQUEST).parse(text)
    return (parsed.reasoning or "", parsed.content or "",
            [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.tool_calls])


def _streamed(text: str, cuts: list[int], reasoning: type | None) -> tuple:
    parser = OutputParser(reasoning, Qwen3CoderToolParser, REQUEST)
    bounds = [0, *sorted(set(cuts)), len(text)]
    reasoning_text, content, calls = "", "", {}
    for i, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        delta = parser.feed(text[start:end], finished=i == len(bounds) - 2)
        reasoning_text += delta.reasoning
        content += delta.content
        for call in delta.tool_calls:
            name, arguments = calls.get(call.index, ("", ""))
            calls[call.index] = (name + (call.name or ""), arguments + (call.arguments or ""))
    return reasoning_text, content, [calls[i] for i in sorted(calls)]


@settings(max_examples=400, deadline=None)
@given(OUTPUTS, st.lists(st.integers(0, 400), max_size=6), st.sampled_from(REASONING))
def test_any_stream_adds_up_to_the_whole_answer(text, cuts, reasoning):
    cuts = [c for c in cuts if c < len(text)]
    assert _streamed(text, cuts, reasoning) == _whole(text, reasoning)


@pytest.mark.parametrize("name", [n for n in shapes() if n.startswith("xml-")])
def test_every_table_shape_streamed_character_by_character_is_the_whole_answer(name):
    text = shapes()[name]
    assert _streamed(text, list(range(1, len(text))), None) == _whole(text, None)


def test_content_streams_before_a_call_without_the_whitespace_a_call_would_strip():
    parser = Qwen3CoderToolParser(REQUEST["tools"])
    assert parser.feed("Let me check. ") == ("Let me check.", [])
    assert parser.feed("\n<tool") == ("", [])  # may become <tool_call>: held back
    assert parser.feed("_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n") == ("", [])
    content, deltas = parser.feed("</function>\n</tool_call>", finished=True)
    assert content == ""
    assert [(d.index, d.name, d.arguments) for d in deltas] == [(0, "get_weather", None),
                                                                 (0, None, '{"city": "Paris"}')]


@pytest.mark.parametrize(("text", "types", "value"), [
    ("3", {"integer"}, 3), (" 42 ", {"integer"}, 42), ("1.0", {"integer"}, 1.0), ("1.5", {"number"}, 1.5),
    ("2.0", {"number"}, 2), ("1e3", {"number"}, 1000), ("inf", {"number"}, "inf"), ("TRUE", {"boolean"}, True),
    ("0", {"boolean"}, False), ("yes", {"boolean"}, "yes"), ("null", {"string", "null"}, None),
    ("Null", {"null"}, None), ("3", {"string", "integer"}, 3), ("[1, 2]", {"array"}, [1, 2]),
    ('{"a": 1}', {"object"}, {"a": 1}), ("5", {"object"}, 5), ("{'a': 1}", {"object"}, "{'a': 1}"),
    ("abc", {"integer"}, "abc"), ("7", {"int"}, 7), ("7", {"foo"}, 7), ("x", {"foo"}, "x"), ("3", {"string"}, "3"),
])
def test_values_are_read_as_their_declared_type(text, types, value):
    """Each row is a rule of DERENDER-028 (and the table's xml-typed/xml-bad-type rows): the declared types tried
    in the order null, integer, number, boolean, object, array, string; JSON, else the text, when none reads."""
    assert json.dumps(_as_declared(text, types)) == json.dumps(value)
