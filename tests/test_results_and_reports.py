"""Results, exit codes, expectations matching and the report writers (no servers)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tokenspec.core.errors import UsageError
from tokenspec.suite.engine.expectations import Expectation, causes, find, load_expectations_file, unexplained
from tokenspec.suite.engine.results import TestResult, exit_code, summarise
from tokenspec.suite.reporting.report import RunInfo, headline, write_reports


def result(outcome: str, level: str = "MUST", nodeid: str = "test_x.py::test_a", **kw) -> TestResult:
    return TestResult(nodeid, ["RENDER-001"], level, outcome, 0.1, **kw)


def expectation(test: str, requirement: str = "RENDER-001", pattern: str = "boom") -> Expectation:
    return Expectation(test, requirement, pattern, "r")


def test_exit_code_only_for_unexpected_must_failures() -> None:
    assert exit_code([result("passed"), result("failed", "SHOULD"), result("xfailed")]) == 0
    assert exit_code([result("failed")]) == 1
    assert exit_code([result("error")]) == 1
    assert exit_code([result("xpassed")]) == 1, "a stale expectation must be noticed"
    assert exit_code([result("unsupported"), result("not_tested")]) == 0


def test_summary_counts_every_outcome_and_level() -> None:
    summary = summarise([result("passed"), result("failed", "SHOULD"), result("unsupported"), result("error"),
                         result("not_tested"), result("xfailed"), result("xfailed", "SHOULD")])
    data = summary.to_dict()
    assert data["total"] == 7 and data["passed"] == 1 and data["failed"] == 1 and data["errors"] == 1
    assert data["unsupported"] == 1 and data["not_tested"] == 1 and data["xfailed"] == 2
    assert data["by_level"]["MUST"] == {"passed": 1, "failed": 1, "known": 1}
    assert data["by_level"]["SHOULD"] == {"passed": 0, "failed": 1, "known": 1}


def test_headline_never_a_bare_pass_over_known_failures_or_untested_roles() -> None:
    line = headline([result("passed"), result("xfailed"), result("not_tested"), result("unsupported")])
    assert line.startswith("PASS") and "known failures 1 MUST" in line
    assert "1 not tested" in line and "1 unsupported" in line


def test_expectations_match_exact_ids_parametrised_ids_prefixes_and_globs() -> None:
    exact = expectation("test_render.py::test_a")
    prefix = expectation("test_render.py::")
    glob = expectation("test_render.py::test_a[*-x]")
    assert exact.matches("test_render.py::test_a") and exact.matches("test_render.py::test_a[x-1]")
    assert not exact.matches("test_render.py::test_ab")
    assert prefix.matches("test_render.py::test_zzz")
    assert find([exact], "test_derender.py::test_a") == []
    assert exact.matches("suite/test_render.py::test_a[path-/v1/x]"), "parameters may contain slashes"
    assert glob.matches("test_render.py::test_a[p-x]") and not glob.matches("test_render.py::test_a[p-y]")
    assert find([exact], "test_render.py::test_a", ["DERENDER-001"]) == [], "the requirement must be cited"


def test_a_failure_with_a_new_cause_is_not_the_known_one() -> None:
    known = [expectation("t", "ERROR-001", "'error' is a required property")]
    message = "AssertionError: 2 cases:\n  [ERROR-001] 400 outside the spec: 'error' is a required property\n"
    assert unexplained(known, ["ERROR-001"], message) == []
    new = message + "  [ERROR-003] answered 500: boom\n"
    assert unexplained(known, ["ERROR-001", "ERROR-003"], new) == ["[ERROR-003] answered 500: boom"]
    assert unexplained(known, ["RENDER-001"], "AssertionError: something else") != [], "same test, other cause"
    assert causes("AssertionError: [A-001] x\nassert [B-002] in repr", []) == [(["A-001"], "[A-001] x")], \
        "pytest's repr of the operands is not a cause"


def test_expectations_file_names_its_implementation_and_configuration(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("implementation: {name: x, version: '1'}\nconfiguration: {model: m}\nexpectations:\n"
                    "  - {test: t.py::a, requirement: RENDER-001, pattern: boom, reason: why}\n")
    assert load_expectations_file(path).header() == "x 1 (model=m)"
    path.write_text("expectations:\n  - {test: t.py::a, reason: why}\n")
    with pytest.raises(UsageError, match="implementation"):
        load_expectations_file(path)
    path.write_text("implementation: {name: x, version: '1'}\nconfiguration: {}\nexpectations:\n"
                    "  - {test: t.py::a, reason: why}\n")
    with pytest.raises(UsageError, match="requirement, pattern"):
        load_expectations_file(path)


def test_reports_have_the_documented_shape(tmp_path: Path) -> None:
    info = RunInfo("http://t", None, None, "m", 1, "2026-01-01T00:00:00+00:00", 1.5,
                   command="tokenspec run --target http://t --seed 1")
    failing = result("failed", message="boom", reproduce="curl -X POST http://t/x", failed_requirements=["RENDER-001"],
                     expected='"a"', actual='"b"', comparison="==")
    untested = result("not_tested", nodeid="test_x.py::test_c", message="not tested: generate: not hosted")
    caps = {"parsers": {"reasoning": "qwen3", "tool": None},
            "decisions": [{"feature": "generate", "status": "not-tested", "source": "probe", "evidence": "404"}]}
    write_reports(tmp_path, info, [result("passed", nodeid="test_x.py::test_b"), failing, untested], None, caps)
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) >= {"tokenspec_version", "target", "engine", "reference", "model", "started_at", "duration_s",
                           "summary", "tests", "headline", "capabilities", "contract", "expectations", "profile",
                           "command", "interrupted", "collected", "insecure", "retries", "lost_servers", "causes"}
    assert report["command"] == "tokenspec run --target http://t --seed 1"
    assert set(report["summary"]) >= {"total", "passed", "failed", "not_tested", "unsupported", "xfailed",
                                      "xpassed", "errors", "by_level"}
    assert set(report["tests"][0]) == {"nodeid", "requirement_ids", "level", "outcome", "duration_s", "message",
                                       "reproduce", "failed_requirements", "expectation", "expected", "actual",
                                       "comparison", "request_method", "request_url", "request_content_type",
                                       "request_file", "charged_to", "retries", "expected_text", "actual_text", "lost"}
    assert TestResult(**{k: v for k, v in report["tests"][0].items() if k not in ("expected", "request_file")}), \
        "a report.json from before the evidence fields still loads"
    html = (tmp_path / "report.html").read_text()
    assert 'id="verdict"' in html and '<del class="diff-del">a</del>' in html
    assert not re.search(r"(src|href)=[\"']?[a-z]+:|url\(|@import|<script", html), "nothing loaded from anywhere"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[0].startswith("# tokenspec conformance report: FAIL")
    assert "RENDER-001" in summary and "curl -X POST http://t/x" in summary
    assert "1 test(s) not tested: generate: not hosted" in summary, "the headline names what was not tested"
    assert "| generate | not-tested | probe | 404 |" in summary, "every capability decision with its evidence"
    assert "Requirements without a test in this run" in summary


def test_evidence_is_recorded_from_a_run_where_the_expectation_explained_the_failure(tmp_path: Path) -> None:
    from tokenspec.suite.engine.expectations import with_evidence

    path = tmp_path / "e.yaml"
    path.write_text("# header kept\nimplementation: {name: x, version: '1'}\nconfiguration: {model: m}\n"
                    "expectations:\n  - {test: t.py::a, requirement: RENDER-001, pattern: boom, reason: why}\n"
                    "  - {test: t.py::b, requirement: RENDER-001, pattern: boom, reason: why}\n")
    hit = {"nodeid": "suite/t.py::a", "outcome": "xfailed", "failed_requirements": ["RENDER-001"],
           "message": "known failure (...); observed: AssertionError: boom here", "reproduce": "curl x"}
    other = {**hit, "nodeid": "suite/t.py::b", "message": "known failure (...); observed: something else"}
    text = with_evidence(path, [{"target": "http://t", "seed": 7, "tests": [hit, other]}])
    assert text.startswith("# header kept\n")
    doc = __import__("yaml").safe_load(text)
    assert doc["expectations"][0]["evidence"] == {"run": "http://t seed 7", "test": "suite/t.py::a",
                                                  "request": "curl x", "answer": "AssertionError: boom here"}
    assert "evidence" not in doc["expectations"][1], "an answer the pattern does not explain is no evidence"


def test_prune_drops_only_entries_a_run_judged_and_did_not_see_fail(tmp_path: Path) -> None:
    from tokenspec.suite.engine.expectations import pruned

    path = tmp_path / "e.yaml"
    path.write_text("# copied from the older release\nimplementation: {name: x, version: '2'}\n"
                    "configuration: {model: m}\nexpectations:\n"
                    "  - {test: t.py::still, requirement: RENDER-001, pattern: boom, reason: still broken}\n"
                    "  - {test: t.py::fixed, requirement: RENDER-001, pattern: boom, reason: fixed since}\n"
                    "  - {test: t.py::unjudged, requirement: RENDER-001, pattern: boom, reason: not run}\n"
                    "  - {test: t.py::fixed, requirement: RENDER-001, pattern: boom, reason: q, families: [qwen3]}\n"
                    "  - {test: t.py::flaky, requirement: RENDER-001, pattern: boom, reason: f,"
                    " seed_dependent: true}\n")
    tests = [{"nodeid": "suite/t.py::still", "outcome": "xfailed", "failed_requirements": ["RENDER-001"],
              "message": "known failure (...); observed: AssertionError: boom"},
             {"nodeid": "suite/t.py::fixed", "outcome": "xpassed", "failed_requirements": [], "message": "XPASS"},
             {"nodeid": "suite/t.py::unjudged", "outcome": "not_tested", "failed_requirements": [], "message": ""},
             {"nodeid": "suite/t.py::flaky", "outcome": "passed", "failed_requirements": [], "message": ""}]
    text, dropped = pruned(path, [("tiny", {"tests": tests})])
    assert text.startswith("# copied from the older release\n")
    kept = [(e["test"], e["reason"]) for e in __import__("yaml").safe_load(text)["expectations"]]
    assert kept == [("t.py::still", "still broken"), ("t.py::unjudged", "not run"), ("t.py::fixed", "q"),
                    ("t.py::flaky", "f")], kept
    assert len(dropped) == 1 and "fixed since" in dropped[0]
    text, dropped = pruned(path, [("tiny", {"tests": tests})], only_seen=True)
    kept = [e["reason"] for e in __import__("yaml").safe_load(text)["expectations"]]
    assert kept == ["still broken"] and len(dropped) == 4, (kept, dropped)


def test_family_scoped_expectations_are_strict_on_their_family_and_absent_elsewhere(tmp_path: Path) -> None:
    from tokenspec.suite.engine.expectations import folder_family, for_family

    path = tmp_path / "e.yaml"
    path.write_text("implementation: {name: x, version: '1'}\nconfiguration: {model: m}\nexpectations:\n"
                    "- {test: 'test_a.py::t', requirement: RENDER-001, pattern: boom, reason: r, families: [qwen3]}\n"
                    "- {test: 'test_a.py::u', requirement: RENDER-001, pattern: boom, reason: r}\n")
    entries = load_expectations_file(path).entries
    assert [e.test for e in for_family(entries, "llama3")] == ["test_a.py::u"]
    (scoped, _) = for_family(entries, "qwen3")
    assert scoped.families == ("qwen3",) and not scoped.may_pass, "on its family a pass is a stale entry"
    loose = for_family(entries, None)
    assert len(loose) == 2 and loose[0].may_pass and not loose[1].may_pass, "unknown family: applied loosely"
    assert "[qwen3]" in scoped.describe()
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("[qwen3]", "qwen3"))
    with pytest.raises(UsageError, match="families"):
        load_expectations_file(bad)
    folder = tmp_path / "model"
    folder.mkdir()
    assert folder_family(folder) is None and folder_family(None) is None
    (folder / "tokenspec-model.json").write_text('{"name": "tokenspec-tiny"}')
    assert folder_family(folder) == "tiny"
    (folder / "tokenspec-model.json").write_text('{"name": "tokenspec-qwen3", "family": "qwen3"}')
    assert folder_family(folder) == "qwen3"


def test_the_headline_of_an_interrupted_insecure_or_throttled_run_says_so() -> None:
    from dataclasses import replace

    info = RunInfo("https://t", None, None, "m", 1, "2026-01-01T00:00:00+00:00", 1.5)
    done = [result("passed"), replace(result("passed", nodeid="test_x.py::test_r"), retries=3)]
    assert headline(done, info).startswith("PASS") and "3 request(s) retried after 429/503" in headline(done, info)
    assert "TLS certificates NOT verified (--insecure)" in headline(done, replace(info, insecure=True))
    stopped = headline(done, replace(info, interrupted="SIGTERM", collected=40))
    assert stopped.startswith("INTERRUPTED (SIGTERM): 2 of 40 tests ran, no verdict") and "PASS" not in stopped
