"""Building golden files: the hand-written cases (``golden/cases.yaml``) encoded with one model's tokenizer and
chat template (the suite's render oracle), plus a generated corpus, written as ``golden/<model>/<fingerprint>.json``
(read back by ``tokenspec.golden``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenspec.core.fingerprint import tokenizer_fingerprint
from tokenspec.core.version import __version__
from tokenspec.core.yaml_files import load_yaml
from tokenspec.golden import GOLDEN_DIR


def _model_name(model_dir: Path) -> str:
    marker = model_dir / "tokenspec-model.json"
    if marker.is_file():
        return str(json.loads(marker.read_text())["name"])
    return model_dir.name


def _eos(model_dir: Path) -> str | None:
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    eos = config.get("eos_token")
    return eos.get("content") if isinstance(eos, dict) else eos


#: Cases added to the hand-written ones: (render oracle, model name, disagreements to append to) -> cases.
Corpus = Callable[[Any, str, list[str]], list[dict[str, Any]]]


def build_golden(model_dir: Path, out_dir: Path = GOLDEN_DIR, *, family: str | None = None,
                 corpus: Corpus | None = None) -> Path:
    """Write the golden file of ``model_dir``: the hand-written cases, plus the ``corpus`` (the generated cases
    of ``tokenspec.campaigns.golden_corpus``). Disagreements between oracles are listed in the file and printed."""
    from tokenizers import Tokenizer

    model_dir = Path(model_dir)
    fingerprint = tokenizer_fingerprint(model_dir)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    from tokenspec.suite.oracles.render_oracle import RenderOracle

    oracle = RenderOracle.load(model_dir)
    source = load_yaml((GOLDEN_DIR / "cases.yaml").read_text())
    cases: list[dict[str, Any]] = []
    for case in source["render"]:
        request = case["request"]
        ids = oracle.prompt_ids(request)
        cases.append({"id": case["id"], "kind": "render", "requirements": case["requirements"],
                      "feature": case.get("feature"), "request": request, "expect": {"token_ids": ids}})
    for case in source["derender"]:
        from tokenspec.specs.parser_families import shapes

        output = shapes()[case["shape"]] if "shape" in case else case["output"]
        ids = tokenizer.encode(output, add_special_tokens=False).ids
        if case.get("append_eos"):
            ids.append(tokenizer.token_to_id(_eos(model_dir)))
        cases.append({"id": case["id"], "kind": "derender", "requirements": case["requirements"],
                      "output": output, "shape": case.get("shape"), "like": case.get("like"),
                      "variant": case["variant"], "token_ids": ids})
    disagreements: list[str] = []
    if corpus is not None:
        cases += corpus(oracle, _model_name(model_dir), disagreements)
    for note in disagreements:
        print(f"golden: disagreement: {note}")
    target = out_dir / _model_name(model_dir) / f"{fingerprint}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = {"model": _model_name(model_dir), "family": family, "tokenizer_fingerprint": fingerprint,
           "tokenspec_version": __version__, "disagreements": disagreements, "tokenizer": tokenizer_facts(model_dir),
           "cases": cases}
    target.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return target


def tokenizer_facts(model_dir: Path) -> dict[str, Any]:
    """What a URL-only run cannot ask a server for and a golden file keeps for it: the model's EOS ids and the ids
    its tokenizer marks special, read from the folder's files."""
    from tokenizers import Tokenizer

    from tokenspec.suite.engine.target import folder_facts

    configs = {name: json.loads((model_dir / name).read_text()) for name in
               ("config.json", "generation_config.json", "tokenizer_config.json") if (model_dir / name).exists()}
    return folder_facts(Tokenizer.from_file(str(model_dir / "tokenizer.json")), configs)
