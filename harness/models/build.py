"""Write a Hugging Face style model folder for a real model family (see ``families``), offline and deterministic.

What ``build_family`` writes into the folder:

- ``tokenizer.json``: the family's public tokenizer pipeline (normalizer, split regex + byte-level
  pre-tokenizer, post-processor, byte-level decoder) around a byte-level BPE model whose vocabulary (ids
  ``0 .. base_vocab_size-1``) and merges are read from llama.cpp's vocab-only GGUF. The GGUF's own control and
  ``[PAD…]`` tokens past the base vocabulary are dropped; the family's real added tokens take their public ids.
  A byte-fallback family (Gemma) keeps every GGUF token: its added tokens are the GGUF's control and
  user-defined ones, at their ids inside the vocabulary.
- ``tokenizer_config.json`` (with ``added_tokens_decoder`` and the chat template inline),
  ``special_tokens_map.json``, and ``chat_template.jinja``: the vendored template, byte for byte.
- ``config.json``: the family's architecture with the tiny dims of ``tinymodel`` and the real padded
  ``vocab_size``; ``generation_config.json``: the real sampling defaults and stop ids.
- ``model.safetensors``: random weights (``tinymodel.random_weights``, fixed seed).
- ``tokenspec-model.json`` last: ``{"family", "imitates", "name", "tokenizer_fingerprint",
  "tokenspec_model_version"}``.

The JSON files are written with fixed key order and indentation, so two builds are byte-identical.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from tokenspec.core.errors import UsageError
from tokenspec.core.fingerprint import fingerprint_of
from tokenspec.core.fingerprint import sha256 as _sha256
from tokenspec.core.progress import step
from tokenspec.harness.models import sources
from tokenspec.harness.models import tiny as tinymodel
from tokenspec.harness.models.families import FAMILY_NAMES, FamilySpec, family

__all__ = ["FAMILY_FILES", "build", "build_family", "read_vocabulary", "tokenizer_document"]

MARKER_FILE = tinymodel.MARKER_FILE
FAMILY_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    MARKER_FILE,
)
#: GGUF token types (llama.cpp's enum): 1 normal, 3 control, 4 user-defined, 6 byte.
_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_BYTE = 1, 3, 4, 6
#: The GGUF tokenizer models ``build`` can turn into a tokenizer.json.
_GGUF_MODELS = ("gpt2", "gemma4")


@functools.lru_cache(maxsize=4)
def read_vocabulary(vocabulary: str) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """(tokens, token types, merges) of ``ggml-vocab-<vocabulary>.gguf``, read with ``gguf.GGUFReader``.

    ``GGUFReader`` takes 7-10 s on these files, so what it read is kept beside the sources as JSON named by
    the GGUF's sha256 (a different GGUF never reuses it); later builds load that in well under a second.
    """
    path = sources.source_file(f"ggml-vocab-{vocabulary}.gguf")
    digest = _sha256(path.read_bytes())
    cached = sources.sources_dir() / "derived" / f"{path.name}.{digest[:16]}.json"
    if cached.is_file():
        try:
            doc = json.loads(cached.read_bytes().decode("utf-8"))
            return tuple(doc["tokens"]), tuple(doc["token_types"]), tuple(doc["merges"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable: read the GGUF again and rewrite it
    tokens, types, merges = _read_gguf(path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_bytes(json.dumps({"tokens": tokens, "token_types": types, "merges": merges},
                                   ensure_ascii=False).encode("utf-8"))
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only cache only costs time
    return tokens, types, merges


def _read_gguf(path: Path) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    from gguf import GGUFReader

    with step(f"reading the vocabulary of {path.name}", expect="first build only: about 10 s"):
        reader = GGUFReader(str(path))

        def strings(key: str) -> tuple[str, ...]:
            f = reader.fields[key]
            return tuple(bytes(f.parts[i]).decode("utf-8") for i in f.data)

        tokens = strings("tokenizer.ggml.tokens")
        merges = strings("tokenizer.ggml.merges")
        types_field = reader.fields["tokenizer.ggml.token_type"]
        types = tuple(int(types_field.parts[i][0]) for i in types_field.data)
        model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode("utf-8")
    if model not in _GGUF_MODELS:
        raise UsageError(f"{path} holds a {model!r} tokenizer, not one of {', '.join(_GGUF_MODELS)}")
    return tokens, types, merges


def _byte_level(style: str, *, trim_offsets: bool) -> dict:
    gpt2 = style == "gpt2"
    return {"type": "ByteLevel", "add_prefix_space": gpt2, "trim_offsets": trim_offsets, "use_regex": gpt2}


def _template_processing(bos: str, bos_id: int) -> dict:
    def special(type_id: int) -> dict:
        return {"SpecialToken": {"id": bos, "type_id": type_id}}

    def sequence(name: str, type_id: int) -> dict:
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {
        "type": "TemplateProcessing",
        "single": [special(0), sequence("A", 0)],
        "pair": [special(0), sequence("A", 0), special(1), sequence("B", 1)],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }


def _byte_fallback_document(spec: FamilySpec, added: list[dict]) -> dict:
    """Gemma's pipeline: spaces to U+2581, BPE over raw UTF-8 with ``<0xNN>`` byte fallback, BOS post-processor."""
    tokens, types, merges = read_vocabulary(spec.vocabulary)
    if len(tokens) != spec.base_vocab_size:
        raise UsageError(f"ggml-vocab-{spec.vocabulary}.gguf has {len(tokens)} tokens, not {spec.base_vocab_size}")
    marked = {i for i, kind in enumerate(types) if kind in (_GGUF_CONTROL, _GGUF_USER_DEFINED)}
    if marked != {t.id for t in spec.added_tokens} or any(tokens[t.id] != t.content for t in spec.added_tokens):
        raise UsageError(f"ggml-vocab-{spec.vocabulary}.gguf: its control and user-defined tokens are not the "
                         f"family's added tokens")
    if any(kind not in (_GGUF_NORMAL, _GGUF_BYTE) for i, kind in enumerate(types) if i not in marked):
        raise UsageError(f"ggml-vocab-{spec.vocabulary}.gguf has token types this pipeline does not know")
    bos = spec.bos_post_processor
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": spec.normalizer,
        "pre_tokenizer": None,
        "post_processor": _template_processing(bos, spec.token_id(bos)) if bos else None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": spec.ignore_merges,
            "vocab": {token: i for i, token in enumerate(tokens)},
            "merges": list(merges),
        },
    }


