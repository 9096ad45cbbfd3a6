"""Incremental detokenization that never emits part of a UTF-8 character.

``skip_ids`` are the token ids dropped from the text (the special tokens, when the request skips them; the
derenderer keeps the ones its parsers need).

Byte-level BPE spreads one character (an emoji, say) over several tokens; decoding a prefix of them yields
U+FFFD. The decoder therefore keeps a small window of pieces: ``prefix_offset`` marks text already emitted
that is re-decoded only as context, ``read_offset`` marks where unread pieces start. New text is emitted
only when the decoded window grows and does not end in U+FFFD, so a split character is held back until its
last byte arrives. This is the same window vLLM carries in its client-side ``stream_state``
(``prev_tokens``, ``prefix_offset``, ``read_offset``), so states are interchangeable between the servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenspec.harness.frontend.model_files import ModelFiles

REPLACEMENT_CHAR = "\ufffd"
# How many prompt pieces seed the window, and how far back the first prefix reaches (vLLM's values).
_SEED_PIECES = 7
_PREFIX_REACH = 5


@dataclass
class DecodeWindow:
    """The incremental decoder's state; small and JSON-friendly because clients carry it.

    ``ids`` runs beside ``prev_tokens`` (the ids of those pieces) when the window came from ids: vLLM 0.34 carries
    the window as ``prev_token_ids``, because string pieces lose raw-byte tokens; None for a window of pieces only.
    """

    prev_tokens: list[str] = field(default_factory=list)
    prefix_offset: int = 0
    read_offset: int = 0
    ids: list[int] | None = None


def seed_window(model: ModelFiles, prompt_ids: list[int] | None, skip_ids: frozenset[int]) -> DecodeWindow:
    """Prime the window with the prompt's tail so the first output token decodes in context."""
    if not prompt_ids:
        return DecodeWindow(ids=[])
    ids = [i for i in prompt_ids[-_SEED_PIECES:] if i not in skip_ids]
    pieces = model.ids_to_pieces(ids, frozenset())
    return DecodeWindow(list(pieces), max(len(pieces) - _PREFIX_REACH, 0), len(pieces), ids)


def window_of_ids(model: ModelFiles, ids: list[int], prefix_offset: int, read_offset: int) -> DecodeWindow:
    """A window carried as ids (``prev_token_ids``), its pieces looked up again."""
    return DecodeWindow(model.ids_to_pieces(ids, frozenset()), prefix_offset, read_offset, list(ids))


def decode_step(model: ModelFiles, window: DecodeWindow, token_id: int, skip_ids: frozenset[int]) -> str:
    """Feed one token id; return the text it completes ('' while a character is incomplete).

    The window is updated in place and trimmed to the part later steps can still read.
    """
    new_pieces = model.ids_to_pieces([token_id], skip_ids)
    pieces = window.prev_tokens + new_pieces
    if window.ids is not None and new_pieces:
        window.ids = window.ids + [token_id]
    prefix, read = window.prefix_offset, window.read_offset
    prefix_text = model.pieces_to_text(pieces[prefix:read])
    full_text = model.pieces_to_text(pieces[prefix:])
    if len(full_text) <= len(prefix_text) or full_text.endswith(REPLACEMENT_CHAR):
        emitted = ""
    else:
        emitted = full_text[len(prefix_text):]
        prefix, read = read, len(pieces)
    # Everything before the prefix is never read again: drop it and rebase the offsets.
    window.prev_tokens = pieces[prefix:]
    if window.ids is not None:
        window.ids = window.ids[prefix:]
    window.read_offset = read - prefix
    window.prefix_offset = 0
    return emitted


def decode_tokens(model: ModelFiles, window: DecodeWindow, token_ids: list[int], skip_ids: frozenset[int]) -> str:
    """Decode a run of ids through the window; the concatenation of each step's text.

    The same steps as calling ``decode_step`` per id, in one loop: the pieces are looked up in one call and
    the window is trimmed once at the end (a step only ever reads ``pieces[prefix:]``, so trimming later
    changes nothing). A 300-token derender spends most of its time here.
    """
    if not token_ids:
        return ""
    all_pieces = model.ids_to_pieces(token_ids, frozenset())
    special = skip_ids
    to_text = model.pieces_to_text
    pieces = list(window.prev_tokens)
    ids = None if window.ids is None else list(window.ids)
    prefix, read = window.prefix_offset, window.read_offset
    out: list[str] = []
    for token_id, piece in zip(token_ids, all_pieces, strict=True):
        if token_id not in special:  # a skipped special token still makes a step, with no new piece
            pieces.append(piece)
            if ids is not None:
                ids.append(token_id)
        prefix_text = to_text(pieces[prefix:read])
        full_text = to_text(pieces[prefix:])
        if len(full_text) > len(prefix_text) and not full_text.endswith(REPLACEMENT_CHAR):
            out.append(full_text[len(prefix_text):])
            prefix, read = read, len(pieces)
    window.prev_tokens = pieces[prefix:]
    window.ids = None if ids is None else ids[prefix:]
    window.read_offset = read - prefix
    window.prefix_offset = 0
    return "".join(out)


def decode_all(model: ModelFiles, window: DecodeWindow, token_ids: list[int], skip_ids: frozenset[int]) -> str:
    """What ``decode_tokens`` returns for a whole (non-streamed) output, usually in one decoder call.

    When the window's text plus the output decodes without U+FFFD, no step of the incremental loop would
    have held text back, and a byte-level decoder is concatenative at character boundaries, so one decode
    of the whole run gives the same text. Otherwise (a split character anywhere, or a decoder whose output
    for a prefix is not a prefix of the whole) the exact incremental loop runs. The window is consumed.
    """
    if not token_ids:
        return ""
    new = model.ids_to_pieces(token_ids, skip_ids)
    pieces = window.prev_tokens
    before = model.pieces_to_text(pieces[window.prefix_offset:window.read_offset])
    whole = model.pieces_to_text(pieces[window.prefix_offset:] + new)
    if REPLACEMENT_CHAR not in whole and whole.startswith(before) and window.read_offset == len(pieces):
        return whole[len(before):]
    return decode_tokens(model, window, token_ids, skip_ids)
