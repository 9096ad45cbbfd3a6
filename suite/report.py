"""Report writers: ``report.json`` (machine), ``summary.md`` and ``report.html`` (human; the latter written by
``suite/report_html.py`` from the report.json data). ``junit.xml`` is pytest's own.

Writers read results and the requirement catalogue, never tests. ``summary.md`` answers, in order: what is
the verdict, which requirements broke (with their sentence, the failing request and the difference), and
which requirements no test exercised.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tokenspec import __version__
from tokenspec.suite.coverage import counts_by_level, unjudged
from tokenspec.suite.results import (CONTRACT_VERSION, LEVELS, TestResult, exit_code, inconclusive, is_failure,
                                     summarise)


@dataclass(frozen=True)
class RunInfo:
    target: str
    engine: str | None
    reference: str | None
    model: str | None
    seed: int | None
    started_at: str
    duration_s: float
    #: The expectations file's implementation, version and configuration ("" without one).
    expectations: str = ""
    profile: str = ""
    #: The ``tokenspec run ...`` command that replays this run ("" when pytest was started some other way).
    command: str = ""
    #: The signal that stopped the run ("SIGINT", "SIGTERM"; "" for a run that finished).
    interrupted: str = ""
    #: Tests collected: with an interrupted run, how many of them ran is the news.
    collected: int = 0
    #: TLS certificates were not verified (--insecure): said in the headline.
    insecure: bool = False
    #: The servers the run lost (``tokenspec.liveness.Loss`` as dicts, role named by the run's URLs).
    lost: tuple[dict[str, str], ...] = ()


def report_dict(info: RunInfo, results: list[TestResult], collection_errors: list[str] | None = None,
                capabilities: dict | None = None) -> dict:
    return {
        "headline": headline(results, info),
        "interrupted": info.interrupted,
        "lost_servers": list(info.lost),
        "collected": info.collected,
        "insecure": info.insecure,
        "retries": sum(r.retries for r in results),
        "contract": CONTRACT_VERSION,
        "expectations": info.expectations,
        "profile": info.profile,
        "capabilities": capabilities,
        "collection_errors": collection_errors or [],
        "tokenspec_version": __version__,
        "target": info.target,
        "engine": info.engine,
        "reference": info.reference,
        "model": info.model,
        "seed": info.seed,
        "command": info.command,
        "started_at": info.started_at,
        "duration_s": info.duration_s,
        "summary": summarise(results).to_dict(),
        "unjudged": [u.to_dict() for u in unjudged(results)],
        "tests": [r.to_dict() for r in sorted(results, key=lambda r: r.nodeid)],
    }


def write_reports(out: Path, info: RunInfo, results: list[TestResult], collection_errors: list[str] | None = None,
                  capabilities: dict | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report = report_dict(info, results, collection_errors, capabilities)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (out / "summary.md").write_text(summary_markdown(info, results, capabilities))
    _prune_bodies(out, results)
    from tokenspec.suite.report_html import write_html

    write_html(out, report)


def _prune_bodies(out: Path, results: list[TestResult]) -> None:
    """bodies/ holds this run's failing requests only (a report folder reused by a later run keeps no stale ones)."""
    folder = out / "bodies"
    if not folder.is_dir():
        return
    kept = {r.request_file for r in results if r.request_file}
    for path in folder.glob("*.bin"):
        if f"bodies/{path.name}" not in kept:
            path.unlink()


