"""`tokenspec serve`: the bundled reference server starts frontend + real vLLM engine, answers through the
gateway, and SIGTERM stops every process it started (no orphans)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.vllm


def _processes_mentioning(port: int) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in args and str(port).encode() in args:
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def _command_line(port: int) -> str:
    """The command line(s) of the process(es) started with ``--port PORT``."""
    found = _processes_mentioning(port)
    assert found, f"no process listens with --port {port}"
    return " ".join(found)


def test_serve_passes_its_flags_to_both_servers_then_sigterm_leaves_nothing_running(tmp_path: Path) -> None:
    """`tokenspec serve` with flags other than the defaults: each reaches the part it configures (read back from
    the engine's and the frontend's /v1/models and command lines), and SIGTERM stops both."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        engine_port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tokenspec", "serve", "--tool-parser", "none",
                             "--reasoning-parser", "deepseek_r1", "--max-model-len", "1536", "--max-concurrency", "7",
                             "--max-num-seqs", "9", "--api-generation", "0.33", "--engine-port", str(engine_port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("model "):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(360), "".join(lines)[-3000:]
        text = "".join(lines)
        frontend = re.search(r"frontend \(render, derender, gateway\): (\S+)", text).group(1)
        engine = re.search(r"engine \(vLLM, generate \+ coupled reference\): (\S+)", text).group(1)
        body = {"model": "tokenspec-tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                "temperature": 0, "return_token_ids": True}
        ours = httpx.post(f"{frontend}/v1/chat/completions", json=body, timeout=60).json()
        theirs = httpx.post(f"{engine}/v1/chat/completions", json=body, timeout=60).json()
        assert ours["choices"][0]["token_ids"] == theirs["choices"][0]["token_ids"]
        assert engine == f"http://127.0.0.1:{engine_port}"
        for url in (frontend, engine):
            assert httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["max_model_len"] == 1536, url
        engine_cmd = _command_line(engine_port)
        assert "--reasoning-parser deepseek_r1" in engine_cmd and "--tool-call-parser" not in engine_cmd
        assert "--max-num-seqs 9" in engine_cmd
        limits = httpx.get(f"{frontend}/openapi.json", timeout=60).json()["info"]["x-tokenspec-limits"]
        assert limits["max_num_seqs"] == 9 and limits["prompt_logprob_token_ids"] is False  # the CPU engine's V1 runner
        frontend_cmd = _command_line(int(frontend.rsplit(":", 1)[1]))
        for flag in ("--tool-parser none", "--reasoning-parser deepseek_r1", "--max-model-len 1536",
                     "--max-concurrency 7", "--max-num-seqs 9", "--api-generation 0.33"):
            assert flag in frontend_cmd, (flag, frontend_cmd)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
    assert code == 0
    for url in (frontend, engine):
        port = int(url.rsplit(":", 1)[1])
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health", timeout=5)
        assert not _processes_mentioning(port), f"left running: {_processes_mentioning(port)}"
