"""Token ids shown as text: a failing comparison of ids (``515 != 712``) hides what a person needs to see (the
system message vanished) unless both sides are decoded, special tokens visible.

The plugin records a failing comparison's two operands as text (pretty JSON); this module finds the token id
lists in them (the operands themselves, or fields of the same name on both sides), decodes each side with the
run's codec, and shows the first differing segment. The codec is the run's own (the model folder's tokenizer,
else the target's /detokenize); a side that cannot be decoded is simply not shown as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable

#: Characters of context shown before the first difference, and of each side after it.
BEFORE = 24
AFTER = 72


def _ids(value: object) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def id_pairs(expected: str, actual: str) -> list[tuple[str, list[int], list[int]]]:
    """``(where, expected ids, actual ids)`` for each id list the two operands hold at the same place: the operands
    themselves, or a field of the same name on both sides (one level down: a render answer's ``token_ids``)."""
    try:
        left, right = json.loads(expected), json.loads(actual)
    except (TypeError, ValueError):
        return []
    if (a := _ids(left)) is not None and (b := _ids(right)) is not None:
        return [("", a, b)]
    if isinstance(left, dict) and isinstance(right, dict):
        return [(key, a, b) for key in left if key in right
                and (a := _ids(left[key])) is not None and (b := _ids(right[key])) is not None and a != b]
    return []


def decoded(expected: str, actual: str, decode: Callable[[list[int]], str]) -> tuple[str, str]:
    """Both operands' token ids as text (each pair under its field name when there are several), or ``("", "")``
    when they hold no id lists or the codec cannot decode them."""
    pairs = id_pairs(expected, actual)
    if not pairs:
        return "", ""
    lefts, rights = [], []
    try:
        for where, a, b in pairs:
            head = f"{where}: " if where and len(pairs) > 1 else ""
            lefts.append(head + decode(a))
            rights.append(head + decode(b))
    except Exception:  # an id the codec does not know, a codec that went away: the ids still show
        return "", ""
    return "\n".join(lefts), "\n".join(rights)


def _shown(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def first_difference(expected: str, actual: str) -> str:
    """One line: where the two texts part, a little before it and the rest of each side from there, escaped
    (``expected `<|im_start|>system\\nYou are...` / got `<|im_start|>user...```)."""
    common = 0
    while common < min(len(expected), len(actual)) and expected[common] == actual[common]:
        common += 1
    start = max(0, common - BEFORE)
    lead = "..." if start else ""

    def side(text: str) -> str:
        rest = text[start:common + AFTER]
        return f"`{lead}{_shown(rest)}{'...' if len(text) > common + AFTER else ''}`" if rest else "(nothing)"

    return f"expected {side(expected)} / got {side(actual)} (they part at character {common})"
