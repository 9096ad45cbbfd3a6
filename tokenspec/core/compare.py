"""Field-by-field comparison of two OpenAI chat/completions answers, after normalisation.

Used by the suite's parity tests and by ``tokenspec parity``. Normalisation removes what legitimately
differs between two correct servers (random ids, tool-call id suffixes, JSON formatting of tool arguments,
absent vs null), and nothing else: the fields compared are exactly the ones the parity requirements name.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHAT_FIELDS", "COMPLETION_FIELDS", "Difference", "assemble_chat_stream", "chat_view", "compare_chat",
    "compare_completions", "compare_logprobs", "compare_views", "completion_view", "tool_signature",
]

CHAT_FIELDS = ("content", "reasoning", "tool_calls", "finish_reason", "usage")
COMPLETION_FIELDS = ("text", "finish_reason", "usage")


@dataclass(frozen=True)
class Difference:
    field: str
    a: Any
    b: Any

    def __str__(self) -> str:
        a, b = (json.dumps(v, ensure_ascii=False)[:300] for v in (self.a, self.b))
        return f"{self.field}: {a} != {b}"


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def tool_signature(calls: list[dict[str, Any]] | None) -> list[tuple[str | None, Any]]:
    """(name, parsed arguments) per call: ids and argument formatting are not part of the contract."""
    out: list[tuple[str | None, Any]] = []
    for call in calls or []:
        function = call.get("function") or {}
        out.append((function.get("name"), _arguments(function.get("arguments"))))
    return out


def _text(value: Any) -> str | None:
    return value if value else None  # "" and None both mean "no text"


def _without(text: str | None, ignore_texts: tuple[str, ...]) -> str | None:
    for ignored in ignore_texts:
        text = text.replace(ignored, "") if text else text
    return _text(text)


def chat_view(choice: dict[str, Any], usage: dict[str, Any] | None, ignore_texts: tuple[str, ...] = ()
              ) -> dict[str, Any]:
    """The parity-relevant fields of a chat choice; ``ignore_texts`` (special-token texts, which DERENDER-025
    says are never content) are removed from content and reasoning first."""
    message = choice.get("message") or {}
    return {
        "content": _without(message.get("content"), ignore_texts),
        "reasoning": _without(message.get("reasoning") or message.get("reasoning_content"), ignore_texts),
        "tool_calls": tool_signature(message.get("tool_calls")),
        "finish_reason": choice.get("finish_reason"),
        "usage": None if usage is None else {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens",
                                                                        "total_tokens")},
    }


def completion_view(choice: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "text": choice.get("text"),
        "finish_reason": choice.get("finish_reason"),
        "usage": None if usage is None else {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens",
                                                                        "total_tokens")},
    }


def compare_views(a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...]) -> list[Difference]:
    return [Difference(f, a.get(f), b.get(f)) for f in fields if a.get(f) != b.get(f)]


def _compare_choices(a: dict[str, Any], b: dict[str, Any], view: Any, fields: tuple[str, ...]
                     ) -> list[Difference]:
    """Differences choice by choice, matched by index, each choice reduced by ``view`` first."""
    a_choices = {c["index"]: c for c in a.get("choices") or []}
    b_choices = {c["index"]: c for c in b.get("choices") or []}
    if sorted(a_choices) != sorted(b_choices):
        return [Difference("choices.index", sorted(a_choices), sorted(b_choices))]
    diffs: list[Difference] = []
    for index in sorted(a_choices):
        va, vb = view(a_choices[index], a.get("usage")), view(b_choices[index], b.get("usage"))
        diffs += [Difference(f"choices[{index}].{d.field}", d.a, d.b) for d in compare_views(va, vb, fields)]
    return diffs


def compare_chat(a: dict[str, Any], b: dict[str, Any], fields: tuple[str, ...] = CHAT_FIELDS,
                 ignore_texts: tuple[str, ...] = ()) -> list[Difference]:
    """Differences between two chat completion responses."""
    return _compare_choices(a, b, lambda choice, usage: chat_view(choice, usage, ignore_texts), fields)


def compare_completions(a: dict[str, Any], b: dict[str, Any],
                        fields: tuple[str, ...] = COMPLETION_FIELDS) -> list[Difference]:
    """Differences between two completions responses."""
    return _compare_choices(a, b, completion_view, fields)


def compare_logprobs(a: list[dict[str, Any]] | None, b: list[dict[str, Any]] | None,
                     tolerance: float = 1e-3) -> list[Difference]:
    """Chat-shape logprobs: same token strings, values within ``tolerance``, same top-k token sets."""
    a, b = a or [], b or []
    if len(a) != len(b):
        return [Difference("logprobs.length", len(a), len(b))]
    diffs = []
    for i, (ea, eb) in enumerate(zip(a, b, strict=True)):
        if ea.get("token") != eb.get("token"):
            diffs.append(Difference(f"logprobs[{i}].token", ea.get("token"), eb.get("token")))
        if not math.isclose(ea.get("logprob", 0.0), eb.get("logprob", 0.0), abs_tol=tolerance):
            diffs.append(Difference(f"logprobs[{i}].logprob", ea.get("logprob"), eb.get("logprob")))
        ta = sorted(t.get("token") for t in ea.get("top_logprobs") or [])
        tb = sorted(t.get("token") for t in eb.get("top_logprobs") or [])
        if ta != tb:
            diffs.append(Difference(f"logprobs[{i}].top_logprobs", ta, tb))
    return diffs


def assemble_chat_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold chat.completion.chunk objects into one chat.completion-like answer (per choice index).

    Tool-call deltas are merged by their ``index`` the way OpenAI clients do: the first delta of a call
    carries its name, later ones append argument text.
    """
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if chunk.get("usage"):
            usage = chunk["usage"]
        for ch in chunk.get("choices") or []:
            slot = choices.setdefault(ch["index"], {"index": ch["index"], "content": "", "reasoning": "",
                                                    "calls": {}, "finish_reason": None, "token_ids": []})
            delta = ch.get("delta") or {}
            slot["content"] += delta.get("content") or ""
            slot["reasoning"] += delta.get("reasoning") or delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                merged = slot["calls"].setdefault(call.get("index", 0), {"function": {"name": None, "arguments": ""}})
                function = call.get("function") or {}
                if function.get("name"):
                    merged["function"]["name"] = function["name"]
                merged["function"]["arguments"] += function.get("arguments") or ""
            slot["token_ids"] += ch.get("token_ids") or []
            if ch.get("finish_reason"):
                slot["finish_reason"] = ch["finish_reason"]
    out_choices = []
    for index in sorted(choices):
        slot = choices[index]
        message = {"role": "assistant", "content": slot["content"] or None, "reasoning": slot["reasoning"] or None,
                   "tool_calls": [slot["calls"][k] for k in sorted(slot["calls"])] or None}
        out_choices.append({"index": index, "message": message, "finish_reason": slot["finish_reason"],
                            "token_ids": slot["token_ids"]})
    return {"choices": out_choices, "usage": usage}
