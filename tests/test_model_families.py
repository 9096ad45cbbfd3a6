"""Tests for the real model families (tokenspec.harness.models): qwen3, llama3, deepseek-r1, qwen3-coder, gemma-4.

The outside oracle for each tokenizer is llama.cpp's own test vectors for the vocabulary it was built from
(``ggml-vocab-<vocabulary>.gguf.inp``/``.out``: inputs and the ids llama.cpp expects, without BOS). The public
facts of each family (added tokens at their ids, special flags, stop ids) are written out literally here, so a
change in families.py shows up as a failing line, not as a silently different folder. The live part starts
vLLM's render server on each folder and compares its token ids with what the local tokenizer and the chat
template (rendered with Hugging Face semantics) give.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import httpx
import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest
from conftest import FamilyModels
from tokenizers import Tokenizer

from tokenspec import cli
from tokenspec.core.errors import UsageError
from tokenspec.harness.implementations import vllm
from tokenspec.harness.models import FAMILIES, FAMILY_NAMES, build, family, sources
from tokenspec.harness.models import tiny as tinymodel
from tokenspec.harness.models.build import FAMILY_FILES

VECTORS = {"qwen3": "qwen2", "llama3": "llama-bpe", "deepseek-r1": "qwen2", "qwen3-coder": "qwen2",
           "gemma-4": "gemma-4"}
REAL = list(FAMILIES)


def _tokenizer(result: tinymodel.BuildResult) -> Tokenizer:
    return Tokenizer.from_file(str(result.model_dir / "tokenizer.json"))


def _json(path: Path) -> dict:
    return json.loads(path.read_bytes().decode("utf-8"))


# --- the tokenizer against llama.cpp's test vectors --------------------------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_tokenizer_reproduces_llama_cpp_test_vectors(families: FamilyModels, name: str,
                                                     record_property: pytest.RecordProperty) -> None:
    tokenizer = _tokenizer(families[name])
    vectors = sources.vocab_test_vectors(VECTORS[name])
    assert len(vectors) == 46
    # Without special tokens, exactly as llama.cpp's test tokenizes.
    misses = [(text, ids, tokenizer.encode(text, add_special_tokens=False).ids) for text, ids in vectors
              if tokenizer.encode(text, add_special_tokens=False).ids != ids]
    matched = len(vectors) - len(misses)
    record_property("vectors_matched", f"{matched}/{len(vectors)}")
    assert not misses, f"{name}: {matched}/{len(vectors)} llama.cpp vectors match; first misses: {misses[:3]}"
    # With special tokens, the families whose post-processor adds BOS put exactly that one id in front.
    bos = family(name).bos_post_processor
    prefix = [family(name).token_id(bos)] if bos else []
    for text, ids in vectors:
        assert tokenizer.encode(text).ids == prefix + ids, text


@pytest.mark.parametrize("name", REAL)
def test_the_vectors_cover_what_the_families_differ_in(name: str) -> None:
    """The vectors are a meaningful oracle: digits runs (\\p{N} vs \\p{N}{1,3}), the Llama 3 ignore_merges case,
    and non-NFC-sensitive text are in them (none of the qwen2 inputs changes under NFC, so NFC is not what
    makes them pass; the NFD inputs that NFC composes are in llama.cpp's qwen35 vectors, not used here)."""
    import unicodedata

    texts = [text for text, _ in sources.vocab_test_vectors(VECTORS[name])]
    assert any(re.search(r"\d{4}", t) for t in texts)
    assert "Cửa Việt" in texts  # transformers' own GGUF conversion gets this one wrong for Llama 3
    assert all(unicodedata.normalize("NFC", t) == t for t in texts)


# --- the folder: files, special tokens at their public ids, template, config -------------------------------------

PUBLIC_IDS = {
    "qwen3": {"<|endoftext|>": (151643, True), "<|im_start|>": (151644, True), "<|im_end|>": (151645, True),
              "<|video_pad|>": (151656, True), "<tool_call>": (151657, False), "</tool_call>": (151658, False),
              "<|file_sep|>": (151664, False), "<tool_response>": (151665, False),
              "</tool_response>": (151666, False), "<think>": (151667, False), "</think>": (151668, False)},
    "llama3": {"<|begin_of_text|>": (128000, True), "<|end_of_text|>": (128001, True),
               "<|finetune_right_pad_id|>": (128004, True), "<|start_header_id|>": (128006, True),
               "<|end_header_id|>": (128007, True), "<|eom_id|>": (128008, True), "<|eot_id|>": (128009, True),
               "<|python_tag|>": (128010, True), "<|reserved_special_token_3|>": (128011, True),
               "<|reserved_special_token_247|>": (128255, True)},
    "qwen3-coder": {"<|endoftext|>": (151643, True), "<|im_start|>": (151644, True), "<|im_end|>": (151645, True),
                    "<tool_call>": (151657, False), "</tool_call>": (151658, False),
                    "<tool_response>": (151665, False), "</tool_response>": (151666, False),
                    "<think>": (151667, False), "</think>": (151668, False)},
    "gemma-4": {"<pad>": (0, True), "<eos>": (1, True), "<bos>": (2, True), "<unk>": (3, True), "<|tool>": (46, True),
                "<|tool_call>": (48, True), "<tool_call|>": (49, True), "<|tool_response>": (50, True),
                '<|"|>': (52, True), "<|think|>": (98, True), "<|channel>": (100, True), "<channel|>": (101, True),
                "<|turn>": (105, True), "<turn|>": (106, True), "<|image|>": (258880, True),
                "<|video|>": (258884, True)},
    "deepseek-r1": {"<\uff5cend\u2581of\u2581sentence\uff5c>": (151643, True), "<\uff5cUser\uff5c>": (151644, False),
                    "<\uff5cAssistant\uff5c>": (151645, False),
                    "<\uff5cbegin\u2581of\u2581sentence\uff5c>": (151646, True), "<|EOT|>": (151647, False),
                    "<think>": (151648, False), "</think>": (151649, False), "<|quad_start|>": (151650, True),
                    "<|video_pad|>": (151656, True), "<tool_call>": (151657, False),
                    "<|file_sep|>": (151664, False), "<\uff5ctool\u2581calls\u2581begin\uff5c>": (151665, False),
                    "<\uff5ctool\u2581sep\uff5c>": (151673, False)},
}
#: (tokenizer size, config.json vocab_size, architecture, bos, eos, pad of tokenizer_config.json)
SHAPE = {
    "qwen3": (151669, 151936, "Qwen3ForCausalLM", None, "<|im_end|>", "<|endoftext|>"),
    "llama3": (128256, 128256, "LlamaForCausalLM", "<|begin_of_text|>", "<|eot_id|>", None),
    "qwen3-coder": (151669, 151936, "Qwen3ForCausalLM", None, "<|im_end|>", "<|endoftext|>"),
    "gemma-4": (262144, 262144, "Gemma4ForCausalLM", "<bos>", "<eos>", "<pad>"),
    "deepseek-r1": (151674, 151936, "Qwen2ForCausalLM", "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                    "<\uff5cend\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"),
}
GENERATION = {
    "qwen3": {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95},
    "llama3": {"bos_token_id": 128000, "do_sample": True, "eos_token_id": [128001, 128008, 128009],
               "temperature": 0.6, "top_p": 0.9},
    "deepseek-r1": {"bos_token_id": 151646, "do_sample": True, "eos_token_id": 151643, "temperature": 0.6,
                    "top_p": 0.95},
    "qwen3-coder": {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                    "pad_token_id": 151643, "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20,
                    "top_p": 0.8},
    "gemma-4": {"bos_token_id": 2, "do_sample": True, "eos_token_id": [1, 106, 50], "pad_token_id": 0,
                "temperature": 1.0, "top_k": 64, "top_p": 0.95},
}


@pytest.mark.parametrize("name", REAL)
def test_special_tokens_are_at_their_public_ids(families: FamilyModels, name: str) -> None:
    result = families[name]
    tokenizer = _tokenizer(result)
    doc = _json(result.model_dir / "tokenizer.json")
    config = _json(result.model_dir / "tokenizer_config.json")
    added = {t["content"]: (t["id"], t["special"]) for t in doc["added_tokens"]}
    decoder = {v["content"]: (int(k), v["special"]) for k, v in config["added_tokens_decoder"].items()}
    assert decoder == added
    for content, (token_id, special) in PUBLIC_IDS[name].items():
        assert added[content] == (token_id, special), content
        assert tokenizer.token_to_id(content) == token_id
        assert tokenizer.encode(content, add_special_tokens=False).ids == [token_id], content
    size, vocab_size, architecture, bos, eos, pad = SHAPE[name]
    if family(name).pipeline == "byte-level":
        # Added tokens fill the ids from the end of the GGUF's regular tokens up, without a gap.
        assert sorted(i for i, _ in added.values()) == list(range(min(i for i, _ in added.values()), size))
    else:
        # Byte fallback: the added tokens are inside the vocabulary, and the 256 byte pieces are regular tokens.
        assert all(i < size for i, _ in added.values())
        assert [tokenizer.token_to_id(f"<0x{b:02X}>") for b in (0, 255)] == [238, 493]
    assert tokenizer.get_vocab_size(with_added_tokens=True) == size
    assert (config.get("bos_token"), config["eos_token"], config.get("pad_token")) == (bos, eos, pad)
    model_config = _json(result.model_dir / "config.json")
    assert model_config["architectures"] == [architecture]
    assert model_config["vocab_size"] == vocab_size
    assert _json(result.model_dir / "generation_config.json") == GENERATION[name]
    # Every stop id of generation_config is an added token; no id is special only in one of the two files.
    eos_ids = GENERATION[name]["eos_token_id"]
    for eos_id in eos_ids if isinstance(eos_ids, list) else [eos_ids]:
        assert eos_id in {i for i, _ in added.values()}


@pytest.mark.parametrize("name", REAL)
def test_template_is_the_vendored_one_byte_for_byte(families: FamilyModels, name: str) -> None:
    result = families[name]
    vendored = sources.template_path(family(name).template).read_bytes()
    assert (result.model_dir / "chat_template.jinja").read_bytes() == vendored
    assert _json(result.model_dir / "tokenizer_config.json")["chat_template"] == vendored.decode("utf-8")


@pytest.mark.parametrize("name", REAL)
def test_every_token_the_template_writes_is_one_added_token(families: FamilyModels, name: str) -> None:
    """A marker the template spells (``<|im_start|>``, ``<｜tool▁sep｜>``, ``<think>``...) must tokenize to its one
    id, or vLLM's parsers and the suite would look for ids that never appear."""
    text = (families[name].model_dir / "chat_template.jinja").read_text(encoding="utf-8")
    markers = set(re.findall(r"<\|[a-z_]+\|>|<\uff5c[^\uff5c>]+\uff5c>|</?(?:think|tool_call|tool_response)>"
                             r"|<\|(?:turn|tool|tool_call|tool_response|channel)>|<(?:turn|tool|tool_call|tool_response"
                             r"|channel)\|>|<\|\"\|>", text))
    assert markers
    added = {t.content for t in family(name).added_tokens}
    assert markers <= added, markers - added


@pytest.mark.parametrize("name", REAL)
def test_marker_file_names_the_family(families: FamilyModels, name: str) -> None:
    result = families[name]
    marker = _json(result.model_dir / "tokenspec-model.json")
    assert marker["name"] == f"tokenspec-{name}"
    assert marker["family"] == name
    assert marker["tokenizer_fingerprint"] == result.fingerprint == tinymodel.tokenizer_fingerprint(result.model_dir)


@pytest.mark.parametrize("name", REAL)
def test_two_builds_are_byte_identical(families: FamilyModels, name: str, tmp_path: Path) -> None:
    first = families[name]
    again = build(tmp_path / "again", name)
    on_disk = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in first.model_dir.iterdir()}
    assert set(on_disk) == set(FAMILY_FILES)
    assert on_disk == first.files == again.files
    for file_name, digest in first.files.items():
        assert hashlib.sha256((again.model_dir / file_name).read_bytes()).hexdigest() == digest, file_name


@pytest.mark.parametrize("name", REAL)
def test_weights_have_the_architecture_parameters(families: FamilyModels, name: str) -> None:
    from safetensors.numpy import load_file

    spec = family(name)
    tensors = load_file(str(families[name].model_dir / "model.safetensors"))
    assert tensors["model.embed_tokens.weight"].shape == (spec.vocab_size, tinymodel.HIDDEN_SIZE)
    names = set(tensors)
    has_norm = "model.layers.0.self_attn.q_norm.weight" in names
    has_bias = "model.layers.0.self_attn.q_proj.bias" in names
    assert (has_norm, has_bias) == {"Qwen3ForCausalLM": (True, False), "Qwen2ForCausalLM": (False, True),
                                    "LlamaForCausalLM": (False, False),
                                    "Gemma4ForCausalLM": (True, False)}[spec.architecture]
    assert ("model.layers.0.pre_feedforward_layernorm.weight" in names) == (spec.architecture == "Gemma4ForCausalLM")
    assert "lm_head.weight" not in names  # tied embeddings
    assert _json(families[name].model_dir / "config.json")["tie_word_embeddings"] is True


def test_tiny_family_is_the_tiny_model(tiny_model: tinymodel.BuildResult, tmp_path: Path) -> None:
    again = build(tmp_path / "tiny", "tiny")
    assert again.files == tiny_model.files
    assert again.fingerprint == tiny_model.fingerprint


def test_building_tiny_over_a_family_leaves_no_stale_file(families: FamilyModels, tmp_path: Path) -> None:
    folder = tmp_path / "m"
    build(folder, "deepseek-r1")
    assert (folder / "chat_template.jinja").is_file()
    result = build(folder, "tiny")
    assert {p.name for p in folder.iterdir()} == set(result.files)
    assert not (folder / "chat_template.jinja").exists()


def test_unknown_family_and_foreign_folder_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown model family 'gpt5'"):
        build(tmp_path / "m", "gpt5")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        build(tmp_path / "foreign", "qwen3")


def test_cli_offers_every_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.MODEL_FAMILIES == FAMILY_NAMES
    assert cli.main(["model", "build", str(tmp_path / "m"), "--family", "llama3"]) == 0
    assert "built llama3 " in capsys.readouterr().out
    assert _json(tmp_path / "m" / "tokenspec-model.json")["family"] == "llama3"


def test_sources_extract_only_the_needed_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = sources.sources_dir() / sources.SDIST_NAME
    if not sdist.is_file():
        sources.ensure_sources()  # downloads it (the family builds above normally have already)
    monkeypatch.setenv("TOKENSPEC_CACHE", str(tmp_path))
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / sources.SDIST_NAME).symlink_to(sdist)
    folder = sources.ensure_sources()
    assert folder == tmp_path / "sources" / sources.MODELS_PREFIX.rstrip("/")
    vocab_files = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert vocab_files == sorted(f"ggml-vocab-{v}.gguf{ext}" for v in ("qwen2", "llama-bpe", "gemma-4")
                                 for ext in ("", ".inp", ".out"))
    templates = {p.name for p in (folder / "templates").iterdir()}
    assert {family(n).template for n in REAL} <= templates
    assert all(name.endswith(".jinja") for name in templates)
    assert sources.ensure_sources() == folder  # in place: nothing fetched or extracted again


