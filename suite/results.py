"""One test's result, the run's summary, and the exit code derived from them.

Results are plain data: the pytest plugin produces them, the report writers consume them, and nothing here
knows about pytest. ``outcome`` is one of the seven values the report schema allows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

OUTCOMES = ("passed", "failed", "unsupported", "not_tested", "xfailed", "xpassed", "error")
LEVELS = ("MUST", "SHOULD", "MAY")
UNSUPPORTED_PREFIX = "unsupported: "
NOT_TESTED_PREFIX = "not tested: "
#: Version of suite/CONTRACT.md, the interpretation of outcomes this code implements.
CONTRACT_VERSION = 2


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class
    nodeid: str
    requirement_ids: list[str]
    level: str
    outcome: str
    duration_s: float
    message: str = ""
    reproduce: str = ""
    #: The requirement(s) whose check failed (a subset of requirement_ids); empty when the test did not fail.
    failed_requirements: list[str] = field(default_factory=list)
    #: For xfailed/xpassed: the expectation that matched (its requirement and pattern).
    expectation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Summary:
    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_level: dict[str, dict[str, int]] = field(
        default_factory=lambda: {level: {"passed": 0, "failed": 0, "known": 0} for level in LEVELS}
    )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"total": self.total}
        out.update({("errors" if k == "error" else k): v for k, v in self.counts.items()})
        out["by_level"] = self.by_level
        return out


def is_failure(outcome: str) -> bool:
    """Unexpected results: a failure, an error, or a strict-xfail test that passed (stale expectation)."""
    return outcome in ("failed", "error", "xpassed")


def summarise(results: list[TestResult]) -> Summary:
    summary = Summary(total=len(results))
    for r in results:
        summary.counts[r.outcome] += 1
        if r.outcome == "passed":
            summary.by_level[r.level]["passed"] += 1
        elif is_failure(r.outcome):
            summary.by_level[r.level]["failed"] += 1
        elif r.outcome == "xfailed":
            summary.by_level[r.level]["known"] += 1
    return summary


def exit_code(results: list[TestResult]) -> int:
    """0 when no MUST-level test failed unexpectedly, else 1 (a test's level is that of the failed check)."""
    return 1 if any(r.level == "MUST" and is_failure(r.outcome) for r in results) else 0
