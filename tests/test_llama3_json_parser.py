"""The reference frontend's ``llama3_json`` tool parser against vLLM 0.32's.

EXPECTED below was recorded from vLLM 0.32.0's GPU-less render server (``--enable-auto-tool-choice
--tool-call-parser llama3_json``, no reasoning parser) on RECORDED_ON, on a copy of the tiny model whose
vocabulary has <|python_tag|>, <|eot_id|>, <|eom_id|> as special tokens (``llama3_model`` below): POST
/v1/chat/completions/derender, whole and streamed in chunks of k tokens (k = 1, 2, 3, 5 and everything in
one chunk), threading stream_state. Re-record with ``python tests/test_llama3_json_parser.py URL``
against such a server; ``test_table_matches_live_vllm`` re-checks the table against a live one.

What vLLM does (and this table pins):
* whole output: every decodable ``{...}`` with "name" and "arguments"/"parameters" becomes a call, the rest
  of the text is dropped (content null); one bad object leaves everything as content. The frontend's
  whole-output answer is exactly this (specs/parsers.yaml).
* vLLM's streaming is a different function of the text: only output that STARTS with ``{`` or <|python_tag|>
  is parsed (so "Sure. {...}" streams as content but parses as a call whole), objects must be separated by
  two characters, a name is sent one chunk after its object appears (so a call that arrives in a single
  chunk is never streamed) and empty arguments are never streamed. The spec wants a stream to concatenate
  to the non-streaming answer (STREAM-008, DERENDER-001), so the frontend does NOT copy this: its stream
  equals its whole answer for every output and every chunking, and vLLM's streaming is a known deviation
  (reports/expectations/vllm-0.32.0-cpu.yaml). The stream-K rows stay here as the record of it.
* non-stream finish_reason stays the engine's ("stop"); the stream's last chunk says "tool_calls" once a
  tool-call delta went out. Our frontend answers "tool_calls" in both (the spec's DERENDER-006).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.frontend.parsers import TOOL_PARSERS, tool_parser_class
from tokenspec.harness.frontend.parsers.llama3_json import (
    Llama3JsonEngineToolParser,
    Llama3JsonToolParser,
    _may_become_object,
)
from tokenspec.harness.loopback import running_app

MODEL = "l3"
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
         for name in ("get_weather", "get_time", "book")]
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
CHUNKINGS = (1, 2, 3, 5, 10_000)

W = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
T = '{"name": "get_time", "parameters": {"zone": "CET"}}'
OUTPUTS = {
    "plain": "The answer is 4.",
    "parameters": W,
    "arguments": '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "python-tag": "<|python_tag|>" + W,
    "two-calls": W + "; " + T,
    "python-tag-two-calls": "<|python_tag|>" + W + "; " + T,
    "newline-separated": W + "\n" + T,
    "text-before": "Sure. " + W,
    "text-after": W + " Done.",
    "leading-space": " " + W,
    "malformed": '{"name": "get_weather", "parameters": {"city": }}',
    "missing-name": '{"parameters": {"city": "Paris"}}',
    "both-keys": '{"name": "get_weather", "arguments": {"a": 1}, "parameters": {"b": 2}}',
    "nested": '{"name": "book", "parameters": {"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, '
              '"seats": 2, "price": 1.5e2, "window": true, "note": null}}',
    "unicode": '{"name": "get_weather", "parameters": {"city": "Zürich 🎉", "escaped": "caf\\u00e9 \\"q\\""}}',
    "compact": '{"name":"get_weather","parameters":{"city":"Paris","days":3}}',
    "empty-parameters": '{"name": "get_time", "parameters": {}}',
    "braces-in-prose": "Use {x} here",
    "python-tag-only": "<|python_tag|>",
    "adjacent-objects": '{"name": "get_time", "parameters": {}}{"name": "get_time", "parameters": {}}',
}

RECORDED_ON = "2026-12-02"
# name -> mode -> (content, finish_reason, [[tool name, arguments string], ...]); ids were present and
# sent once per call in every answer. Modes: whole (non-streaming), stream-K (chunks of K tokens).
EXPECTED: dict[str, dict[str, tuple[str | None, str, list[list[str]]]]] = {
    'plain': {
        'whole': ('The answer is 4.', 'stop', []),
        'stream-1': ('The answer is 4.', 'stop', []),
        'stream-2': ('The answer is 4.', 'stop', []),
        'stream-3': ('The answer is 4.', 'stop', []),
        'stream-5': ('The answer is 4.', 'stop', []),
        'stream-10000': ('The answer is 4.', 'stop', []),
    },
    'parameters': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'arguments': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'python-tag': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'two-calls': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'python-tag-two-calls': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'newline-separated': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}'], ['get_time', '{"zone": "CET"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'text-before': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': ('Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-2': ('Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-3': ('Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-5': ('Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-10000': ('Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
    },
    'text-after': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris"}']]),
        'stream-10000': (None, 'stop', []),
    },
    'leading-space': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris"}']]),
        'stream-1': (' {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-2': (' {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-3': (' {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-5': (' {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
        'stream-10000': (' {"name": "get_weather", "parameters": {"city": "Paris"}}', 'stop', []),
    },
    'malformed': {
        'whole': ('{"name": "get_weather", "parameters": {"city": }}', 'stop', []),
        'stream-1': (None, 'tool_calls', [['get_weather', '']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '']]),
        'stream-10000': (None, 'stop', []),
    },
    'missing-name': {
        'whole': ('{"parameters": {"city": "Paris"}}', 'stop', []),
        'stream-1': (None, 'stop', []),
        'stream-2': (None, 'stop', []),
        'stream-3': (None, 'stop', []),
        'stream-5': (None, 'stop', []),
        'stream-10000': (None, 'stop', []),
    },
    'both-keys': {
        'whole': (None, 'stop', [['get_weather', '{"a": 1}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '']]),
        'stream-10000': (None, 'stop', []),
    },
    'nested': {
        'whole': (None, 'stop', [['book', '{"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, "seats": 2, "price": 150.0, "window": true, "note": null}']]),  # noqa: E501
        'stream-1': (None, 'tool_calls', [['book', '{"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, "seats": 2, "price": 150.0, "window": true, "note": null}']]),  # noqa: E501
        'stream-2': (None, 'tool_calls', [['book', '{"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, "seats": 2, "price": 150.0, "window": true, "note": null}']]),  # noqa: E501
        'stream-3': (None, 'tool_calls', [['book', '{"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, "seats": 2, "price": 150.0, "window": true, "note": null}']]),  # noqa: E501
        'stream-5': (None, 'tool_calls', [['book', '{"trip": {"from": "Paris", "to": ["Oslo", "Rome"]}, "seats": 2, "price": 150.0, "window": true, "note": null}']]),  # noqa: E501
        'stream-10000': (None, 'stop', []),
    },
    'unicode': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Zürich 🎉", "escaped": "café \\"q\\""}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Zürich 🎉", "escaped": "café \\"q\\""}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Zürich 🎉", "escaped": "café \\"q\\""}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Zürich 🎉", "escaped": "café \\"q\\""}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Zürich 🎉", "escaped": "café \\"q\\""}']]),
        'stream-10000': (None, 'stop', []),
    },
    'compact': {
        'whole': (None, 'stop', [['get_weather', '{"city": "Paris", "days": 3}']]),
        'stream-1': (None, 'tool_calls', [['get_weather', '{"city": "Paris", "days": 3}']]),
        'stream-2': (None, 'tool_calls', [['get_weather', '{"city": "Paris", "days": 3}']]),
        'stream-3': (None, 'tool_calls', [['get_weather', '{"city": "Paris", "days": 3}']]),
        'stream-5': (None, 'tool_calls', [['get_weather', '{"city": "Paris", "days": 3}']]),
        'stream-10000': (None, 'stop', []),
    },
    'empty-parameters': {
        'whole': (None, 'stop', [['get_time', '{}']]),
        'stream-1': (None, 'tool_calls', [['get_time', '']]),
        'stream-2': (None, 'tool_calls', [['get_time', '']]),
        'stream-3': (None, 'tool_calls', [['get_time', '']]),
        'stream-5': (None, 'tool_calls', [['get_time', '']]),
        'stream-10000': (None, 'stop', []),
    },
    'braces-in-prose': {
        'whole': ('Use {x} here', 'stop', []),
        'stream-1': ('Use {x} here', 'stop', []),
        'stream-2': ('Use {x} here', 'stop', []),
        'stream-3': ('Use {x} here', 'stop', []),
        'stream-5': ('Use {x} here', 'stop', []),
        'stream-10000': ('Use {x} here', 'stop', []),
    },
    'python-tag-only': {
        'whole': ('<|python_tag|>', 'stop', []),
        'stream-1': (None, 'stop', []),
        'stream-2': (None, 'stop', []),
        'stream-3': (None, 'stop', []),
        'stream-5': (None, 'stop', []),
        'stream-10000': (None, 'stop', []),
    },
    'adjacent-objects': {
        'whole': ('{"name": "get_time", "parameters": {}}{"name": "get_time", "parameters": {}}', 'stop', []),
        'stream-1': (None, 'tool_calls', [['get_time', '']]),
        'stream-2': (None, 'tool_calls', [['get_time', '']]),
        'stream-3': (None, 'tool_calls', [['get_time', '']]),
        'stream-5': (None, 'tool_calls', [['get_time', '']]),
        'stream-10000': (None, 'stop', []),
    },
}


# -- the model with the Llama 3 special tokens -------------------------------------------------------------

# -- measuring any derender server (vLLM's render server or our frontend) ----------------------------------

Post = Callable[[dict[str, Any]], dict[str, Any]]


def http_post(url: str) -> Post:
    def post(body: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(url + "/v1/chat/completions/derender", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()
    return post


def measure_whole(post: Post, tok: Tokenizer, text: str) -> dict[str, Any]:
    body = {"model": MODEL, "prompt_token_ids": tok.encode(PROMPT).ids, "chat_request": CHAT,
            "generate_response": {"request_id": "r", "choices": [{
                "index": 0, "token_ids": tok.encode(text).ids, "finish_reason": "stop"}]}}
    choice = post(body)["choices"][0]
    message = choice["message"]
    calls = message.get("tool_calls") or []
    return {"content": message["content"], "finish_reason": choice["finish_reason"],
            "tool_calls": [[c["function"]["name"], c["function"]["arguments"]] for c in calls],
            "ids_ok": all(c["type"] == "function" and c["id"] for c in calls)}


def stream_chunks(post: Post, tok: Tokenizer, text: str, k: int) -> list[dict[str, Any]]:
    ids = tok.encode(text).ids
    state, choices = None, []
    for start in range(0, len(ids), k):
        last = start + k >= len(ids)
        body = {"stream": True, "model": MODEL, "prompt_token_ids": tok.encode(PROMPT).ids, "stream_state": state,
                "chat_request": CHAT, "generate_chunk": {"request_id": "r", "choices": [{
                    "index": 0, "token_ids": ids[start:start + k], "finish_reason": "stop" if last else None}]}}
        out = post(body)
        state = out["stream_state"]
        choices += out["chunk"]["choices"]
    return choices


def assemble(choices: list[dict[str, Any]]) -> dict[str, Any]:
    content, calls, finish, ids = "", {}, None, {}
    for c in choices:
        delta = c["delta"]
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            entry = calls.setdefault(call["index"], ["", ""])
            entry[0] += call["function"].get("name") or ""
            entry[1] += call["function"].get("arguments") or ""
            if call.get("id"):
                ids.setdefault(call["index"], []).append(call["id"])
        finish = c["finish_reason"] or finish
    return {"content": content or None, "finish_reason": finish,
            "tool_calls": [calls[i] for i in sorted(calls)],
            "ids_ok": all(len(v) == 1 for v in ids.values()) and set(ids) == set(calls)}


def measure(post: Post, tok: Tokenizer, text: str) -> dict[str, Any]:
    return {"whole": measure_whole(post, tok, text),
            **{f"stream-{k}": assemble(stream_chunks(post, tok, text, k)) for k in CHUNKINGS}}


def record(url: str, tok: Tokenizer) -> dict[str, Any]:
    return {name: measure(http_post(url), tok, text) for name, text in OUTPUTS.items()}


# -- fixtures ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llama3_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenspec.harness.models.tiny import build, with_llama3_tokens

    base = tmp_path_factory.mktemp("l3j")
    build(base / "tiny")
    return with_llama3_tokens(base / "tiny", base / "l3j")


@pytest.fixture(scope="module")
def tok(llama3_model: Path) -> Tokenizer:
    return Tokenizer.from_file(str(llama3_model / "tokenizer.json"))


@pytest.fixture(scope="module")
def frontend_url(llama3_model: Path) -> Iterator[str]:
    # The recorded answers are vLLM 0.32's, which 0.33 reads alike; 0.34 reads calls only from the start.
    config = FrontendConfig(llama3_model, MODEL, tool_parser="llama3_json", max_body_bytes=1 << 20,
                            api_generation="0.33")
    with running_app(create_app(config)) as url:
        yield url


if __name__ == "__main__":  # recording: python tests/test_llama3_json_parser.py http://127.0.0.1:PORT MODEL_DIR
    print(json.dumps(record(sys.argv[1], Tokenizer.from_file(str(Path(sys.argv[2]) / "tokenizer.json"))),
                     indent=1, ensure_ascii=False))


def as_tuple(result: dict[str, Any]) -> tuple[str | None, str, list[list[str]]]:
    return result["content"], result["finish_reason"], result["tool_calls"]


# -- (1) the parser alone, on the recorded whole-output answers --------------------------------------------

@pytest.mark.parametrize("name", OUTPUTS)
def test_extract_matches_vllm(name):
    content, _, calls = EXPECTED[name]["whole"]
    got_content, got_calls = Llama3JsonToolParser().extract(OUTPUTS[name])
    assert (got_content, [[c["name"], c["arguments"]] for c in got_calls]) == (content, calls)


def test_registered_under_vllm_name():
    assert TOOL_PARSERS["llama3_json"] is Llama3JsonToolParser
    assert Llama3JsonToolParser.MARKERS == ("<|python_tag|>",)


# -- (2) the prefix reader: where a stream can decide "content" before its end -------------------------------

def _json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                        st.text(max_size=6))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
        max_leaves=max_leaves)


@given(value=st.dictionaries(st.text(max_size=4), _json_values(), max_size=3),
       style=st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 2}, {"ensure_ascii": False},
                              {"indent": "\t", "ensure_ascii": False}]))
def test_every_prefix_of_a_json_object_may_become_one(value, style):
    """Soundness: a stream never gives up on text that a later chunk could still complete."""
    text = json.dumps(value, **style)
    assert all(_may_become_object(text[:n]) for n in range(1, len(text)))


@pytest.mark.parametrize("text", ["{x", '{"a" 1', '{"a": 01', '{"a": tru ', '{"a": "\n', '{"a": [1,]', '{,',
                                  '{"a": "\\q', '{"a": -x', '{"a": nan'])
def test_a_prefix_no_continuation_completes(text):
    assert not _may_become_object(text)
    for tail in ("", "}", '"}', "]}", ' "b": 2}'):
        with pytest.raises(json.JSONDecodeError):
            json.JSONDecoder().raw_decode(text + tail)


# -- (3) streaming: the concatenated stream is the whole answer, for every split of the text -----------------

def feed_all(pieces: list[str], parser_class: type[Llama3JsonToolParser] = Llama3JsonToolParser,
             ) -> tuple[str | None, list[list[str]], list[str]]:
    parser = parser_class()
    content, calls, ids = "", {}, []
    for i, piece in enumerate(pieces):
        text, deltas = parser.feed(piece, finished=i == len(pieces) - 1)
        content += text
        for d in deltas:
            entry = calls.setdefault(d.index, ["", ""])
            entry[0] += d.name or ""
            entry[1] += d.arguments or ""
            if d.id is not None:
                ids.append(d.id)
    return content or None, [calls[i] for i in sorted(calls)], ids


def whole(text: str, parser_class: type[Llama3JsonToolParser] = Llama3JsonToolParser,
          ) -> tuple[str | None, list[list[str]]]:
    content, calls = parser_class().extract(text)
    return content or None, [[c["name"], c["arguments"]] for c in calls]


def split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("name", OUTPUTS)
def test_every_split_in_two_or_three_streams_the_whole_answer(name):
    text = OUTPUTS[name]
    want = whole(text)
    cuts = [[a] for a in range(1, len(text))]
    cuts += [[a, b] for a in range(1, len(text), 3) for b in range(a + 1, len(text), 4)]
    for pieces in [[text], *(split(text, c) for c in cuts)]:
        content, calls, ids = feed_all(pieces)
        assert (content, calls) == want, pieces
        assert len(ids) == len(set(ids)) == len(calls)


PIECES = (*OUTPUTS.values(), "{", "}", "; ", " ", "\n", "Sure.", "<|python_tag|>", '{"name": "f", "arguments": {',
          '"x": [1, 2.5e', "NaN", '"}', "}}")


@given(parts=st.lists(st.sampled_from(PIECES), min_size=1, max_size=5), data=st.data())
def test_random_texts_and_chunks_stream_the_whole_answer(parts, data):
    text = "".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=12)))
    content, calls, ids = feed_all(split(text, [c for c in cuts if c < len(text)]))
    assert (content, calls) == whole(text)
    assert len(ids) == len(set(ids)) == len(calls)


# vLLM 0.34.0's render server (llama3_json, the Llama 3 tokens on the tiny model), derendered 2026-12-07: calls only
# from an output that starts with { or <|python_tag|>; text before or prose after leaves it all content.
_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_PARIS = ["get_weather", '{"city": "Paris"}']
VLLM_034 = {
    " " + _CALL: (" " + _CALL, []), "\n" + _CALL: ("\n" + _CALL, []), "x" + _CALL: ("x" + _CALL, []),
    _CALL + " and more": (_CALL + " and more", []), _CALL + "; " + _CALL: (None, [_PARIS, _PARIS]),
    "<|python_tag|>" + _CALL: (None, [_PARIS]), "<|python_tag|> " + _CALL: (None, [_PARIS]),
    _CALL + "\n": (None, [_PARIS]), _CALL + "<|eot_id|>": (None, [_PARIS]),
    '<tool_call>\n' + _CALL + '\n</tool_call>': ('<tool_call>\n' + _CALL + '\n</tool_call>', []),
}


@pytest.mark.parametrize("text", VLLM_034)
def test_the_0_34_reading_matches_vllm_0_34(text):
    assert whole(text, Llama3JsonEngineToolParser) == VLLM_034[text]
    assert tool_parser_class("llama3_json", "0.34") is Llama3JsonEngineToolParser
    assert tool_parser_class("llama3_json", "0.33") is Llama3JsonToolParser


@given(parts=st.lists(st.sampled_from((*PIECES, *VLLM_034)), min_size=1, max_size=5), data=st.data())
def test_the_0_34_reading_streams_the_whole_answer(parts, data):
    text = "".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=12)))
    content, calls, ids = feed_all(split(text, [c for c in cuts if c < len(text)]), Llama3JsonEngineToolParser)
    assert (content, calls) == whole(text, Llama3JsonEngineToolParser)
    assert len(ids) == len(set(ids)) == len(calls)


def test_content_streams_once_no_tool_call_is_possible():
    parser = Llama3JsonToolParser()
    assert parser.feed("Use {") == ("", [])  # may still become a call: held back
    assert parser.feed("x} ") == ("Use {x} ", [])  # "{x" starts no JSON object: content from here on
    assert parser.feed("here", finished=True) == ("here", [])


def test_calls_are_sent_whole_on_the_finishing_chunk():
    text = OUTPUTS["two-calls"]
    parser = Llama3JsonToolParser()
    assert all(parser.feed(text[i:i + 3]) == ("", []) for i in range(0, len(text), 3))
    content, deltas = parser.feed("", finished=True)
    assert content == ""
    assert [(d.index, d.name, d.arguments) for d in deltas] == [
        (0, "get_weather", '{"city": "Paris"}'), (1, "get_time", '{"zone": "CET"}')]
    assert all(d.id for d in deltas) and len({d.id for d in deltas}) == 2


def test_a_later_bad_object_turns_streamed_calls_back_into_content():
    text = OUTPUTS["parameters"] + " {oops"
    assert feed_all([OUTPUTS["parameters"], " {oops"]) == (text, [], [])


# -- (4) the frontend's derender route, whole and streamed -------------------------------------------------------

# The frontend drops a final special token as the EOS (harness/frontend/stopping.py text_ids); vLLM's
# parser path keeps it as text. Only the bare <|python_tag|> output shows it here.
FRONTEND_DEVIATIONS = {"python-tag-only": ("<|python_tag|>", None)}


def frontend_whole(name: str) -> tuple[str | None, str, list[list[str]]]:
    """The whole answer the spec wants: vLLM's split, with DERENDER-006's finish_reason."""
    content, finish, calls = EXPECTED[name]["whole"]
    if calls:
        finish = "tool_calls"  # DERENDER-006; vLLM 0.32's non-stream derender keeps "stop" (a known deviation)
    if name in FRONTEND_DEVIATIONS:
        vllm_content, ours = FRONTEND_DEVIATIONS[name]
        assert content == vllm_content
        content = ours
    return content, finish, calls


@pytest.mark.parametrize("name", OUTPUTS)
def test_frontend_derender_whole_matches_vllm_and_every_stream_matches_whole(name, frontend_url, tok):
    got = measure(http_post(frontend_url), tok, OUTPUTS[name])
    for mode in EXPECTED[name]:
        assert got[mode]["ids_ok"], mode
        assert as_tuple(got[mode]) == frontend_whole(name), mode  # STREAM-008: the stream is the whole answer


# vLLM 0.32's stream is not its own whole answer for these outputs (EXPECTED's stream-K rows); the suite sees
# it as STREAM-008/PARITY-004 failures, recorded in reports/expectations/vllm-0.32.0-cpu.yaml.
VLLM_STREAM_DIFFERS = ("parameters", "arguments", "python-tag", "two-calls", "python-tag-two-calls",
                       "newline-separated", "text-before", "text-after", "leading-space", "malformed",
                       "missing-name", "both-keys", "nested", "unicode", "compact", "empty-parameters",
                       "python-tag-only", "adjacent-objects")


def test_recorded_vllm_streams_differ_from_vllm_whole_exactly_where_listed():
    def same_split(a, b):  # finish_reason aside (DERENDER-006 is its own deviation)
        return (a[0], a[2]) == (b[0], b[2])

    differs = {name for name, modes in EXPECTED.items()
               if any(not same_split(r, modes["whole"]) for m, r in modes.items() if m != "whole")}
    assert differs == set(VLLM_STREAM_DIFFERS)


def test_frontend_tool_call_shape(frontend_url, tok):
    body = {"model": MODEL, "prompt_token_ids": tok.encode(PROMPT).ids, "chat_request": CHAT,
            "generate_response": {"request_id": "r", "choices": [{
                "index": 0, "token_ids": tok.encode(OUTPUTS["python-tag"]).ids, "finish_reason": "stop"}]}}
    message = http_post(frontend_url)(body)["choices"][0]["message"]
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert message["content"] is None


# -- live re-check against vLLM ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vllm_llama3_render(vllm_install, llama3_model) -> Iterator[str]:
    from tokenspec.harness.implementations import vllm

    server = vllm.VllmServer(vllm_install, "render", llama3_model, MODEL,
                             extra_args=vllm.parser_args("llama3_json", None))
    with server:
        yield server.url


@pytest.mark.vllm
def test_table_matches_live_vllm(vllm_llama3_render, tok):
    live = record(vllm_llama3_render, tok)
    assert {n: {m: as_tuple(r) for m, r in modes.items()} for n, modes in live.items()} == EXPECTED
    assert all(r["ids_ok"] for modes in live.values() for r in modes.values())
