"""What each real model family's folder holds: one ``FamilySpec`` per family, facts only.

Every value below is taken from the public files of the model the family imitates (``tokenizer.json``,
``tokenizer_config.json``, ``generation_config.json``, ``config.json``); the vocabulary and merges come from
llama.cpp's vocab-only GGUF files and the chat template from llama.cpp's vendored templates (see ``sources``).
Only the weights are not real: random, with the tiny dims of ``tokenspec.harness.models.tiny``, at the real
(padded) ``vocab_size``.

- ``qwen3``: Qwen3-0.6B. Hermes-style ``<tool_call>`` markup, ``<think>`` reasoning; no BOS.
- ``llama3``: Llama-3.1-8B-Instruct. BOS added by the tokenizer's post-processor, all 256 added tokens special.
- ``qwen3-coder``: Qwen3-Coder-30B-A3B-Instruct. The Qwen3 tokenizer (same vocabulary and added tokens) with
  Qwen3-Coder's template: XML-style calls (``<tool_call><function=name><parameter=x>``), no reasoning. The real
  model is a mixture of experts (``Qwen3MoeForCausalLM``); its tiny random weights are the dense
  ``Qwen3ForCausalLM`` of the same tokenizer and template, because the weights never reach what the suite
  judges (render, derender and the wire) and vLLM's CPU build serves the dense class on these dims.
- ``deepseek-r1``: DeepSeek-R1-Distill-Qwen-1.5B. The Qwen2 vocabulary with DeepSeek's fullwidth-bar added
  tokens (U+FF5C and U+2581 inside the names), BOS added by the post-processor.
- ``gemma-4``: gemma-4-31B-it, text only. A byte-fallback BPE over raw UTF-8 (spaces as U+2581) whose special
  tokens sit inside the vocabulary at low ids; ``<|turn>`` turns, ``<|channel>`` reasoning and
  ``<|tool_call>call:NAME{key:<|"|>text<|"|>}`` calls. The real model is the multimodal
  ``Gemma4ForConditionalGeneration``; its tiny weights are the text-only ``Gemma4ForCausalLM`` vLLM also serves.
  Two facts are not in any offline source and are taken from elsewhere: ``generation_config.json`` (stop ids
  ``<eos>``, ``<turn|>`` and ``<|tool_response>`` from llama.cpp's end-of-generation list for this vocabulary;
  sampling defaults temperature 1.0, top_p 0.95, top_k 64 from the model card), and which tokens the real
  tokenizer.json lists as added (here the 24 named in its tokenizer_config and typed control or user-defined in
  the GGUF, all special).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["FAMILIES", "FAMILY_NAMES", "AddedTokenSpec", "FamilySpec", "family"]

#: The split regexes of the public tokenizer.json files (the pre-tokenizer's first step, behaviour Isolated).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class AddedTokenSpec:
    """One added token of ``tokenizer.json`` at its public id (never normalized, never stripped)."""

    id: int
    content: str
    special: bool


@dataclass(frozen=True)
class FamilySpec:
    """Everything that differs between families; ``build`` turns it into a model folder."""

    name: str  # the --family value
    model: str  # the public model it imitates
    vocabulary: str  # llama.cpp's ggml-vocab-<vocabulary>.gguf (and its .inp/.out test vectors)
    base_vocab_size: int  # regular (byte-level BPE) tokens taken from the GGUF: ids 0 .. base_vocab_size-1
    template: str  # file name under llama.cpp's models/templates/
    split_regex: str
    normalizer: dict | None  # tokenizer.json "normalizer"
    pre_tokenizer_trim_offsets: bool  # the ByteLevel step of the pre-tokenizer
    ignore_merges: bool  # BPE: a word that is itself a vocabulary entry is not split (Llama 3)
    bos_post_processor: str | None  # the token a TemplateProcessing post-processor puts before every sequence
    byte_level_post_processor: bool  # a ByteLevel(trim_offsets=False) post-processor step
    post_processor_byte_level_style: str  # "qwen" (all false) or "gpt2" (add_prefix_space/use_regex true)
    decoder_style: str  # same two styles, for the ByteLevel decoder's (decode-neutral) flags
    bpe_affixes: str | None  # continuing_subword_prefix / end_of_word_suffix: "" (Qwen) or None (Llama 3)
    added_tokens: tuple[AddedTokenSpec, ...]
    tokenizer_config: dict  # tokenizer_config.json fields (added_tokens_decoder and chat_template are computed)
    special_tokens_map: dict
    generation_config: dict
    architecture: str  # config.json "architectures"[0]; tinymodel writes its parameters
    vocab_size: int  # config.json "vocab_size": padded past the tokenizer's size where the real model pads
    #: config.json values that differ from the tiny defaults. ``transformers_version`` is the real file's: without
    #: it transformers 5 takes any local folder for an old Mistral one and warns about its split regex.
    config: dict = field(default_factory=dict)
    #: "byte-level": GPT-2 style byte-level BPE (split regex, ByteLevel pre-tokenizer and decoder), regular tokens
    #: below ``base_vocab_size`` and added tokens after them. "byte-fallback": SentencePiece-style BPE over raw
    #: UTF-8 (Gemma): spaces become U+2581, unknown bytes ``<0xNN>``; every GGUF token is in the vocabulary and
    #: the added tokens are some of them. The byte-level fields above do not apply to it.
    pipeline: str = "byte-level"

    @property
    def model_name(self) -> str:
        return f"tokenspec-{self.name}"

    @property
    def tokenizer_size(self) -> int:
        return max(self.base_vocab_size, max(t.id for t in self.added_tokens) + 1)

    def token_id(self, content: str) -> int:
        for token in self.added_tokens:
            if token.content == content:
                return token.id
        raise KeyError(content)


def _run(start: int, names: list[str], special: bool) -> list[AddedTokenSpec]:
    return [AddedTokenSpec(start + i, name, special) for i, name in enumerate(names)]


# --- qwen3 (Qwen3-0.6B) ----------------------------------------------------------------------------------------

_QWEN3_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
]
_QWEN3_PLAIN = [
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]

QWEN3 = FamilySpec(
    name="qwen3",
    model="Qwen/Qwen3-0.6B",
    vocabulary="qwen2",
    base_vocab_size=151643,
    template="Qwen-Qwen3-0.6B.jinja",
    split_regex=QWEN2_SPLIT,
    normalizer={"type": "NFC"},
    pre_tokenizer_trim_offsets=False,
    ignore_merges=False,
    bos_post_processor=None,
    byte_level_post_processor=True,
    post_processor_byte_level_style="qwen",
    decoder_style="qwen",
    bpe_affixes="",
    added_tokens=tuple(_run(151643, _QWEN3_SPECIAL, True) + _run(151657, _QWEN3_PLAIN, False)),
    tokenizer_config={
        "add_bos_token": False,
        "add_prefix_space": False,
        "additional_special_tokens": _QWEN3_SPECIAL[1:],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    },
    special_tokens_map={
        "additional_special_tokens": _QWEN3_SPECIAL[1:],
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    },
    generation_config={
        "bos_token_id": 151643,
        "do_sample": True,
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
        "temperature": 0.6,
        "top_k": 20,
        "top_p": 0.95,
    },
    architecture="Qwen3ForCausalLM",
    vocab_size=151936,
    config={"bos_token_id": 151643, "eos_token_id": 151645, "max_position_embeddings": 40960,
            "rope_theta": 1000000.0, "transformers_version": "4.51.0"},
)


# --- qwen3-coder (Qwen3-Coder-30B-A3B-Instruct) --------------------------------------------------------------------

QWEN3_CODER = replace(
    QWEN3,  # the same tokenizer: vocabulary, merges, pipeline and added tokens
    name="qwen3-coder",
    model="Qwen/Qwen3-Coder-30B-A3B-Instruct",
    template="Qwen3-Coder.jinja",
    tokenizer_config={**QWEN3.tokenizer_config, "model_max_length": 1048576},
    generation_config={
        "bos_token_id": 151643,
        "do_sample": True,
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
        "repetition_penalty": 1.05,
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.8,
    },
    config={"bos_token_id": 151643, "eos_token_id": 151645, "max_position_embeddings": 262144,
            "rope_theta": 10000000.0, "transformers_version": "4.51.0"},
)


# --- llama3 (Llama-3.1-8B-Instruct) ------------------------------------------------------------------------------

_LLAMA3_NAMED = {
    128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128002: "<|reserved_special_token_0|>",
    128003: "<|reserved_special_token_1|>", 128004: "<|finetune_right_pad_id|>",
    128005: "<|reserved_special_token_2|>", 128006: "<|start_header_id|>", 128007: "<|end_header_id|>",
    128008: "<|eom_id|>", 128009: "<|eot_id|>", 128010: "<|python_tag|>",
}
_LLAMA3_ADDED = [AddedTokenSpec(i, _LLAMA3_NAMED.get(i, f"<|reserved_special_token_{i - 128008}|>"), True)
                 for i in range(128000, 128256)]

LLAMA3 = FamilySpec(
    name="llama3",
    model="meta-llama/Llama-3.1-8B-Instruct",
    vocabulary="llama-bpe",
    base_vocab_size=128000,
    template="meta-llama-Llama-3.1-8B-Instruct.jinja",
    split_regex=LLAMA3_SPLIT,
    normalizer=None,
    pre_tokenizer_trim_offsets=True,
    ignore_merges=True,
    bos_post_processor="<|begin_of_text|>",
    byte_level_post_processor=True,
    post_processor_byte_level_style="gpt2",
    decoder_style="gpt2",
    bpe_affixes=None,
    added_tokens=tuple(_LLAMA3_ADDED),
    tokenizer_config={
        "bos_token": "<|begin_of_text|>",
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    },
    special_tokens_map={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    generation_config={
        "bos_token_id": 128000,
        "do_sample": True,
        "eos_token_id": [128001, 128008, 128009],
        "temperature": 0.6,
        "top_p": 0.9,
    },
    architecture="LlamaForCausalLM",
    vocab_size=128256,
    config={"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "transformers_version": "4.43.0.dev0"},
)


# --- deepseek-r1 (DeepSeek-R1-Distill-Qwen-1.5B) -----------------------------------------------------------------

_BAR, _SP = "\uff5c", "\u2581"  # FULLWIDTH VERTICAL LINE, LOWER ONE EIGHTH BLOCK (as in the template)


def _ds(name: str) -> str:
    return f"<{_BAR}{name.replace(' ', _SP)}{_BAR}>"


_DS_BOS, _DS_EOS = _ds("begin of sentence"), _ds("end of sentence")
_DEEPSEEK_ADDED = (
    [AddedTokenSpec(151643, _DS_EOS, True), AddedTokenSpec(151644, _ds("User"), False),
     AddedTokenSpec(151645, _ds("Assistant"), False), AddedTokenSpec(151646, _DS_BOS, True),
     AddedTokenSpec(151647, "<|EOT|>", False), AddedTokenSpec(151648, "<think>", False),
     AddedTokenSpec(151649, "</think>", False)]
    + _run(151650, ["<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                    "<|image_pad|>", "<|video_pad|>"], True)
    + _run(151657, ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                    "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"], False)
    + _run(151665, [_ds(n) for n in ("tool calls begin", "tool calls end", "tool call begin", "tool call end",
                                      "tool outputs begin", "tool outputs end", "tool output begin",
                                      "tool output end", "tool sep")], False)
)

DEEPSEEK_R1 = FamilySpec(
    name="deepseek-r1",
    model="deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    vocabulary="qwen2",
    base_vocab_size=151643,
    template="deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    split_regex=QWEN2_SPLIT,
    normalizer={"type": "NFC"},
    pre_tokenizer_trim_offsets=False,
    ignore_merges=False,
    bos_post_processor=_DS_BOS,
    byte_level_post_processor=False,
    post_processor_byte_level_style="qwen",
    decoder_style="qwen",
    bpe_affixes="",
    added_tokens=tuple(_DEEPSEEK_ADDED),
    tokenizer_config={
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": _DS_BOS,
        "clean_up_tokenization_spaces": False,
        "eos_token": _DS_EOS,
        "legacy": True,
        "model_max_length": 16384,
        "pad_token": _DS_EOS,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizerFast",
        "unk_token": None,
        "use_default_system_prompt": False,
    },
    special_tokens_map={"bos_token": _DS_BOS, "eos_token": _DS_EOS, "pad_token": _DS_EOS},
    generation_config={
        "bos_token_id": 151646,
        "do_sample": True,
        "eos_token_id": 151643,
        "temperature": 0.6,
        "top_p": 0.95,
    },
    architecture="Qwen2ForCausalLM",
    vocab_size=151936,
    config={"bos_token_id": 151643, "eos_token_id": 151643, "max_position_embeddings": 131072,
            "rope_theta": 10000.0, "sliding_window": 4096, "transformers_version": "4.44.0"},
)

# --- gemma-4 (gemma-4-31B-it) ------------------------------------------------------------------------------------

#: The GGUF's control and user-defined tokens (ids inside the vocabulary), all named special tokens in
#: tokenizer_config.json.
_GEMMA4_ADDED = tuple(AddedTokenSpec(i, content, True) for i, content in (
    (0, "<pad>"), (1, "<eos>"), (2, "<bos>"), (3, "<unk>"), (4, "<mask>"), (46, "<|tool>"), (47, "<tool|>"),
    (48, "<|tool_call>"), (49, "<tool_call|>"), (50, "<|tool_response>"), (51, "<tool_response|>"), (52, '<|"|>'),
    (98, "<|think|>"), (100, "<|channel>"), (101, "<channel|>"), (105, "<|turn>"), (106, "<turn|>"),
    (255999, "<|image>"), (256000, "<|audio>"), (258880, "<|image|>"), (258881, "<|audio|>"), (258882, "<image|>"),
    (258883, "<audio|>"), (258884, "<|video|>"),
))
_GEMMA4_NAMED = {
    "audio_token": "<|audio|>", "boa_token": "<|audio>", "boi_token": "<|image>", "eoa_token": "<audio|>",
    "eoc_token": "<channel|>", "eoi_token": "<image|>", "eot_token": "<turn|>", "escape_token": '<|"|>',
    "etc_token": "<tool_call|>", "etd_token": "<tool|>", "etr_token": "<tool_response|>", "image_token": "<|image|>",
    "soc_token": "<|channel>", "sot_token": "<|turn>", "stc_token": "<|tool_call>", "std_token": "<|tool>",
    "str_token": "<|tool_response>", "think_token": "<|think|>",
}

GEMMA4 = FamilySpec(
    name="gemma-4",
    model="google/gemma-4-31B-it",
    vocabulary="gemma-4",
    base_vocab_size=262144,
    template="google-gemma-4-31B-it.jinja",
    split_regex="",
    normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    pre_tokenizer_trim_offsets=False,
    ignore_merges=False,
    bos_post_processor="<bos>",
    byte_level_post_processor=False,
    post_processor_byte_level_style="qwen",
    decoder_style="qwen",
    bpe_affixes=None,
    added_tokens=_GEMMA4_ADDED,
    tokenizer_config={
        **_GEMMA4_NAMED,
        "backend": "tokenizers",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "extra_special_tokens": ["<|video|>"],
        "mask_token": "<mask>",
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "<pad>",
        "padding_side": "left",
        "tokenizer_class": "GemmaTokenizer",
        "unk_token": "<unk>",
    },
    special_tokens_map={"bos_token": "<bos>", "eos_token": "<eos>", "mask_token": "<mask>", "pad_token": "<pad>",
                        "unk_token": "<unk>"},
    generation_config={
        "bos_token_id": 2,
        "do_sample": True,
        "eos_token_id": [1, 106, 50],
        "pad_token_id": 0,
        "temperature": 1.0,
        "top_k": 64,
        "top_p": 0.95,
    },
    architecture="Gemma4ForCausalLM",
    vocab_size=262144,
    config={"bos_token_id": 2, "eos_token_id": 1, "max_position_embeddings": 262144, "pad_token_id": 0,
            "transformers_version": "5.5.0.dev0"},
    pipeline="byte-fallback",
)

FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec for spec in (QWEN3, LLAMA3, DEEPSEEK_R1, QWEN3_CODER, GEMMA4)
}
#: Every --family value; ``tiny`` is the embedded tiny model of ``tokenspec.harness.models.tiny``.
FAMILY_NAMES = ("tiny", *FAMILIES)
#: (tool parser, reasoning parser) each family is served with: vLLM's parsers for that model family.
FAMILY_PARSERS: dict[str, tuple[str | None, str | None]] = {
    "tiny": ("hermes", "qwen3"), "qwen3": ("hermes", "qwen3"), "llama3": ("llama3_json", None),
    "deepseek-r1": (None, "deepseek_r1"), "qwen3-coder": ("qwen3_coder", None),
    "gemma-4": ("gemma4", "gemma4"),
}


def family(name: str) -> FamilySpec:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}; known: {', '.join(FAMILY_NAMES)}") from None
