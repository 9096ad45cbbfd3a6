"""Golden files: deterministic, current for the embedded model, and keyed by tokenizer fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

from tokenspec.campaigns.golden_build import build_golden
from tokenspec.campaigns.golden_corpus import DIALECT_CASES
from tokenspec.golden import GOLDEN_DIR, find_golden
from tokenspec.suite.oracles.dialects import messages_as_chat, responses_as_chat


def test_committed_golden_file_is_current(tiny_model, tmp_path: Path) -> None:
    """The hand-written cases rebuild identically; every generated render case (chat, Messages, Responses) still
    equals its oracle (transformers, after the dialect's mapping), so a change of the oracle or of the normalisation
    shows here, not as a suite failure."""
    from tokenspec.suite.oracles.render_oracle import RenderOracle

    fresh = build_golden(tiny_model.model_dir, tmp_path)
    committed = GOLDEN_DIR / fresh.parent.name / fresh.name
    assert committed.is_file(), f"run `tokenspec golden build` for the tiny model: {committed} is missing"
    written = json.loads(committed.read_text())
    hand = {c["id"] for c in json.loads(fresh.read_text())["cases"]}
    assert [c for c in written["cases"] if c["id"] in hand] == json.loads(fresh.read_text())["cases"]
    oracle = RenderOracle.load(tiny_model.model_dir)
    generated = [c for c in written["cases"] if c["kind"] == "render" and c["id"] not in hand]
    assert len(generated) >= 100
    for case in generated:
        if "token_ids" in case["expect"]:
            assert oracle.prompt_ids(case["request"]) == case["expect"]["token_ids"], case["id"]
    mappings = {"messages-render": messages_as_chat, "responses-render": responses_as_chat}
    dialect = [c for c in written["cases"] if c["kind"] in mappings]
    assert {c["kind"] for c in dialect} == set(mappings) and len(dialect) == len(mappings) * DIALECT_CASES
    for case in dialect:
        if "token_ids" in case["expect"]:
            chat = mappings[case["kind"]]({"model": written["model"], **case["request"]})
            assert oracle.prompt_ids(chat) == case["expect"]["token_ids"], case["id"]
    assert len(written["cases"]) >= 150


def test_golden_lookup_uses_the_fingerprint(tiny_model, tmp_path: Path) -> None:
    assert find_golden(tiny_model.model_dir)["tokenizer_fingerprint"] == tiny_model.fingerprint
    other = tmp_path / "other"
    other.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (other / name).write_bytes((tiny_model.model_dir / name).read_bytes())
    config = json.loads((other / "tokenizer_config.json").read_text())
    config["chat_template"] += " "
    (other / "tokenizer_config.json").write_text(json.dumps(config))
    assert find_golden(other) is None, "a changed template must not match the tiny model's golden file"
