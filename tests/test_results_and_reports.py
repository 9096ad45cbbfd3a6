"""Results, exit codes, expectations matching and the report writers (no servers)."""

from __future__ import annotations

import json
from pathlib import Path

from tokenspec.suite.expectations import Expectation, find
from tokenspec.suite.report import RunInfo, write_reports
from tokenspec.suite.results import TestResult, exit_code, summarise


def result(outcome: str, level: str = "MUST", nodeid: str = "test_x.py::test_a", **kw) -> TestResult:
    return TestResult(nodeid, ["RENDER-001"], level, outcome, 0.1, **kw)


def test_exit_code_only_for_unexpected_must_failures() -> None:
    assert exit_code([result("passed"), result("failed", "SHOULD"), result("xfailed")]) == 0
    assert exit_code([result("failed")]) == 1
    assert exit_code([result("error")]) == 1
    assert exit_code([result("xpassed")]) == 1, "a stale expectation must be noticed"
    assert exit_code([result("unsupported"), result("skipped")]) == 0


def test_summary_counts_every_outcome_and_level() -> None:
    summary = summarise([result("passed"), result("failed", "SHOULD"), result("unsupported"), result("error")])
    data = summary.to_dict()
    assert data["total"] == 4 and data["passed"] == 1 and data["failed"] == 1 and data["errors"] == 1
    assert data["unsupported"] == 1
    assert data["by_level"]["MUST"] == {"passed": 1, "failed": 1}
    assert data["by_level"]["SHOULD"] == {"passed": 0, "failed": 1}


def test_expectations_match_exact_ids_parametrised_ids_and_prefixes() -> None:
    exact = Expectation("test_render.py::test_a", "r")
    prefix = Expectation("test_render.py::", "r")
    assert exact.matches("test_render.py::test_a") and exact.matches("test_render.py::test_a[x-1]")
    assert not exact.matches("test_render.py::test_ab")
    assert prefix.matches("test_render.py::test_zzz")
    assert find([exact], "test_derender.py::test_a") is None
    assert exact.matches("suite/test_render.py::test_a[path-/v1/x]"), "parameters may contain slashes"


def test_reports_have_the_documented_shape(tmp_path: Path) -> None:
    info = RunInfo("http://t", None, None, "m", 1, "2026-01-01T00:00:00+00:00", 1.5)
    failing = result("failed", message="boom", reproduce="curl -X POST http://t/x")
    write_reports(tmp_path, info, [result("passed", nodeid="test_x.py::test_b"), failing])
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) >= {"tokenspec_version", "target", "engine", "reference", "model", "started_at", "duration_s",
                           "summary", "tests"}
    assert set(report["summary"]) >= {"total", "passed", "failed", "skipped", "unsupported", "xfailed", "xpassed",
                                      "errors", "by_level"}
    assert set(report["tests"][0]) == {"nodeid", "requirement_ids", "level", "outcome", "duration_s", "message",
                                       "reproduce"}
    summary = (tmp_path / "summary.md").read_text()
    assert "FAIL" in summary and "RENDER-001" in summary and "curl -X POST http://t/x" in summary
    assert "Requirements without a test in this run" in summary