# --- live: vLLM's render server on each folder --------------------------------------------------------------------

CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, 世界! ied 4 ½ months"}]
#: The ids a chat render starts and ends with: BOS / first role marker, and the generation prompt.
CHAT_EDGES = {
    # <|im_start|>system\n ... <|im_end|>\n<|im_start|>assistant\n
    "qwen3": ([151644, 8948, 198], [151645, 198, 151644, 77091, 198]),
    "llama3": ([128000, 128006, 9125, 128007, 271], [128009, 128006, 78191, 128007, 271]),
    "deepseek-r1": ([151646], [151645, 151648, 198, 151649]),  # <｜Assistant｜><think>\n</think> (vendored template)
    "qwen3-coder": ([151644, 8948, 198], [151645, 198, 151644, 77091, 198]),  # as Qwen3, without a think block
    # <bos><|turn>user\n ... <turn|>\n<|turn>model\n<|channel>thought\n<channel|> (thinking off by default)
    "gemma-4": ([2, 105, 2364, 107], [106, 107, 105, 4368, 107, 100, 45518, 107, 101]),
}


def _hf_render(template: str, messages: list[dict], config: dict) -> str:
    """The chat template with Hugging Face semantics (sandboxed jinja2, trim/lstrip blocks, tojson keeps
    non-ASCII, raise_exception), the special tokens as variables, a generation prompt."""

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: object, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                        extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    specials = {k: config[k] for k in ("bos_token", "eos_token", "pad_token") if config.get(k) is not None}
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, **specials)


