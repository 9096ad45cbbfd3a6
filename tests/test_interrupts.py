"""A cancelled CI job: SIGINT or SIGTERM at any point of a run stops it within seconds with exit 130 / 143, a
report whose headline says INTERRUPTED (never PASS), and no process of the run left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from frontend_server import running_frontend

from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
#: 20 points of a run (seconds after the start): the CLI's checks, the probe, collection, the tests.
POINTS = [round(0.3 + 0.55 * i, 2) for i in range(20)]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def frontend_url(tiny_model):
    config = FrontendConfig(model_dir=tiny_model.model_dir, served_model_name=DEFAULT_MODEL_NAME,
                            tool_parser="hermes", reasoning_parser="qwen3")
    with running_frontend(config) as url:
        yield url


@pytest.mark.parametrize("signum,at", [(signal.SIGINT if i % 2 else signal.SIGTERM, at) for i, at in enumerate(POINTS)],
                         ids=[f"{'SIGINT' if i % 2 else 'SIGTERM'}-at-{at}s" for i, at in enumerate(POINTS)])
def test_a_signal_stops_the_run_at_once_and_the_report_says_so(frontend_url, tiny_model, tmp_path, signum, at):
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"headline": "PASS: a stale report of an earlier run"}))
    proc = subprocess.Popen([sys.executable, "-m", "tokenspec", "run", "--target", frontend_url, "--tokenizer",
                             str(tiny_model.model_dir), "--report", str(out), "--seed", "20261201", "-n", "2",
                             # enough examples that every point falls inside the run, however fast it gets
                             "--max-examples", "200"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    time.sleep(at)
    if proc.poll() is not None:
        pytest.fail(f"the run ended by itself before {at}s: {proc.stdout.read()[-2000:]}")
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        output, _ = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"still running 5 s after {signal.Signals(signum).name}; its output ended: "
                    f"{proc.communicate()[0][-3000:]}")
    took = time.monotonic() - sent
    assert proc.returncode == 128 + signum, f"exit {proc.returncode} after {took:.1f}s: {output[-2000:]}"
    assert "Traceback" not in output, output[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["headline"].startswith(f"INTERRUPTED ({signal.Signals(signum).name})"), report["headline"]
    assert report["interrupted"] and len(report["tests"]) <= max(report["collected"], 0) or not report["tests"]
    for name in ("report.json", "summary.md", "report.html"):
        assert "PASS" not in (out / name).read_text(), f"{name} of an unfinished run says PASS"
    deadline = time.monotonic() + 5
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _group_alive(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not alive, "a process of the run (an xdist worker) outlived it"


def _processes_mentioning(text: str) -> list[str]:
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            out.append(f"{cmdline.parent.name}: {args[:200]}")
    return out


@pytest.mark.vllm
def test_an_interrupted_main_job_stops_the_servers_it_started(tmp_path):
    """SIGTERM to `tokenspec embedded` while its vLLM engine starts: exit 143 within seconds, and neither the engine
    (in a session of its own) nor anything else that names the job's folder is left running."""
    work = tmp_path / "work"
    proc = subprocess.Popen([sys.executable, "-m", "tokenspec", "embedded", "--work", str(work), "--report",
                             str(tmp_path / "report")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not [p for p in _processes_mentioning(str(work)) if "vllm" in p] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, proc.stdout.read()[-2000:]
    time.sleep(3)  # the engine is loading
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=20)
    assert proc.returncode == 143 and "Traceback" not in output, output[-3000:]
    time.sleep(1)
    assert not _processes_mentioning(str(work)), _processes_mentioning(str(work))