def headline(results: list[TestResult], info: RunInfo | None = None) -> str:
    """The verdict in one line: never a bare PASS over known failures or over what was not tested, and no
    verdict at all for a run that was stopped before its end."""
    summary = summarise(results)
    known_any = any(summary.by_level[lvl]["known"] for lvl in LEVELS)
    verdict = "FAIL" if exit_code(results) == 1 else "PASS WITH KNOWN FAILURES" if known_any else "PASS"
    notes = ""
    if info is not None and info.insecure:
        notes += "; TLS certificates NOT verified (--insecure)"
    if retried := sum(r.retries for r in results):
        notes += f"; {retried} request(s) retried after 429/503"
    if info is not None and info.interrupted:
        ran = f"{len(results)} of {info.collected} tests ran" if info.collected else f"{len(results)} tests ran"
        return (f"INTERRUPTED ({info.interrupted}): {ran}, no verdict; {summary.counts['passed']} passed,"
                f" {sum(summary.by_level[lvl]['failed'] for lvl in LEVELS)} failed unexpectedly so far{notes}")
    if inconclusive(results, info.lost if info is not None else ()):
        return _inconclusive_headline(results, info, notes)
    failed = ", ".join(f"{summary.by_level[lvl]['failed']} {lvl}" for lvl in LEVELS)
    known = ", ".join(f"{summary.by_level[lvl]['known']} {lvl}" for lvl in LEVELS)
    never = counts_by_level(unjudged(results))
    blind = ", ".join(f"{never[lvl]} {lvl}" for lvl in LEVELS)
    others = "".join(f"; {n} failure(s) of the {role}'s answers (not the target's)"
                     for role, n in sorted(summary.others.items()))
    return (f"{verdict}: {summary.counts['passed']} passed; unexpected failures {failed}; known failures {known};"
            f" {summary.counts['unsupported']} unsupported; {summary.counts['not_tested']} not tested;"
            f" requirements never judged {blind}{others}{notes}")


def _inconclusive_headline(results: list[TestResult], info: RunInfo | None, notes: str) -> str:
    """A run that lost a server: which one and when, what it stopped, and what was seen before; no verdict word."""
    from tokenspec.liveness import Loss

    summary = summarise(results)
    losses = [Loss(**loss) for loss in info.lost] if info is not None else []
    what = "; ".join(loss.sentence() for loss in losses) or (
        "the " + " and ".join(sorted({r.lost for r in results if r.lost})) + " stopped answering")
    stopped = sum(1 for r in results if r.lost)
    failed = sum(summary.by_level[lvl]["failed"] for lvl in LEVELS)
    return (f"INCONCLUSIVE: {what}; no verdict; {stopped} test(s) not tested for that; of the tests that ran,"
            f" {summary.counts['passed']} passed and {failed} failed unexpectedly{notes}")


