"""Generate's id-only logprobs -> OpenAI chat and completions logprob shapes.

Each id is decoded on its own; a piece that decodes to U+FFFD (one byte of a multi-byte character) is
repaired from up to four preceding sampled ids, as vLLM does, so clients see the character once.
"""

from __future__ import annotations

from typing import Any

from tokenspec.harness.frontend.model_files import ModelFiles

CONTEXT_WINDOW = 4


def _token_text(model: ModelFiles, token_id: int) -> str | None:
    if model.id_to_piece(token_id) is None:
        return None
    return model.decode([token_id])


def _repair(model: ModelFiles, token_id: int, context: list[int]) -> str:
    for n in range(1, min(len(context), CONTEXT_WINDOW) + 1):
        ctx = context[-n:]
        full = model.decode(ctx + [token_id])
        if full.endswith("\ufffd"):
            continue
        clean_end = len(ctx)
        for j in range(len(ctx) - 1, -1, -1):
            if not model.decode([ctx[j]]).endswith("\ufffd"):
                break
            clean_end = j
        prefix = model.decode(ctx[:clean_end]) if clean_end else ""
        if full.startswith(prefix):
            return full[len(prefix):]
        common = 0
        for a, b in zip(prefix, full, strict=False):
            if a != b:
                break
            common += 1
        return full[common:]
    return ""


def _entry(model: ModelFiles, token_id: int, logprob: float, context: list[int]) -> dict[str, Any]:
    text = _token_text(model, token_id)
    if text is None:
        return {"token": "", "logprob": logprob, "bytes": None}
    if text.endswith("\ufffd"):
        text = _repair(model, token_id, context)
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8", errors="replace"))}


def chat_logprobs(model: ModelFiles, logprobs: dict[str, Any], context: list[int] | None = None
                  ) -> dict[str, Any]:
    content = logprobs.get("content")
    if content is None:
        return {"content": None, "refusal": None}
    ctx = list(context or [])
    out = []
    for item in content:
        entry = _entry(model, item["token_id"], item["logprob"], ctx)
        entry["top_logprobs"] = [_entry(model, t["token_id"], t["logprob"], ctx)
                                 for t in item.get("top_logprobs") or []]
        out.append(entry)
        ctx.append(item["token_id"])
    return {"content": out, "refusal": None}


def completion_logprobs(chat: dict[str, Any], text_offset: int = 0) -> dict[str, Any]:
    content = chat.get("content")
    if content is None:
        return {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    offsets, tokens, lps, tops = [], [], [], []
    for entry in content:
        offsets.append(text_offset)
        tokens.append(entry["token"])
        lps.append(entry["logprob"])
        tops.append({t["token"]: t["logprob"] for t in entry["top_logprobs"]} or None)
        text_offset += len(entry["token"])
    return {"text_offset": offsets, "token_logprobs": lps, "tokens": tokens, "top_logprobs": tops}
