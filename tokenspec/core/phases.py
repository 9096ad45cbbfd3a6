"""Where a conformance run spends its time: per test and per phase (probe, HTTP, validation, hypothesis
generation and shrinking, report writing), for ``tokenspec bench suite --profile``.

Off unless ``TOKENSPEC_PHASES`` names a folder; then every process of the run (the controller and each xdist
worker) adds up its own times and writes ``phases-<pid>.json`` there when it ends. Phases overlap by design:
HTTP and validation happen inside a test's call, and "shrinking" is the share of a test's time spent on the
examples hypothesis ran while shrinking (their HTTP included); ``benchmarks`` reads them as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

__all__ = ["CLOCK", "ENV", "PhaseClock", "SESSION", "merged"]

ENV = "TOKENSPEC_PHASES"
SESSION = "(session)"  # what is timed outside any test: the probe, the report


class PhaseClock:
    """Seconds per (test, phase) of this process. Every method is a no-op while profiling is off."""

    def __init__(self) -> None:
        self.folder = os.environ.get(ENV) or None
        self.test = SESSION
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    @property
    def on(self) -> bool:
        return self.folder is not None

    def add(self, phase: str, seconds: float) -> None:
        if self.folder is not None:
            self.totals[self.test][phase] += seconds

    @contextlib.contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        if self.folder is None:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - start)

    @contextlib.contextmanager
    def running(self, test: str) -> Iterator[None]:
        """Attribute what happens inside to ``test``, and time the whole of it as its ``wall``."""
        previous, self.test = self.test, test
        try:
            with self.timing("wall"):
                yield
        finally:
            self.test = previous

    def write(self) -> Path | None:
        if self.folder is None or not self.totals:
            return None
        folder = Path(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"phases-{os.getpid()}.json"
        path.write_text(json.dumps({test: dict(phases) for test, phases in self.totals.items()}))
        return path


CLOCK = PhaseClock()


def merged(folder: Path) -> dict[str, dict[str, float]]:
    """Every process's totals in ``folder``, added up per test and phase."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in sorted(folder.glob("phases-*.json")):
        for test, phases in json.loads(path.read_text()).items():
            for phase, seconds in phases.items():
                out[test][phase] += seconds
    return {test: dict(phases) for test, phases in out.items()}
