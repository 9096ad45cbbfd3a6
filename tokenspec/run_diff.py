"""``tokenspec compare RUN_A RUN_B``: what changed between two runs of the suite.

Typical use is two versions of one implementation on the same configuration: which tests got fixed, which
regressed, which still fail but for another reason (a different requirement broke, or a different first
line of the message), and what one run judged that the other could not. Tests are matched by node id;
outcomes fold into four states (pass, fail, known failure, not judged). Field-by-field comparison of two
responses is another concept and lives in ``tokenspec.core.compare``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tokenspec.core.errors import UsageError

_STATE = {"passed": "pass", "failed": "fail", "error": "fail", "xpassed": "fail", "xfailed": "known",
          "unsupported": "not judged", "not_tested": "not judged"}


@dataclass(frozen=True)
class Change:
    nodeid: str
    before: str  # the outcome in run A ("" when the test did not exist)
    after: str
    requirements: list[str]
    detail: str = ""


@dataclass
class RunDiff:
    run_a: str
    run_b: str
    headline_a: str
    headline_b: str
    fixed: list[Change] = field(default_factory=list)
    regressed: list[Change] = field(default_factory=list)
    changed_cause: list[Change] = field(default_factory=list)
    newly_judged: list[Change] = field(default_factory=list)
    no_longer_judged: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    removed: list[Change] = field(default_factory=list)
    unchanged: int = 0

    SECTIONS = ("regressed", "fixed", "changed_cause", "no_longer_judged", "newly_judged", "added", "removed")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_markdown(self) -> str:
        lines = [f"# tokenspec compare: {self.run_a} -> {self.run_b}", "",
                 f"- A: {self.headline_a}", f"- B: {self.headline_b}", "",
                 "| " + " | ".join(s.replace("_", " ") for s in self.SECTIONS) + " | unchanged |",
                 "|" + "---:|" * (len(self.SECTIONS) + 1),
                 "| " + " | ".join(str(len(getattr(self, s))) for s in self.SECTIONS) + f" | {self.unchanged} |",
                 ""]
        for section in self.SECTIONS:
            changes = getattr(self, section)
            if not changes:
                continue
            lines += [f"## {section.replace('_', ' ').capitalize()} ({len(changes)})", "",
                      "| test | requirements | A | B | detail |", "|---|---|---|---|---|"]
            lines += [f"| `{c.nodeid}` | {', '.join(c.requirements)} | {c.before or '-'} | {c.after or '-'} |"
                      f" {c.detail.replace('|', '/')[:240]} |" for c in changes]
            lines.append("")
        return "\n".join(lines)


def load_run(path: str | Path) -> dict[str, Any]:
    """A run folder (with report.json) or a report.json file."""
    path = Path(path)
    report = path / "report.json" if path.is_dir() else path
    if not report.is_file():
        raise UsageError(f"{path}: no report.json there (give a run folder written by `tokenspec run --report`)")
    try:
        doc = json.loads(report.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{report}: not JSON ({exc})") from None
    if "tests" not in doc:
        raise UsageError(f"{report}: not a tokenspec report (no tests)")
    return doc


def _cause(test: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """The failed requirements and the first line of what was observed (a known failure's message starts
    with its expectation, which differs between expectation files: only the observation counts)."""
    message = (test.get("message") or "").strip()
    if test["outcome"] == "xfailed" and "; observed: " in message:
        message = message.split("; observed: ", 1)[1]
    first = message.splitlines()[:1]
    return tuple(test.get("failed_requirements") or ()), first[0][:200] if first else ""


def _same_cause(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal failed requirements and observations, numbers aside (ids, timestamps and ports vary per run)."""
    (ra, ma), (rb, mb) = _cause(a), _cause(b)
    return ra == rb and re.sub(r"\d+", "#", ma) == re.sub(r"\d+", "#", mb)


def diff_runs(a: dict[str, Any], b: dict[str, Any], name_a: str = "A", name_b: str = "B") -> RunDiff:
    tests_a = {t["nodeid"]: t for t in a["tests"]}
    tests_b = {t["nodeid"]: t for t in b["tests"]}
    out = RunDiff(name_a, name_b, a.get("headline", ""), b.get("headline", ""))
    for nodeid in sorted(tests_a.keys() | tests_b.keys()):
        ta, tb = tests_a.get(nodeid), tests_b.get(nodeid)
        reqs = list((tb or ta or {}).get("requirement_ids", []))
        if ta is None or tb is None:
            present = ta or tb
            assert present is not None
            change = Change(nodeid, ta["outcome"] if ta else "", tb["outcome"] if tb else "", reqs)
            (out.added if ta is None else out.removed).append(change)
            continue
        sa, sb = _STATE[ta["outcome"]], _STATE[tb["outcome"]]
        change = Change(nodeid, ta["outcome"], tb["outcome"], reqs)
        if sa in ("fail", "known") and sb == "pass":
            out.fixed.append(change)
        elif sa == "pass" and sb in ("fail", "known"):
            out.regressed.append(Change(nodeid, ta["outcome"], tb["outcome"], reqs, _cause(tb)[1]))
        elif sa in ("fail", "known") and sb in ("fail", "known"):
            if _same_cause(ta, tb) is False:
                ca, cb = _cause(ta), _cause(tb)
                detail = (f"A: {', '.join(ca[0])} {ca[1]} / B: {', '.join(cb[0])} {cb[1]}")
                out.changed_cause.append(Change(nodeid, ta["outcome"], tb["outcome"], reqs, detail))
            elif sa != sb:  # the same failure became known, or a known one became unexpected
                out.changed_cause.append(Change(nodeid, ta["outcome"], tb["outcome"], reqs,
                                                "same cause; expectation " + ("added" if sb == "known" else "gone")))
            else:
                out.unchanged += 1
        elif sa == "not judged" and sb != "not judged":
            out.newly_judged.append(change)
        elif sa != "not judged" and sb == "not judged":
            out.no_longer_judged.append(Change(nodeid, ta["outcome"], tb["outcome"], reqs,
                                               (tb.get("message") or "")[:200]))
        else:
            out.unchanged += 1
    return out


def compare_from_args(args: Any) -> int:
    """Print the comparison as Markdown; ``--out DIR`` also writes compare.md and compare.json.

    Exit code 1 when B regressed against A (a CI gate between two versions), else 0."""
    diff = diff_runs(load_run(args.run_a), load_run(args.run_b), str(args.run_a), str(args.run_b))
    text = diff.to_markdown()
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        (out / "compare.json").write_text(json.dumps(diff.to_dict(), indent=2) + "\n")
    return 1 if diff.regressed else 0
