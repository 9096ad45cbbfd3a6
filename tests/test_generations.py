"""API generations: requirements say where they apply (since/until), the probe decides what a target speaks from its
own answers, and a claimed generation is held to its requirements.

The bundled frontend speaks the 0.34 wire by default (parse_context, the prev_token_ids window) and the 0.33 one with
``api_generation="0.33"`` (the prev_tokens window). 0.32 is a labelled test double: the 0.33 frontend behind the
mutant proxy, with render answers stripped of parse_context.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from broken_server import frontend_config
from frontend_server import running_frontend

from tokenspec.harness.loopback import running_app
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.harness.mutants.defects import RENDERS, Defect, edit_answer
from tokenspec.harness.mutants.proxy import MutantProxy
from tokenspec.specs.catalogue import Requirement
from tokenspec.suite.engine.gating import Capabilities


def _requirement(since: str | None = None, until: str | None = None) -> Requirement:
    return Requirement("RENDER-999", "MUST", "x", "render.yaml#", None, False, "RENDER", since, until)


def test_a_requirement_applies_within_its_span() -> None:
    assert _requirement(since="0.33").applies_to("0.34") and not _requirement(since="0.33").applies_to("0.32")
    assert _requirement(until="0.33").applies_to("0.32") and not _requirement(until="0.33").applies_to("0.34")
    assert _requirement(since="0.33", until="0.33").applies_to("0.33")


@pytest.mark.parametrize(("candidates", "cited", "outcome"), [
    (["0.32"], [_requirement(since="0.33")], "unsupported"),
    (["0.33", "0.34"], [_requirement(since="0.34")], "not tested"),
    (["0.33", "0.34"], [_requirement(since="0.33")], None),
    (["0.34"], [_requirement(since="0.34")], None),
    (["0.32"], [_requirement(since="0.33"), _requirement()], None),  # an unversioned requirement is always judged
    ([], [_requirement(since="0.33")], None),  # no generation fits the wire: everything is judged
])
def test_the_gate_judges_only_what_holds_for_every_candidate(candidates, cited, outcome) -> None:
    caps = Capabilities(generations=candidates, generation_evidence="seen")
    if outcome is None:
        caps.require_generation(cited)
        return
    with pytest.raises(pytest.skip.Exception, match=outcome):
        caps.require_generation(cited)


def _without_parse_context(answer: Any, request: Any) -> None:
    if isinstance(answer, dict):
        answer.pop("parse_context", None)


SPEAKS_032 = Defect("speaks-0.32", "test double", ("RENDER-025",), "a render without parse_context",
                    on_response=edit_answer(RENDERS, _without_parse_context))


def _run(url: str, model_dir: Path, report: Path, *extra: str) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "tokenspec", "run", "--target", url, "--tokenizer", str(model_dir),
                    "-k", "parse_context or valid_stream_state", "-n", "0", "--report", str(report), *extra],
                   capture_output=True, text=True, timeout=300)
    return json.loads((report / "report.json").read_text())


def _outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"] if "parse_context" in t["nodeid"]}


def _generation(report: dict[str, Any]) -> list[str]:
    return report["capabilities"]["generation"]["candidates"]


def test_the_probe_reads_the_generation_off_the_wire(tiny_model, tmp_path) -> None:
    runs = {}
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as url:
        runs["0.34"] = _run(url, tiny_model.model_dir, tmp_path / "frontend")
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, api_generation="0.33")) as url:
        runs["0.33"] = _run(url, tiny_model.model_dir, tmp_path / "frontend-0.33")
        with running_app(MutantProxy(url, SPEAKS_032)) as proxied:
            runs["0.32"] = _run(proxied, tiny_model.model_dir, tmp_path / "0.32")
    seen = {name: _generation(report) for name, report in runs.items()}
    assert seen == {"0.34": ["0.34"], "0.33": ["0.33"], "0.32": ["0.32"]}, seen
    assert set(_outcomes(runs["0.32"]).values()) == {"unsupported"}, _outcomes(runs["0.32"])
    for name in ("0.33", "0.34"):  # RENDER-025 holds since 0.33: judged, and the frontend keeps it
        assert set(_outcomes(runs[name]).values()) == {"passed"}, (name, _outcomes(runs[name]))


def test_a_declared_generation_is_held_to_its_requirements(tiny_model, tmp_path) -> None:
    """A profile that claims 0.33 for a target whose wire is 0.32 gets failures, never "unsupported"."""
    profile = tmp_path / "claims-0.33.yaml"
    profile.write_text("implementation: {name: claims}\ngeneration: '0.33'\n")
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, api_generation="0.33")) as url:
        with running_app(MutantProxy(url, SPEAKS_032)) as proxied:
            report = _run(proxied, tiny_model.model_dir, tmp_path / "claimed", "--profile", str(profile))
    generation = report["capabilities"]["generation"]
    assert generation["candidates"] == ["0.33"] and "the wire looks like 0.32" in generation["evidence"], generation
    assert set(_outcomes(report).values()) == {"failed"}, _outcomes(report)