def tokenizer_document(spec: FamilySpec) -> dict:
    """The family's ``tokenizer.json`` as a dict, in the key order of the public files."""
    added = [
        {"id": t.id, "content": t.content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": t.special}
        for t in spec.added_tokens
    ]
    if spec.pipeline == "byte-fallback":
        return _byte_fallback_document(spec, added)
    tokens, types, merges = read_vocabulary(spec.vocabulary)
    base = spec.base_vocab_size
    if len(tokens) < base or any(t != _GGUF_NORMAL for t in types[:base]):
        raise UsageError(f"ggml-vocab-{spec.vocabulary}.gguf: ids below {base} are not all regular tokens")
    vocab = {token: i for i, token in enumerate(tokens[:base])}
    if len(vocab) != base:
        raise UsageError(f"ggml-vocab-{spec.vocabulary}.gguf: duplicate tokens below id {base}")
    if spec.bos_post_processor is None:
        post_processor = _byte_level(spec.post_processor_byte_level_style, trim_offsets=False)
    else:
        template = _template_processing(spec.bos_post_processor, spec.token_id(spec.bos_post_processor))
        if spec.byte_level_post_processor:
            post_processor = {"type": "Sequence", "processors": [
                _byte_level(spec.post_processor_byte_level_style, trim_offsets=False), template]}
        else:
            post_processor = template
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": spec.normalizer,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": spec.split_regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": spec.pre_tokenizer_trim_offsets,
             "use_regex": False},
        ]},
        "post_processor": post_processor,
        "decoder": _byte_level(spec.decoder_style, trim_offsets=True),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": spec.bpe_affixes,
            "end_of_word_suffix": spec.bpe_affixes,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": spec.ignore_merges,
            "vocab": vocab,
            "merges": list(merges),
        },
    }


def _token_entry(content: str) -> dict:
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}


def _tokenizer_config(spec: FamilySpec, template: str) -> dict:
    decoder = {
        str(t.id): {**_token_entry(t.content), "special": t.special} for t in spec.added_tokens
    }
    return {**spec.tokenizer_config, "added_tokens_decoder": decoder, "chat_template": template}


def _special_tokens_map(spec: FamilySpec) -> dict:
    return {key: value if isinstance(value, list) else _token_entry(value)
            for key, value in spec.special_tokens_map.items()}


def _model_config(spec: FamilySpec) -> dict:
    config = spec.config
    config_doc = tinymodel._model_config(spec.vocab_size, config["bos_token_id"], config["eos_token_id"],
                                         spec.architecture)
    config_doc.update(config)
    return config_doc


