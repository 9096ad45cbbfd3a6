"""``<think>...</think>`` reasoning split, as vLLM's qwen3 reasoning parser does it.

Observed rules (vLLM 0.32, qwen3): the output starts inside the reasoning block (the template may already
have opened it), so text before the first ``</think>`` is reasoning and ``<think>`` itself is dropped; a
``<tool_call>`` also ends reasoning and stays in the content. With no end marker everything is reasoning.
``chat_template_kwargs.enable_thinking: false`` switches reasoning parsing off entirely.
"""

from __future__ import annotations

from typing import Any

from tokenspec.harness.frontend.parsers.markup import partial_suffix
from tokenspec.harness.frontend.parsers.progress import TEXT, Resumable

THINK_START = "<think>"
THINK_END = "</think>"
TOOL_START = "<tool_call>"


class ThinkReasoningParser(Resumable):
    """Splits text into (reasoning, content); ``feed`` gives the same split incrementally."""

    MARKERS = (THINK_START, THINK_END)  # texts the parser must see, even when they are special tokens
    #: vLLM 0.32 runs qwen3 reasoning on the same parser engine as its engine-based tool parsers (qwen3_coder),
    #: which then keep their own content even when no call parsed (``Qwen3CoderToolParser``).
    ENGINE_BASED = True

    PROGRESS = {"_mode": {"enum": ["reasoning", "content"]}, "_pending": TEXT}

    def __init__(self, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.enabled = (chat_template_kwargs or {}).get("enable_thinking", True) is not False
        self._mode = "reasoning" if self.enabled else "content"
        self._pending = ""  # text received but not sent: a tail that may still become a marker

    #: tokens that end the scan of the prompt for a think marker (the current turn only); none: the whole prompt
    TURN_BOUNDARIES: tuple[str, ...] = ("<|im_start|>", "<|im_end|>")

    def prompt_left_reasoning(self, prompt_ids: list[int], vocab: dict[str, int]) -> bool:
        """Whether generation starts after reasoning (render's ``reasoning_ended``), from the prompt's ids.

        vLLM 0.32: with thinking off, always; else the last ``</think>`` or ``<think>`` of the current turn
        decides (end: True, start: False), and a prompt whose current turn has neither is still reasoning.
        """
        if not self.enabled:
            return True
        start, end = vocab.get(THINK_START), vocab.get(THINK_END)
        boundaries = {vocab[t] for t in self.TURN_BOUNDARIES if t in vocab}
        for token in reversed(prompt_ids):
            if token == end:
                return True
            if token == start or token in boundaries:
                return False
        return False

    @staticmethod
    def _end_of_reasoning(text: str) -> tuple[int, int] | None:
        """(end of reasoning, start of content) for the first end marker, or None."""
        found = [(i, i + len(THINK_END)) for i in [text.find(THINK_END)] if i >= 0]
        found += [(i, i) for i in [text.find(TOOL_START)] if i >= 0]
        return min(found) if found else None

    def split(self, text: str) -> tuple[str | None, str | None]:
        """Non-streaming split of a whole output."""
        if not self.enabled:
            return None, text
        end = self._end_of_reasoning(text)
        if end is None:
            return text.replace(THINK_START, "") or None, None
        reasoning = text[: end[0]].replace(THINK_START, "")
        content = text[end[1]:].replace(THINK_END, "")
        return reasoning or None, content or None

    def feed(self, delta: str, finished: bool = False) -> tuple[str, str]:
        """Add streamed text; return (new reasoning, new content) safe to emit now.

        A tail that may be the start of a marker is held back, unless the output has ``finished``. Only that
        tail is kept between calls: no marker can straddle text already sent, so each piece is split alone.
        """
        if not self.enabled:
            return "", delta
        text = self._pending + delta
        if self._mode == "content":
            return "", self._content(text, finished)
        end = self._end_of_reasoning(text)
        if end is None:
            hold = 0 if finished else max(partial_suffix(text, t) for t in (THINK_START, THINK_END, TOOL_START))
            self._pending = text[len(text) - hold:]
            return text[: len(text) - hold].replace(THINK_START, ""), ""
        self._mode = "content"
        return text[: end[0]].replace(THINK_START, ""), self._content(text[end[1]:], finished)

    def _content(self, text: str, finished: bool) -> str:
        """Content to send, with later ``</think>`` markers dropped as ``split`` drops them; a tail that may be
        the start of ``</think>`` is held back until it is decided (or the output ends)."""
        hold = 0 if finished else partial_suffix(text, THINK_END)
        self._pending = text[len(text) - hold:]
        return text[: len(text) - hold].replace(THINK_END, "")


class DeepSeekR1ReasoningParser(ThinkReasoningParser):
    """``<think>...</think>`` as vLLM's deepseek_r1 parser splits it (specs/parsers.yaml, deepseek_r1 rows).

    Unlike qwen3: ``enable_thinking`` is ignored (the parser always runs), only ``</think>`` ends reasoning
    (tool-call markup inside reasoning stays reasoning), text after the first ``<think>`` is what is split,
    and later ``</think>`` strings stay in the content.
    """

    ENGINE_BASED = False  # a parser of its own in vLLM 0.32

    TURN_BOUNDARIES = ()  # the whole prompt is scanned

    PROGRESS = {"_mode": {"enum": ["opening", "reasoning", "content"]}, "_pending": TEXT}

    def __init__(self, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(None)
        self._mode = "opening"  # no <think> seen yet

    def split(self, text: str) -> tuple[str | None, str | None]:
        _, opened, after = text.partition(THINK_START)
        body = after if opened else text
        reasoning, ended, content = body.partition(THINK_END)
        if not ended:
            return body or None, None
        return reasoning or None, content or None

    def feed(self, delta: str, finished: bool = False) -> tuple[str, str]:
        """The split of everything seen so far, less a tail that may still become a marker; emit what is new.

        Until a ``<think>`` has been seen nothing is sent: one arriving later restarts the split after it (the
        whole answer drops the text before it), and what was sent cannot be taken back (STREAM-008). So the
        text before it is the one thing kept whole between calls; after it only an undecided tail is."""
        text = self._pending + delta
        if self._mode == "opening":
            _, opened, after = text.partition(THINK_START)
            if not opened:
                if not finished:
                    self._pending = text
                    return "", ""
                self._pending = ""
                reasoning, content = self.split(text)
                return reasoning or "", content or ""
            self._mode, text = "reasoning", after
        if self._mode == "content":
            self._pending = ""
            return "", text
        reasoning, ended, content = text.partition(THINK_END)
        if ended:
            self._mode, self._pending = "content", ""
            return reasoning, content
        hold = 0 if finished else max(partial_suffix(text, t) for t in (THINK_START, THINK_END))
        self._pending = text[len(text) - hold:]
        return text[: len(text) - hold], ""
