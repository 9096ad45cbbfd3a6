"""``report.html``: one self-contained page a person reads after a run (no script, font or image from anywhere).

It is written from the ``report.json`` data (and the requirement catalogue), so any report folder can be
re-rendered. In order: the verdict with its honest counts, pass rates per requirement area (inline SVG), the
requirement table, then every failure with its evidence: the requirement sentence, the message, the request,
expected and actual side by side with the difference highlighted, a ``curl`` that replays the request from the
report folder (its body is ``bodies/<test>.bin``), and the ``tokenspec run`` command that replays the test.

Everything from a run is escaped: messages and bodies can hold arbitrary bytes and markup.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from tokenspec.suite.engine.results import LEVELS, TestResult, is_failure, safe_name
from tokenspec.suite.reporting.causes import Cause, causes
from tokenspec.suite.reporting.coverage import blind_spot_line

_FIELDS = frozenset(TestResult.__dataclass_fields__)

VERDICTS = ("PASS WITH KNOWN FAILURES", "PASS", "FAIL", "INTERRUPTED", "INCONCLUSIVE")
#: Outcome -> the chart's segment it counts in.
SEGMENTS = (("passed", "passed", "#2e7d32"), ("failed", "failed", "#c62828"), ("known", "known failure", "#f0a30a"),
            ("unjudged", "unsupported / not tested", "#9e9e9e"))
MAX_BODY_SHOWN = 20_000
#: Equal lines kept around each difference; longer equal runs are folded.
CONTEXT = 3
#: Largest product of the two sides' lengths (lines, or tokens of a line) aligned element by element.
DIFF_BUDGET = 250_000
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
_K_IDENT = re.compile(r"^[\w:+\-.\[\]\\/]+$")


def failure_anchor(nodeid: str) -> str:
    """The id of a test's failure on the page: another page links to ``report.html#<anchor>``."""
    return f"failure-{safe_name(nodeid).replace('.', '_')}"  # no dots: the id is also a plain CSS selector


def write_html(out_dir: Path, report: dict[str, Any]) -> Path:
    """Write ``out_dir/report.html`` from a report.json dict; returns its path."""
    path = Path(out_dir) / "report.html"
    path.write_text(render_html(report, Path(out_dir)), encoding="utf-8", errors="backslashreplace")
    return path


def render_html(report: dict[str, Any], out_dir: Path | None = None) -> str:
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    tests = report.get("tests") or []
    found = causes([TestResult(**{k: v for k, v in t.items() if k in _FIELDS}) for t in tests])
    parts = [
        _head(report),
        _verdict(report, tests, found),
        _causes(report, found, catalogue, out_dir),
        _run_info(report),
        _area_chart(tests),
        _requirement_table(tests, catalogue, found),
        _unjudged(report),
        _known_failures(report, tests, catalogue, out_dir),
        "</main></body></html>\n",
    ]
    return "\n".join(parts)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:1.5em}
h1{font-size:1.1em;color:#555;font-weight:600;margin:0 0 .4em}
h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
code,pre,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:13px}
pre{background:#fff;border:1px solid #ddd;border-radius:4px;padding:.6em;overflow:auto;max-height:28em;
    white-space:pre-wrap;word-break:break-all;margin:.3em 0}
