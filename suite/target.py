"""What the suite runs against: URLs, model name, and a token codec.

``Target`` is built once per test session from the plugin's options. ``Codec`` turns text into the target's
token IDs and back: from a local tokenizer folder when ``--tokenizer`` is given (fast, exact), else through the
target's own ``/tokenize`` and ``/detokenize`` (so the suite needs nothing but a URL).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Target:
    url: str
    engine_url: str | None
    reference_url: str | None
    model: str
    tokenizer_dir: Path | None
    timeout: float
    max_examples: int
    seed: int

    @property
    def generate_url(self) -> str:
        return self.engine_url or self.url


def card_max_model_len(url: str, timeout: float) -> int | None:
    """``max_model_len`` from the first ``/v1/models`` card at ``url``, if the server reports one."""
    try:
        card = httpx.get(f"{url}/v1/models", timeout=timeout).json()["data"][0]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return None
    value = card.get("max_model_len") if isinstance(card, dict) else None
    return value if isinstance(value, int) else None


class CodecUnavailable(Exception):
    """Neither a local tokenizer nor the target's /tokenize is available."""


@dataclass
class Codec:
    target: Target

    @cached_property
    def _local(self):  # -> tokenizers.Tokenizer | None
        if self.target.tokenizer_dir is None:
            return None
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self.target.tokenizer_dir / "tokenizer.json"))

    @cached_property
    def vocab_size(self) -> int:
        if self._local is not None:
            return int(self._local.get_vocab_size(with_added_tokens=True))
        # Without a local tokenizer the size is unknown. Tests use it to build IDs that are surely out of
        # the vocabulary (vocab_size + k) and cap in-vocabulary draws at min(vocab_size, 1000), so an upper
        # bound larger than any real vocabulary is the safe answer.
        return 1 << 20

    def encode(self, text: str) -> list[int]:
        if self._local is not None:
            return list(self._local.encode(text, add_special_tokens=False).ids)
        resp = self._remote("/tokenize", {"model": self.target.model, "prompt": text, "add_special_tokens": False})
        return list(resp["tokens"])

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        if self._local is not None:
            return str(self._local.decode(ids, skip_special_tokens=skip_special_tokens))
        resp = self._remote("/detokenize", {"model": self.target.model, "tokens": ids})
        return str(resp["prompt"])

    @cached_property
    def special_texts(self) -> tuple[str, ...]:
        """Texts of the tokens the tokenizer marks special (empty without a local tokenizer)."""
        if self._local is None:
            return ()
        return tuple(sorted({t.content for t in self._local.get_added_tokens_decoder().values() if t.special}))

    def token_id(self, token: str) -> int | None:
        """The ID of a single (special or added) token, or None when the vocabulary lacks it."""
        if self._local is not None:
            found = self._local.token_to_id(token)
            return None if found is None else int(found)
        ids = self.encode(token)
        return ids[0] if len(ids) == 1 else None

    def _remote(self, path: str, body: dict) -> dict:
        try:
            resp = httpx.post(f"{self.target.url}{path}", json=body, timeout=self.target.timeout)
        except httpx.HTTPError as exc:
            raise CodecUnavailable(f"{path} failed: {exc}") from None
        if resp.status_code != 200:
            raise CodecUnavailable(f"{path} answered {resp.status_code}; pass --tokenizer DIR")
        return resp.json()
