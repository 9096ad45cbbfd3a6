"""The frontend's gemma4 parsers (harness/frontend/parsers/gemma4.py) in process.

The oracle is tests/data/gemma4_parser_oracle.json: vLLM 0.32's real ``--reasoning-parser gemma4
--tool-call-parser gemma4`` answers for a fixed, seeded corpus of Gemma 4 outputs (hand-written cases first, then
drawn ones), recorded by tests/data/record_gemma4_oracle.py (run it with the vLLM build's interpreter to regenerate).
Here: every recorded whole answer is the frontend's; a stream, cut anywhere and fed in any chunks, adds up to
exactly the whole answer (DERENDER-001, STREAM-008); and a few rules one by one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenspec.harness.frontend.parsers import REASONING_PARSERS, TOOL_PARSERS, OutputParser
from tokenspec.harness.frontend.parsers.gemma4 import Gemma4ReasoningParser, Gemma4ToolParser

ORACLE = json.loads((Path(__file__).parent / "data" / "gemma4_parser_oracle.json").read_text())
TOOLS = ORACLE["tools"]
S = '<|"|>'
CALL = f"<|tool_call>call:get_weather{{city:{S}Paris{S},days:3}}<tool_call|>"

# Configurations whose vLLM answer the composed OutputParser gives as it is: the tool pass runs (tools, "auto"),
# or no tool parser is configured, or no reasoning parser.
COMPOSED = ("auto", "thinking", "reasoning_only", "tool_only")
# vLLM also runs the engine's tool pass when the request allows no calls (no tools, or tool_choice "none") and keeps
# its content; OutputParser only calls a tool parser when calls are allowed, so these are checked on the two passes.
CALLS_OFF = ("tool_choice_none", "no_tools")


def _cases(configs: tuple[str, ...]) -> list[dict]:
    return [c for c in ORACLE["cases"] if c["config"] in configs]


def _parsers(config: str) -> tuple[type | None, type | None, dict]:
    entry = ORACLE["configs"][config]
    return (Gemma4ReasoningParser if entry["reasoning"] else None, Gemma4ToolParser if entry["tool"] else None,
            dict(entry["request"]))


def _whole(text: str, config: str = "auto") -> tuple:
    reasoning, tool, request = _parsers(config)
    parsed = OutputParser(reasoning, tool, request).parse(text)
    return parsed.reasoning, parsed.content, [[c["function"]["name"], c["function"]["arguments"]]
                                              for c in parsed.tool_calls]


def _calls_off(text: str, config: str) -> tuple:
    """What vLLM's composition gives when calls are not allowed: reasoning split, then the tool pass, calls dropped."""
    request = dict(ORACLE["configs"][config]["request"])
    reasoning, content = Gemma4ReasoningParser(request.get("chat_template_kwargs")).split(text)
    if content is not None:
        content, _ = Gemma4ToolParser.for_request(request, Gemma4ReasoningParser).extract(content)
    return reasoning, content, []


def _oracle(case: dict) -> tuple:
    return case["reasoning"], case["content"], case["tool_calls"]


# -- (a) differential: the recorded vLLM answers ----------------------------------------------------------------

def test_the_oracle_is_big_enough_and_records_the_drawn_corpus():
    assert len(_cases(("auto",))) >= 300
    assert all(c["skip_special_tokens"] is False for c in ORACLE["cases"])  # gemma4 always turns skipping off


@pytest.mark.parametrize("config", COMPOSED)
def test_every_recorded_whole_answer_is_the_frontends(config):
    cases = _cases((config,))
    mismatches = [(c["text"], _oracle(c), _whole(c["text"], config)) for c in cases
                  if _whole(c["text"], config) != _oracle(c)]
    assert not mismatches, f"{len(mismatches)}/{len(cases)} differ, first: {mismatches[:3]}"


@pytest.mark.parametrize("config", CALLS_OFF)
def test_with_calls_off_the_two_passes_give_vllms_content(config):
    cases = _cases((config,))
    mismatches = [(c["text"], _oracle(c)) for c in cases if _calls_off(c["text"], config) != _oracle(c)]
    assert not mismatches, f"{len(mismatches)}/{len(cases)} differ, first: {mismatches[:3]}"


