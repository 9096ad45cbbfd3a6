"""Report writers: ``report.json`` (machine), ``summary.md`` and ``report.html`` (human; the latter written by
``suite/reporting/report_html.py`` from the report.json data). ``junit.xml`` is pytest's own.

Writers read results and the requirement catalogue, never tests. ``summary.md`` answers, in order: what is
the verdict, which requirements broke (with their sentence, the failing request and the difference), and
which requirements no test exercised.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tokenspec.core.version import __version__
from tokenspec.suite.engine.results import (
    CONTRACT_VERSION,
    LEVELS,
    TestResult,
    exit_code,
    inconclusive,
    is_failure,
    summarise,
)
from tokenspec.suite.reporting.causes import Cause, causes
from tokenspec.suite.reporting.coverage import blind_spot_line, counts_by_level, unjudged


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
    #: The servers the run lost (``tokenspec.core.liveness.Loss`` as dicts, role named by the run's URLs).
    lost: tuple[dict[str, str], ...] = ()
    #: Where each setting that is not a default came from (``RunConfig.origins``: setting -> origin).
    settings: dict[str, str] = field(default_factory=dict)


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
        "settings": info.settings,
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
        "causes": [c.to_dict() for c in causes(results)],
        "unjudged": [u.to_dict() for u in unjudged(results)],
        "tests": [r.to_dict() for r in sorted(results, key=lambda r: r.nodeid)],
    }


def write_reports(out: Path, info: RunInfo, results: list[TestResult], collection_errors: list[str] | None = None,
                  capabilities: dict | None = None) -> dict:
    """Write report.json, summary.md and report.html into ``out``; returns report.json's data."""
    out.mkdir(parents=True, exist_ok=True)
    report = report_dict(info, results, collection_errors, capabilities)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (out / "summary.md").write_text(summary_markdown(info, results, capabilities))
    _prune_bodies(out, results)
    from tokenspec.suite.reporting.report_html import write_html

    write_html(out, report)
    return report


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
    from tokenspec.core.liveness import Loss

    summary = summarise(results)
    losses = [Loss(**loss) for loss in info.lost] if info is not None else []
    what = "; ".join(loss.sentence() for loss in losses) or (
        "the " + " and ".join(sorted({r.lost for r in results if r.lost})) + " stopped answering")
    stopped = sum(1 for r in results if r.lost)
    failed = sum(summary.by_level[lvl]["failed"] for lvl in LEVELS)
    return (f"INCONCLUSIVE: {what}; no verdict; {stopped} test(s) not tested for that; of the tests that ran,"
            f" {summary.counts['passed']} passed and {failed} failed unexpectedly{notes}")


def cause_lines(found: list[Cause], limit: int = 5) -> list[str]:
    """The causes as a terminal shows them: ``RENDER-005 (MUST) x89: <what failed>``, an example test, and where
    the decoded token ids part. What a person reads before anyone opens a report."""
    from tokenspec.suite.oracles.token_text import first_difference

    lines = []
    for cause in found[:limit]:
        example = cause.example
        whose = "" if cause.charged_to == "target" else f" [the {cause.charged_to}'s answers]"
        others = f" (and {len(cause.ways) - 1} other way(s) it showed)" if len(cause.ways) > 1 else ""
        lines.append(f"{cause.requirement} ({cause.level}) x{len(cause.tests)}{whose}: {cause.summary}{others}")
        lines.append(f"    e.g. {example.nodeid}")
        if example.expected_text or example.actual_text:
            lines.append(f"    {first_difference(example.expected_text, example.actual_text)[:300]}")
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more (summary.md, report.html)")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_markdown(info: RunInfo, results: list[TestResult], capabilities: dict | None = None) -> str:
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    summary = summarise(results)
    blind = blind_spot_line([u.to_dict() for u in unjudged(results)])
    lines = [
        f"# tokenspec conformance report: {headline(results, info)}",
        "",
        *([f"**Blind spots:** {blind} (the list is at the end)", ""] if blind else []),
        *_not_tested_lines(results, capabilities),
        f"- target: `{info.target}`; engine: `{info.engine}`; reference: `{info.reference}`; model: `{info.model}`",
        f"- started {info.started_at}, {info.duration_s:.1f} s, seed {info.seed}, tokenspec {__version__},"
        f" runner contract {CONTRACT_VERSION}",
        f"- expectations: {info.expectations or 'none'}; profile: {info.profile or 'none (the probe decided)'}",
        *([f"- settings: {_settings_line(info.settings)}"] if info.settings else []),
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
    found = causes(results)
    if found:
        total = sum(len(c.tests) for c in found)
        lines += [f"## Unexpected failures: {len(found)} unique cause(s) of {total} failure(s)", ""]
        for cause in found:
            lines += _cause_lines(cause, catalogue)
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


def _cause_lines(cause: Cause, catalogue: dict) -> list[str]:
    """One cause in summary.md: its requirement sentence, one failure in full, the other tests named."""
    from tokenspec.suite.oracles.token_text import first_difference

    r = cause.example
    whose = "" if cause.charged_to == "target" else f", the {cause.charged_to}'s answers: not the target's verdict"
    lines = [f"### {cause.requirement} ({cause.level}{whose}): {len(cause.tests)} test(s)", ""]
    if cause.requirement in catalogue:
        lines.append(f"**{cause.requirement}** ({catalogue[cause.requirement].level}):"
                     f" {catalogue[cause.requirement].statement}")
    if len(cause.ways) > 1:
        lines += ["", "How it showed:", ""] + [f"- {n} x `{sig}`" for sig, n in cause.ways]
    lines += ["", f"Example: {r.outcome.upper()} `{r.nodeid}`", "", "```", r.message.strip()[:3000], "```"]
    if r.expected_text or r.actual_text:
        lines += ["", f"Token ids as text: {first_difference(r.expected_text, r.actual_text)}"]
    if r.reproduce:
        lines += ["", "Reproduce:", "", "```sh", r.reproduce, "```"]
    if len(cause.tests) > 1:
        lines += ["", f"The other {len(cause.tests) - 1} test(s) with this cause:", ""]
        lines += [f"- `{t.nodeid}`" for t in cause.tests[1:]]
    return [*lines, ""]


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


def _settings_line(origins: dict[str, str]) -> str:
    """Which settings came from where: ``from tokenspec.toml: target, profile; from the command line: seed``."""
    by_origin: dict[str, list[str]] = {}
    for name, origin in origins.items():
        by_origin.setdefault(origin, []).append(name)
    return "; ".join(f"from {'the command line' if origin == 'command line' else f'`{origin}`'}: {', '.join(names)}"
                     for origin, names in by_origin.items())
