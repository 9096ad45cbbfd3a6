"""The committed matrix (reports/matrix/) rebuilt from its run folders, and read in headless Chromium.

A committed run keeps its data (report.json, summary.md, cell.json); `tokenspec matrix --page-only` writes the
matrix page and each run's report.html from it, and must say the same thing as the committed page. Then the page is
opened as a reader would: every run's verdict is visible, the requirement grid shows each implementation's state,
and a failed or known cell leads to that run's report.html, where the failure it names is on screen with its
highlighted difference."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tokenspec.cli import main

MATRIX = Path(__file__).resolve().parent.parent / "reports" / "matrix"


def _cells() -> list[dict]:
    return json.loads((MATRIX / "matrix.json").read_text())["cells"]


def test_the_committed_matrix_covers_three_implementations_on_two_families() -> None:
    cells = _cells()
    assert {c["implementation"] for c in cells} >= {"reference", "vllm", "aphrodite"}
    families: dict[str, set[str]] = {}
    for c in cells:
        families.setdefault(c["implementation"], set()).add(c["family"])
        assert all((MATRIX / c["folder"] / name).is_file() for name in ("report.json", "summary.md", "cell.json"))
        assert not c["headline"].startswith("FAIL"), f"{c['folder']}: {c['headline']}"
        # speed is measured when asked (--speed-requests); where it was, it is sane and the answers were the same
        assert c["speed"] is None or (c["speed"]["render_p50"] > 0 and c["speed"]["same_answers"]), c["folder"]
    assert all(len(f) >= 2 for f in families.values()), families


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed run folders' data only (what a fresh clone has), pages written by ``--page-only``."""
    copy = tmp_path_factory.mktemp("matrix") / "matrix"
    shutil.copytree(MATRIX, copy, ignore=shutil.ignore_patterns("index.html", "matrix.md", "matrix.json",
                                                                 "report.html", "junit.xml", "bodies"))
    assert main(["matrix", "--page-only", "--report", str(copy)]) == 0
    return copy


def test_the_matrix_page_rebuilt_from_the_committed_runs_says_the_same(rebuilt: Path) -> None:
    assert json.loads((rebuilt / "matrix.json").read_text()) == json.loads((MATRIX / "matrix.json").read_text())
    assert all((rebuilt / c["folder"] / "report.html").is_file() for c in _cells()), "each run's page is written"


def _linked_failure_with_a_difference(matrix: Path) -> tuple[str, str]:
    """(folder, anchor) of a known or failed test the page links to whose report shows expected and actual."""
    from tokenspec.suite.reporting.report_html import failure_anchor

    page = (matrix / "index.html").read_text()
    for cell in _cells():
        report = json.loads((matrix / cell["folder"] / "report.json").read_text())
        for test in report["tests"]:
            anchor = failure_anchor(test["nodeid"])
            if test["outcome"] in ("xfailed", "failed") and test.get("expected") and test.get("actual") \
                    and f"{cell['folder']}/report.html#{anchor}" in page:
                return cell["folder"], anchor
    raise AssertionError("no linked failure of the committed matrix has an expected/actual difference")


def test_the_matrix_page_in_chromium_leads_from_a_cell_to_its_failure(chromium_page, rebuilt: Path) -> None:
    page = chromium_page.page
    chromium_page.open(rebuilt / "index.html")
    verdicts = page.locator("#runs td.verdict")
    assert verdicts.count() == len(_cells())
    for i in range(verdicts.count()):
        assert verdicts.nth(i).is_visible() and verdicts.nth(i).inner_text().startswith("PASS")
    grid = page.locator("#matrix")
    assert grid.is_visible() and grid.locator("td.cell.passed").count() > 100
    folder, anchor = _linked_failure_with_a_difference(rebuilt)
    link = grid.locator(f"a[href='{folder}/report.html#{anchor}']").first
    assert link.is_visible(), "a broken requirement's cell links to its failure"
    chromium_page.screenshot("matrix-page")
    test_id = link.get_attribute("title")
    link.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/{folder}/report.html#{anchor}")
    failure = page.locator(f"[id='{anchor}']")
    assert failure.is_visible() and test_id in failure.inner_text(), "the linked failure is the cell's test"
    if failure.evaluate("e => e.tagName") == "DETAILS" and not failure.evaluate("e => e.open"):
        failure.locator("summary").first.click()  # known failures are folded: the reader unfolds one
    changed = failure.locator(".diff .diff-ins, .diff .diff-del").first
    assert changed.is_visible() and changed.inner_text().strip(), "the difference is highlighted on screen"
    assert page.locator("#verdict").is_visible() and page.locator("#area-chart").is_visible()
    chromium_page.screenshot("matrix-linked-failure", failure)
    assert chromium_page.external_requests() == [], "neither page requests anything from the network"


