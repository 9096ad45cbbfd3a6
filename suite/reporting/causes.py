"""Failures grouped by cause: one defect that breaks 89 tests is one thing to fix, and the report says so.

A failure's *signature* is the requirement(s) its check charged and its message with the variable parts
normalised away (numbers, quoted values, token id lists, the example hypothesis drew). A *cause* gathers the
failures that broke one requirement: each failure joins the requirement it charged that the run saw broken most
widely, so a dropped system message seen by the transformers oracle, a golden case and the tokenize utility
(RENDER-005; RENDER-005 and RENDER-023; RENDER-005 and UTIL-002) is one cause, with its signatures listed as the
ways it showed. Parity compares the whole pipeline with a coupled server, so a broken stage shows there too: a
parity failure joins the stage cause of the same server broken most widely, when the run has one (a defect seen
only through parity stays a cause of its own). Reports lead with the causes, one card each: its count, the
requirement sentence, one representative failure in full, the other tests listed. Expectations and
``tokenspec compare`` keep working on tests; causes are how a person reads them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tokenspec.suite.engine.results import LEVELS, TestResult, is_failure

#: Characters of a normalised message kept in a signature (the rest of a long message is detail, not cause).
SIGNATURE_CHARS = 160
_PREFIXES = re.compile(r"^(NEW CAUSE: .*?not explained: |failure \d+ of \d+: |\w+(Error|Exception): )")
_VARIABLE = [
    (re.compile(r"\[(?:\s*-?\d+\s*,)+\s*-?\d+\s*\]"), "[ids]"),  # a list of numbers, token ids mostly
    (re.compile(r"'(?:[^'\\]|\\.){0,200}'|\"(?:[^\"\\]|\\.){0,200}\""), "'…'"),  # quoted values
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b"), "#"),  # hashes, addresses
    (re.compile(r"-?\b\d+(\.\d+)?(e-?\d+)?\b"), "N"),  # numbers
    (re.compile(r"\s+"), " "),
]


_TAGS = re.compile(r"\[[A-Z]+-\d{3}\]\s*")
#: Areas whose checks compare the whole pipeline end to end (a consequence of a broken stage, where one is broken).
END_TO_END = frozenset({"PARITY"})
#: Areas of the pipeline's stages: what a broken stage is charged to.
STAGES = frozenset({"RENDER", "DERENDER", "GENERATE", "STREAM", "TOKNAT"})


def normalised(message: str) -> str:
    """The message with what changes from test to test taken out: its first meaningful line, numbers, quoted
    values and id lists replaced by placeholders."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    first = next((line for line in lines if not line.startswith(("Falsifying", "assert ", "+", "-", "where"))),
                 lines[0] if lines else "")
    text = _TAGS.sub("", _PREFIXES.sub("", _PREFIXES.sub("", first)))
    for pattern, placeholder in _VARIABLE:
        text = pattern.sub(placeholder, text)
    return text.strip()[:SIGNATURE_CHARS]


def signature(result: TestResult) -> str:
    """What a failure is: the requirement(s) charged, and its normalised message."""
    charged = ",".join(result.failed_requirements or result.requirement_ids)
    return f"{charged} | {normalised(result.message)}"


@dataclass
class Cause:
    """One broken requirement and the unexpected failures that show it (the representative, the most direct,
    first); ``ways`` counts each signature among them, the commonest first."""

    requirement: str
    level: str
    charged_to: str
    tests: list[TestResult] = field(default_factory=list)

    @property
    def id(self) -> str:
        """A stable anchor for the cause (the same requirement and server give the same id in every run)."""
        return f"cause-{self.requirement}" + ("" if self.charged_to == "target" else f"-{self.charged_to}")

    @property
    def example(self) -> TestResult:
        return self.tests[0]

    @property
    def ways(self) -> list[tuple[str, int]]:
        counts = Counter(signature(t) for t in self.tests)
        first = signature(self.example)
        return sorted(counts.items(), key=lambda kv: (kv[0] != first, -kv[1], kv[0]))

    @property
    def summary(self) -> str:
        """What failed, in the example's normalised words."""
        return self.ways[0][0].partition(" | ")[2]

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "requirement": self.requirement, "level": self.level, "charged_to": self.charged_to,
                "count": len(self.tests), "example": self.example.nodeid,
                "ways": [{"signature": sig, "count": n} for sig, n in self.ways],
                "tests": [t.nodeid for t in self.tests]}


def _area(requirement: str) -> str:
    return requirement.partition("-")[0]


def _charged(result: TestResult) -> list[str]:
    return result.failed_requirements or result.requirement_ids


def _directness(result: TestResult, ways: Counter[str]) -> tuple[int, int, int, str]:
    """The representative failure: one that shows the difference (decoded ids, operands), of the commonest way
    the cause showed, then the shortest."""
    shows = 0 if result.expected_text else 1 if result.expected else 2
    return (shows, -ways[signature(result)], len(result.message), result.nodeid)


def causes(results: list[TestResult]) -> list[Cause]:
    """The unexpected failures grouped by the requirement each broke that is broken most widely in the run: the
    target's causes first, strongest level first, then the most tests."""
    failing = [r for r in results if is_failure(r.outcome)]
    reach = Counter(rid for r in failing for rid in dict.fromkeys(_charged(r)))
    groups: dict[tuple[str, str], list[TestResult]] = defaultdict(list)
    for r in failing:
        ids = _charged(r)
        widest = max(ids, key=lambda rid: (reach[rid], -ids.index(rid)))
        groups[(r.charged_to, widest)].append(r)
    for whose, rid in [key for key in groups if _area(key[1]) in END_TO_END]:
        stages = [key for key in groups if key[0] == whose and _area(key[1]) in STAGES]
        if stages:
            widest_stage = max(stages, key=lambda key: (len(groups[key]), key[1]))
            groups[widest_stage] += groups.pop((whose, rid))
    out = []
    for (whose, rid), tests in groups.items():
        ways = Counter(signature(t) for t in tests)
        tests.sort(key=lambda t: _directness(t, ways))
        out.append(Cause(rid, min((t.level for t in tests), key=LEVELS.index), whose, tests))
    return sorted(out, key=lambda c: (c.charged_to != "target", LEVELS.index(c.level), -len(c.tests), c.requirement))