@pytest.fixture(scope="module", params=REAL)
def family_render(request: pytest.FixtureRequest, vllm_install: vllm.VllmInstall,
                  families: FamilyModels) -> tuple[str, str, tinymodel.BuildResult, vllm.VllmServer]:
    name = request.param
    return name, families.served_name(name), families[name], families.render_server(name)


@pytest.mark.vllm
def test_vllm_render_chat_matches_the_local_template_and_tokenizer(family_render) -> None:
    name, served, result, server = family_render
    config = _json(result.model_dir / "tokenizer_config.json")
    conversation = CONVERSATION
    if name == "gemma-4":
        # vLLM 0.32's own deviation: the template loops over a message's content, so vLLM's "auto" content format
        # passes every string content as a list of parts, and the system turn (written with ``| trim``, no loop)
        # shows the list's Python repr. Hugging Face passes the string. Shown here, then compared without it.
        resp = httpx.post(f"{server.url}/v1/chat/completions/render",
                          json={"model": served, "messages": CONVERSATION}, timeout=30)
        shown = _tokenizer(result).decode(resp.json()["token_ids"], skip_special_tokens=False)
        assert "<|turn>system\n[{'type': 'text', 'text': 'Be brief.'}]<turn|>" in shown
        conversation = CONVERSATION[1:]
    text = _hf_render(config["chat_template"], conversation, config)
    local = _tokenizer(result).encode(text, add_special_tokens=False).ids
    head, tail = CHAT_EDGES[name]
    assert local[:len(head)] == head and local[-len(tail):] == tail
    resp = httpx.post(f"{server.url}/v1/chat/completions/render", json={"model": served, "messages": conversation},
                      timeout=30)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["token_ids"] == local
    # vLLM copies the family's generation_config sampling defaults into the render output.
    params = body["sampling_params"]
    for key in ("temperature", "top_p", "top_k"):
        if key in GENERATION[name]:
            assert params[key] == pytest.approx(GENERATION[name][key]), key


@pytest.mark.vllm
def test_vllm_render_completions_match_llama_cpp_vectors(family_render) -> None:
    """/v1/completions/render of each llama.cpp input gives llama.cpp's ids (plus the family's BOS, which the
    completions path adds as the tokenizer's post-processor says), and the local tokenizer's ids."""
    name, served, result, server = family_render
    tokenizer = _tokenizer(result)
    bos = family(name).bos_post_processor
    prefix = [family(name).token_id(bos)] if bos else []
    checked = 0
    with httpx.Client(timeout=30) as client:
        for text, ids in sources.vocab_test_vectors(VECTORS[name]):
            if not text:
                continue  # an empty prompt is a request error, not a tokenizer case
            resp = client.post(f"{server.url}/v1/completions/render", json={"model": served, "prompt": text})
            assert resp.status_code == 200, resp.text
            got = resp.json()[0]["token_ids"]
            assert got == prefix + ids == tokenizer.encode(text).ids, text
            checked += 1
    assert checked >= 40
