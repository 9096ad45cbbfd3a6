"""The committed matrix (reports/matrix/) in headless Chromium, and rebuilt from its run folders.

Opens the matrix page as a reader would: every run's verdict is visible, the requirement grid shows each
implementation's state, and a failed or known cell leads to that run's report.html, where the failure it
names is on screen with its highlighted difference. The page is also rebuilt from the committed run folders
(`tokenspec matrix --page-only`) and must say the same thing as the committed one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from browser import chromium, chromium_page  # noqa: F401  (pytest fixtures)

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
        assert (MATRIX / c["folder"] / "report.html").is_file() and (MATRIX / c["folder"] / "report.json").is_file()
        assert not c["headline"].startswith("FAIL"), f"{c['folder']}: {c['headline']}"
    assert all(len(f) >= 2 for f in families.values()), families


def test_the_matrix_page_rebuilt_from_the_committed_runs_says_the_same(tmp_path: Path) -> None:
    copy = tmp_path / "matrix"
    shutil.copytree(MATRIX, copy, ignore=shutil.ignore_patterns("index.html", "matrix.md", "matrix.json"))
    assert main(["matrix", "--page-only", "--report", str(copy)]) == 0
    assert json.loads((copy / "matrix.json").read_text()) == json.loads((MATRIX / "matrix.json").read_text())


def test_the_matrix_page_in_chromium_leads_from_a_cell_to_its_failure(chromium_page) -> None:  # noqa: F811
    page = chromium_page.page
    chromium_page.open(MATRIX / "index.html")
    verdicts = page.locator("#runs td.verdict")
    assert verdicts.count() == len(_cells())
    for i in range(verdicts.count()):
        assert verdicts.nth(i).is_visible() and verdicts.nth(i).inner_text().startswith("PASS")
    grid = page.locator("#matrix")
    assert grid.is_visible() and grid.locator("td.cell.passed").count() > 100
    link = grid.locator("td.cell.known a, td.cell.failed a").first
    assert link.is_visible(), "a broken requirement's cell links to its failure"
    chromium_page.screenshot("matrix-page")
    target = link.get_attribute("title")
    link.click()
    page.wait_for_load_state("load")
    assert page.url.split("#")[0].endswith("/report.html") and "#" in page.url
    anchor = page.url.split("#", 1)[1]
    failure = page.locator(f"[id='{anchor}']")
    assert failure.is_visible() and target in failure.inner_text(), "the linked failure is the cell's test"
    assert page.locator("#verdict").is_visible() and page.locator("#area-chart").is_visible()
    chromium_page.screenshot("matrix-linked-failure", failure)
    assert chromium_page.external_requests() == [], "neither page requests anything from the network"