# vLLM answers that look like bugs. The frontend follows vLLM in each (the recorded answer is asserted here
# explicitly, so that a change on either side is noticed); the reason says what a reader would expect instead.
VLLM_QUIRKS = [
    ("text after a call is lost once any call has a name",
     f"Before.\n{CALL}\nAfter.", (None, "Before.", [["get_weather", '{"city": "Paris", "days": 3}']])),
    ("bare values stay strings when the tool declares no type for them (unknown function, untyped property)",
     "<|tool_call>call:unknown_fn{a:1,b:true,c:null}<tool_call|>",
     (None, None, [["unknown_fn", '{"a": "1", "b": "true", "c": "null"}']])),
    ("a <|channel> inside a quoted argument opens reasoning in the reasoning pass and cuts the call",
     f"<|tool_call>call:get_weather{{city:{S}<|channel>x{S}}}<tool_call|>",
     (f"x{S}}}<tool_call|>", None, [["get_weather", '{"city": ""}']])),
    ("content that starts with 'thought\\n' after a reasoning block is taken for reasoning by the tool pass",
     "<|channel>thought\nA<channel|>thought\nB", ("A", None, [])),
    ("a closing brace is always taken as the call's own, so an unclosed inner object loses its last value",
     "<|tool_call>call:search{a:{b:1}<tool_call|>", (None, None, [["search", '{"a": {}}']])),
    ("the turn markers are deleted, not treated as the end of the answer",
     "Hello<|turn>model\nMore", (None, "Hellomodel\nMore", [])),
    ("an argument object in JSON is read as key:value text",
     '<|tool_call>call:{"name": "get_weather"}<tool_call|>',
     (None, None, [["get_weather", '{"\\"name\\"": "\\"get_weather\\""}']])),
]


@pytest.mark.parametrize(("reason", "text", "answer"), VLLM_QUIRKS, ids=[q[0][:40] for q in VLLM_QUIRKS])
def test_vllm_quirks_are_followed(reason, text, answer):
    recorded = {c["text"]: _oracle(c) for c in _cases(("auto",))}
    if text in recorded:
        assert tuple(recorded[text]) == answer
    assert _whole(text) == answer


def test_without_a_reasoning_parser_a_thought_output_gets_a_literal_channel_marker():
    """vLLM's engine inserts the reasoning opener it thinks is missing, then, with reasoning parsing off, prints it."""
    parsed = OutputParser(None, Gemma4ToolParser, {"tools": TOOLS}).parse("thought\nHi")
    assert (parsed.reasoning, parsed.content) == (None, "<|channel>thought\nHi")


# -- (b) streaming adds up to the whole answer ------------------------------------------------------------------

PIECES = st.one_of(
    st.sampled_from([c["text"] for c in ORACLE["cases"][:60]]),
    st.sampled_from(["<|channel>", "thought\n", "thought", "<channel|>", "<|tool_call>", "<tool_call|>", "call:",
                     "get_weather", "{", "}", "(", ")", ":", ",", S, f"city:{S}Paris{S}", "days:3", "flag:true",
                     "tags:[1,2]", "opts:{n:5}", "<turn|>", "<|turn>", "<|tool_response>", "<eos>", "<|tool",
                     "_call>", "<chan", "nel|>", "\n", "  ", "Hello", "."]),
    st.text(alphabet="ab <>|:{}\n", max_size=6),
)
OUTPUTS = st.lists(PIECES, min_size=1, max_size=8).map("".join)
REQUESTS = [("auto", Gemma4ReasoningParser, Gemma4ToolParser), ("no tools", Gemma4ReasoningParser, None),
            ("no reasoning parser", None, Gemma4ToolParser)]


def _streamed(text: str, cuts: list[int], reasoning: type | None, tool: type | None) -> tuple:
    parser = OutputParser(reasoning, tool, {"tools": TOOLS})
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


def _whole_for(text: str, reasoning: type | None, tool: type | None) -> tuple:
    parsed = OutputParser(reasoning, tool, {"tools": TOOLS}).parse(text)
    return (parsed.reasoning or "", parsed.content or "",
            [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.tool_calls])


@settings(max_examples=500, deadline=None)
@given(OUTPUTS, st.lists(st.integers(0, 400), max_size=6), st.sampled_from(REQUESTS))
def test_any_stream_adds_up_to_the_whole_answer(text, cuts, request):
    _, reasoning, tool = request
    cuts = [c for c in cuts if c < len(text)]
    assert _streamed(text, cuts, reasoning, tool) == _whole_for(text, reasoning, tool)


@pytest.mark.parametrize("case", _cases(("auto",))[:60], ids=lambda c: repr(c["text"])[:30])
def test_recorded_outputs_streamed_character_by_character_are_the_whole_answer(case):
    text = case["text"]
    expected = _whole_for(text, Gemma4ReasoningParser, Gemma4ToolParser)
    assert _streamed(text, list(range(1, len(text))), Gemma4ReasoningParser, Gemma4ToolParser) == expected


def test_reasoning_streams_once_a_channel_has_opened():
    parser = Gemma4ReasoningParser()
    assert parser.feed("<|channel>thou") == ("", "")  # may still be the dropped "thought\n"
    assert parser.feed("ght\nThe user ") == ("The user", "")  # trailing whitespace waits for what follows
    assert parser.feed("asks.<chan") == (" asks.", "")
    assert parser.feed("nel|>Sunny") == ("", "Sunny")
    assert parser.feed(" today.", finished=True) == ("", " today.")