def test_a_cell_whose_speed_cannot_be_measured_says_why(tiny_model, tmp_path: Path) -> None:
    """A target the benchmark cannot reach leaves the cell's verdict alone and records the one-line reason."""
    import socket

    from tokenspec.campaigns.matrix import _speed, _speed_text
    from tokenspec.harness.implementations import Configuration

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = Configuration(tiny_model.model_dir, "tokenspec-tiny", "tiny", "hermes", "qwen3")
    speed = _speed(closed, tiny_model.model_dir, config, tmp_path, 2)
    assert set(speed) == {"error"} and "cannot read the model name" in speed["error"], speed
    assert "Traceback" not in speed["error"] and _speed_text(speed).startswith("not measured: ")


def test_the_release_table_names_the_first_release_from_which_a_requirement_passes() -> None:
    from tokenspec.campaigns.matrix import CellRun, release_table
    from tokenspec.specs.catalogue import load_catalogue

    def cell(version: str, family: str) -> CellRun:
        return CellRun("vllm", version, "cpu", family, f"vllm-{version}-{family}", "", 0, 0.0, "", None, "")

    cells = [cell("0.32.0", "tiny"), cell("0.32.0", "qwen3"), cell("0.34.0", "tiny"), cell("0.33.0", "tiny")]
    rows = {
        "RENDER-011": [("known", "t"), ("passed", None), ("passed", None), ("passed", None)],  # fixed in 0.33
        "RENDER-013": [("passed", None), ("passed", None), ("failed", "t"), ("passed", None)],  # regressed in 0.34
        "RENDER-001": [("passed", None)] * 4,
        "TOKNAT-001": [("unsupported", None)] * 4,
    }
    table = release_table(cells, rows, load_catalogue())
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "| 0.32.0 | 0.33.0 | 0.34.0 |" in table, "releases in version order"
    assert lines["RENDER-011"].endswith("| known | pass | pass | 0.33.0 |"), "the worst family state of a release"
    assert lines["RENDER-013"].endswith("| pass | pass | FAIL | none yet |")
    assert "RENDER-001" not in lines and "TOKNAT-001" not in lines, "passed everywhere or never judged: no row"
    assert release_table(cells[:2], rows, load_catalogue()) == "", "one release: nothing to compare"


def test_the_release_table_puts_the_rust_renderer_beside_the_releases() -> None:
    from tokenspec.campaigns.matrix import CellRun, release_table
    from tokenspec.specs.catalogue import load_catalogue

    def cell(name: str, version: str) -> CellRun:
        return CellRun(name, version, "cpu", "tiny", f"{name}-{version}", "", 0, 0.0, "", None, "")

    cells = [cell("vllm", "0.33.0"), cell("vllm", "0.34.0"), cell("vllm-rs", "0.34.0")]
    rows = {"RENDER-011": [("passed", None), ("passed", None), ("failed", "t")],  # only the Rust server fails
            "RENDER-013": [("known", "t"), ("passed", None), ("passed", None)]}
    table = release_table(cells, rows, load_catalogue())
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "| 0.33.0 | 0.34.0 | first passing | vllm-rs 0.34.0 |" in table
    assert lines["RENDER-011"].endswith("| pass | pass | 0.33.0 | FAIL |"), "the Rust column is outside first passing"
    assert lines["RENDER-013"].endswith("| known | pass | 0.34.0 | pass |")


