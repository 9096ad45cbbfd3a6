"""Implementation plug-ins without vLLM: the registry, the expectations a configuration gets, and a deployment
that fails half-way stops what it had started (no process left). The real deployments run in
tests/test_matrix_cell.py (vLLM) and by hand in `tokenspec matrix` (Aphrodite)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tokenspec.harness.implementations import IMPLEMENTATIONS, implementation
from tokenspec.harness.implementations.base import REPORTS_DIR, Deployment, started
from tokenspec.harness.processes import LaunchError, ServerProcess, free_port

HEALTHY = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_every_implementation_names_itself_and_its_version() -> None:
    assert set(IMPLEMENTATIONS) == {"reference", "vllm", "vllm-0.33", "vllm-0.34", "aphrodite", "vllm-rs",
                                    "vllm-rs-nolen"}
    for name in IMPLEMENTATIONS:
        impl = implementation(name)
        assert impl.name == name and impl.title


def test_a_configuration_gets_its_family_file_first_then_the_implementations(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = Deployment("vllm", "0.32.0", "cpu", "http://t", None, None, "roles")
    assert deployment.key == "vllm-0.32.0-cpu"
    assert deployment.expectations("tiny") == REPORTS_DIR / "expectations" / "vllm-0.32.0-cpu.yaml"
    monkeypatch.setattr("tokenspec.harness.implementations.base.REPORTS_DIR", tmp_path)
    (tmp_path / "expectations").mkdir()
    assert deployment.expectations("tiny") is None
    (tmp_path / "expectations" / "vllm-0.32.0-cpu-qwen3.yaml").write_text("x")
    assert deployment.expectations("qwen3") == tmp_path / "expectations" / "vllm-0.32.0-cpu-qwen3.yaml"


def test_a_deployment_that_fails_half_way_stops_what_it_started(tmp_path: Path) -> None:
    first = ServerProcess("first server", [sys.executable, "-c", HEALTHY, "{port}"], port=free_port(),
                          log_path=tmp_path / "first.log", startup_timeout=30)
    broken = ServerProcess("broken server", [sys.executable, "-c", "raise SystemExit('no model here')"],
                           log_path=tmp_path / "broken.log", startup_timeout=30)
    deployment = Deployment("x", "1", "cpu", first.url, None, None, "roles")
    with pytest.raises(LaunchError, match="broken server exited with code 1 .*no model here"):
        started(deployment, first, broken)
    assert first.process is not None and first.process.poll() is not None, "the first server was left running"


def test_a_healthy_deployment_stops_every_process_on_exit(tmp_path: Path) -> None:
    servers = [ServerProcess(f"server {i}", [sys.executable, "-c", HEALTHY, "{port}"], port=free_port(),
                             log_path=tmp_path / f"{i}.log", startup_timeout=30) for i in range(2)]
    with started(Deployment("x", "1", "cpu", servers[0].url, servers[1].url, None, "roles"), *servers) as d:
        assert d.alive()
    assert not any(s.running() for s in servers)
