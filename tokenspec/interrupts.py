"""SIGINT and SIGTERM stop a job within seconds, every time, and say so (exit 130 / 143).

A CI job is cancelled with SIGTERM (or SIGINT); pytest turns a KeyboardInterrupt into an interrupted
session, so both signals raise one. Two things make that unreliable on their own, and are handled here:

- an interrupt raised inside a garbage-collection callback (hypothesis registers one) is printed as
  "Exception ignored" and swallowed: the signal is raised again every second until the job is finishing;
- xdist workers are separate processes that SIGTERM to the controller does not reach: the signal is
  forwarded to the job's child processes as SIGINT, as a terminal's Ctrl-C would deliver it.

While the job writes its interrupted report (:meth:`Interrupts.finishing`), further signals are noted, not raised.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """The process's interrupt state; one instance, :data:`INTERRUPTS`."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._finishing = threading.Event()
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM); 130 when none was recorded."""
        return 128 + (self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum or signal.SIGINT).name

    def finishing(self) -> None:
        """The job is writing what it has: from now on a signal is noted, not raised."""
        self._finishing.set()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            _forward_to_children()
            threading.Thread(target=self._insist, daemon=True, name="tokenspec-interrupt").start()
        if not self._finishing.is_set():
            raise KeyboardInterrupt

    def _insist(self) -> None:
        """Raise the interrupt again while the job has not reached its end (the first may have been swallowed)."""
        while not self._finishing.wait(1.0):
            try:
                signal.raise_signal(signal.SIGINT)
            except (OSError, ValueError):
                return


INTERRUPTS = Interrupts()


def _forward_to_children() -> None:
    """SIGINT to every direct child (xdist workers, servers the job started); Linux /proc, else nothing."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(me):
            try:
                os.kill(int(stat.parent.name), signal.SIGINT)
            except (OSError, ValueError):
                pass