def top_failing(results: list[TestResult], limit: int = 5) -> list[str]:
    """The requirements that broke most, unexpected failures first: ``RENDER-006 (MUST): 3 unexpected,
    1 known: <its sentence>``. What a terminal shows at the end of a run, before anyone opens a report."""
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        if is_failure(r.outcome) or r.outcome == "xfailed":
            for rid in r.failed_requirements or r.requirement_ids:
                counts[rid][0 if is_failure(r.outcome) else 1] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:limit]
    lines = []
    for rid, (unexpected, known) in ranked:
        req = catalogue.get(rid)
        what = ", ".join(part for part in (f"{unexpected} unexpected" if unexpected else "",
                                           f"{known} known" if known else "") if part)
        sentence = req.statement if req else ""
        lines.append(f"{rid} ({req.level if req else '?'}): {what}: "
                     f"{sentence[:100]}{'...' if len(sentence) > 100 else ''}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_markdown(info: RunInfo, results: list[TestResult], capabilities: dict | None = None) -> str:
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    summary = summarise(results)
    lines = [
        f"# tokenspec conformance report: {headline(results, info)}",
        "",
        *_not_tested_lines(results, capabilities),
        f"- target: `{info.target}`; engine: `{info.engine}`; reference: `{info.reference}`; model: `{info.model}`",
        f"- started {info.started_at}, {info.duration_s:.1f} s, seed {info.seed}, tokenspec {__version__},"
        f" runner contract {CONTRACT_VERSION}",
        f"- expectations: {info.expectations or 'none'}; profile: {info.profile or 'none (the probe decided)'}",
        "",
        "| total | " + " | ".join(summary.counts) + " |",
        "|---:|" + "---:|" * len(summary.counts),
        f"| {summary.total} | " + " | ".join(str(v) for v in summary.counts.values()) + " |",
        "",
        "| level | passed | failed | known failures |",
        "|---|---:|---:|---:|",
        *(f"| {lvl} | {summary.by_level[lvl]['passed']} | {summary.by_level[lvl]['failed']} |"
          f" {summary.by_level[lvl]['known']} |" for lvl in LEVELS),
        "",
        *_decision_lines(capabilities),
    ]
    failures = [r for r in results if is_failure(r.outcome)]
    if failures:
        lines += ["## Failures", ""]
        for r in sorted(failures, key=lambda r: (LEVELS.index(r.level), r.nodeid)):
            whose = "" if r.charged_to == "target" else f", the {r.charged_to}'s answer: not the target's verdict"
            lines.append(f"### {r.outcome.upper()} `{r.nodeid}` ({r.level}{whose})")
            for rid in r.failed_requirements or r.requirement_ids:
                if rid in catalogue:
                    lines.append(f"- **{rid}** ({catalogue[rid].level}): {catalogue[rid].statement}")
            lines += ["", "```", r.message.strip()[:3000], "```"]
            if r.reproduce:
                lines += ["Reproduce:", "", "```sh", r.reproduce, "```"]
            lines.append("")
    xfailed = [r for r in results if r.outcome == "xfailed"]
    if xfailed:
        lines += ["## Known failures (expectations)", "",
                  "| test | level | requirement | expectation and observation |", "|---|---|---|---|"]
        lines += [f"| `{r.nodeid}` | {r.level} | {', '.join(r.failed_requirements or r.requirement_ids)} |"
                  f" {_cell(r.message)[:400]} |" for r in xfailed]
        lines.append("")

    per_req: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        for rid in r.requirement_ids:
            per_req[rid][r.outcome] += 1
    lines += [
        "## Requirements",
        "",
        "| requirement | level | passed | failed | known | unsupported | not tested | statement |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    untested = []
    for rid, req in sorted(catalogue.items()):
        if req.withdrawn:
            continue
        counts = per_req.get(rid)
        if not counts:
            untested.append(rid)
            continue
        failed = sum(v for k, v in counts.items() if is_failure(k))
        lines.append(
            f"| {rid} | {req.level} | {counts.get('passed', 0)} | {failed} | {counts.get('xfailed', 0)} |"
            f" {counts.get('unsupported', 0)} | {counts.get('not_tested', 0)} | {_cell(req.statement)} |"
        )
    lines += ["", f"Requirements without a test in this run ({len(untested)}): {', '.join(untested) or 'none'}", ""]
    lines += unjudged_lines(results)
    return "\n".join(lines)


def unjudged_lines(results: list[TestResult]) -> list[str]:
    """The blind spots: per level, each requirement no test of this run judged, why, and what would judge it."""
    items = unjudged(results)
    if not items:
        return ["## Requirements never judged in this run", "", "None: every requirement was judged.", ""]
    lines = ["## Requirements never judged in this run", "",
             "Not one test of these ran its checks; a pass says nothing about them.", "",
             "| requirement | level | state | why | what would judge it |", "|---|---|---|---|---|"]
    lines += [f"| {u.id} | {u.level} | {u.state.replace('_', ' ')} | {_cell('; '.join(u.reasons))[:300]} |"
              f" {_cell('; '.join(u.enable)) or '-'} |" for u in items]
    return [*lines, ""]


def _not_tested_lines(results: list[TestResult], capabilities: dict | None) -> list[str]:
    """What this run could not judge, and why, right under the headline."""
    reasons: dict[str, int] = defaultdict(int)
    for r in results:
        if r.outcome in ("not_tested", "unsupported"):
            reasons[f"{r.outcome.replace('_', ' ')}: {r.message.split(';')[0].removeprefix('not tested: ')}"] += 1
    if not reasons:
        return []
    lines = ["Not judged in this run:", ""]
    lines += [f"- {n} test(s) {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    return [*lines, ""]


def _decision_lines(capabilities: dict | None) -> list[str]:
    if not capabilities:
        return []
    parsers = capabilities.get("parsers") or {}
    generation = capabilities.get("generation") or {}
    lines = ["## Capability decisions", "",
             f"Parser families: reasoning `{parsers.get('reasoning')}`, tool calls `{parsers.get('tool')}`.", "",
             f"API generation: {' or '.join(generation.get('candidates') or []) or 'none of the spec'}"
             f" ({generation.get('evidence', 'not probed')}).", "",
             "| feature | status | source | evidence |", "|---|---|---|---|"]
    lines += [f"| {d['feature']} | {d['status']} | {d['source']} | {_cell(d['evidence'])[:300]} |"
              for d in capabilities.get("decisions") or []]
    return [*lines, ""]

