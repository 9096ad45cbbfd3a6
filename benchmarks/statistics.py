"""Statistics of the benchmarks: percentiles, summaries, ratios, speed targets with their verdict, text tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values_ms: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99, mean, min and max of latencies in milliseconds."""
    return {"n": len(values_ms), "p50": percentile(values_ms, 50), "p95": percentile(values_ms, 95),
            "p99": percentile(values_ms, 99), "mean": sum(values_ms) / len(values_ms),
            "min": min(values_ms), "max": max(values_ms)}


def ratio(ours: float, baseline: float) -> float:
    """ours / baseline; a non-positive baseline is a measuring error, not an infinitely good result."""
    if baseline <= 0:
        raise ValueError(f"baseline must be positive, got {baseline}")
    return ours / baseline


@dataclass(frozen=True)
class Target:
    """A speed target of the form ``measured <= limit`` (both ratios), with its verdict."""

    name: str
    measured: float
    limit: float

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    def line(self) -> str:
        # three significant digits: 0.0696 and 0.0730 both read "0.07" at two decimals, one a PASS, one a MISS
        return f"{'PASS' if self.passed else 'MISS'}  {self.name}: {self.measured:.3g}x (target <= {self.limit:g}x)"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "measured": round(self.measured, 4), "limit": self.limit,
                "verdict": "PASS" if self.passed else "MISS"}


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (floats to 2 decimals)."""
    cells = [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
