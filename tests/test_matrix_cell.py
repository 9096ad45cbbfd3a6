"""One real matrix cell in CI: the vLLM plug-in deploys its render server and engine on the tiny family, the
suite runs with the committed expectations of that configuration, and every process is gone afterwards.

(The full matrix, Aphrodite included, is run by hand: `tokenspec matrix --report reports/matrix`; Aphrodite's
install is 5.5 GB and 5 min, more than CI should pay on every run.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tokenspec.cli import main
from tokenspec.harness.implementations import vllm

pytestmark = pytest.mark.vllm


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((parts.hostname, parts.port)) == 0


def test_a_vllm_cell_runs_with_its_committed_expectations_and_leaves_nothing_running(
        tmp_path: Path, vllm_install: vllm.VllmInstall, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"  # a folder of this test's own: its path names every process it may leave
    monkeypatch.setenv("TOKENSPEC_CACHE", str(cache))
    monkeypatch.setenv("TOKENSPEC_VLLM_PYTHON", str(vllm_install.executable))
    out = tmp_path / "matrix"
    code = main(["matrix", "--implementations", "vllm", "--families", "tiny", "--report", str(out),
                 "--max-examples", "3", "--speed-requests", "5"])
    (cell_dir,) = [p.parent for p in out.glob("*/cell.json")]
    cell = json.loads((cell_dir / "cell.json").read_text())
    report = json.loads((cell_dir / "report.json").read_text())
    unexpected = [f"{t['nodeid']} {t['outcome']}: {t['message'][:300]}" for t in report["tests"]
                  if t["outcome"] in ("failed", "error", "xpassed")]
    assert not unexpected, "every failure must be one the committed expectations explain:\n" + "\n".join(unexpected)
    assert code == 0, f"the vLLM cell failed: {cell['headline']} (see {cell_dir}/summary.md)"
    assert cell_dir.name == f"vllm-{vllm_install.version()}-cpu-tiny"
    assert cell["expectations"] and cell["expectations"].endswith(f"vllm-{vllm_install.version()}-cpu.yaml")
    assert cell["headline"].startswith("PASS WITH KNOWN FAILURES"), cell["headline"]
    assert cell["commit"], "the cell names the suite commit it ran"
    assert report["summary"]["xfailed"] > 0, "vLLM's known violations show up as known failures"
    assert report["summary"]["passed"] > 250 and report["expectations"].startswith("reports/expectations/")
    assert (out / "index.html").is_file() and (cell_dir / "report.html").is_file()
    speed = cell["speed"]  # bench target against the cell's render server, the bundled frontend as baseline
    assert speed["same_answers"] and speed["requests"] == 5, speed
    assert all(speed[f"{ep}_{k}"] > 0 for ep in ("render", "derender") for k in ("p50", "p99", "c1", "c16")), speed
    assert (cell_dir / "target.json").is_file() and "derender p50" in (out / "index.html").read_text()
    words = cell["command"].split()
    urls = [words[i + 1] for i, w in enumerate(words) if w in ("--target", "--engine", "--reference")]
    assert urls and not [u for u in urls if _listening(u)], "a server of the cell still listens"
    left = subprocess.run(["pgrep", "-f", str(cache)], capture_output=True, text=True).stdout.split()
    assert [pid for pid in left if int(pid) != os.getpid()] == [], "a process of the cell is still running"
