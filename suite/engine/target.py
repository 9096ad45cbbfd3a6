"""What the suite runs against: URLs, model name, and a token codec.

``Target`` is built once per test session from the plugin's options. ``Codec`` turns text into the target's
token IDs and back: from a local tokenizer folder when ``--tokenizer`` is given (fast, exact), else through the
target's own ``/tokenize`` and ``/detokenize`` (so the suite needs nothing but a URL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx

from tokenspec.core.transport import Transport

if TYPE_CHECKING:
    from tokenizers import Tokenizer


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
    transport: Transport = field(default_factory=Transport)

    @property
    def generate_url(self) -> str:
        return self.engine_url or self.url


def model_card(url: str, transport: Transport, role: str = "target", model: str | None = None) -> dict[str, Any]:
    """The ``/v1/models`` card of ``model`` (or the first card) at ``url``; ``{}`` when there is none."""
    try:
        with transport.client(role) as client:
            cards = client.get(f"{url}/v1/models").json()["data"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return {}
    cards = [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []
    card = next((c for c in cards if model is None or c.get("id") == model), None)
    return card or {}


def card_max_model_len(url: str, transport: Transport, role: str = "target") -> int | None:
    """``max_model_len`` from the first ``/v1/models`` card at ``url``, if the server reports one."""
    value = model_card(url, transport, role).get("max_model_len")
    return value if isinstance(value, int) else None


class CodecUnavailable(Exception):
    """Neither a local tokenizer nor the target's /tokenize is available."""


@dataclass
class Codec:
    target: Target

    @cached_property
    def _local(self) -> Tokenizer | None:
        if self.target.tokenizer_dir is None:
            return None
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self.target.tokenizer_dir / "tokenizer.json"))

    @cached_property
    def _folder_config(self) -> dict[str, Any]:
        """config.json, generation_config.json and tokenizer_config.json of the model folder, merged by name."""
        import json

        out: dict[str, Any] = {}
        for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
            path = self.target.tokenizer_dir / name if self.target.tokenizer_dir else None
            if path is not None and path.exists():
                try:
                    out[name] = json.loads(path.read_text())
                except ValueError:
                    out[name] = {}
        return out

    @cached_property
    def tokenizer_size(self) -> int | None:
        """How many ids the tokenizer can decode (None without the model folder)."""
        if self._local is None:
            return None
        return int(self._local.get_vocab_size(with_added_tokens=True))

    @cached_property
    def vocab_size(self) -> int:
        """The model's id bound: ids >= this are out of the vocabulary for every component.

        With the folder it is config.json's ``vocab_size`` (embedding rows, padding included; real models pad:
        Qwen3 has 151936 rows for 151669 tokenizer ids), never less than the tokenizer's size. Ids between
        the two are *padding*: an engine may accept and even sample them, they decode to no text (see
        GENERATE-021). Without the folder the bound is unknown and the suite uses 2**20, larger than any real
        vocabulary, so "surely out of the vocabulary" stays true and in-vocabulary draws use :attr:`known_ids`.
        """
        size = (self._folder_config.get("config.json") or {}).get("vocab_size")
        if isinstance(size, int) and size > 0:
            return max(size, self.tokenizer_size or 0)
        return self.tokenizer_size or 1 << 20

    @cached_property
    def known_ids(self) -> tuple[int, ...]:
        """Ids surely inside the real vocabulary: all the tokenizer's ids, or those the target's /tokenize
        produced for a mixed-script sample (no guessing of a size the suite cannot see)."""
        if self.tokenizer_size is not None:
            return tuple(range(self.tokenizer_size))
        sample = ("The quick brown fox jumps over the lazy dog. 0123456789 !?,.;:()[]{}<>/\\'\"-_+=*&^%$#@~` "
                  "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. 東京の天気は晴れです。"
                  " Привет мир. 😀🚀👍 \n\t  ")
        return tuple(sorted(set(self.encode(sample))))

    @cached_property
    def facts(self) -> dict[str, Any]:
        """The tokenizer's EOS and special ids (``{"eos_ids": [...], "special": {"<id>": "<text>"}}``) and where
        they came from (``"source"``): the model folder's own files; without a folder, the golden file of the
        fingerprint the target's card reports as its ``tokenizer_version`` (recorded from that model's folder);
        else nothing (the tests that need them are not tested)."""
        if self._local is not None:
            return {**folder_facts(self._local, self._folder_config), "source": "the model folder"}
        from tokenspec.golden import golden_of_fingerprint

        version = model_card(self.target.url, self.target.transport, model=self.target.model).get("tokenizer_version")
        golden = golden_of_fingerprint(str(version or ""))
        if golden is None or not golden.get("tokenizer"):
            return {"eos_ids": [], "special": {}, "source": ""}
        return {**golden["tokenizer"], "source": f"the golden file of the target's tokenizer_version {version}"}

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """The model's end-of-sequence ids (see :attr:`facts` for where they come from)."""
        return tuple(self.facts["eos_ids"])

    @property
    def special_texts(self) -> tuple[str, ...]:
        """Texts of the tokens the tokenizer marks special (empty when no source has them)."""
        return tuple(sorted(set(self.facts["special"].values())))

    @property
    def special_ids(self) -> tuple[int, ...]:
        """Ids the tokenizer marks special (empty when no source has them)."""
        return tuple(sorted(int(i) for i in self.facts["special"]))

    def encode(self, text: str) -> list[int]:
        if self._local is not None:
            return list(self._local.encode(text, add_special_tokens=False).ids)
        resp = self._remote("/tokenize", {"model": self.target.model, "prompt": text, "add_special_tokens": False})
        return list(resp["tokens"])

    def offsets(self, text: str, add_special_tokens: bool) -> tuple[list[int], list[list[int]]] | None:
        """The ids of ``text`` and each one's character range, from the model folder's tokenizer (None without
        the folder: a target's /tokenize reports no ranges)."""
        if self._local is None:
            return None
        encoding = self._local.encode(text, add_special_tokens=add_special_tokens)
        return list(encoding.ids), [[int(start), int(end)] for start, end in encoding.offsets]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        if self._local is not None:
            return str(self._local.decode(ids, skip_special_tokens=skip_special_tokens))
        resp = self._remote("/detokenize", {"model": self.target.model, "tokens": ids})
        return str(resp["prompt"])


    def _remote(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            with self.target.transport.client() as client:
                resp = client.post(f"{self.target.url}{path}", json=body)
        except httpx.HTTPError as exc:
            raise CodecUnavailable(f"{path} failed: {exc}") from None
        if resp.status_code != 200:
            raise CodecUnavailable(f"{path} answered {resp.status_code}; pass --tokenizer DIR")
        return cast(dict[str, Any], resp.json())


def folder_facts(tokenizer: Tokenizer, configs: dict[str, Any]) -> dict[str, Any]:
    """EOS ids (generation_config.json / config.json, and tokenizer_config.json's eos_token) and the ids the
    tokenizer marks special, read from a model folder's files (``configs``: those files by name)."""
    ids: list[int] = []
    for name in ("generation_config.json", "config.json"):
        value = (configs.get(name) or {}).get("eos_token_id")
        ids += value if isinstance(value, list) else [value] if isinstance(value, int) else []
    token = (configs.get("tokenizer_config.json") or {}).get("eos_token")
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str) and (found := tokenizer.token_to_id(token)) is not None:
        ids.append(int(found))
    special = {str(i): t.content for i, t in sorted(tokenizer.get_added_tokens_decoder().items()) if t.special}
    return {"eos_ids": list(dict.fromkeys(ids)), "special": special}

