"""A server that stops answering mid-run: the run has no verdict to give (INCONCLUSIVE, exit 3), says which
server it lost and when, stops the tests that needed it within seconds, and never says PASS or FAIL; a server
that hangs up on one request but still answers is a real failure, never excused as lost."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from frontend_server import running_frontend

from tokenspec.core.liveness import LIVENESS, ServerLost
from tokenspec.core.transport import Transport
from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.harness.processes import free_port
from tokenspec.suite.engine.results import EXIT_INCONCLUSIVE, TestResult, exit_code
from tokenspec.suite.reporting.report import RunInfo, headline

ROOT = Path(__file__).resolve().parents[1]
#: Seconds after the run starts at which its target is killed: in the probe's wake, early and late in the tests.
KILL_POINTS = (4.0, 11.0, 19.0)
#: A whole verdict word in an artifact (the run's own words; test names carry no such capitals).
VERDICT_WORD = re.compile(r"\b(PASS|FAIL)\b")


class _HangUp:
    """Labelled test double: an HTTP server on a raw socket that answers GET /health and hangs up, without a
    word, on anything else (a server that crashes its connection on one input but is still up)."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536)
                if request.startswith(b"GET /health"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: the port refuses from now on
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[Path]:
    LIVENESS.watch(tmp_path)
    try:
        yield tmp_path
    finally:
        LIVENESS.stop()


def test_a_server_that_hangs_up_on_one_request_but_answers_is_not_lost(watching: Path) -> None:
    server = _HangUp()
    try:
        with Transport().client("target", server.url) as client, pytest.raises(httpx.TransportError):
            client.post("/v1/chat/completions/render", json={})
    finally:
        server.close()
    assert LIVENESS.losses() == [], "a server that still answers /health is judged on the request it broke"


def test_a_server_that_stops_answering_is_lost_and_stays_lost(watching: Path) -> None:
    server = _HangUp()
    port = server.port
    server.close()
    transport = Transport()
    with transport.client("engine", server.url) as client:
        with pytest.raises(ServerLost) as lost:
            client.get("/v1/models")
        assert lost.value.loss.role == "engine" and "ConnectError" in lost.value.loss.evidence
        again = _HangUp(port)  # the same server answers again: a flapping one must not turn into a pass
        try:
            started = time.monotonic()
            with pytest.raises(ServerLost):
                client.get("/health")
            assert time.monotonic() - started < 0.5, "a request to a lost server is refused without the network"
        finally:
            again.close()
    assert [loss.url for loss in LIVENESS.losses()] == [f"http://127.0.0.1:{port}"]


def test_a_lost_server_makes_the_verdict_inconclusive_whatever_else_happened() -> None:
    lost = TestResult("t.py::b", ["RENDER-001"], "MUST", "not_tested", 0.0,
                      message="not tested: the target stopped answering", lost="target")
    failed = TestResult("t.py::a", ["RENDER-001"], "MUST", "failed", 0.1, message="boom")
    assert exit_code([failed, lost]) == EXIT_INCONCLUSIVE, "a failure before the loss does not make a FAIL"
    assert exit_code([TestResult("t.py::c", ["RENDER-001"], "MUST", "passed", 0.1)], [{"role": "target"}]) == 3
    info = RunInfo("http://x", None, None, None, 1, "now", 1.0, lost=(
        {"role": "target", "url": "http://x:80", "at": "12:00:00", "during": "t.py::b", "evidence": "refused"},))
    line = headline([failed, lost], info)
    assert line.startswith("INCONCLUSIVE: the target (http://x:80) stopped answering at 12:00:00 during t.py::b")
    assert not VERDICT_WORD.search(line), line


def _serve_frontend(model_dir: Path, port: int, engine: str | None = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "tokenspec", "serve", "frontend", "--model", str(model_dir), "--port", str(port)]
    proc = subprocess.Popen([*command, *(["--engine", engine] if engine else [])], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the frontend did not start on port {port}")


def _run(target: str, model_dir: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tokenspec", "run", "--target", target, "--tokenizer",
                             str(model_dir), "--report", str(out), "--seed", "20261201", "-n", "2", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _assert_inconclusive(out: Path, output: str, role: str) -> dict:
    report = json.loads((out / "report.json").read_text())
    assert report["headline"].startswith("INCONCLUSIVE"), report["headline"]
    assert [loss["role"] for loss in report["lost_servers"]] == [role], report["lost_servers"]
    assert any(t["lost"] for t in report["tests"]), "the tests the loss stopped say so"
    assert "Traceback" not in output, output[-3000:]
    for name in ("report.json", "summary.md", "report.html"):
        text = (out / name).read_text()
        head = text if name != "report.json" else report["headline"]
        assert not VERDICT_WORD.search(head[:3000]), f"{name} of a run that lost its {role} gives a verdict"
    assert 'name="tokenspec_verdict" value="INCONCLUSIVE"' in (out / "junit.xml").read_text()
    return report


@pytest.mark.parametrize("at", KILL_POINTS, ids=[f"killed-at-{at:g}s" for at in KILL_POINTS])
def test_a_run_whose_target_dies_is_inconclusive_within_seconds(tiny_model, tmp_path: Path, at: float) -> None:
    port = free_port()
    server = _serve_frontend(tiny_model.model_dir, port)
    out = tmp_path / "run"
    try:
        run = _run(f"http://127.0.0.1:{port}", tiny_model.model_dir, out, "--max-examples", "200")
        time.sleep(at)
        if run.poll() is not None:
            pytest.fail(f"the run ended before its target was killed at {at}s: {run.stdout.read()[-2000:]}")
        server.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        output, _ = run.communicate(timeout=120)
        took = time.monotonic() - killed
    finally:
        server.kill()
        server.wait()
    assert run.returncode == EXIT_INCONCLUSIVE, f"exit {run.returncode}: {output[-3000:]}"
    assert took < 30, f"the run went on {took:.0f} s after its target died"
    report = _assert_inconclusive(out, output, "target")
    assert "no verdict" in output and report["lost_servers"][0]["url"] == f"http://127.0.0.1:{port}"


def _after_the_probe(run: subprocess.Popen, timeout: float = 240) -> list[str]:
    """Read the run's output until its tests start (the probe has decided); the rest is read in a thread."""
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in run.stdout:
            lines.append(line)
            if "live counts" in line:
                started.set()
        started.set()

    threading.Thread(target=read, daemon=True).start()
    assert started.wait(timeout), "the run's tests did not start"
    return lines


def test_a_run_whose_engine_dies_loses_only_the_generate_tests(tiny_model, vllm_engine, tmp_path: Path) -> None:
    config = FrontendConfig(model_dir=tiny_model.model_dir, served_model_name=DEFAULT_MODEL_NAME,
                            tool_parser="hermes", reasoning_parser="qwen3")
    port = free_port()
    # The engine role: a second frontend whose /inference/v1/generate passes through to the real vLLM engine.
    engine = _serve_frontend(tiny_model.model_dir, port, engine=vllm_engine.url)
    out = tmp_path / "run"
    try:
        with running_frontend(config) as target:
            run = _run(target, tiny_model.model_dir, out, "--engine", f"http://127.0.0.1:{port}",
                       "-k", "test_generate or test_render")
            lines = _after_the_probe(run)
            time.sleep(2)
            assert run.poll() is None, "".join(lines)[-2000:]
            engine.send_signal(signal.SIGKILL)
            run.wait(timeout=300)
    finally:
        engine.kill()
        engine.wait()
    output = "".join(lines)
    assert run.returncode == EXIT_INCONCLUSIVE, f"exit {run.returncode}: {output[-3000:]}"
    report = _assert_inconclusive(out, output, "engine")
    assert {t["lost"] for t in report["tests"] if t["lost"]} == {"engine"}
    rendered = [t for t in report["tests"] if t["nodeid"].startswith("test_render.py")]
    assert rendered and all(not t["lost"] for t in rendered), "the target's own tests go on without the engine"
    assert any(t["outcome"] == "passed" and t["nodeid"].startswith("test_generate") for t in report["tests"]), \
        "the engine answered before it died"
