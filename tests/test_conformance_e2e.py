"""The conformance suite end to end, as users run it, against the bundled reference server, on a fixed seed so
hypothesis and schemathesis draw the same examples every time. (The run against vLLM with its committed
expectations is a matrix cell: tests/test_matrix_cell.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from doubles import ABORT_NOT_PROVEN

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[1]
SEED = "20261129"


def tokenspec(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenspec", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


#: Markup the reference server's tool parser (hermes) does not read: nothing to exercise, so unsupported.
OTHER_MARKUP_TESTS = {"test_derender.py::test_parameter_elements_take_their_declared_types": "parameter elements",
                      "test_derender.py::test_key_value_calls_take_their_declared_types": "Gemma 4's key:value calls"}
#: The one timing-bound outcome: vLLM's API server, relaying a long stream on a machine loaded by other jobs (CI ran
#: this beside a second suite run), answered every abort only when the generation had ended, so no abort could be
#: shown to have come in time: honestly not tested. Judged deterministically elsewhere (tests/test_generate_only.py,
#: tests/test_frontend_generations.py); on two cores with busy loops beside it, it passed 10 of 10 main-job runs.
ABORT_TEST = "test_generate_extensions.py::test_abort_ends_a_streamed_generation"


def read_report(folder: Path) -> dict:
    for name in ("report.json", "junit.xml", "summary.md"):
        assert (folder / name).is_file(), f"{name} missing"
    return json.loads((folder / "report.json").read_text())


def unexpected(report: dict) -> list[str]:
    return [f"{t['nodeid']} {t['outcome']}: {t['message'][:300]}" for t in report["tests"]
            if t["outcome"] in ("failed", "error", "xpassed")]


def test_embedded_main_job_passes_at_must_and_should(tmp_path) -> None:
    """The README's main job: tiny model + bundled reference server (frontend + vLLM engine) + the whole
    suite, parity included (vLLM's coupled endpoint as reference). Nothing may fail or be unsupported."""
    out = tmp_path / "embedded"
    done = tokenspec("embedded", "--report", str(out), "--work", str(tmp_path / "work"), "-n", "2",
                     "--max-examples", "10", "--seed", SEED, timeout=1200)
    report = read_report(out)
    assert not unexpected(report), "\n".join(unexpected(report))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = report["summary"]
    unexercised = [f"{t['nodeid']} {t['outcome']}: {t['message'][:300]}" for t in report["tests"]
                   if t["outcome"] not in ("passed", "failed", "error", "xfailed", "xpassed")
                   and not (t["nodeid"] in OTHER_MARKUP_TESTS and t["outcome"] == "unsupported"
                            and f"(hermes) reads no {OTHER_MARKUP_TESTS[t['nodeid']]}" in t["message"])
                   and not (t["nodeid"] == ABORT_TEST and ABORT_NOT_PROVEN in t["message"])]
    assert not unexercised, "every capability must be exercised: " + "; ".join(unexercised)
    assert any(t["nodeid"].startswith("test_profile.py") and t["outcome"] == "passed" for t in report["tests"]), \
        "the reference server's profile is checked claim by claim"
    assert summary["by_level"]["MUST"]["failed"] == 0 and summary["by_level"]["SHOULD"]["failed"] == 0
    assert any(t["nodeid"].startswith("test_parity.py") and t["outcome"] == "passed" for t in report["tests"])
