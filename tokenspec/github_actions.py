"""What a run tells GitHub Actions when it runs there (``GITHUB_ACTIONS=true``): the job summary, one annotation
per unique failure cause, and the step's outputs.

An implementer's gate then reads like any other check on a pull request: the summary page shows summary.md, each
broken requirement is an error annotation with its count and the test that shows it, and later steps (uploading
the report, commenting) find the verdict and the report folder in the step's outputs. Nothing here changes the
verdict or the exit code; outside GitHub Actions it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["announce"]


def announce(exit_code: int, report_dir: Path, data: dict[str, Any] | None, causes: list[Any],
             extra: list[str] | None = None) -> None:
    """Write the job summary, the annotations and the step outputs of one finished (or interrupted) run."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    headline = data["headline"] if data else "INTERRUPTED"
    verdict = "INCONCLUSIVE" if exit_code == 3 else headline.split(":", 1)[0]
    if exit_code == 1 and verdict.startswith("PASS"):  # --require-judged turned a pass into a failure
        verdict = "FAIL"
    summary = report_dir / "summary.md"
    _append("GITHUB_STEP_SUMMARY", summary.read_text() if summary.is_file() else f"# tokenspec: {headline}\n")
    _append("GITHUB_OUTPUT", f"verdict={verdict}\nexit-code={exit_code}\nreport={report_dir}\n")
    for cause in causes:
        example = cause.example
        title = f"{cause.requirement} ({cause.level}) x{len(cause.tests)}"
        print(f"::error title={_property(title)}::{_data(f'{cause.summary} (e.g. {example.nodeid})')}")
    for line in extra or []:
        print(f"::error title=tokenspec::{_data(line)}")
    if exit_code == 3:
        print(f"::error title={_property('tokenspec: no verdict')}::{_data(headline)}")


def _append(variable: str, text: str) -> None:
    if path := os.environ.get(variable):
        with open(path, "a", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")


def _data(text: str) -> str:
    """A workflow command's message, escaped as the runner reads it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