def _json_bytes(doc: dict, *, sort_keys: bool = True) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n").encode("utf-8")


def _check_loadable(tokenizer_json: bytes, spec: FamilySpec) -> None:
    """The written tokenizer.json loads in ``tokenizers`` and has the added tokens at their ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
    if tokenizer.get_vocab_size(with_added_tokens=True) != spec.tokenizer_size:
        raise RuntimeError(f"{spec.name}: tokenizer has {tokenizer.get_vocab_size()} ids, not {spec.tokenizer_size}")
    for token in spec.added_tokens:
        if tokenizer.token_to_id(token.content) != token.id:
            raise RuntimeError(f"{spec.name}: {token.content!r} is not at id {token.id}")


def build_family(out_dir: Path, spec: FamilySpec) -> tinymodel.BuildResult:
    """Write ``spec``'s model folder into ``out_dir`` (same folder rules as ``tinymodel.build``)."""
    out_dir = Path(out_dir)
    tinymodel._prepare_out_dir(out_dir)

    template_bytes = sources.template_path(spec.template).read_bytes()
    template = template_bytes.decode("utf-8")
    tokenizer_json = _json_bytes(tokenizer_document(spec), sort_keys=False)
    _check_loadable(tokenizer_json, spec)
    tok_config = _tokenizer_config(spec, template)
    fingerprint = fingerprint_of(tokenizer_json, tok_config)
    marker = {"family": spec.name, "imitates": spec.model, "name": spec.model_name,
              "tokenizer_fingerprint": fingerprint, "tokenspec_model_version": tinymodel.MODEL_VERSION}
    contents: dict[str, bytes] = {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": _json_bytes(tok_config),
        "special_tokens_map.json": _json_bytes(_special_tokens_map(spec)),
        "chat_template.jinja": template_bytes,
        "config.json": _json_bytes(_model_config(spec)),
        "generation_config.json": _json_bytes(spec.generation_config),
    }
    # Every file is written beside its final name and renamed over it, so a server reading a folder that is being
    # rebuilt sees the old file or the new one, never half of one.
    def replace(name: str, write: Callable[[Path], None]) -> None:
        tmp = out_dir / f".{name}.{os.getpid()}.tmp"
        write(tmp)
        tmp.chmod(0o644)  # safetensors creates its file owner-only; every file gets the same mode
        os.replace(tmp, out_dir / name)

    try:
        (out_dir / MARKER_FILE).unlink(missing_ok=True)  # an interrupted rebuild is not a finished build
        for name, data in contents.items():
            replace(name, lambda path, data=data: path.write_bytes(data))
        weights_path = out_dir / "model.safetensors"
        with step(f"writing random {spec.architecture} weights (vocab {spec.vocab_size}) to {weights_path}"):
            weights: dict[str, np.ndarray] = tinymodel.random_weights(spec.vocab_size, spec.architecture)
            replace("model.safetensors",
                    lambda path: save_file(weights, str(path), metadata={"format": "pt"}))
        contents["model.safetensors"] = weights_path.read_bytes()
        contents[MARKER_FILE] = _json_bytes(marker)
        replace(MARKER_FILE, lambda path: path.write_bytes(contents[MARKER_FILE]))
    except OSError as exc:
        raise UsageError(f"cannot write the model into {out_dir}: {exc.strerror or exc}") from exc
    return tinymodel.BuildResult(model_dir=out_dir, fingerprint=fingerprint,
                                 files={name: _sha256(contents[name]) for name in FAMILY_FILES})


def build(out_dir: Path, family_name: str = "tiny") -> tinymodel.BuildResult:
    """Build ``family_name`` (one of ``FAMILY_NAMES``) into ``out_dir``; ``tiny`` is ``tinymodel.build``.

    Rebuilding a folder that holds an earlier tokenspec build of another family first removes the files
    this build would not overwrite, so no stale file (e.g. a chat_template.jinja) outlives its family.
    """
    if family_name not in FAMILY_NAMES:
        raise UsageError(f"unknown model family {family_name!r}; choose one of {', '.join(FAMILY_NAMES)}")
    out_dir = Path(out_dir)
    if family_name == "tiny":
        if (out_dir / MARKER_FILE).is_file():
            for name in set(FAMILY_FILES) - set(tinymodel._MODEL_FILES):
                (out_dir / name).unlink(missing_ok=True)
        return tinymodel.build(out_dir)
    spec = family(family_name)
    with step(f"building the {spec.name} model folder ({spec.model}, random weights) in {out_dir}",
              expect="a few seconds; the first run downloads 77 MB of sources"):
        return build_family(out_dir, spec)
