"""Whether the servers of a run still answer: a run that lost a server it needs has no verdict to give.

Every request of a suite run goes through the transport. When one ends without an HTTP answer (connection
refused or reset, a timeout), the transport asks the same server for ``/health`` on fresh connections. A server
that answers anything at all (a 404 included) is alive, and the error stands as the test's evidence: a server
that hangs up on one request is a real failure. A server that answers nothing is *lost*: the loss is recorded
once (role, URL, when, during which test, the evidence) in a folder the run's processes share, and from then on
every request to that server raises :class:`ServerLost` at once, without touching the network, so the tests
that need it end within seconds as not tested instead of each waiting out its timeout.

A lost server stays lost for the rest of the run, even if it answers again: a server that flaps must never
turn the tests it missed into passes. The suite's plugin turns a test ended by :class:`ServerLost` into
``not_tested`` and the run's verdict into INCONCLUSIVE (``suite/CONTRACT.md``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

__all__ = [
    "HEALTH_PAUSE", "HEALTH_TIMEOUT", "HEALTH_TRIES", "LIVENESS", "LIVENESS_ENV", "Liveness", "Loss", "ServerLost",
    "answers", "origin",
]

#: Environment variable naming the folder where the run's processes (xdist workers) share their losses.
LIVENESS_ENV = "TOKENSPEC_LIVENESS"
#: How a lost server is asked whether it answers: tries on fresh connections, each with this timeout.
HEALTH_TRIES = 2
HEALTH_TIMEOUT = 5.0
HEALTH_PAUSE = 1.0


@dataclass(frozen=True)
class Loss:
    """One server that stopped answering: what the report says about it."""

    role: str
    url: str
    at: str
    during: str
    evidence: str

    def sentence(self) -> str:
        during = f" during {self.during}" if self.during else ""
        return f"the {self.role} ({self.url}) stopped answering at {self.at}{during}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


class ServerLost(BaseException):  # noqa: N818 - reads as what happened, like KeyboardInterrupt
    """A request to a server this run has lost. A BaseException on purpose: neither a test's ``except
    Exception`` nor hypothesis's search for a failing example may absorb it and judge what was never asked."""

    def __init__(self, loss: Loss) -> None:
        super().__init__(f"not tested: {loss.sentence()}")
        self.loss = loss


def origin(url: httpx.URL | str) -> str:
    """The server a URL names (scheme, host and port): two roles on one origin are one server."""
    parsed = httpx.URL(str(url))
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{parsed.host}:{port}"


class Liveness:
    """The servers this process knows to be lost; inert until :meth:`watch` names the run's shared folder."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        #: The test running in this process (set by the plugin): named in a loss it discovers.
        self.current = ""
        self._lost: dict[str, Loss] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.folder is not None

    def watch(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._lost.clear()

    def stop(self) -> None:
        self.folder = None
        self._lost.clear()

    def _file(self, server: str) -> Path:
        assert self.folder is not None
        return self.folder / (server.replace("://", "_").replace(":", "_").replace("/", "_") + ".json")

    def lost(self, url: httpx.URL | str) -> Loss | None:
        """The loss of the server ``url`` is on, as this process or any other of the run recorded it."""
        if self.folder is None:
            return None
        server = origin(url)
        if server in self._lost:
            return self._lost[server]
        file = self._file(server)
        if not file.exists():
            return None
        try:
            loss = Loss(**json.loads(file.read_text()))
        except (OSError, ValueError, TypeError):
            return None  # another process is writing it; the next request reads it whole
        self._lost[server] = loss
        return loss

    def losses(self) -> list[Loss]:
        """Every loss of the run, first first."""
        if self.folder is None or not self.folder.is_dir():
            return []
        found = []
        for file in sorted(self.folder.glob("*.json")):
            try:
                found.append(Loss(**json.loads(file.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return sorted(found, key=lambda loss: loss.at)

    def raise_if_lost(self, url: httpx.URL | str) -> None:
        if (loss := self.lost(url)) is not None:
            raise ServerLost(loss)

    def after_error(self, role: str, url: httpx.URL | str, error: BaseException,
                    verify: object = True) -> None:
        """A request to ``url`` got no HTTP answer: if the server answers nothing else either, record the loss
        and raise :class:`ServerLost` (from ``error``); if it answers, return and let ``error`` stand."""
        if self.folder is None:
            return
        self.raise_if_lost(url)
        if answers(url, verify):
            return
        raise ServerLost(self._record(role, url, f"{type(error).__name__}: {error}")) from error

    def check(self, role: str, url: str, verify: object = True) -> Loss | None:
        """Ask ``url``'s server whether it answers, outside any test (after the probe, which judges no server
        lost: a server that died while it was probed would leave every role "not hosted" and the run a PASS)."""
        if self.folder is None or (loss := self.lost(url)) is not None:
            return loss if self.folder is not None else None
        return None if answers(url, verify) else self._record(role, url, "no answer after the probe")

    def _record(self, role: str, url: httpx.URL | str, evidence: str) -> Loss:
        """The first loss of a server is the run's: a later record by another process does not replace it."""
        loss = Loss(role=role, url=origin(url), at=datetime.now(UTC).isoformat(timespec="seconds"),
                    during=self.current, evidence=f"{evidence}; /health answered nothing in {HEALTH_TRIES} tries"
                                                  f" of {HEALTH_TIMEOUT:g} s")
        with self._lock:
            file = self._file(loss.url)
            if not file.exists():
                tmp = file.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(loss.to_dict()))
                tmp.replace(file)
        return self.lost(url) or loss


def answers(url: httpx.URL | str, verify: object = True) -> bool:
    """Whether the server ``url`` is on answers an HTTP request at all, on a fresh connection each try."""
    health = f"{origin(url)}/health"
    for attempt in range(HEALTH_TRIES):
        if attempt:
            time.sleep(HEALTH_PAUSE)
        try:
            with httpx.Client(verify=verify, timeout=HEALTH_TIMEOUT) as client:  # type: ignore[arg-type]
                client.get(health)
            return True
        except httpx.HTTPError:
            continue
    return False


#: The process's one view of the run's servers (the transport consults it, the plugin arms and reads it).
LIVENESS = Liveness()
