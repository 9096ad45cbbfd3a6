"""Build the embedded tiny chat model that real vLLM serves in tokenspec's live tests.

Why it exists: no model hub is reachable here, and conformance checks need a model whose tokenizer, chat
template and special tokens are known exactly. Random weights are enough, because parity is judged on token
ids, never on what the text means. Everything below is deterministic: two builds give byte-identical files.

What ``build`` writes into the model folder:

- ``tokenizer.json``: byte-level BPE (ByteLevel pre-tokenizer with the GPT-2 split regex and
  ``add_prefix_space=False``, ByteLevel decoder, ByteLevel post-processor with ``trim_offsets=False`` so
  offsets cover every byte, no normalizer so any text round-trips exactly), trained by the ``tokenizers``
  BPE trainer on the shipped corpus (``harness/models/corpus/*.txt``, read in file-name order), then the added
  tokens of the Qwen3 layout appended after the learned vocabulary:
  ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` (special) and ``<think>``, ``</think>``,
  ``<tool_call>``, ``</tool_call>``, ``<tool_response>``, ``</tool_response>`` (not special, so they survive
  ``skip_special_tokens`` decoding, and vLLM's ``hermes`` tool parser and ``qwen3`` reasoning parser find
  them in the vocabulary).
- ``tokenizer_config.json`` and ``special_tokens_map.json`` (Hugging Face semantics): no BOS token,
  EOS ``<|im_end|>``, pad ``<|endoftext|>``, ``model_max_length`` 2048, and the chat template inline.
- ``config.json``: a two-layer ``Qwen3ForCausalLM`` (hidden 128, two heads of 64: the CPU attention kernel
  rejects smaller heads), tied embeddings, float32.
- ``generation_config.json``: only ``bos_token_id`` and ``eos_token_id`` (``<|im_end|>`` and
  ``<|endoftext|>``). vLLM takes sampling defaults (temperature, top_p, top_k, ...) from this file, and
  render copies them into every generate request; keeping them out leaves vLLM's own defaults in place,
  which is what the suite's expectations are written against.
- ``model.safetensors``: every Qwen3 parameter, drawn in a fixed order from ``np.random.default_rng(0)``
  (normal, std 0.02, float32); norm weights are ones.
- ``tokenspec-model.json``: ``{"name", "tokenizer_fingerprint", "tokenspec_model_version"}``. It marks the
  folder as a tokenspec build, which is what lets a later ``build`` overwrite it.

How the chat template renders (``harness/models/templates/chat_template.jinja``, HF semantics: jinja2
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, a ``raise_exception`` global and
a ``tojson`` filter that is ``json.dumps(value, ensure_ascii=False)``):

- each turn is ``<|im_start|>ROLE\\nTEXT<|im_end|>\\n`` for the roles system, user, assistant and tool;
  any other role raises;
- content is a string, null, or a list of parts whose ``{"type": "text"}`` parts are concatenated with
  nothing in between (other part types are dropped);
- with ``tools``, the first turn is a system turn: the system message's text (if the conversation
  starts with one) and a blank line, then ``# Tools``, one ``tojson`` line per tool inside
  ``<tools>...</tools>``, and the instruction to answer with
  ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``;
- an assistant turn is ``<think>\\nREASONING\\n</think>\\n\\n`` (only when ``reasoning`` or, failing that,
  ``reasoning_content`` is a non-empty string; shown on EVERY assistant turn that carries it, not only the
  last one), then the content, then each tool call as
  ``<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>``, separated from the content and from
  each other by one newline; ARGS is the string as given when arguments is a string, else ``tojson``;
- consecutive tool messages share one ``<|im_start|>user`` turn holding one
  ``\\n<tool_response>\\nTEXT\\n</tool_response>`` block per message;
- ``add_generation_prompt`` appends ``<|im_start|>assistant\\n``, and ``<think>\\n\\n</think>\\n\\n`` after
  it when ``enable_thinking`` is passed and is exactly ``false``.

The tokenizer fingerprint is defined in ``tokenspec.core.fingerprint`` (it applies to any model folder).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from tokenspec.core.errors import UsageError
from tokenspec.core.fingerprint import fingerprint_of, tokenizer_fingerprint
from tokenspec.core.fingerprint import sha256 as _sha256

__all__ = ["BuildResult", "DEFAULT_MODEL_NAME", "LLAMA3_SPECIAL", "MODEL_VERSION", "build", "tokenizer_fingerprint",
           "with_llama3_tokens"]

DEFAULT_MODEL_NAME = "tokenspec-tiny"
MODEL_VERSION = 1
MARKER_FILE = "tokenspec-model.json"

#: Learned vocabulary size (256 byte symbols plus merges); the added tokens come after it.
LEARNED_VOCAB_SIZE = 991
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
NON_SPECIAL_ADDED_TOKENS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
MODEL_MAX_LENGTH = 2048

HIDDEN_SIZE = 128
NUM_HEADS = 2
NUM_KV_HEADS = 2
HEAD_DIM = 64
INTERMEDIATE_SIZE = 256
NUM_LAYERS = 2
WEIGHT_SEED = 0
WEIGHT_STD = 0.02

_MODEL_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    MARKER_FILE,
)


@dataclass(frozen=True)
class BuildResult:
    """Where the model went, its tokenizer fingerprint, and the sha256 of every file written."""

    model_dir: Path
    fingerprint: str
    files: dict[str, str]


def corpus_texts() -> list[tuple[str, str]]:
    """The shipped training corpus as (file name, text), in file-name order (the order training sees)."""
    folder = resources.files("tokenspec.harness.models") / "corpus"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".txt"))
    return [(name, (folder / name).read_bytes().decode("utf-8")) for name in names]


def chat_template() -> str:
    """The shipped chat template text, exactly as stored in tokenizer_config.json."""
    folder = resources.files("tokenspec.harness.models") / "templates"
    return (folder / "chat_template.jinja").read_bytes().decode("utf-8")


def train_tokenizer() -> Tokenizer:
    """Train the byte-level BPE on the corpus and append the added tokens (deterministic for fixed input)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=LEARNED_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator([text for _, text in corpus_texts()], trainer=trainer)
    learned = tokenizer.get_vocab_size(with_added_tokens=False)
    if learned != LEARNED_VOCAB_SIZE:
        raise RuntimeError(f"BPE training gave {learned} tokens, not {LEARNED_VOCAB_SIZE}: corpus too small")
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in NON_SPECIAL_ADDED_TOKENS])
    return tokenizer


