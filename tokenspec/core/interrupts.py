"""SIGINT and SIGTERM stop a job within seconds, every time, and say so (exit 130 / 143).

A CI job is cancelled with SIGTERM (or SIGINT); pytest turns a KeyboardInterrupt into an interrupted
session, so both signals raise one. Two things make that unreliable on their own, and are handled here:

- an interrupt raised inside a garbage-collection callback (hypothesis registers one) is printed as
  "Exception ignored" and swallowed: while the suite runs (:meth:`Interrupts.insisting`), the signal is raised
  again every second until the run is finishing. Outside it a signal is raised once: a second one must not
  cut short the cleanup the first started (stopping the servers a job started);
- xdist workers are separate processes that SIGTERM to the controller does not reach: the signal is
  forwarded to the job's child processes as SIGINT, as a terminal's Ctrl-C would deliver it.

While the job writes its interrupted report (:meth:`Interrupts.finishing`), further signals are noted, not raised.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

__all__ = ["INTERRUPTS", "Interrupts", "SIGNALS"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """The process's interrupt state; one instance, :data:`INTERRUPTS`."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._finishing = threading.Event()
        self._previous: dict[int, object] = {}
        #: While the command's modules load, a signal is recorded and raised at :meth:`arm`: an interrupt raised
        #: inside an import (a C extension's init above all) leaves a half-made module and a confusing traceback.
        self._deferred = True
        self._thread: threading.Thread | None = None
        self._forwarded = False
        self._insisting = False

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
        """Handle SIGINT and SIGTERM from now on (deferred until :meth:`arm`); a second call does nothing."""
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return
        self.signum, self._deferred, self._thread, self._forwarded = None, True, None, False
        self._finishing.clear()
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def insisting(self, on: bool) -> None:
        """The suite runs (``on``): an interrupt is raised again every second until the run is finishing."""
        self._insisting = on

    def defer(self) -> None:
        """Modules load again (pytest's plugins, xdist's workers): hold signals until the next :meth:`arm`."""
        self._deferred = True

    def arm(self) -> None:
        """The command's modules are loaded: a signal now raises KeyboardInterrupt, one that came earlier at once."""
        self._deferred = False
        if self.signum is not None and not self._finishing.is_set():
            self._stop()

    def uninstall(self) -> None:
        """Back to the handlers before :meth:`install`, once no re-raised signal can still be on its way."""
        self._finishing.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            self._thread = threading.Thread(target=self._insist, daemon=True, name="tokenspec-interrupt")
            self._thread.start()
        if self._finishing.is_set() or self._deferred:
            return
        if self._insisting or not self._forwarded:  # the first raise forwards; later ones only while the suite runs
            self._stop()

    def _stop(self) -> None:
        if not self._forwarded:
            self._forwarded = True
            _forward_to_children()  # not while deferred: a worker killed while it starts is an xdist INTERNALERROR
            _quiet_swallowed_interrupts()
        raise KeyboardInterrupt

    def _insist(self) -> None:
        """Raise the interrupt again while the job has not reached its end (the first may have been swallowed)."""
        while not self._finishing.wait(1.0):
            if self._deferred or not self._insisting:
                continue
            try:
                signal.raise_signal(signal.SIGINT)
            except (OSError, ValueError):
                return


INTERRUPTS = Interrupts()


def _quiet_swallowed_interrupts() -> None:
    """An interrupt raised inside a ``__del__`` or a gc callback is swallowed and printed as "Exception ignored"
    with a traceback; the job raises it again itself (``_insist``), so that print is noise and is dropped."""
    previous = sys.unraisablehook

    def hook(unraisable: object) -> None:
        if not isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
            previous(unraisable)  # type: ignore[arg-type]

    sys.unraisablehook = hook


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
