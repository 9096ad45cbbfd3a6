"""The bundled reference server: the CPU frontend in front of a real vLLM engine.

``ReferenceServer`` starts both as child processes in their own process groups (vLLM forks workers) and
stops both on exit, on Ctrl-C and on SIGTERM, so no process outlives it. The frontend serves render,
derender and the utilities itself and sends generation to the engine (gateway routes); the engine also
exposes vLLM's standard coupled endpoints, which serve as the parity reference.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tokenspec.harness import vllm
from tokenspec.harness.tinymodel import DEFAULT_MODEL_NAME, build
from tokenspec.progress import step

TOOL_PARSER = "hermes"
REASONING_PARSER = "qwen3"
MAX_MODEL_LEN = 2048  # the engine's and the frontend's context length must agree


@dataclass
class FrontendProcess:
    """The CPU frontend as a child process (``python -m tokenspec serve frontend``)."""

    model_dir: Path
    served_model_name: str
    engine_url: str | None
    port: int = 0
    log_path: Path | None = None
    text_filter: str = "pass-through"
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> FrontendProcess:
        self.port = self.port or vllm.free_port()
        logs = vllm.cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_path or logs / f"frontend-{self.port}.log"
        cmd = [sys.executable, "-m", "tokenspec", "serve", "frontend", "--model", str(self.model_dir),
               "--served-model-name", self.served_model_name, "--port", str(self.port),
               "--tool-parser", TOOL_PARSER, "--reasoning-parser", REASONING_PARSER,
               "--max-model-len", str(MAX_MODEL_LEN)]
        if self.engine_url:
            cmd += ["--engine", self.engine_url]
        if self.text_filter != "pass-through":
            cmd += ["--text-filter", self.text_filter]
        with step(f"starting the tokenspec frontend on {self.url} (log {self.log_path})"):
            with open(self.log_path, "wb") as log:
                self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            return self._wait_healthy(timeout)

    def _wait_healthy(self, timeout: float) -> FrontendProcess:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise vllm.LaunchError(f"the frontend exited with code {self.process.returncode}; log {self.log_path}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise vllm.LaunchError(f"the frontend did not become healthy in {timeout:.0f}s; log {self.log_path}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class ReferenceServer:
    model_dir: Path
    served_model_name: str = DEFAULT_MODEL_NAME
    port: int = 0
    flavour: str = "auto"
    text_filter: str = "pass-through"
    engine: vllm.VllmServer | None = field(default=None, init=False)
    frontend: FrontendProcess | None = field(default=None, init=False)

    def start(self) -> ReferenceServer:
        install = vllm.find_vllm(self.flavour)  # type: ignore[arg-type]
        extra = vllm.parser_args(TOOL_PARSER, REASONING_PARSER) + vllm.engine_args(MAX_MODEL_LEN)
        self.engine = vllm.VllmServer(install, "engine", self.model_dir, self.served_model_name, extra_args=extra)
        try:
            self.engine.start()
            self.frontend = FrontendProcess(self.model_dir, self.served_model_name, self.engine.url, self.port,
                                            text_filter=self.text_filter)
            self.frontend.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.frontend is not None:
            self.frontend.stop()
        if self.engine is not None:
            self.engine.stop()

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_model(work: Path | None = None) -> Path:
    """Build (deterministically, in well under a second) the embedded tiny model and return its folder."""
    target = (work or vllm.cache_dir() / "embedded") / "tiny-model"
    with step(f"building the tiny model in {target}"):
        return build(target).model_dir


def serve_reference(args: argparse.Namespace) -> int:
    """``tokenspec serve``: run until Ctrl-C or SIGTERM, then stop everything that was started."""
    model_dir = Path(args.model) if args.model else default_model()
    server = ReferenceServer(model_dir, args.served_model_name, args.port, args.flavour,
                             text_filter=getattr(args, "text_filter", "pass-through"))

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        with server:
            assert server.frontend is not None and server.engine is not None
            print(f"frontend (render, derender, gateway): {server.frontend.url}", flush=True)
            print(f"engine (vLLM, generate + coupled reference): {server.engine.url}", flush=True)
            print(f"model {server.served_model_name} from {model_dir}; Ctrl-C stops both", flush=True)
            while all(p is not None and p.poll() is None for p in (server.frontend.process, server.engine.process)):
                time.sleep(0.5)
            print("a server process exited; stopping", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
