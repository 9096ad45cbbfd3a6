"""Request payloads of a given size in tokens, cut from the shipped corpus of mixed text."""

from __future__ import annotations

import math
from typing import Any

from tokenspec.harness.models.tiny import corpus_texts

TARGET_TOKENS = 300  # the frontend benchmark's prompt and output size


def mixed_text() -> list[str]:
    """The shipped corpus, one string per file (prose, accented Latin, CJK, emoji, code, JSON)."""
    return [text for _, text in corpus_texts()]


def conversation(tokenizer: Any, content_tokens: int) -> list[dict[str, str]]:
    """A system + user + assistant + user conversation whose message text is about ``content_tokens`` tokens
    of mixed corpus text."""
    texts = mixed_text()
    per_part = max(1, content_tokens // 3)
    parts = []
    for i in range(3):
        ids = tokenizer.encode(texts[i % len(texts)] + "\n" + texts[(i + 3) % len(texts)]).ids
        parts.append(tokenizer.decode(ids[:per_part]).strip())
    return [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": parts[0]},
            {"role": "assistant", "content": parts[1]},
            {"role": "user", "content": parts[2]}]


def output_ids(tokenizer: Any, count: int) -> list[int]:
    """About ``count`` token ids of mixed text: an equal share from every corpus file, cut at whole tokens."""
    texts = mixed_text()
    share = math.ceil(count / len(texts))
    ids: list[int] = []
    for text in texts:
        ids += tokenizer.encode(text).ids[:share]
    return ids[:count]