class _GridRows(HTMLParser):
    """The grid of a matrix page as rows: (tr attributes, [(td attributes, its link, its text), ...])."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict, list[tuple[dict, str, str]]]] = []
        self._in_grid = self._cell = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        if tag == "table":
            self._in_grid = attrs.get("id") == "grid"
        elif self._in_grid and tag == "tr":
            self.rows.append((attrs, []))
        elif self._in_grid and tag == "td":
            self._cell, self._text = [attrs, ""], []
        elif self._cell and tag == "a":
            self._cell[1] = attrs["href"]

    def handle_data(self, data: str) -> None:
        self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_grid = False
        elif self._cell and tag == "td":
            self.rows[-1][1].append((self._cell[0], self._cell[1], " ".join(" ".join(self._text).split())))
            self._cell = None


def _grid_rows(page: Path) -> list[tuple[dict, list[tuple[dict, str, str]]]]:
    parser = _GridRows()
    parser.feed(page.read_text())
    return parser.rows


def _expected_cell(tests: list[dict]) -> str:
    """A grid cell's text computed here from report.json tests: ``97% (312/322)``, then known, FAIL, n/j."""
    passed = sum(t["outcome"] == "passed" for t in tests)
    known = sum(t["outcome"] == "xfailed" for t in tests)
    failed = sum(t["outcome"] in ("failed", "error", "xpassed") and t.get("charged_to", "target") == "target"
                 for t in tests)
    unjudged = len(tests) - passed - known - failed
    judged = passed + known + failed
    # The percentage rounds half up, but never to 100% with a failure nor to 0% with a pass.
    percent = 100 if passed == judged else 0 if not passed else min(max(int(100 * passed / judged + 0.5), 1), 99)
    text = f"{percent}% ({passed}/{judged})" if judged else "-"
    apart = " · ".join(x for x in (f"{known} known" if known else "", f"{failed} FAIL" if failed else "",
                                   f"{unjudged} n/j" if unjudged else "") if x)
    return f"{text} {apart}".strip()


def _counted_for(test: dict, ids: set[str]) -> bool:
    """Whether a test counts for a row of requirements ``ids``: it cites one of them, and when it broke naming the
    requirements whose checks failed, one of those."""
    cited = set(test["requirement_ids"]) & ids
    broken = test.get("failed_requirements")
    if test["outcome"] in ("xfailed", "failed", "error", "xpassed") and broken:
        cited &= set(broken)
    return bool(cited)


def test_the_grid_numbers_are_the_runs_tests_counted_from_report_json(rebuilt: Path) -> None:
    """Every cell of the grid (every run; all tests, each area, each requirement) says what its report.json
    says, counted here without tokenspec's code: passed of judged, known failures, failures, tests not judged."""
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = {rid: r for rid, r in load_catalogue().items() if not r.withdrawn}
    rows = _grid_rows(rebuilt / "index.html")
    cells = json.loads((rebuilt / "matrix.json").read_text())["cells"]
    areas = sorted({r.area for r in catalogue.values()})
    assert [r[0].get("data-area") for r in rows if r[0].get("class") == "area"] == areas
    assert len([r for r in rows if r[0].get("class") == "req"]) == len(catalogue)
    seen_known = False
    for i, cell in enumerate(cells):
        tests = json.loads((rebuilt / cell["folder"] / "report.json").read_text())["tests"]
        for attrs, tds in rows[2:]:
            assert len(tds) == len(cells), attrs
            td_attrs, href, text = tds[i]
            if attrs["class"] == "total":
                ids, mine = None, tests
            else:
                ids = ({rid for rid, r in catalogue.items() if r.area == attrs["data-area"]}
                       if attrs["class"] == "area" else {attrs["data-req"]})
                mine = [t for t in tests if _counted_for(t, ids)]
            assert text == _expected_cell(mine), (cell["folder"], attrs, text)
            assert href.split("#")[0] == f"{cell['folder']}/report.html", "a cell opens its run"
            seen_known |= "known" in text
            judged = [t for t in mine if t["outcome"] != "unsupported" and t["outcome"] != "not_tested"]
            if judged and all(t["outcome"] == "passed" for t in judged):
                assert "full" in td_attrs["class"].split(), "all passed: the full colour"
    assert seen_known, "the committed matrix has known failures: the grid shows them apart"


