"""Server processes and cached virtualenvs: what every implementation plug-in starts and installs with.

A server runs in its own process group (vLLM and Aphrodite fork engine workers), logs to a file, is polled
until ``/health`` answers 200, and ``stop()`` ends the whole group, so nothing outlives a test session, a
matrix run or a Ctrl-C. A virtualenv is ready only once its marker file exists, written after a complete
install, so an interrupted install is redone rather than half used.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tokenspec.core.errors import UsageError
from tokenspec.core.progress import step

READY_MARKER = ".tokenspec-ready"


class LaunchError(UsageError):
    """A server could not be installed or did not become healthy; the message names the fix or the log."""


def cache_dir() -> Path:
    return Path(os.environ.get("TOKENSPEC_CACHE", Path.home() / ".cache" / "tokenspec"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def distribution_version(python: Path, names: Sequence[str]) -> str:
    """The version of the first installed distribution of ``names`` in ``python``'s environment."""
    code = ("import importlib.metadata as m, sys\n"
            "for n in sys.argv[1:]:\n"
            "    try: print(m.version(n)); break\n"
            "    except m.PackageNotFoundError: pass\n")
    done = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or "unknown"


def venv_ready(venv: Path) -> bool:
    return (venv / READY_MARKER).exists() and (venv / "bin" / "python").exists()


#: Arguments after ``python -m pip``, or a function that computes them once the steps before it have run (for a
#: step that depends on what an earlier one installed, e.g. a distribution's own Requires-Dist).
PipStep = Sequence[str] | Callable[[], Sequence[str]]


def install_venv(venv: Path, what: str, pip_steps: Sequence[PipStep], *, expect: str, hint: str = "") -> Path:
    """Create ``venv`` once and run ``pip_steps`` in it; its python.

    Idempotent: a ready virtualenv is returned at once. A failed step raises LaunchError naming the step,
    the last lines pip printed and ``hint``."""
    python = venv / "bin" / "python"
    if venv_ready(venv):
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with step(f"installing {what} into {venv}", expect=expect):
        _install_step(what, [sys.executable, "-m", "venv", "--clear", str(venv)], hint)
        for args in pip_steps:
            _install_step(what, [str(python), "-m", "pip", *(args() if callable(args) else args)], hint)
        (venv / READY_MARKER).write_text(what + "\n")
    return python


def _install_step(what: str, command: Sequence[str], hint: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise LaunchError(f"installing {what} failed at `{' '.join(command[:5])}`: {' | '.join(tail)}"
                          + (f" ({hint})" if hint else ""))


@dataclass
class ServerProcess:
    """One server process: started in its own process group, logged to a file, polled until healthy."""

    label: str  # "vLLM engine", "Aphrodite render", ...: names the server in progress lines and errors
    command: Sequence[str]  # may contain "{port}", filled in at start
    env: Mapping[str, str] | None = None
    port: int = 0
    log_path: Path | None = None
    startup_timeout: float = 300.0
    expect: str = ""  # how long a start usually takes, for the progress line
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        self.port = self.port or free_port()
        if self.log_path is None:
            logs = cache_dir() / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            self.log_path = logs / f"{self.label.lower().replace(' ', '-')}-{self.port}.log"
        cmd = [part.replace("{port}", str(self.port)) for part in self.command]
        with step(f"starting {self.label} on {self.url} (log {self.log_path})", expect=self.expect):
            with open(self.log_path, "wb") as log:
                log.write((" ".join(cmd) + "\n").encode())
                log.flush()
                self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                env=dict(self.env) if self.env is not None else None,
                                                start_new_session=True)
            self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    self.stop()
                    raise LaunchError(f"{self.label} exited with code {self.process.returncode} before becoming"
                                      f" healthy; log {self.log_path}: {self.log_tail()}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.3)
        self.stop()
        raise LaunchError(f"{self.label} not healthy after {self.startup_timeout:.0f}s; log {self.log_path}:"
                          f" {self.log_tail()}")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 3) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:])

    def stop(self, grace: float = 15.0) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after ``grace`` seconds (3 when the job was
        interrupted: a cancelled CI job must end in seconds)."""
        from tokenspec.core.interrupts import INTERRUPTS

        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        if INTERRUPTS.requested:
            grace = min(grace, 3.0)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace)
        except ProcessLookupError:
            pass

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