#verdict{border-radius:8px;padding:1em 1.3em;color:#fff;margin-bottom:1em}
#verdict .word{font-size:2.6em;font-weight:800;letter-spacing:.02em;line-height:1.1}
#verdict.pass{background:#2e7d32}#verdict.known{background:#9a6700}#verdict.fail{background:#c62828}
#verdict.inconclusive{background:#4a4a6a}
#verdict table{border-collapse:collapse;margin-top:.6em;color:#fff}
#verdict td,#verdict th{padding:.15em .9em .15em 0;text-align:left}
#verdict ul{margin:.4em 0 0;padding-left:1.2em}
table.reqs{border-collapse:collapse;width:100%;background:#fff}
table.reqs td,table.reqs th{border:1px solid #ddd;padding:.25em .45em;vertical-align:top;text-align:left}
table.reqs td.n{text-align:right;font-variant-numeric:tabular-nums}
.st-failing{color:#c62828;font-weight:700}.st-known{color:#9a6700;font-weight:600}.st-passing{color:#2e7d32}
.st-unjudged,.st-untested{color:#777}
dl.info{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:0}
dl.info dt{color:#555}dl.info dd{margin:0;word-break:break-all}
.failure{background:#fff;border:1px solid #ddd;border-left:5px solid #c62828;border-radius:4px;
    padding:.6em 1em;margin:1em 0}
.cause{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fff}
.cause h3{margin:0 0 .3em}
#verdict .line{margin:.25em 0}#verdict a{color:#fff;text-decoration:underline}
#verdict .lost,#verdict .causes,#verdict .blind{font-weight:600}
.first-difference{background:#fffbea;border:1px solid #eed;padding:.3em .5em;margin:.3em 0}
details.failure{border-left-color:#f0a30a}
.failure h3,.failure summary{margin:0;font-size:1em;word-break:break-all}
.badge{display:inline-block;border-radius:3px;padding:0 .4em;color:#fff;font-size:.85em;font-weight:700;
    margin-right:.4em}
.b-failed,.b-error,.b-xpassed{background:#c62828}.b-xfailed{background:#9a6700}
.label{color:#555;font-weight:600;margin-top:.7em}
.diff{display:grid;grid-template-columns:1fr 1fr;gap:.6em}
.diff pre{margin:0}
.diff .line{display:block;min-height:1.2em}
.diff .fold{color:#777;font-style:italic}
del.diff-del{background:#ffc9c9;color:#7f0000;text-decoration:line-through}
ins.diff-ins{background:#c3f0c8;color:#00450a;text-decoration:none}
.line.gone{background:#fff0f0}.line.new{background:#effaf0}.line.changed{background:#fffbea}
#area-chart{max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1b1b1b}
a{color:#0b5cad}
"""


def _head(report: dict[str, Any]) -> str:
    verdict = _verdict_word(report)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>tokenspec: {_e(verdict)} ({_e(report.get('target') or '')})</title>\n"
            f"<style>{CSS}</style></head>\n<body><main>\n"
            f"<h1>tokenspec conformance report</h1>")


def _verdict_word(report: dict[str, Any]) -> str:
    headline = str(report.get("headline") or "")
    if report.get("interrupted"):
        return "INTERRUPTED"
    if report.get("lost_servers"):
        return "INCONCLUSIVE"
    for word in VERDICTS:
        if headline.startswith(word + ":"):
            return word
    tests = report.get("tests") or []
    if any(t.get("level") == "MUST" and is_failure(t.get("outcome", "")) for t in tests):
        return "FAIL"
    return "PASS WITH KNOWN FAILURES" if any(t.get("outcome") == "xfailed" for t in tests) else "PASS"


def _verdict(report: dict[str, Any], tests: list[dict[str, Any]], found: list[Cause]) -> str:
    """The first screen: the verdict, the servers a run lost, the blind spots in one line, the causes linked."""
    word = _verdict_word(report)
    css = {"PASS": "pass", "PASS WITH KNOWN FAILURES": "known", "FAIL": "fail", "INTERRUPTED": "known",
           "INCONCLUSIVE": "inconclusive"}[word]
    summary = report.get("summary") or {}
    by_level = summary.get("by_level") or {}
    rows = "".join(
        f"<tr><th>{lvl}</th><td>{(by_level.get(lvl) or {}).get('failed', 0)}</td>"
        f"<td>{(by_level.get(lvl) or {}).get('known', 0)}</td><td>{(by_level.get(lvl) or {}).get('passed', 0)}</td>"
        "</tr>" for lvl in LEVELS)
    reasons: dict[str, int] = defaultdict(int)
    for t in tests:
        if t.get("outcome") in ("not_tested", "unsupported"):
            why = str(t.get("message", "")).split(";")[0].removeprefix("not tested: ").removeprefix("unsupported: ")
            reasons[f"{t['outcome'].replace('_', ' ')}: {why}"] += 1
    reason_items = "".join(f"<li>{n} test(s) {_e(reason)}</li>"
                           for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    broken = report.get("collection_errors") or []
    lost = "".join(f'<div class="line lost">No verdict: the {_e(loss["role"])} ({_e(loss["url"])}) stopped answering'
                   f' at {_e(loss["at"])}{" during " + _e(loss["during"]) if loss.get("during") else ""}; the tests'
                   " that needed it after that are not tested. Restart it and run again.</div>\n"
                   for loss in report.get("lost_servers") or [])
    blind = blind_spot_line(report.get("unjudged") or [])
    blind_html = (f'<div class="line blind">{_e(blind)} (<a href="#unjudged">the list</a>)</div>\n' if blind else "")
    target_causes = [c for c in found if c.charged_to == "target"]
    cause_links = ", ".join(f'<a href="#{c.id}">{_e(c.requirement)} &times;{len(c.tests)}</a>'
                            for c in target_causes[:6])
    more = f" and {len(target_causes) - 6} more" if len(target_causes) > 6 else ""
    failures = sum(len(c.tests) for c in target_causes)
    causes_html = (f'<div class="line causes">{len(target_causes)} unique cause{"s" if len(target_causes) != 1 else ""}'
                   f" of {failures} unexpected failure{'s' if failures != 1 else ''}: {cause_links}{more}</div>\n"
                   if target_causes else "")
    return (
        f'<section id="verdict" class="{css}"><div class="word">{_e(word)}</div>\n'
        + lost + causes_html + blind_html +
        f'<div class="line">{summary.get("total", len(tests))} tests: {summary.get("passed", 0)} passed,'
        f' {summary.get("failed", 0)} failed, {summary.get("errors", 0)} errors, {summary.get("xpassed", 0)} xpassed'
        f' (stale expectations), {summary.get("xfailed", 0)} known failures, {summary.get("unsupported", 0)}'
        f' unsupported, {summary.get("not_tested", 0)} not tested</div>\n'
        "<table><tr><th>level</th><th>unexpected failures</th><th>known failures</th><th>passed</th></tr>"
        f"{rows}</table>\n"
        + (f"<details><summary>Not judged in this run: {sum(reasons.values())} tests</summary>"
           f"<ul>{reason_items}</ul></details>\n" if reason_items else "")
        + (f"<div>{len(broken)} suite module(s) failed to load: the run is incomplete</div><ul>"
           + "".join(f"<li class=\"mono\">{_e(b[:500])}</li>" for b in broken) + "</ul>\n" if broken else "")
        + "</section>"
    )


def _unjudged(report: dict[str, Any]) -> str:
    """The run's blind spots: each requirement not one test judged, with why and the flag that would judge it."""
    items = report.get("unjudged") or []
    if not items:
        return ('<section id="unjudged"><h2>Requirements never judged</h2>'
                "<p>None: every requirement was judged.</p></section>")
    rows = "".join(
        f'<tr class="st-unjudged"><td class="mono">{_e(u["id"])}</td><td>{_e(u["level"])}</td>'
        f'<td>{_e(str(u["state"]).replace("_", " "))}</td><td>{_e("; ".join(u.get("reasons") or []))}</td>'
        f'<td>{_e("; ".join(u.get("enable") or []) or "-")}</td><td>{_e(u.get("statement", ""))}</td></tr>'
        for u in items)
    per_level = ", ".join(f"{sum(1 for u in items if u['level'] == lvl)} {lvl}" for lvl in LEVELS)
    return (f'<section id="unjudged"><h2>Requirements never judged ({per_level})</h2>'
            "<p>Not one test of these ran its checks in this run: a pass says nothing about them.</p>"
            f"<details><summary>{len(items)} requirements, why, and what would judge each</summary>"
            "<table><tr><th>requirement</th><th>level</th><th>state</th><th>why</th><th>what would judge it</th>"
            f"<th>statement</th></tr>{rows}</table></details></section>")


def _run_info(report: dict[str, Any]) -> str:
    rows = [
        ("target", report.get("target")), ("engine", report.get("engine")), ("reference", report.get("reference")),
        ("model", report.get("model")), ("seed", report.get("seed")),
        ("started", f"{report.get('started_at', '')}, {float(report.get('duration_s') or 0):.1f} s"),
        ("expectations", report.get("expectations") or "none"),
        ("profile", report.get("profile") or "none (the probe decided)"),
        ("tokenspec", f"{report.get('tokenspec_version', '')}, runner contract {report.get('contract', '')}"),
        ("replay the run", report.get("command") or "(not started by tokenspec run)"),
    ]
    items = "".join(f"<dt>{_e(k)}</dt><dd class=\"mono\">{_e('none' if v is None else v)}</dd>" for k, v in rows)
    return f'<section id="run"><dl class="info">{items}</dl></section>'


def _segment(outcome: str) -> str:
    if outcome == "passed":
        return "passed"
    if is_failure(outcome):
        return "failed"
    return "known" if outcome == "xfailed" else "unjudged"


def area_counts(tests: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per requirement area (ID prefix), the tests in each chart segment; a test counts in every area it cites."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys((s[0] for s in SEGMENTS), 0))
    for t in tests:
        for area in dict.fromkeys(rid.rsplit("-", 1)[0] for rid in t.get("requirement_ids") or []):
            counts[area][_segment(t.get("outcome", ""))] += 1
    return dict(sorted(counts.items()))


def _area_chart(tests: list[dict[str, Any]]) -> str:
    counts = area_counts(tests)
    if not counts:
        return '<h2>Pass rate by area</h2><p id="area-chart">No tests ran.</p>'
    label_w, bar_w, row_h, top = 90, 560, 26, 34
    notes = {}
    for area, seg in counts.items():
        judged = seg["passed"] + seg["failed"] + seg["known"]
        rate = f"{100 * seg['passed'] / judged:.0f}% of judged" if judged else "none judged"
        notes[area] = (f"{seg['passed']}/{sum(seg.values())} passed ({rate}); {seg['failed']} failed,"
                       f" {seg['known']} known, {seg['unjudged']} not judged")
    width = label_w + bar_w + 16 + 7 * max(len(n) for n in notes.values())
    height = top + row_h * len(counts) + 8
    legend, x = [], label_w
    for _key, label, colour in SEGMENTS:
        legend.append(f'<rect x="{x}" y="6" width="12" height="12" fill="{colour}"></rect>'
                      f'<text x="{x + 16}" y="16">{_e(label)}</text>')
        x += 30 + 7 * len(label)
    rows = []
    for i, (area, seg) in enumerate(counts.items()):
        y = top + i * row_h
        total = sum(seg.values())
        rows.append(f'<g class="bar" data-area="{_e(area)}"><text x="{label_w - 8}" y="{y + 15}" '
                    f'text-anchor="end">{_e(area)}</text>')
        x0 = float(label_w)
        for key, label, colour in SEGMENTS:
            if not seg[key]:
                continue
            w = bar_w * seg[key] / total
            rows.append(f'<rect class="seg seg-{key}" x="{x0:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}"'
                        f' fill="{colour}"><title>{_e(area)}: {seg[key]} {_e(label)}</title></rect>')
            x0 += w
        rows.append(f'<text x="{label_w + bar_w + 8}" y="{y + 15}">{_e(notes[area])}</text></g>')
    return (f'<h2>Pass rate by area</h2>\n<svg id="area-chart" role="img" width="{width}" height="{height}"'
            f' viewBox="0 0 {width} {height}" aria-label="tests per requirement area by outcome">'
            f'<title>tests per requirement area by outcome</title>{"".join(legend)}{"".join(rows)}</svg>')


def _requirement_table(tests: list[dict[str, Any]], catalogue: dict, found: list[Cause]) -> str:
    first_cause: dict[str, str] = {}
    for cause in found:
        first_cause.setdefault(cause.requirement, cause.id)
    for cause in found:
        for t in cause.tests:
            for rid in t.failed_requirements or t.requirement_ids:
                first_cause.setdefault(rid, cause.id)
    per_req: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in tests:
        for rid in t.get("requirement_ids") or []:
            per_req[rid][t.get("outcome", "")] += 1
    rows, untested = [], []
    for rid, req in sorted(catalogue.items()):
        counts = per_req.get(rid)
        if req.withdrawn and not counts:
            continue
        if not counts:
            untested.append(rid)
            continue
        failed = sum(v for k, v in counts.items() if is_failure(k))
        known, passed = counts.get("xfailed", 0), counts.get("passed", 0)
        unjudged = counts.get("unsupported", 0) + counts.get("not_tested", 0)
        status = ("failing" if failed else "known" if known else "passing" if passed else "unjudged")
        text = {"failing": "FAILING", "known": "known failure", "passing": "passing", "unjudged": "not judged"}[status]
        if status == "failing" and rid in first_cause:
            text = f'<a href="#{first_cause[rid]}">FAILING</a>'
        elif status == "known":
            text = '<a href="#known-failures">known failure</a>'
        rows.append(f'<tr id="req-{_e(rid)}"><td class="mono">{_e(rid)}</td><td>{_e(req.level)}</td>'
                    f"<td>{_e(req.statement)}</td><td class=\"n\">{passed}</td><td class=\"n\">{failed}</td>"
                    f"<td class=\"n\">{known}</td><td class=\"n\">{unjudged}</td>"
                    f'<td class="st-{status}">{text}</td></tr>')
    return (
        '<h2>Requirements</h2>\n<table class="reqs" id="requirements"><thead><tr><th>requirement</th><th>level</th>'
        "<th>statement</th><th>passed</th><th>failed</th><th>known</th><th>not judged</th><th>status</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>\n"
        f"<p>Requirements without a test in this run ({len(untested)}): "
        f"<span class=\"mono\">{_e(', '.join(untested) or 'none')}</span></p>"
    )


def _causes(report: dict[str, Any], found: list[Cause], catalogue: dict, out_dir: Path | None) -> str:
    """One card per cause: its count and requirement, one failure in full, the other tests listed collapsed."""
    failures = sum(len(c.tests) for c in found)
    out = [f'<section id="causes"><h2 id="failures">Unexpected failures: {len(found)} unique'
           f' cause{"s" if len(found) != 1 else ""} of {failures} failure{"s" if failures != 1 else ""}</h2>']
    if not found:
        out.append("<p>None.</p>")
    for cause in found:
        whose = "" if cause.charged_to == "target" else f" (the {_e(cause.charged_to)}'s answers, not the target's)"
        rid = cause.requirement
        sentence = f" ({_e(catalogue[rid].level)}): {_e(catalogue[rid].statement)}" if rid in catalogue else ""
        ways = "".join(f"<li>{n} &times; <span class=\"mono\">{_e(sig)}</span></li>" for sig, n in cause.ways)
        others = cause.tests[1:]
        listed = "".join(
            f'<li id="{_e(failure_anchor(t.nodeid))}"><span class="mono">{_e(t.nodeid)}</span>: '
            f"{_e(_first_line(t.message))}</li>" for t in others)
        rest = (f"<details class=\"others\"><summary>{len(others)} other test{'s' if len(others) != 1 else ''} with"
                f" this cause</summary><ul>{listed}</ul></details>" if others else "")
        out.append(
            f'<section class="cause" id="{cause.id}"><h3><span class="badge b-failed">{_e(cause.level)}</span>'
            f'<a class="mono" href="#req-{_e(rid)}">{_e(rid)}</a> broken in {len(cause.tests)}'
            f" test{'s' if len(cause.tests) != 1 else ''}{whose}"
            f' <a href="#{cause.id}" title="link to this cause">#</a></h3>'
            f'<p class="sentence">{_e(rid)}{sentence}</p>'
            + (f'<details class="ways"><summary>{len(cause.ways)} ways it showed</summary><ul>{ways}</ul></details>'
               if len(cause.ways) > 1 else "") +
            f'<div class="label">example</div>'
            f"{_failure(report, cause.example.to_dict(), catalogue, out_dir, collapsed=False)}{rest}</section>")
    out.append("</section>")
    return "\n".join(out)


def _first_line(message: str, limit: int = 240) -> str:
    line = next((part.strip() for part in str(message).splitlines() if part.strip()), "")
    return line[:limit] + ("..." if len(line) > limit else "")


def _known_failures(report: dict[str, Any], tests: list[dict[str, Any]], catalogue: dict,
                    out_dir: Path | None) -> str:
    known = sorted((t for t in tests if t.get("outcome") == "xfailed"), key=lambda t: t["nodeid"])
    out = [f'<h2 id="known-failures">Known failures ({len(known)})</h2>']
    if not known:
        out.append("<p>None.</p>")
    else:
        out.append("<p>Each explained by an entry of the expectations file; open one for its evidence.</p>")
    out += [_failure(report, t, catalogue, out_dir, collapsed=True) for t in known]
    return "\n".join(out)


def _failure(report: dict[str, Any], t: dict[str, Any], catalogue: dict, out_dir: Path | None,
             collapsed: bool) -> str:
    nodeid, outcome = t["nodeid"], t.get("outcome", "")
    anchor = failure_anchor(nodeid)
    title = (f'<span class="badge b-{_e(outcome)}">{_e(outcome.upper())}</span><span class="mono">{_e(nodeid)}</span>'
             f' ({_e(t.get("level", ""))}) <a href="#{_e(anchor)}" title="link to this failure">#</a>')
    body = []
    reqs = []
    for rid in t.get("failed_requirements") or t.get("requirement_ids") or []:
        req = catalogue.get(rid)
        sentence = f" ({_e(req.level)}): {_e(req.statement)}" if req else ""
        reqs.append(f'<li><a class="mono" href="#req-{_e(rid)}">{_e(rid)}</a>{sentence}</li>')
    body.append(f'<ul class="reqs-cited">{"".join(reqs)}</ul>')
    if t.get("expectation"):
        body.append(f'<div class="label">expectation</div><div>{_e(t["expectation"])}</div>')
    if t.get("expected_text") or t.get("actual_text"):
        body.append(_text_diff(t.get("expected_text", ""), t.get("actual_text", "")))
    body.append(f'<div class="label">message</div><pre class="message">{_e(str(t.get("message", ""))[:20_000])}'
                "</pre>")
    body.append(_request(t, out_dir))
    if t.get("expected") or t.get("actual"):
        ids = _diff(t.get("expected", ""), t.get("actual", ""), t.get("comparison", ""))
        body.append(f"<details><summary>the token ids</summary>{ids}</details>" if t.get("expected_text") else ids)
    curl = replay_curl(t)
    if curl:
        where = " (run it in the report folder: the body is the file beside this page)" if t.get("request_file") else ""
        body.append(f'<div class="label">replay the request{where}</div><pre class="curl">{_e(curl)}</pre>')
    command = report.get("command")
    if command:
        replay = replay_test_command(command, nodeid)
        body.append(f'<div class="label">replay the test</div><pre class="replay">{_e(replay)}</pre>')
    inner = "\n".join(body)
    if collapsed:
        return f'<details class="failure" id="{_e(anchor)}"><summary>{title}</summary>\n{inner}</details>'
    return f'<section class="failure" id="{_e(anchor)}"><h3>{title}</h3>\n{inner}</section>'


def replay_test_command(command: str, nodeid: str) -> str:
    """The run's replay command narrowed to one test: the run's own ``-k`` (if any) replaced by the test's."""
    try:
        words = shlex.split(command)
    except ValueError:
        return f"{command} -k {shlex.quote(replay_keyword(nodeid))}"
    kept = [w for i, w in enumerate(words) if w != "-k" and (i == 0 or words[i - 1] != "-k")]
    return shlex.join([*kept, "-k", replay_keyword(nodeid)])


def replay_keyword(nodeid: str) -> str:
    """A pytest ``-k`` expression selecting this test: its module and name (parameters too when -k allows them)."""
    path, _, name = nodeid.rpartition("::")
    module = path.rsplit("/", 1)[-1].split("::")[0]
    if not _K_IDENT.match(name):
        name = name.split("[", 1)[0]
    return f"{module} and {name}" if module and _K_IDENT.match(module) else name


def replay_curl(t: dict[str, Any]) -> str:
    """The curl of the failing request: its body read from ``bodies/`` when saved, else the inline reproduction."""
    if not t.get("request_file"):
        return str(t.get("reproduce") or "")
    parts = ["curl", "-sS", "-X", t.get("request_method") or "POST", t.get("request_url", "")]
    if t.get("request_content_type"):
        parts += ["-H", f"content-type: {t['request_content_type']}"]
    parts += ["--data-binary", f"@{t['request_file']}"]
    return shlex.join(parts)


def _request(t: dict[str, Any], out_dir: Path | None) -> str:
    if not t.get("request_url"):
        return ""
    head = f'{_e(t.get("request_method", ""))} {_e(t["request_url"])}'
    if t.get("request_content_type"):
        head += f' <span class="ctype">({_e(t["request_content_type"])})</span>'
    out = [f'<div class="label">request</div><div class="mono request-line">{head}</div>']
    path = out_dir / t["request_file"] if out_dir is not None and t.get("request_file") else None
    if path is not None and path.is_file():
        raw = path.read_bytes()
        out.append(f'<div>body: {len(raw)} bytes, <a href="{_e(t["request_file"])}">{_e(t["request_file"])}</a>'
                   "</div>")
        out.append(f'<pre class="body">{_e(body_text(raw))}</pre>')
    return "\n".join(out)


def body_text(raw: bytes) -> str:
    """A request body for reading: pretty JSON when it is JSON, else its text (invalid UTF-8 as escapes); capped."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = "(not valid UTF-8; undecodable bytes shown as \\x escapes)\n" + raw.decode("utf-8", "backslashreplace")
    else:
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    if len(text) > MAX_BODY_SHOWN:
        text = text[:MAX_BODY_SHOWN] + f"\n... ({len(text) - MAX_BODY_SHOWN} more characters in the file)"
    return text


def _text_diff(expected: str, actual: str) -> str:
    """Token ids decoded by the run's codec, special tokens visible, the first difference named."""
    from tokenspec.suite.oracles.token_text import first_difference

    left, right = diff_columns(expected, actual)
    return (f'<div class="label">expected and actual, decoded (the token ids below)</div>'
            f'<div class="first-difference mono">{_e(first_difference(expected, actual))}</div>'
            f'<div class="diff"><div><div class="label">expected</div><pre class="expected text">{left}</pre></div>'
            f'<div><div class="label">actual</div><pre class="actual text">{right}</pre></div></div>')


def _diff(expected: str, actual: str, op: str) -> str:
    left, right = diff_columns(expected, actual)
    relation = f" (the test asserted actual {op} expected)" if op and op != "==" else ""
    return (f'<div class="label">expected and actual{_e(relation)}</div>'
            f'<div class="diff"><div><div class="label">expected</div><pre class="expected">{left}</pre></div>'
            f'<div><div class="label">actual</div><pre class="actual">{right}</pre></div></div>')


def diff_columns(expected: str, actual: str) -> tuple[str, str]:
    """Two escaped HTML columns: lines only in ``expected`` in ``<del class="diff-del">``, only in ``actual`` in
    ``<ins class="diff-ins">``; within a changed line, only the differing tokens are marked. Long runs of equal
    lines are folded to a few lines of context."""
    a, b = expected.splitlines(), actual.splitlines()
    left: list[str] = []
    right: list[str] = []
    opcodes = _opcodes(a, b)
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            lines = a[i1:i2]
            keep_head = CONTEXT if index > 0 else 0
            keep_tail = CONTEXT if index < len(opcodes) - 1 else 0
            if len(opcodes) > 1 and len(lines) > keep_head + keep_tail + 3:
                shown = [*lines[:keep_head], None, *lines[len(lines) - keep_tail:]]
            else:
                shown = list(lines)
            for line in shown:
                if line is None:
                    fold = (f'<span class="line fold">... {len(lines) - keep_head - keep_tail} equal lines ...'
                            "</span>")
                    left.append(fold)
                    right.append(fold)
                else:
                    left.append(f'<span class="line">{_e(line)}</span>')
                    right.append(f'<span class="line">{_e(line)}</span>')
            continue
        old, new = a[i1:i2], b[j1:j2]
        for k in range(max(len(old), len(new))):
            if k < len(old) and k < len(new):
                lhs, rhs = _inline_diff(old[k], new[k])
                left.append(f'<span class="line changed">{lhs}</span>')
                right.append(f'<span class="line changed">{rhs}</span>')
            elif k < len(old):
                left.append(f'<span class="line gone"><del class="diff-del">{_e(old[k]) or " "}</del></span>')
                right.append('<span class="line gap"></span>')
            else:
                left.append('<span class="line gap"></span>')
                right.append(f'<span class="line new"><ins class="diff-ins">{_e(new[k]) or " "}</ins></span>')
    return "".join(left), "".join(right)


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes, within a time budget: the common head and tail are cut first (one region usually
    differs), and a middle too large to align (SequenceMatcher is quadratic) is one changed block."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    out: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    if len(mid_a) * len(mid_b) <= DIFF_BUDGET:
        out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head)
                for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()]
    else:
        out.append(("replace", head, head + len(mid_a), head, head + len(mid_b)))
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def _inline_diff(old: str, new: str) -> tuple[str, str]:
    """One changed line pair with the differing tokens (words, numbers, single punctuation) marked."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    lhs: list[str] = []
    rhs: list[str] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        x, y = _e("".join(a[i1:i2])), _e("".join(b[j1:j2]))
        if tag == "equal":
            lhs.append(x)
            rhs.append(y)
            continue
        if x:
            lhs.append(f'<del class="diff-del">{x}</del>')
        if y:
            rhs.append(f'<ins class="diff-ins">{y}</ins>')
    return "".join(lhs), "".join(rhs)
