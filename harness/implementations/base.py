"""What an implementation plug-in is: something that installs itself, deploys on a model folder, and stops.

The matrix (and anyone who wants "vLLM 0.32 on Qwen3 with its parsers" without writing launch code) asks a
plug-in for a ``Deployment``: the URLs the suite is pointed at, per role, with the version and the
expectations file that belong to that configuration. The suite itself never sees a plug-in; it only gets
URLs, as it does for anyone's server.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tokenspec.harness.processes import ServerProcess

REPORTS_DIR = Path(__file__).resolve().parents[2] / "reports"


@dataclass(frozen=True)
class Configuration:
    """What a deployment serves: a model folder of one family, under a name, with that family's parsers."""

    model_dir: Path
    served_model_name: str
    family: str
    tool_parser: str | None
    reasoning_parser: str | None

    def describe(self) -> str:
        return (f"family {self.family}, tool parser {self.tool_parser or 'none'},"
                f" reasoning parser {self.reasoning_parser or 'none'}")


@dataclass
class Deployment:
    """Running servers of one implementation and where the suite finds each role.

    ``target`` is what is judged; ``engine`` serves generate when the target does not; ``reference`` is a
    standard coupled endpoint for parity (never judged). ``stop()`` ends every process it started."""

    implementation: str
    version: str
    platform: str  # "cpu" or "cuda": part of the expectations key, deviations can differ per build
    target: str
    engine: str | None
    reference: str | None
    roles: str  # one sentence: which process plays which role
    profile: Path | None = None
    servers: list[ServerProcess] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.implementation}-{self.version}-{self.platform}"

    def expectations(self, family: str) -> Path | None:
        """The committed known failures of this implementation in this configuration, if any: the family's
        own file first (``<key>-<family>.yaml``), else the implementation's (``<key>.yaml``)."""
        folder = REPORTS_DIR / "expectations"
        for name in (f"{self.key}-{family}.yaml", f"{self.key}.yaml"):
            if (folder / name).is_file():
                return folder / name
        return None

    def alive(self) -> bool:
        return all(server.running() for server in self.servers)

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Implementation(Protocol):
    """One implementation of the render / generate / derender family, as the harness drives it."""

    name: str
    title: str

    def installed(self) -> bool: ...

    def install(self) -> None:
        """Install into a cached virtualenv (idempotent; seconds when already there)."""

    def version(self) -> str: ...

    def deploy(self, config: Configuration) -> Deployment:
        """Start its servers on ``config`` and return them running; the caller stops the deployment."""


def started(deployment: Deployment, *servers: ServerProcess) -> Deployment:
    """Start ``servers`` in order into ``deployment``; on any failure stop what already runs, then raise."""
    with contextlib.ExitStack() as undo:
        undo.callback(deployment.stop)
        for server in servers:
            deployment.servers.append(server)
            server.start()
        undo.pop_all()
    return deployment
