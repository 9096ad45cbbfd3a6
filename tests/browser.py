"""Headless Chromium for tests that look at the pages tokenspec writes (report.html, and later others).

The browser is Debian's ``/usr/bin/chromium`` driven by the ``playwright`` Python package (a dev dependency);
``scripts/bootstrap.sh`` installs both, and nothing here downloads a browser. A missing one is a test failure
that says how to install it, never a skip: CI has both.

``tests/conftest.py`` registers this module as a plugin, so there is one browser per session (playwright's sync
API allows one at a time: a second one, started by a module that imported the fixtures itself, fails with
"using Playwright Sync API inside the asyncio loop"). Use the fixtures by name::

    def test_x(chromium_page):
        chromium_page.open(path_to_html)
        assert chromium_page.page.locator("#verdict").is_visible()
        assert chromium_page.external_requests() == []

``chromium`` is the session's browser (a second page: ``chromium.new_page()``, or ask for ``chromium_page``
again through another fixture); ``chromium_page`` is a fresh page that records every request it makes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: Quiet, offline-friendly flags: no sandbox (root in CI), no GPU, no background or update traffic.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "out" / "screenshots"


@dataclass
class OpenedPage:
    """A browser page plus every URL it requested (``page.on("request")``)."""

    page: Any
    requests: list[str] = field(default_factory=list)

    def open(self, path: Path) -> None:
        """Load a local file (``file://``) and wait until it and everything it references has loaded."""
        self.page.goto(Path(path).resolve().as_uri(), wait_until="load")

    def external_requests(self) -> list[str]:
        """Requests to anything but a local file: a self-contained page makes none."""
        return [url for url in self.requests if not url.startswith("file://")]

    def screenshot(self, name: str, element: Any = None) -> Path:
        """Save a PNG of the whole page (or of one locator's element) under ``out/screenshots/`` (untracked)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        if element is not None:
            element.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """The session's headless Chromium (Debian's build, launched through playwright)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package `playwright` is not installed: `.venv/bin/pip install -e '.[dev]'` "
                    "(or `bash scripts/bootstrap.sh`) installs it", pytrace=False)
    if not CHROMIUM.exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (as root; `bash scripts/bootstrap.sh` "
                    "does it) installs Debian's", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def chromium_page(chromium: Any) -> Iterator[OpenedPage]:
    """A fresh page (its own context, 1280 px wide) that records every request it makes."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    opened = OpenedPage(context.new_page())
    opened.page.on("request", lambda request: opened.requests.append(request.url))
    try:
        yield opened
    finally:
        context.close()