def test_a_test_failing_one_of_its_requirements_counts_against_that_one_only() -> None:
    """Constructed tests: a failure naming its broken requirement, a failure charged to the engine, a known failure,
    one not tested: each lands in the right count of the right rows."""
    from tokenspec.campaigns.matrix import grid_tallies, share_text

    area_of = {"RENDER-001": "RENDER", "RENDER-002": "RENDER", "SCHEMA-001": "SCHEMA", "STREAM-001": "STREAM"}
    tests = [{"nodeid": "a", "requirement_ids": ["RENDER-001", "SCHEMA-001"], "outcome": "failed",
              "failed_requirements": ["RENDER-001"]},
             {"nodeid": "b", "requirement_ids": ["RENDER-001", "RENDER-002"], "outcome": "passed"},
             {"nodeid": "c", "requirement_ids": ["STREAM-001"], "outcome": "failed", "charged_to": "engine"},
             {"nodeid": "d", "requirement_ids": ["RENDER-002"], "outcome": "xfailed"},
             {"nodeid": "e", "requirement_ids": ["SCHEMA-001"], "outcome": "not_tested"}]
    total, areas, reqs = grid_tallies({"tests": tests}, area_of)
    assert (total.passed, total.known, total.failed, total.unjudged) == (1, 1, 1, 2)
    assert (areas["RENDER"].passed, areas["RENDER"].known, areas["RENDER"].failed) == (1, 1, 1)
    assert areas["RENDER"].first_broken == "a" and share_text(areas["RENDER"]) == "33% (1/3)"
    assert (areas["SCHEMA"].judged, areas["SCHEMA"].unjudged) == (0, 1), "a only broke RENDER-001"
    assert (areas["STREAM"].judged, areas["STREAM"].unjudged) == (0, 1), "the engine's failure is not the target's"
    assert share_text(reqs["RENDER-002"]) == "50% (1/2)" and share_text(reqs["RENDER-001"]) == "50% (1/2)"
    assert share_text(areas["SCHEMA"]) == "-"


def test_the_grid_at_the_top_reads_at_a_glance_and_an_area_unfolds_in_chromium(chromium_page, rebuilt: Path) -> None:
    """The grid is the first thing on the page (above the runs); areas down, implementation x release then family
    across; an area unfolds into its requirements, whose names lead to the table below; a family selector keeps
    one family's columns; a cell opens its run."""
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = {rid: r for rid, r in load_catalogue().items() if not r.withdrawn}
    page = chromium_page.page
    chromium_page.open(rebuilt / "index.html")
    grid = page.locator("#grid")
    box = grid.bounding_box()
    assert grid.is_visible() and box["y"] < 400 and box["y"] < page.locator("#runs").bounding_box()["y"]
    cells = _cells()
    areas = sorted({r.area for r in catalogue.values()})
    assert page.locator("#grid tr.area").count() == len(areas)
    assert page.locator("#grid tr.families th:visible").count() == len(cells)
    assert page.locator("#grid tr.total td.share:visible").count() == len(cells)
    assert page.locator("#grid tr.req:visible").count() == 0, "requirements start folded"
    area = "PARITY" if "PARITY" in areas else areas[0]
    ids = sorted(rid for rid, r in catalogue.items() if r.area == area)
    page.locator(f"#grid button.unfold[data-area='{area}']").click()
    unfolded = page.locator(f"#grid tr.req[data-area='{area}']:visible")
    assert unfolded.count() == len(ids) and page.locator("#grid tr.req:visible").count() == len(ids)
    assert [unfolded.nth(k).get_attribute("data-req") for k in range(len(ids))] == ids
    assert unfolded.first.locator("td.share").count() == len(cells)
    chromium_page.screenshot("matrix-grid-unfolded", grid)
    judged = next(rid for rid in ids if page.locator(f"#matrix tr[id='{rid}']").count())
    page.locator(f"#grid tr.req[data-req='{judged}'] th a").click()
    assert page.url.endswith(f"#{judged}") and page.locator(f"#matrix tr[id='{judged}']").is_visible()
    page.locator(f"#grid button.unfold[data-area='{area}']").click()
    assert page.locator("#grid tr.req:visible").count() == 0, "and folds again"
    family = cells[-1]["family"]
    page.select_option("#grid-family", family)
    kept = [c for c in cells if c["family"] == family]
    assert page.locator("#grid tr.total td.share:visible").count() == len(kept)
    assert page.locator("#grid tr.families th:visible").all_inner_texts() == [family] * len(kept)
    chromium_page.screenshot("matrix-grid-one-family", grid)
    link = page.locator("#grid tr.total td.share:visible a").last
    assert link.get_attribute("href").split("#")[0] == f"{kept[-1]['folder']}/report.html"
    link.click()
    page.wait_for_load_state("load")
    assert page.url.split("#")[0].endswith(f"/{kept[-1]['folder']}/report.html")
    assert page.locator("#verdict").is_visible()
    assert chromium_page.external_requests() == [], "the grid requests nothing from the network"
