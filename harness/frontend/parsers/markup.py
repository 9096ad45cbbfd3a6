"""Text helpers shared by the parsers."""

from __future__ import annotations


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with (0 if none).

    A stream must hold such a tail back: the next chunk may complete it into the tag.
    """
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
