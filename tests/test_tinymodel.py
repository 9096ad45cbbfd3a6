"""Tests for the embedded tiny model builder (tokenspec.harness.models.tiny); no vLLM needed.

Templates are rendered with Hugging Face's chat-template semantics: jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension, a
``raise_exception`` global and a ``tojson`` filter that is ``json.dumps(value, ensure_ascii=False)``.
The expected strings are written out literally so that a change in the template shows up as a readable
diff.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest
from tokenizers import Tokenizer

from tokenspec.core.errors import UsageError
from tokenspec.harness.models import tiny as tinymodel


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tinymodel.BuildResult:
    return tinymodel.build(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(built: tinymodel.BuildResult) -> Tokenizer:
    return Tokenizer.from_file(str(built.model_dir / "tokenizer.json"))


def _hf_env() -> jinja2.Environment:
    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: object, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    return env


def render(messages: list[dict], **kwargs: object) -> str:
    return _hf_env().from_string(tinymodel.chat_template()).render(messages=messages, **kwargs)


# --- build: files, determinism, metadata -------------------------------------------------------------


def test_two_builds_are_byte_identical(built: tinymodel.BuildResult, tmp_path: Path) -> None:
    again = tinymodel.build(tmp_path / "again")
    assert again.files == built.files
    assert again.fingerprint == built.fingerprint
    for name, digest in built.files.items():
        assert hashlib.sha256((again.model_dir / name).read_bytes()).hexdigest() == digest, name


def test_files_listed_are_the_files_written(built: tinymodel.BuildResult) -> None:
    on_disk = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in built.model_dir.iterdir()}
    assert on_disk == built.files
    assert set(on_disk) == {
        "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json",
        "generation_config.json", "model.safetensors", "tokenspec-model.json",
    }


def test_fingerprint_is_recomputed_from_the_folder_and_recorded_in_the_marker(
    built: tinymodel.BuildResult,
) -> None:
    assert tinymodel.tokenizer_fingerprint(built.model_dir) == built.fingerprint
    marker = json.loads((built.model_dir / "tokenspec-model.json").read_text())
    assert marker == {"name": "tokenspec-tiny", "tokenizer_fingerprint": built.fingerprint,
                      "tokenspec_model_version": 1}


def test_fingerprint_changes_with_the_template(built: tinymodel.BuildResult, tmp_path: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((built.model_dir / name).read_bytes())
    assert tinymodel.tokenizer_fingerprint(tmp_path) == built.fingerprint
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] += " "
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert tinymodel.tokenizer_fingerprint(tmp_path) != built.fingerprint


def test_fingerprint_of_a_folder_without_tokenizer_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        tinymodel.tokenizer_fingerprint(tmp_path)


def test_tokenizer_special_and_added_tokens(tokenizer: Tokenizer, built: tinymodel.BuildResult) -> None:
    assert tokenizer.get_vocab_size(with_added_tokens=True) == 1000
    config = json.loads((built.model_dir / "config.json").read_text())
    assert config["vocab_size"] == 1000
    ids = {t: tokenizer.token_to_id(t) for t in tinymodel.SPECIAL_TOKENS + tinymodel.NON_SPECIAL_ADDED_TOKENS}
    assert list(ids.values()) == list(range(991, 1000))
    decoder = json.loads((built.model_dir / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    assert {v["content"]: v["special"] for v in decoder.values()} == {
        t: t in tinymodel.SPECIAL_TOKENS for t in ids
    }
    # Non-special markup survives skip_special_tokens decoding; the special ones do not.
    encoded = tokenizer.encode("<|im_start|><think>hi</think><|im_end|>", add_special_tokens=False)
    assert encoded.ids[0] == ids["<|im_start|>"] and encoded.ids[-1] == ids["<|im_end|>"]
    assert tokenizer.decode(encoded.ids, skip_special_tokens=True) == "<think>hi</think>"
    gen = json.loads((built.model_dir / "generation_config.json").read_text())
    assert gen == {"bos_token_id": ids["<|endoftext|>"],
                   "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]]}


@pytest.mark.parametrize("name", [name for name, _ in tinymodel.corpus_texts()])
def test_tokenizer_round_trips_every_corpus_file(tokenizer: Tokenizer, name: str) -> None:
    text = dict(tinymodel.corpus_texts())[name]
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert len(ids) < len(text.encode("utf-8")), "BPE merges should shorten the byte sequence"
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_weights_cover_every_qwen3_parameter(built: tinymodel.BuildResult) -> None:
    from safetensors.numpy import load_file

    tensors = load_file(str(built.model_dir / "model.safetensors"))
    assert tensors["model.embed_tokens.weight"].shape == (1000, 128)
    assert tensors["model.layers.1.self_attn.q_norm.weight"].shape == (64,)
    assert tensors["model.layers.0.mlp.down_proj.weight"].shape == (128, 256)
    assert all(t.dtype.name == "float32" for t in tensors.values())
    assert len(tensors) == 1 + 2 * 11 + 1
    assert (tensors["model.norm.weight"] == 1).all()
    assert 0.015 < float(tensors["model.embed_tokens.weight"].std()) < 0.025


# --- build: bad output folders ----------------------------------------------------------------------


def test_non_empty_foreign_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        tinymodel.build(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_file_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        tinymodel.build(target)


def test_folder_under_a_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError) as info:
        tinymodel.build(tmp_path / "a-file" / "model")
    assert "\n" not in str(info.value)


def test_rebuild_over_an_earlier_build_overwrites_it(built: tinymodel.BuildResult, tmp_path: Path) -> None:
    first = tinymodel.build(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{}")
    second = tinymodel.build(tmp_path / "m")
    assert second.files == first.files == built.files


# --- chat template ----------------------------------------------------------------------------------


def test_string_content() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}]
    assert render(messages) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n"
    )


def test_list_of_parts_content_concatenates_text_parts() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hello, "},
                                             {"type": "image_url", "image_url": {"url": "x"}},
                                             {"type": "text", "text": "world"}]}]
    assert render(messages) == "<|im_start|>user\nHello, world<|im_end|>\n"


def test_add_generation_prompt_and_enable_thinking() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    assert render(messages, add_generation_prompt=True) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render(messages, add_generation_prompt=True, enable_thinking=True) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render(messages, add_generation_prompt=True, enable_thinking=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Météo",
                                                 "parameters": {"type": "object",
                                                                "properties": {"city": {"type": "string"}}}}}


def test_system_and_tools() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
    assert render(messages, tools=[WEATHER_TOOL], add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\n"
        "These functions are available. Their signatures are listed inside <tools></tools>:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": "Météo", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n'
        "</tools>\n\nTo call a function, reply with a JSON object holding its name and arguments inside "
        "<tool_call></tool_call> tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_tools_without_system_message() -> None:
    out = render([{"role": "user", "content": "Hi"}], tools=[WEATHER_TOOL])
    assert out.startswith("<|im_start|>system\n# Tools\n\n")
    assert out.endswith("</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")


def test_assistant_tool_calls_with_dict_and_string_arguments_and_reasoning() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": None, "reasoning": "Two cities.", "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "b", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "18 C"},
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "4 C"}]},
        {"role": "assistant", "content": "Warm and cold.", "reasoning_content": "Compare."},
    ]
    assert render(messages) == (
        "<|im_start|>user\nWeather in Paris and Oslo?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nTwo cities.\n</think>\n\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city":"Oslo"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n18 C\n</tool_response>\n"
        "<tool_response>\n4 C\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nCompare.\n</think>\n\nWarm and cold.<|im_end|>\n"
    )


def test_tool_call_after_content_is_on_a_new_line() -> None:
    messages = [{"role": "assistant", "content": "Checking.", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {}}}]}]
    assert render(messages) == (
        "<|im_start|>assistant\nChecking.\n"
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n'
    )


def test_unknown_role_raises() -> None:
    with pytest.raises(jinja2.exceptions.TemplateError, match="Unknown message role: wizard"):
        render([{"role": "wizard", "content": "x"}])


def test_tokenizer_config_carries_the_template_and_special_tokens(built: tinymodel.BuildResult) -> None:
    config = json.loads((built.model_dir / "tokenizer_config.json").read_text())
    assert config["chat_template"] == tinymodel.chat_template()
    assert config["bos_token"] is None
    assert (config["eos_token"], config["pad_token"]) == ("<|im_end|>", "<|endoftext|>")
    assert config["model_max_length"] == 2048
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["clean_up_tokenization_spaces"] is False
