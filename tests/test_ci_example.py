"""The GitHub-Actions example for implementers (examples/github-actions-conformance.yml) stays runnable:
it installs the package (no clone), and its run and compare commands parse with today's CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from tokenspec.cli import build_parser

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "github-actions-conformance.yml"


def _runs() -> list[str]:
    doc = yaml.safe_load(EXAMPLE.read_text())
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def test_the_example_installs_the_package_and_runs_the_suite_with_flags_tokenspec_run_accepts() -> None:
    (install,) = [run for run in _runs() if "pip install" in run]
    assert "git clone" not in "".join(_runs()) and "$TOKENSPEC_PACKAGE" in install
    (command,) = [run for run in _runs() if run.startswith("tokenspec run")]
    words = shlex.split(command.replace("$GITHUB_WORKSPACE", "/w"))
    args = build_parser().parse_args(words[1:])
    assert args.target == "http://127.0.0.1:8000" and args.seed == 20261201 and args.expectations


def test_the_example_compares_against_a_baseline_with_tokenspec_compare() -> None:
    (command,) = [run for run in _runs() if " compare " in run]
    words = shlex.split(command.replace("$GITHUB_WORKSPACE", "/w"))
    args = build_parser().parse_args(words[1:])
    assert args.command == "compare" and args.run_a == "/w/baseline"
