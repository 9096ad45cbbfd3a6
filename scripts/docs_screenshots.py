"""Take the screenshots of docs/reports.md: a failing report's first screen and its cause card, and a passing one.

The failing run is real: the suite against the reference frontend behind the planted defect `render-drops-system`
(tokenspec mutants' catalogue), on the tiny model, seed 20261201. Run from the checkout after bootstrap:

    .venv/bin/python scripts/docs_screenshots.py

Chromium is Debian's (/usr/bin/chromium), driven by playwright; the pictures go to docs/img/.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tokenspec.core.config import RunConfig
from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.loopback import running_app
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, build
from tokenspec.harness.mutants.defects import DEFECTS
from tokenspec.harness.mutants.proxy import MutantProxy
from tokenspec.runner import run

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"


def failing_report(work: Path) -> Path:
    model = build(work / "model").model_dir
    config = FrontendConfig(model, DEFAULT_MODEL_NAME, tool_parser="hermes", reasoning_parser="qwen3")
    with running_app(create_app(config)) as upstream, \
            running_app(MutantProxy(upstream, DEFECTS["render-drops-system"])) as url:
        run(RunConfig(target=url, tokenizer=str(model), report=str(work / "report"), seed=20261201,
                      keyword="test_render or test_golden"))
    return work / "report" / "report.html"


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        failing = failing_report(Path(tmp))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(failing.as_uri(), wait_until="load")
            page.screenshot(path=str(IMAGES / "report-first-screen.png"))
            page.locator(".cause").first.screenshot(path=str(IMAGES / "report-cause-card.png"))
            page.goto((ROOT / "reports" / "embedded" / "report.html").as_uri(), wait_until="load")
            page.screenshot(path=str(IMAGES / "report-pass.png"))
            browser.close()
    for image in sorted(IMAGES.glob("*.png")):
        print(f"{image.relative_to(ROOT)}: {image.stat().st_size} bytes")


if __name__ == "__main__":
    main()
