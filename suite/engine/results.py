"""One test's result, the run's summary, and the exit code derived from them.

Results are plain data: the pytest plugin produces them, the report writers consume them, and nothing here
knows about pytest. ``outcome`` is one of the seven values the report schema allows.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

OUTCOMES = ("passed", "failed", "unsupported", "not_tested", "xfailed", "xpassed", "error")
LEVELS = ("MUST", "SHOULD", "MAY")
UNSUPPORTED_PREFIX = "unsupported: "
NOT_TESTED_PREFIX = "not tested: "
#: Version of suite/CONTRACT.md, the interpretation of outcomes this code implements.
CONTRACT_VERSION = 6
#: Exit code of a run that lost a server it needs: no verdict (INCONCLUSIVE), neither PASS nor FAIL.
EXIT_INCONCLUSIVE = 3
#: Cap (characters) of a failing comparison's ``expected`` and ``actual`` as recorded in results.
MAX_OPERAND = 20_000


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
    #: The failing comparison of ``assert actual == expected`` (pretty JSON when the operand is JSON-able, else
    #: repr; capped at ``MAX_OPERAND`` characters); empty when the test did not fail on a comparison.
    expected: str = ""
    actual: str = ""
    #: The failing comparison's operator (``actual <op> expected``: "==", "in", "<", ...).
    comparison: str = ""
    #: When the operands are token ids: each side decoded by the run's codec, special tokens visible
    #: (suite/oracles/token_text.py); empty otherwise.
    expected_text: str = ""
    actual_text: str = ""
    #: The last request the failing test sent: method, URL, content type, and its body saved byte for byte in
    #: ``<report dir>/<request_file>`` (``bodies/<test>.bin``; empty without a body or a report folder).
    request_method: str = ""
    request_url: str = ""
    request_content_type: str = ""
    request_file: str = ""
    #: The server whose answer broke the test: "target" (the verdict's), "engine" or "reference" (listed apart).
    charged_to: str = "target"
    #: Requests of this test answered 429/503 and sent again (tokenspec/core/transport.py); never a verdict.
    retries: int = 0
    #: The role of the server whose loss ended this test (not tested; the run is INCONCLUSIVE); "" otherwise.
    lost: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Summary:
    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    by_level: dict[str, dict[str, int]] = field(
        default_factory=lambda: {level: {"passed": 0, "failed": 0, "known": 0} for level in LEVELS}
    )
    #: Unexpected failures charged to the other servers of the run ({"engine": n, "reference": m}).
    others: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"total": self.total}
        out.update({("errors" if k == "error" else k): v for k, v in self.counts.items()})
        out["by_level"] = self.by_level
        out["other_servers"] = self.others
        return out


def safe_name(nodeid: str) -> str:
    """A file name and HTML id for a test: its nodeid's safe characters, plus a hash (parameters can collide)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.")[:120]
    return f"{readable}-{hashlib.sha1(nodeid.encode('utf-8', 'backslashreplace')).hexdigest()[:8]}"


def is_failure(outcome: str) -> bool:
    """Unexpected results: a failure, an error, or a strict-xfail test that passed (stale expectation)."""
    return outcome in ("failed", "error", "xpassed")


def summarise(results: list[TestResult]) -> Summary:
    summary = Summary(total=len(results))
    for r in results:
        summary.counts[r.outcome] += 1
        if r.outcome == "passed":
            summary.by_level[r.level]["passed"] += 1
        elif is_failure(r.outcome) and r.charged_to != "target":
            summary.others[r.charged_to] = summary.others.get(r.charged_to, 0) + 1
        elif is_failure(r.outcome):
            summary.by_level[r.level]["failed"] += 1
        elif r.outcome == "xfailed":
            summary.by_level[r.level]["known"] += 1
    return summary


def inconclusive(results: list[TestResult], lost: object = ()) -> bool:
    """The run lost a server it needs (tokenspec/core/liveness.py): what it did not ask cannot pass or fail."""
    return bool(lost) or any(r.lost for r in results)


def exit_code(results: list[TestResult], lost: object = ()) -> int:
    """3 when the run lost a server it needs (INCONCLUSIVE); else 0 when no MUST-level test failed unexpectedly on
    the target, else 1 (a test's level is that of the failed check; a failure of the engine's or the reference's
    answer is theirs, listed apart, not the target's verdict)."""
    if inconclusive(results, lost):
        return EXIT_INCONCLUSIVE
    return 1 if any(r.level == "MUST" and is_failure(r.outcome) and r.charged_to == "target" for r in results) else 0
