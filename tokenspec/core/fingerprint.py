"""The tokenizer fingerprint: one hash that changes whenever token IDs for the same request could change.

It covers the tokenizer (tokenizer.json), the chat template and the special-token settings, for any
Hugging Face style model folder. Golden cases are keyed by it, so a golden file is only ever applied to a
server whose tokenizer would produce exactly its token IDs.

The fingerprint is the hex sha256 of the UTF-8 bytes of
``json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))`` where ``doc`` is::

    {"tokenizer_json_sha256": <hex sha256 of the tokenizer.json bytes>,
     "chat_template": <tokenizer_config.json "chat_template">,
     "special_tokens": {"bos_token", "eos_token", "pad_token", "unk_token": <tokenizer_config.json values>,
                        "added_tokens_decoder": <tokenizer_config.json "added_tokens_decoder">}}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tokenspec.core.errors import UsageError

__all__ = ["fingerprint_of", "sha256", "tokenizer_fingerprint"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint_of(tokenizer_json: bytes, config: dict[str, Any]) -> str:
    doc = {
        "tokenizer_json_sha256": sha256(tokenizer_json),
        "chat_template": config.get("chat_template"),
        "special_tokens": {
            "bos_token": config.get("bos_token"),
            "eos_token": config.get("eos_token"),
            "pad_token": config.get("pad_token"),
            "unk_token": config.get("unk_token"),
            "added_tokens_decoder": config.get("added_tokens_decoder"),
        },
    }
    canonical = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return sha256(canonical.encode("utf-8"))


def tokenizer_fingerprint(model_dir: Path) -> str:
    """Recompute the fingerprint from a model folder's tokenizer.json and tokenizer_config.json."""
    model_dir = Path(model_dir)
    try:
        tokenizer_json = (model_dir / "tokenizer.json").read_bytes()
        config = json.loads((model_dir / "tokenizer_config.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{model_dir} is not a model folder with a readable tokenizer ({exc})") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{model_dir / 'tokenizer_config.json'} is not a JSON object")
    return fingerprint_of(tokenizer_json, config)
