"""What a run tells GitHub Actions (tokenspec/github_actions.py): nothing outside it; inside it the job summary,
one escaped annotation per cause, and outputs whose verdict agrees with the exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenspec.github_actions import announce
from tokenspec.suite.engine.results import TestResult
from tokenspec.suite.reporting.causes import causes


def _failure(nodeid: str, message: str) -> TestResult:
    return TestResult(nodeid=nodeid, requirement_ids=["RENDER-005"], level="MUST", outcome="failed", duration_s=0.1,
                      message=message, failed_requirements=["RENDER-005"])


@pytest.fixture
def runner_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    files = {name: tmp_path / name for name in ("summary", "output")}
    for path in files.values():
        path.write_text("")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(files["summary"]))
    monkeypatch.setenv("GITHUB_OUTPUT", str(files["output"]))
    (tmp_path / "summary.md").write_text("# tokenspec conformance report: FAIL: 1 passed\n")
    return files


def test_each_cause_is_one_escaped_error_and_the_outputs_agree(runner_files, tmp_path: Path, capsys) -> None:
    found = causes([_failure("t.py::a", "render differs: 50% of ids\nsecond line"),
                    _failure("t.py::b", "render differs: 50% of ids\nsecond line")])
    announce(1, tmp_path, {"headline": "FAIL: 1 passed"}, found)
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and errors[0].startswith("::error title=RENDER-005 (MUST) x2::")
    assert "of ids" in errors[0] and "%25 of ids" in errors[0]  # the message's % escaped as the runner reads it
    assert runner_files["summary"].read_text().startswith("# tokenspec conformance report: FAIL")
    assert runner_files["output"].read_text() == f"verdict=FAIL\nexit-code=1\nreport={tmp_path}\n"


def test_a_pass_that_require_judged_failed_is_a_fail_and_no_verdict_is_said(runner_files, tmp_path, capsys) -> None:
    announce(1, tmp_path, {"headline": "PASS WITH KNOWN FAILURES: 3 passed"}, [], ["FAIL (--require-judged must)"])
    assert "verdict=FAIL\n" in runner_files["output"].read_text()
    announce(3, tmp_path, {"headline": "INCONCLUSIVE: the target stopped answering"}, [])
    out = capsys.readouterr().out
    assert "::error title=tokenspec::FAIL (--require-judged must)" in out
    assert "::error title=tokenspec%3A no verdict::INCONCLUSIVE%3A" not in out  # message data keeps its colons
    assert "::error title=tokenspec%3A no verdict::INCONCLUSIVE: the target stopped answering" in out
    assert runner_files["output"].read_text().endswith(f"verdict=INCONCLUSIVE\nexit-code=3\nreport={tmp_path}\n")


def test_outside_github_actions_nothing_is_written(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    announce(1, tmp_path, {"headline": "FAIL"}, causes([_failure("t.py::a", "x")]))
    assert capsys.readouterr().out == "" and not (tmp_path / "output").exists()
