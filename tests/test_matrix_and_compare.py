"""``tokenspec compare`` and the matrix page, on report folders written by the real report writer (no servers)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tokenspec.campaigns.matrix import CellRun, build_page, requirement_states
from tokenspec.cli import main
from tokenspec.core.errors import UsageError
from tokenspec.run_diff import diff_runs, load_run
from tokenspec.suite.engine.results import TestResult
from tokenspec.suite.reporting.report import RunInfo, report_dict, write_reports


def _result(nodeid: str, outcome: str, reqs: tuple[str, ...] = ("RENDER-001",), failed: tuple[str, ...] = (),
            message: str = "") -> TestResult:
    return TestResult(nodeid, list(reqs), "MUST", outcome, 0.1, message=message, failed_requirements=list(failed))


def _report(results: list[TestResult]) -> dict:
    info = RunInfo("http://127.0.0.1:1", None, None, "m", 1, "2026-12-02T00:00:00+00:00", 1.0)
    return report_dict(info, results)


def test_compare_sorts_each_test_into_what_changed() -> None:
    a = _report([
        _result("t::fixed", "failed", failed=("RENDER-001",), message="AssertionError: boom"),
        _result("t::regressed", "passed"),
        _result("t::cause", "failed", ("RENDER-001", "RENDER-002"), ("RENDER-001",), "AssertionError: x"),
        _result("t::same", "failed", failed=("RENDER-001",), message="AssertionError: id 1796164947 port 8300"),
        _result("t::now-known", "failed", failed=("RENDER-001",), message="AssertionError: y"),
        _result("t::lost", "passed"),
        _result("t::gone", "passed"),
    ])
    b = _report([
        _result("t::fixed", "passed"),
        _result("t::regressed", "failed", failed=("RENDER-001",), message="AssertionError: new bug"),
        _result("t::cause", "failed", ("RENDER-001", "RENDER-002"), ("RENDER-002",), "AssertionError: x"),
        _result("t::same", "failed", failed=("RENDER-001",), message="AssertionError: id 1796170000 port 8100"),
        _result("t::now-known", "xfailed", failed=("RENDER-001",),
                message="known failure (RENDER-001 /y/: why); observed: AssertionError: y"),
        _result("t::lost", "unsupported", message="unsupported: no tools"),
        _result("t::new", "passed"),
    ])
    diff = diff_runs(a, b)
    names = {section: [c.nodeid for c in getattr(diff, section)] for section in diff.SECTIONS}
    assert names["fixed"] == ["t::fixed"]
    assert names["regressed"] == ["t::regressed"] and "new bug" in diff.regressed[0].detail
    assert names["changed_cause"] == ["t::cause", "t::now-known"], "numbers alone (ids, ports) are no new cause"
    assert "expectation added" in diff.changed_cause[1].detail
    assert names["no_longer_judged"] == ["t::lost"]
    assert names["added"] == ["t::new"] and names["removed"] == ["t::gone"]
    assert diff.unchanged == 1
    text = diff.to_markdown()
    assert "## Regressed (1)" in text and "`t::regressed`" in text


def test_compare_cli_exits_1_on_a_regression_and_2_on_a_missing_run(tmp_path: Path, capsys) -> None:
    info = RunInfo("http://127.0.0.1:1", None, None, "m", 1, "2026-12-02T00:00:00+00:00", 1.0)
    write_reports(tmp_path / "a", info, [_result("t::x", "passed")])
    write_reports(tmp_path / "b", info, [_result("t::x", "failed", failed=("RENDER-001",), message="boom")])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp")]) == 1
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["regressed"][0]["nodeid"] == "t::x"
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no report.json" in err[0]
    with pytest.raises(UsageError, match="no report.json"):
        load_run(tmp_path / "missing")


def test_a_requirement_takes_the_worst_state_of_the_tests_that_broke_it() -> None:
    report = _report([
        _result("t::a", "passed", ("RENDER-001", "RENDER-002")),
        _result("t::b", "failed", ("RENDER-001", "RENDER-002"), ("RENDER-002",), "boom"),
        _result("t::c", "xfailed", ("RENDER-003",), ("RENDER-003",), "known"),
        _result("t::d", "unsupported", ("RENDER-004",)),
    ])
    states = requirement_states(report)
    assert states["RENDER-001"] == ("passed", None), "t::b failed for RENDER-002 only"
    assert states["RENDER-002"] == ("failed", "t::b")
    assert states["RENDER-003"] == ("known", "t::c")
    assert states["RENDER-004"] == ("unsupported", "t::d")


def _cell(folder: str, impl: str, family: str, headline: str) -> CellRun:
    return CellRun(impl, "1.0", "cpu", family, folder, headline, 0, 1.0, "render server as target", None,
                   "tokenspec run --target X")


def test_matrix_page_links_each_broken_requirement_to_its_failure(tmp_path: Path) -> None:
    from tokenspec.suite.reporting.report_html import failure_anchor

    info = RunInfo("http://127.0.0.1:1", None, None, "m", 1, "2026-12-02T00:00:00+00:00", 1.0)
    runs = {"good-tiny": [_result("t::a", "passed", ("RENDER-001",))],
            "bad-tiny": [_result("t::a", "failed", ("RENDER-001",), ("RENDER-001",), "AssertionError: boom")]}
    for folder, results in runs.items():
        write_reports(tmp_path / folder, info, results)
        cell = _cell(folder, folder.split("-")[0], "tiny", json.loads(
            (tmp_path / folder / "report.json").read_text())["headline"])
        (tmp_path / folder / "cell.json").write_text(json.dumps(asdict(cell)))
    doc = build_page(tmp_path)
    columns = [c["folder"] for c in doc["cells"]]
    assert doc["requirements"]["RENDER-001"] == [
        "failed" if folder == "bad-tiny" else "passed" for folder in columns]
    page = (tmp_path / "index.html").read_text()
    assert f"bad-tiny/report.html#{failure_anchor('t::a')}" in page
    assert "http://" not in page.replace("http://127.0.0.1:1", ""), "the page loads nothing from the network"
    assert "| RENDER-001 | MUST |" in (tmp_path / "matrix.md").read_text()


def test_a_cell_is_stale_when_a_requirement_was_added_or_changed_after_it_ran() -> None:
    from dataclasses import replace

    from tokenspec.specs.catalogue import requirement_digests

    digests = requirement_digests()
    cell = _cell("x-tiny", "x", "tiny", "PASS")
    assert cell.stale(digests) == "ran before cells recorded the catalogue"
    assert replace(cell, catalogue=dict(digests)).stale(digests) == ""
    older = {**digests, "RENDER-005": "0" * 12}
    del older["STREAM-018"]
    reason = replace(cell, catalogue=older).stale(digests)
    assert reason.startswith("2 requirement(s) added or changed") and "RENDER-005" in reason and "STREAM-018" in reason
    assert [replace(cell, implementation="vllm", version=v).plugin_name for v in ("0.32.0", "0.33.0", "0.34.0")] \
        == ["vllm", "vllm-0.33", "vllm-0.34"]
    assert replace(cell, implementation="vllm", version="0.34.0", plugin="vllm-rs").plugin_name == "vllm-rs"


def test_matrix_stale_runs_exactly_the_stale_cells_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tokenspec matrix --stale``: the cells whose runs predate today's catalogue, and no other (the deploy and
    run are a labelled double here; tests/test_matrix_cell.py runs a real cell)."""
    import shutil

    from tokenspec.campaigns import matrix
    from tokenspec.specs.catalogue import requirement_digests

    committed = Path(__file__).resolve().parents[1] / "reports" / "matrix"
    for name in ("vllm-0.33.0-cpu-tiny", "reference-0.1.0-cpu-tiny"):
        shutil.copytree(committed / name, tmp_path / name)
    current = tmp_path / "reference-0.1.0-cpu-tiny" / "cell.json"
    current.write_text(json.dumps({**json.loads(current.read_text()), "catalogue": requirement_digests()}))
    old = tmp_path / "vllm-0.33.0-cpu-tiny" / "cell.json"  # stale whatever the committed cell is: no digests
    old.write_text(json.dumps({k: v for k, v in json.loads(old.read_text()).items() if k != "catalogue"}))
    ran: list[tuple[str, str]] = []

    def double_run_cell(plugin: str, family: str, out_dir: Path, **_: object) -> CellRun:  # TEST DOUBLE
        ran.append((plugin, family))
        cell = CellRun(**json.loads((out_dir / "vllm-0.33.0-cpu-tiny" / "cell.json").read_text()))
        return cell

    monkeypatch.setattr(matrix, "run_cell", double_run_cell)
    assert main(["matrix", "--stale", "--report", str(tmp_path)]) == 0
    assert ran == [("vllm-0.33", "tiny")]
    page = (tmp_path / "index.html").read_text()
    assert "<td class='current'>current</td>" in page and "stale: ran before cells recorded the catalogue" in page