def test_unmarked_text_waits_for_the_end_because_a_late_channel_close_makes_it_reasoning():
    parser = Gemma4ReasoningParser()
    assert parser.feed("Plain so far ") == ("", "")
    assert parser.feed("then<channel|>answer", finished=True) == ("Plain so far then", "answer")


# -- (c) rules ---------------------------------------------------------------------------------------------------

VOCAB = {"<|channel>": 100, "<channel|>": 101, "<|tool_call>": 48, "<tool_call|>": 49, "<|turn>": 105,
         "<|tool_response>": 50}


@pytest.mark.parametrize("case", ORACLE["prompt_cases"], ids=lambda c: f"{c['name']}-{c['chat_template_kwargs']}")
def test_prompt_state_detection_is_vllms(case):
    parser = Gemma4ReasoningParser(case["chat_template_kwargs"])
    assert parser.prompt_left_reasoning(case["ids"], VOCAB) is case["ended"]


def test_the_parsers_are_registered_and_name_the_markers_they_read():
    assert REASONING_PARSERS["gemma4"] is Gemma4ReasoningParser
    assert TOOL_PARSERS["gemma4"] is Gemma4ToolParser
    assert set(Gemma4ReasoningParser.MARKERS) == {"<|channel>", "<channel|>"}
    assert set(Gemma4ToolParser.MARKERS) == {"<|tool_call>", "<tool_call|>", S}


@pytest.mark.parametrize(("text", "answer"), [
    ("<|channel>thought\nWhy.<channel|>Because.", ("Why.", "Because.")),
    ("<|channel>thought\nunfinished", ("unfinished", None)),
    ("<|channel>thought\n<channel|>Thinking was off.", (None, "Thinking was off.")),
    ("No opener<channel|>Answer", ("No opener", "Answer")),
    ("thought\nstill", ("still", None)),
    ("A<channel|>B<|channel>C<channel|>D", ("C", "ABD")),
    ("<|channel>thought\n  x  \n<channel|>  y  ", ("  x", "  y  ")),
    ("<|channel>think <|tool_call>call:f{}<tool_call|>", ("think", "<|tool_call>call:f{}<tool_call|>")),
    ("stray <tool_call|> closer", (None, "stray  closer")),
])
def test_reasoning_split_rules(text, answer):
    assert Gemma4ReasoningParser({"enable_thinking": True}).split(text) == answer
    assert Gemma4ReasoningParser().split(text) == answer  # enable_thinking never changes the split


@pytest.mark.parametrize(("args", "arguments"), [
    (f"city:{S}Paris{S},days:3", {"city": "Paris", "days": 3}),
    ("days:-2", {"days": -2}),
    ("days:3.0", {"days": 3.0}),
    (f"unit:{S}c{S}", {"unit": "c"}),
    (f"city:{S}a, {{b}}: \"c\" [d]{S}", {"city": 'a, {b}: "c" [d]'}),
])
def test_values_follow_the_declared_types(args, arguments):
    content, calls = Gemma4ToolParser(TOOLS).extract(f"<|tool_call>call:get_weather{{{args}}}<tool_call|>")
    assert content is None and [c["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["arguments"]) == arguments


def test_every_json_type_and_nesting():
    """Nested values are typed by nested properties/items; a property schema naming no type keeps a string."""
    text = ("<|tool_call>call:set_flags{flag:false,ratio:-1e3,note:null,opts:{n:5,s:" + S + "x" + S + "},"
            "tags:[1,2],raw:{k:[true,null]},any:12}<tool_call|>")
    _, calls = Gemma4ToolParser(TOOLS).extract(text)
    assert calls[0]["arguments"] == ('{"flag": false, "ratio": -1000, "note": null, "opts": {"n": 5, "s": "x"}, '
                                     '"tags": [1, 2], "raw": {"k": ["true", "null"]}, "any": "12"}')


def test_an_unclosed_call_ends_with_the_output_and_text_before_calls_is_stripped():
    content, calls = Gemma4ToolParser(TOOLS).extract(f"  Let me check.\n<|tool_call>call:get_weather{{city:{S}Oslo")
    assert content == "Let me check."
    assert calls == [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]


def test_streamed_calls_come_with_the_last_chunk():
    parser = Gemma4ToolParser(TOOLS)
    assert parser.feed("Checking. ") == ("", [])
    content, deltas = parser.feed(CALL, finished=True)
    assert content == "Checking."
    assert [(d.index, d.name, d.arguments) for d in deltas] == [(0, "get_weather", None),
                                                                 (0, None, '{"city": "Paris", "days": 3}')]