def _tokenizer_config(tokenizer: Tokenizer, template: str) -> dict:
    decoder = {}
    for token in SPECIAL_TOKENS + NON_SPECIAL_ADDED_TOKENS:
        decoder[str(tokenizer.token_to_id(token))] = {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": token in SPECIAL_TOKENS,
        }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [],
        "bos_token": None,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "eos_token": EOS_TOKEN,
        "errors": "replace",
        "model_max_length": MODEL_MAX_LENGTH,
        "pad_token": PAD_TOKEN,
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


#: Architectures whose config and parameters ``_model_config`` and ``random_weights`` can write (the tiny model is
#: the first; the real-model families of ``tokenspec.harness.models`` use the others with the same tiny dims).
ARCHITECTURES = ("Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM", "Gemma4ForCausalLM")


def _model_config(vocab_size: int, bos_id: int, eos_id: int | list[int],
                  architecture: str = "Qwen3ForCausalLM") -> dict:
    """config.json for the tiny dims; Qwen3 is the tiny model's, Qwen2 and Llama drop the keys they lack."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; known: {', '.join(ARCHITECTURES)}")
    config = {
        "architectures": [architecture],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": WEIGHT_STD,
        "intermediate_size": INTERMEDIATE_SIZE,
        "max_position_embeddings": 4096,
        "max_window_layers": NUM_LAYERS,
        "model_type": "qwen3",
        "num_attention_heads": NUM_HEADS,
        "num_hidden_layers": NUM_LAYERS,
        "num_key_value_heads": NUM_KV_HEADS,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab_size,
    }
    if architecture == "Qwen2ForCausalLM":
        del config["attention_bias"]  # Qwen2 always has q/k/v biases
        config["model_type"] = "qwen2"
    elif architecture == "LlamaForCausalLM":
        for key in ("max_window_layers", "sliding_window", "use_sliding_window"):
            del config[key]
        config.update(model_type="llama", mlp_bias=False, pretraining_tp=1)
    elif architecture == "Gemma4ForCausalLM":
        # Gemma 4's text model: alternating sliding and full attention, no per-layer input embeddings
        # (``hidden_size_per_layer_input`` 0; transformers' default adds them) and one head size for both kinds
        # of layer, the one layout vLLM's CPU attention serves without mixing head sizes.
        for key in ("hidden_act", "max_window_layers", "rope_scaling", "rope_theta", "use_sliding_window"):
            del config[key]
        config.update(
            model_type="gemma4_text", hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=30.0,
            global_head_dim=HEAD_DIM, hidden_size_per_layer_input=0, vocab_size_per_layer_input=vocab_size,
            layer_types=["sliding_attention", "full_attention"][:NUM_LAYERS], sliding_window=512,
            rope_parameters={"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                                "rope_type": "proportional"},
                             "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}})
    return config


def random_weights(vocab_size: int, architecture: str = "Qwen3ForCausalLM") -> dict[str, np.ndarray]:
    """Every parameter of ``architecture`` (tied embeddings, so no lm_head), drawn in a fixed order.

    Qwen3 has per-head q/k norms (ones); Qwen2 has q/k/v biases instead (zeros, not drawn, so the draws of the
    other tensors stay those of Qwen3); Llama has neither; Gemma 4 has Qwen3's q/k norms plus a norm before and
    after the MLP and a per-layer output scalar (ones)."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; known: {', '.join(ARCHITECTURES)}")
    rng = np.random.default_rng(WEIGHT_SEED)

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(WEIGHT_STD)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones((n,), dtype=np.float32)

    q_out, kv_out = NUM_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM
    tensors = {"model.embed_tokens.weight": normal(vocab_size, HIDDEN_SIZE)}
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}"
        tensors[f"{p}.self_attn.q_proj.weight"] = normal(q_out, HIDDEN_SIZE)
        tensors[f"{p}.self_attn.k_proj.weight"] = normal(kv_out, HIDDEN_SIZE)
        tensors[f"{p}.self_attn.v_proj.weight"] = normal(kv_out, HIDDEN_SIZE)
        tensors[f"{p}.self_attn.o_proj.weight"] = normal(HIDDEN_SIZE, q_out)
        if architecture in ("Qwen3ForCausalLM", "Gemma4ForCausalLM"):
            tensors[f"{p}.self_attn.q_norm.weight"] = ones(HEAD_DIM)
            tensors[f"{p}.self_attn.k_norm.weight"] = ones(HEAD_DIM)
        elif architecture == "Qwen2ForCausalLM":
            tensors[f"{p}.self_attn.q_proj.bias"] = np.zeros((q_out,), dtype=np.float32)
            tensors[f"{p}.self_attn.k_proj.bias"] = np.zeros((kv_out,), dtype=np.float32)
            tensors[f"{p}.self_attn.v_proj.bias"] = np.zeros((kv_out,), dtype=np.float32)
        tensors[f"{p}.mlp.gate_proj.weight"] = normal(INTERMEDIATE_SIZE, HIDDEN_SIZE)
        tensors[f"{p}.mlp.up_proj.weight"] = normal(INTERMEDIATE_SIZE, HIDDEN_SIZE)
        tensors[f"{p}.mlp.down_proj.weight"] = normal(HIDDEN_SIZE, INTERMEDIATE_SIZE)
        tensors[f"{p}.input_layernorm.weight"] = ones(HIDDEN_SIZE)
        tensors[f"{p}.post_attention_layernorm.weight"] = ones(HIDDEN_SIZE)
        if architecture == "Gemma4ForCausalLM":
            tensors[f"{p}.pre_feedforward_layernorm.weight"] = ones(HIDDEN_SIZE)
            tensors[f"{p}.post_feedforward_layernorm.weight"] = ones(HIDDEN_SIZE)
            tensors[f"{p}.layer_scalar"] = ones(1)
    tensors["model.norm.weight"] = ones(HIDDEN_SIZE)
    return tensors


