"""A Hugging Face model folder as the frontend needs it: tokenizer, chat template, special tokens, defaults.

Only files are read (tokenizer.json, tokenizer_config.json, generation_config.json); no model hub, no
transformers. The methods mirror the few tokenizer operations vLLM's render and derender paths use, with
the same meaning as transformers' fast tokenizers (e.g. "special" = the named special tokens of
tokenizer_config.json plus its additional/extra special tokens, not every added token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tokenspec.core.errors import UsageError

_NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
#: The tokenizers library's ids are unsigned 32-bit: a larger id is no token of any vocabulary.
_ID_RANGE = 2 ** 32
# generation_config.json keys that become sampling defaults, with vLLM's SamplingParams names.
_GENERATION_DEFAULTS = {
    "repetition_penalty": "repetition_penalty",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "max_new_tokens": "max_tokens",
}


def _token_text(value: Any) -> str | None:
    """A special token in tokenizer_config.json is a string or an AddedToken-like dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


@dataclass
class ModelFiles:
    """Everything loaded from one model folder."""

    tokenizer: Tokenizer
    chat_template: str | None
    special_tokens: dict[str, str]  # named special tokens present, e.g. {"eos_token": "<|im_end|>"}
    all_special_tokens: list[str]
    added_vocab: dict[str, int]
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    vocab_size: int = 0
    #: The ids the engine stops on: the tokenizer's eos_token (the primary one) and generation_config.json's.
    eos_ids: frozenset[int] = frozenset()
    primary_eos: int | None = None

    @classmethod
    def load(cls, model_dir: Path) -> ModelFiles:
        tokenizer_path = model_dir / "tokenizer.json"
        if not tokenizer_path.is_file():
            raise UsageError(f"{model_dir} is not a model folder: tokenizer.json is missing")
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        config = _read_json(model_dir / "tokenizer_config.json")
        template = config.get("chat_template")
        if isinstance(template, list):  # the named-templates form: [{"name": "default", "template": ...}]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        jinja_file = model_dir / "chat_template.jinja"
        if template is None and jinja_file.is_file():
            template = jinja_file.read_text(encoding="utf-8")

        special: dict[str, str] = {}
        for name in _NAMED_SPECIAL:
            text = _token_text(config.get(name))
            if text is not None:
                special[name] = text
        extra = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
        if isinstance(extra, dict):
            extra = list(extra.values())
        all_special = list(dict.fromkeys([*special.values(), *filter(None, map(_token_text, extra))]))

        generation = _read_json(model_dir / "generation_config.json")
        defaults = {ours: generation[theirs] for theirs, ours in _GENERATION_DEFAULTS.items()
                    if generation.get(theirs) is not None}
        primary = tokenizer.token_to_id(special["eos_token"]) if "eos_token" in special else None
        config_eos = generation.get("eos_token_id")
        eos = {config_eos} if isinstance(config_eos, int) else set(config_eos or ())
        eos |= {primary} if primary is not None else set()
        return cls(
            tokenizer=tokenizer,
            chat_template=template if isinstance(template, str) else None,
            special_tokens=special,
            all_special_tokens=all_special,
            added_vocab={t.content: i for i, t in tokenizer.get_added_tokens_decoder().items()},
            sampling_defaults=defaults,
            vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
            eos_ids=frozenset(i for i in eos if isinstance(i, int)),
            primary_eos=primary,
        )

    # -- tokenizer operations, with transformers' meaning -------------------------------------------

    @property
    def all_special_ids(self) -> frozenset[int]:
        """The ids ``skip_special_tokens`` drops: the named special tokens plus every added token the
        tokenizer marks special (what the Rust decoder, and so vLLM's detokenizer, skips). Computed once:
        incremental decoding asks for it at every token."""
        key = tuple(self.all_special_tokens)
        cached = self.__dict__.get("_special_ids")
        if cached is None or cached[0] != key:
            ids = {self.tokenizer.token_to_id(t) for t in key}
            ids |= {i for i, token in self.tokenizer.get_added_tokens_decoder().items() if token.special}
            cached = (key, frozenset(i for i in ids if i is not None))
            self.__dict__["_special_ids"] = cached
        return cached[1]

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        """The ids of ``text``. ``encode_batch_fast`` gives the same ids as ``encode`` without tracking character
        offsets, which nothing here reads: about a third less time for a chat prompt."""
        return self.tokenizer.encode_batch_fast([text], add_special_tokens=add_special_tokens)[0].ids

    def encode_with_offsets(self, text: str, add_special_tokens: bool) -> tuple[list[int], list[list[int]]]:
        """The ids of ``text`` and each one's [start, end) character range in it, as the tokenizer reports them
        ([0, 0] for a token it adds): what a fast tokenizer's offset mapping gives vLLM's render."""
        encoding = self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return encoding.ids, [[start, end] for start, end in encoding.offsets]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ``ids``; an id past the tokenizer's 32-bit range has none, as one past its vocabulary
        (DERENDER-033)."""
        if any(not 0 <= i < _ID_RANGE for i in ids):
            ids = [i for i in ids if 0 <= i < _ID_RANGE]
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def id_to_piece(self, token_id: int) -> str | None:
        """The raw vocabulary piece (e.g. byte-level 'Ġhello'), None for an id outside the vocabulary."""
        if not 0 <= token_id < _ID_RANGE:
            return None
        return self.tokenizer.id_to_token(token_id)

    @property
    def piece_table(self) -> list[str]:
        """Every id's piece ('' for gaps), built once: a list index is far cheaper than a call into the
        tokenizer per token, and derender looks up every generated token."""
        table = self.__dict__.get("_piece_table")
        if table is None:
            size = max(self.vocab_size, self.tokenizer.get_vocab_size(with_added_tokens=True))
            table = [self.tokenizer.id_to_token(i) or "" for i in range(size)]
            self.__dict__["_piece_table"] = table
        return table

    def ids_to_pieces(self, ids: list[int], skip_ids: frozenset[int]) -> list[str]:
        """Pieces for incremental decoding; unknown ids become '' and ``skip_ids`` are dropped."""
        table = self.piece_table
        size = len(table)
        return [table[i] if 0 <= i < size else "" for i in ids if i not in skip_ids]

    def pieces_to_text(self, pieces: list[str]) -> str:
        """Join pieces with the tokenizer's decoder (byte-level pieces become UTF-8 text)."""
        decoder = self.tokenizer.decoder
        return decoder.decode(pieces) if decoder is not None else " ".join(pieces)
