"""The committed matrix (reports/matrix/) rebuilt from its run folders, and read in headless Chromium.

A committed run keeps its data (report.json, summary.md, cell.json); `tokenspec matrix --page-only` writes the
matrix page and each run's report.html from it, and must say the same thing as the committed page. Then the page is
opened as a reader would: every run's verdict is visible, the requirement grid shows each implementation's state,
and a failed or known cell leads to that run's report.html, where the failure it names is on screen with its
highlighted difference."""

from __future__ import annotations

import json
import shutil
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
        assert c["speed"] and c["speed"]["render_p50"] > 0 and c["speed"]["same_answers"], f"{c['folder']}: speed"
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


def test_the_grid_at_the_top_reads_at_a_glance_in_chromium(chromium_page, rebuilt: Path) -> None:
    """Areas down, implementation x release then family across; each cell the share of judged requirements that
    passed, opening its run; each area opening its requirements in the table below."""
    from tokenspec.specs.catalogue import load_catalogue

    page = chromium_page.page
    chromium_page.open(rebuilt / "index.html")
    grid = page.locator("#grid")
    assert grid.is_visible() and grid.bounding_box()["y"] < page.locator("#runs").bounding_box()["y"]
    areas = {r.area for r in load_catalogue().values() if not r.withdrawn}
    assert grid.locator("tr").count() == 2 + len(areas)  # two header rows, one row per area
    assert grid.locator("td.share").count() == len(areas) * len(_cells())
    reports = json.loads((rebuilt / "matrix.json").read_text())
    first = reports["cells"][0]
    # The share in a cell is the area's passed requirements over its judged ones, in that run.
    derender = [states[0] for rid, states in reports["requirements"].items() if rid.startswith("DERENDER-")]
    judged = [s for s in derender if s in ("passed", "known", "failed")]
    expected = f"{100 * derender.count('passed') / len(judged):.0f}%"
    row = grid.locator("tr", has=page.locator("th a", has_text="DERENDER"))
    cell = row.locator("td.share").first
    assert cell.locator("a").inner_text() == expected and cell.locator("a").get_attribute("href") == \
        f"{first['folder']}/report.html"
    chromium_page.screenshot("matrix-grid", grid)
    target = row.locator("th a").get_attribute("href")
    assert page.locator(f"#matrix tr[id='{target[1:]}']").count() == 1, "the area opens its requirements"
