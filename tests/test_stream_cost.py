"""A streamed derender's work per chunk and its state's size do not grow with the stream (STREAM-019).

Counted, not timed: the token ids decoded, the characters of text decoded, the characters the parsers re-read (the
undecided text their progress carries, plus the chunk's text) and the size of the stream_state, per chunk, near
token 1,000 and near token 32,000 of one long reasoning stream under a request with tools, on the tiny model, the
qwen3 family (qwen3 + hermes) and the qwen3-coder family (qwen3_coder, which reads the ``<think>`` text as content).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.derender import Derenderer
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.models.families import FAMILY_PARSERS

LENGTH = 32_000
EARLY, LATE = range(1_000, 1_200), range(LENGTH - 200, LENGTH)
STATE_LIMIT = 4096  # bytes of stream_state when no construct is open (issue 40's target)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
WORDS = ("the model weighs each option before it answers and writes down what it finds along the way " * 50).split()


class Counted:
    """The model's two decoding calls, counted: a test double around the real tokenizer, not in its place."""

    def __init__(self, model: ModelFiles) -> None:
        self.ids = self.chars = 0
        self._pieces, self._text = model.ids_to_pieces, model.pieces_to_text
        model.ids_to_pieces = self.ids_to_pieces  # type: ignore[method-assign]
        model.pieces_to_text = self.pieces_to_text  # type: ignore[method-assign]

    def ids_to_pieces(self, ids: list[int], skip: frozenset[int]) -> list[str]:
        self.ids += len(ids)
        return self._pieces(ids, skip)

    def pieces_to_text(self, pieces: list[str]) -> str:
        text = self._text(pieces)
        self.chars += len(text)
        return text


def _strings(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_strings(v) for v in value)
    return 0


def _output(model: ModelFiles) -> list[int]:
    """A reasoning stream of LENGTH tokens: ``<think>`` and words, closed and answered at the very end."""
    ids = model.encode("<think>\n", add_special_tokens=False)
    words = iter(WORDS * 1000)
    while len(ids) < LENGTH:
        ids += model.encode(" " + next(words), add_special_tokens=False)
    return ids[: LENGTH - 8] + model.encode("</think>\n\nYes.", add_special_tokens=False)[:8]


def _per_chunk(model_dir: Path, parsers: tuple[str | None, str | None], chunk: int) -> dict[str, dict[str, int]]:
    """Stream the output through the derenderer in chunks of ``chunk`` ids, the state carried through JSON as a
    client carries it; the largest figure per chunk in each window."""
    tool, reasoning = parsers
    model = ModelFiles.load(model_dir)
    derender = Derenderer(FrontendConfig(model_dir, tool_parser=tool, reasoning_parser=reasoning,
                                         max_model_len=LENGTH * 2), model)
    counted = Counted(model)
    output = _output(model)
    prompt = model.encode("<|im_start|>user\nThink it over.<|im_end|>\n<|im_start|>assistant\n", False)
    request = {"messages": [{"role": "user", "content": "Think it over."}], "tools": TOOLS}
    state: dict[str, Any] | None = None
    worst: dict[str, dict[str, int]] = {"early": {}, "late": {}}
    for start in range(0, LENGTH, chunk):
        ids = output[start:start + chunk]
        last = start + chunk >= LENGTH
        body = {"stream": True, "generate_chunk": {"request_id": "r", "choices": [
            {"index": 0, "token_ids": ids, "finish_reason": "stop" if last else None}]},
            "stream_state": state, "prompt_token_ids": prompt, "chat_request": request}
        reread = _strings((state or {}).get("parser_state")) + len((state or {}).get("held_text") or "")
        counted.ids = counted.chars = 0
        answer = derender.chat_stream(body, "m")
        carried = json.dumps(answer["stream_state"])
        state = json.loads(carried)
        window = "early" if start in EARLY else "late" if start in LATE else None
        if window:
            figures = {"ids decoded": counted.ids, "chars decoded": counted.chars, "chars re-read": reread,
                       "state bytes": len(carried)}
            for key, value in figures.items():
                worst[window][key] = max(worst[window].get(key, 0), value)
    return worst


CASES = [("tiny", "parsers", 1), ("tiny", "parsers", 8), ("tiny", "plain", 1), ("qwen3", "parsers", 1),
         ("qwen3", "parsers", 8), ("qwen3-coder", "parsers", 8)]


@pytest.mark.parametrize(("family", "path", "chunk"), CASES, ids=[f"{f}-{p}-{c}" for f, p, c in CASES])
def test_a_chunk_at_token_32k_costs_what_one_at_token_1k_costs(family, path, chunk, model_dir, families) -> None:
    folder = model_dir if family == "tiny" else families[family].model_dir
    parsers = FAMILY_PARSERS[family] if path == "parsers" else (None, None)
    worst = _per_chunk(folder, parsers, chunk)
    early, late = worst["early"], worst["late"]
    grown = {key: (early[key], late[key]) for key in early if late[key] > early[key] + 16}
    assert not grown, f"per-chunk work grew from token 1k to token {LENGTH // 1000}k: {grown}"
    assert late["state bytes"] < STATE_LIMIT, f"stream_state at token {LENGTH}: {late['state bytes']} bytes"
    # the chunk's ids plus the few of the carried decode window (0.34 carries it as ids)
    assert late["ids decoded"] <= chunk + 8, f"{late['ids decoded']} ids decoded for a chunk of {chunk}"
