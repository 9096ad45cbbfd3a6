"""Progress of long steps, printed the same way everywhere: what is being done, then how long it took.

A new user's first run installs vLLM, builds a model and starts servers before any test runs; without a word
on the terminal those minutes look like a hang. Every long step (install, model build, server start, the
suite's live counts) goes through this module, so the lines look alike and go to one place (stderr, so a
command's stdout stays its result).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

__all__ = ["Counter", "MIN_GAP", "PREFIX", "say", "seconds", "step"]

PREFIX = "tokenspec: "
MIN_GAP = 2.0  # seconds between two live-count lines, unless the run is done


def say(text: str) -> None:
    """One progress line on stderr, flushed at once (the terminal may be a CI log)."""
    print(f"{PREFIX}{text}", file=sys.stderr, flush=True)


@contextmanager
def step(what: str, *, expect: str = "") -> Iterator[None]:
    """Announce ``what`` (with an ``expect``-ed duration for long first-time steps), then report its time,
    or that it failed after that time."""
    say(f"{what}{f' ({expect})' if expect else ''} ...")
    started = time.monotonic()
    try:
        yield
    except BaseException:
        say(f"{what}: failed after {seconds(time.monotonic() - started)}")
        raise
    say(f"{what}: done in {seconds(time.monotonic() - started)}")


def seconds(value: float) -> str:
    """``4.2 s`` under a minute, ``3 min 05 s`` above: the way the README states times."""
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(int(round(value)), 60)
    return f"{minutes} min {rest:02d} s"


class Counter:
    """Live counts of a test run: a line when another tenth of the tests is done (no closer than ``MIN_GAP``
    seconds to the last) or after ``interval`` quiet seconds, and one at the end: a long run shows it is
    moving without flooding a CI log. Each line also counts per area (the requirement ids' prefix), so a
    broken area shows while the run goes on."""

    def __init__(self, total: int, interval: float = 20.0, emit: Callable[[str], None] = say) -> None:
        self.total = total
        self.emit = emit
        self.interval = interval
        self.counts: dict[str, int] = {}
        self.areas: dict[str, dict[str, int]] = {}
        self.started = time.monotonic()
        self._last_line = self.started
        self._last_tenth = 0

    def add(self, outcome: str, areas: Iterable[str] = ()) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        kind = "failed" if outcome in ("failed", "error", "xpassed") else "known" if outcome == "xfailed" else "done"
        for area in dict.fromkeys(areas):
            counts = self.areas.setdefault(area, {"done": 0, "failed": 0, "known": 0})
            counts["done"] += 1
            if kind != "done":
                counts[kind] += 1
        done = sum(self.counts.values())
        tenth = done * 10 // self.total if self.total else 10
        now = time.monotonic()
        quiet_for = now - self._last_line
        if (tenth > self._last_tenth and quiet_for >= MIN_GAP) or quiet_for >= self.interval or done == self.total:
            self._last_tenth, self._last_line = tenth, now
            self.emit(self.line())

    def line(self) -> str:
        done = sum(self.counts.values())
        parts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in sorted(self.counts.items()))
        line = f"[{done}/{self.total}] {parts} ({seconds(time.monotonic() - self.started)})"
        return f"{line}; by area: {self.area_line()}" if self.areas else line

    def area_line(self) -> str:
        """``RENDER 52 (1 failed), DERENDER 40 (3 known), ...``: tests done per area, failing areas first."""
        def text(area: str, c: dict[str, int]) -> str:
            notes = [f"{c[k]} {k}" for k in ("failed", "known") if c[k]]
            return f"{area} {c['done']}" + (f" ({', '.join(notes)})" if notes else "")
        ordered = sorted(self.areas.items(), key=lambda kv: (-kv[1]["failed"], kv[0]))
        return ", ".join(text(area, c) for area, c in ordered)