def _json_bytes(doc: dict) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _prepare_out_dir(out_dir: Path) -> None:
    """Refuse anything that is not an empty folder, a missing one, or an earlier tokenspec build."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"cannot build the model into {out_dir}: it is a file, not a folder")
    if out_dir.is_dir():
        if any(out_dir.iterdir()) and not (out_dir / MARKER_FILE).is_file():
            raise UsageError(
                f"cannot build the model into {out_dir}: the folder is not empty and holds no earlier "
                f"tokenspec build ({MARKER_FILE}); choose an empty or new folder"
            )
    else:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the model folder {out_dir}: {exc.strerror or exc}") from exc
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UsageError(f"cannot build the model into {out_dir}: the folder is not writable")


def build(out_dir: Path) -> BuildResult:
    """Write the tiny model into ``out_dir`` (created if missing; an earlier build there is overwritten).

    Raises ``UsageError`` when ``out_dir`` is a file, cannot be created or written, or is a non-empty folder
    that is not an earlier tokenspec build. The marker file is written last, so an interrupted build is not
    mistaken for a finished one.
    """
    out_dir = Path(out_dir)
    _prepare_out_dir(out_dir)

    template = chat_template()
    tokenizer = train_tokenizer()
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    bos_id = tokenizer.token_to_id(PAD_TOKEN)
    eos_id = tokenizer.token_to_id(EOS_TOKEN)

    tokenizer_json = (tokenizer.to_str(pretty=True) + "\n").encode("utf-8")
    tok_config = _tokenizer_config(tokenizer, template)
    fingerprint = fingerprint_of(tokenizer_json, tok_config)
    special_map = {
        "eos_token": {"content": EOS_TOKEN, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
        "pad_token": {"content": PAD_TOKEN, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False},
    }
    generation_config = {"bos_token_id": bos_id, "eos_token_id": [eos_id, bos_id]}
    marker = {"name": DEFAULT_MODEL_NAME, "tokenizer_fingerprint": fingerprint,
              "tokenspec_model_version": MODEL_VERSION}

    contents: dict[str, bytes] = {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": _json_bytes(tok_config),
        "special_tokens_map.json": _json_bytes(special_map),
        "config.json": _json_bytes(_model_config(vocab_size, bos_id, eos_id)),
        "generation_config.json": _json_bytes(generation_config),
    }
    files: dict[str, str] = {}
    try:
        for name, data in contents.items():
            (out_dir / name).write_bytes(data)
        weights_path = out_dir / "model.safetensors"
        save_file(random_weights(vocab_size), str(weights_path), metadata={"format": "pt"})
        weights_path.chmod(0o644)  # safetensors creates the file owner-only; match the other files
        contents["model.safetensors"] = weights_path.read_bytes()
        contents[MARKER_FILE] = _json_bytes(marker)
        (out_dir / MARKER_FILE).write_bytes(contents[MARKER_FILE])
    except OSError as exc:
        raise UsageError(f"cannot write the model into {out_dir}: {exc.strerror or exc}") from exc
    for name in _MODEL_FILES:
        files[name] = _sha256(contents[name])
    return BuildResult(model_dir=out_dir, fingerprint=fingerprint, files=files)


#: The Llama 3 tokens vLLM's llama3_json parser looks up in the vocabulary (it refuses one without the tag).
LLAMA3_SPECIAL = ("<|python_tag|>", "<|eot_id|>", "<|eom_id|>")


def with_llama3_tokens(src: Path, dst: Path) -> Path:
    """A copy of the model folder ``src`` at ``dst`` with ``LLAMA3_SPECIAL`` added as special tokens: the tiny
    model that vLLM's llama3_json parser accepts, for recording and comparing that parser on it."""
    import shutil

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    tok = Tokenizer.from_file(str(dst / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA3_SPECIAL])
    tok.save(str(dst / "tokenizer.json"))
    config = json.loads((dst / "tokenizer_config.json").read_text())
    for t in LLAMA3_SPECIAL:
        config.setdefault("added_tokens_decoder", {})[str(tok.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": True}
    (dst / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return dst
