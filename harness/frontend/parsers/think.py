"""``<think>...</think>`` reasoning split, as vLLM's qwen3 reasoning parser does it.

Observed rules (vLLM 0.32, qwen3): the output starts inside the reasoning block (the template may already
have opened it), so text before the first ``</think>`` is reasoning and ``<think>`` itself is dropped; a
``<tool_call>`` also ends reasoning and stays in the content. With no end marker everything is reasoning.
``chat_template_kwargs.enable_thinking: false`` switches reasoning parsing off entirely.
"""

from __future__ import annotations

from typing import Any

from tokenspec.harness.frontend.parsers.markup import partial_suffix

THINK_START = "<think>"
THINK_END = "</think>"
TOOL_START = "<tool_call>"


class ThinkReasoningParser:
    """Splits text into (reasoning, content); ``feed`` gives the same split incrementally."""

    MARKERS = (THINK_START, THINK_END)  # texts the parser must see, even when they are special tokens
    #: vLLM 0.32 runs qwen3 reasoning on the same parser engine as its engine-based tool parsers (qwen3_coder),
    #: which then keep their own content even when no call parsed (``Qwen3CoderToolParser``).
    ENGINE_BASED = True

    def __init__(self, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.enabled = (chat_template_kwargs or {}).get("enable_thinking", True) is not False
        self._text = ""
        self._reasoning_sent = 0
        self._content_start: int | None = None if self.enabled else 0
        self._content_sent = 0  # length of the cleaned content already returned (thinking enabled only)

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

        A tail that may be the start of a marker is held back, unless the output has ``finished``.
        """
        self._text += delta
        if self._content_start is not None:
            if not self.enabled:
                return "", delta
            return "", self._new_content(finished)
        end = self._end_of_reasoning(self._text)
        if end is None:
            body = self._text
            hold = 0 if finished else max(partial_suffix(body, t) for t in (THINK_START, THINK_END, TOOL_START))
            visible = body[: len(body) - hold]
        else:
            visible = self._text[: end[0]]
        reasoning = visible.replace(THINK_START, "")
        new_reasoning = reasoning[self._reasoning_sent:]
        self._reasoning_sent = len(reasoning)
        if end is None:
            return new_reasoning, ""
        self._content_start = end[1]
        return new_reasoning, self._new_content(finished)

    def _new_content(self, finished: bool) -> str:
        """Content not yet returned, with later ``</think>`` markers dropped as ``split`` drops them.

        A tail that may be the start of ``</think>`` is held back until it is decided (or the output ends).
        """
        assert self._content_start is not None
        body = self._text[self._content_start:]
        hold = 0 if finished else partial_suffix(body, THINK_END)
        cleaned = body[: len(body) - hold].replace(THINK_END, "")
        new = cleaned[self._content_sent:]
        self._content_sent = len(cleaned)
        return new


class DeepSeekR1ReasoningParser(ThinkReasoningParser):
    """``<think>...</think>`` as vLLM's deepseek_r1 parser splits it (specs/parsers.yaml, deepseek_r1 rows).

    Unlike qwen3: ``enable_thinking`` is ignored (the parser always runs), only ``</think>`` ends reasoning
    (tool-call markup inside reasoning stays reasoning), text after the first ``<think>`` is what is split,
    and later ``</think>`` strings stay in the content.
    """

    ENGINE_BASED = False  # a parser of its own in vLLM 0.32

    TURN_BOUNDARIES = ()  # the whole prompt is scanned

    def __init__(self, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(None)
        self._sent = (0, 0)

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
        whole answer drops the text before it), and what was sent cannot be taken back (STREAM-008)."""
        self._text += delta
        if not finished and THINK_START not in self._text:
            return "", ""
        hold = 0 if finished else max(partial_suffix(self._text, t) for t in (THINK_START, THINK_END))
        reasoning, content = self.split(self._text[: len(self._text) - hold])
        reasoning, content = reasoning or "", content or ""
        new = reasoning[self._sent[0]:], content[self._sent[1]:]
        self._sent = (max(self._sent[0], len(reasoning)), max(self._sent[1], len(content)))
        return new
