"""Which requirements a run judged, and for each one it did not: why, and the flag that would judge it.

A headline's "106 not tested" counts tests; a reader needs to know which *requirements* were never judged at
all (not merely some of their tests), because a requirement no test could reach is a blind spot of the run,
not a pass. A requirement is judged when at least one test citing it ran its checks (passed, failed, or a
known failure); it is blind when every test citing it was not tested, unsupported or broke before checking,
and unrun when no test of this run cites it (deselected by ``--level`` or ``-k``, or the suite has none).
``tokenspec run --require-judged LEVEL`` turns blind requirements at or above LEVEL into a failed run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tokenspec.suite.engine.results import LEVELS, TestResult

JUDGING_OUTCOMES = frozenset({"passed", "failed", "xfailed", "xpassed"})


@dataclass(frozen=True)
class Unjudged:
    """A requirement this run did not judge: why (each distinct reason of its tests) and what would judge it."""

    id: str
    level: str
    statement: str
    #: "not_tested" (the run lacked a route, URL or fact), "unsupported" (the target lacks the optional
    #: feature), "error" (its tests broke before checking), or "no_test" (no test of this run cites it).
    state: str
    reasons: tuple[str, ...] = ()
    enable: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "level": self.level, "statement": self.statement, "state": self.state,
                "reasons": list(self.reasons), "enable": list(self.enable)}


def _reason_and_hint(message: str) -> tuple[str, str]:
    """("generate: not hosted: ...", "pass --engine URL ...") from a not-tested or unsupported message."""
    text = message.removeprefix("not tested: ").removeprefix("unsupported: ")
    head, _, rest = text.partition("; pass ")
    return head.strip()[:200], (f"pass {rest.strip()}" if rest else "")


def unjudged(results: list[TestResult]) -> list[Unjudged]:
    """Every live requirement of the catalogue this run did not judge, strongest level first."""
    from tokenspec.specs.catalogue import load_catalogue

    outcomes: dict[str, list[TestResult]] = defaultdict(list)
    for r in results:
        for rid in r.requirement_ids:
            outcomes[rid].append(r)
    out = []
    for rid, req in load_catalogue().items():
        if req.withdrawn:
            continue
        tests = outcomes.get(rid, [])
        if any(t.outcome in JUDGING_OUTCOMES for t in tests):
            continue
        if not tests:
            out.append(Unjudged(rid, req.level, req.statement, "no_test",
                                ("no test of this run cites it (deselected by --level or -k, or the suite has none)",)))
            continue
        states = {t.outcome for t in tests}
        state = "not_tested" if "not_tested" in states else "error" if "error" in states else "unsupported"
        pairs = [_reason_and_hint(t.message) for t in tests if t.outcome in ("not_tested", "unsupported")]
        reasons = tuple(dict.fromkeys(p[0] for p in pairs)) or ("its tests broke before their checks ran",)
        enable = tuple(dict.fromkeys(p[1] for p in pairs if p[1]))
        out.append(Unjudged(rid, req.level, req.statement, state, reasons, enable))
    return sorted(out, key=lambda u: (LEVELS.index(u.level), u.id))


def blind(results: list[TestResult], level: str) -> list[Unjudged]:
    """The requirements at ``level`` or stronger that tests of this run cite but none judged (what
    ``--require-judged`` fails on). Unsupported ones are the target's declared absence, not the run's gap."""
    threshold = LEVELS.index(level.upper())
    return [u for u in unjudged(results) if LEVELS.index(u.level) <= threshold and u.state in ("not_tested", "error")]


def counts_by_level(items: list[Unjudged]) -> dict[str, int]:
    return {lvl: sum(1 for u in items if u.level == lvl) for lvl in LEVELS}


def _short(reason: str, limit: int = 60) -> str:
    """A reason cut for one line: before its parenthesis, then at a word, never inside one."""
    reason = reason.split(" (")[0]
    if len(reason) <= limit:
        return reason
    return reason[:limit].rsplit(" ", 1)[0] + "…"


def blind_spot_line(items: list[dict]) -> str:
    """The run's blind spots in one line, for the banner: the MUST requirements never judged (else the weakest
    level with some), and the reasons shared by most of them with what would judge them ("49 MUST never judged:
    41 generate: not hosted (pass --engine URL), 8 no test in this run"). "" when every requirement was judged."""
    for level in LEVELS:
        mine = [u for u in items if u["level"] == level]
        if mine:
            break
    else:
        return ""
    why: dict[str, int] = defaultdict(int)
    for u in mine:
        reason = _short(": ".join((u.get("reasons") or ["?"])[0].split(": ")[:2]))
        if u["state"] == "no_test":
            reason = "no test of this run cites them"
        hint = (u.get("enable") or [""])[0].split(" (")[0]
        why[f"{reason} ({hint})" if hint else reason] += 1
    ranked = sorted(why.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{n} {reason}" for reason, n in ranked[:3])
    more = f", {sum(n for _, n in ranked[3:])} for other reasons" if len(ranked) > 3 else ""
    return f"{len(mine)} {level} never judged: {shown}{more}"
