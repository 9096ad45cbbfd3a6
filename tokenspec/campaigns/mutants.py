"""Judge the suite: run it through the mutant proxy once clean, then once per planted defect.

A defect is *detected* when at least one test that did not fail on the clean run fails (or errors) with the
defect planted; the tests and requirements that caught it are recorded. The clean run must have no failure
at all (a failure there is a false alarm of the suite, or a target that is not correct), and the detection
rate is detected / planted. Each suite run is a separate ``tokenspec run`` process, exactly as users run it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenspec.core.config import RunConfig
from tokenspec.core.errors import UsageError
from tokenspec.core.progress import say, seconds
from tokenspec.core.transport import DEFAULT_TIMEOUTS, Transport, redact_folder
from tokenspec.harness.loopback import running_app
from tokenspec.harness.mutants.defects import CATALOGUE, DEFECTS, Defect
from tokenspec.harness.mutants.proxy import MutantProxy

FAILING = ("failed", "error", "xpassed")
#: Outcomes that judge nothing: a defect that moves a test the clean run judged into one of these hid a behaviour.
SILENT = ("not_tested", "unsupported")

#: Tests a proxy cannot relay faithfully, left out of every campaign run (clean included), with the reason.
EXCLUDED = {
    "refused_from_its_declared_length": "the proxy reads a request body whole before forwarding it, so whether "
                                        "the server refuses an oversized body from its declared length alone "
                                        "(ERROR-014, SHOULD) cannot be seen through it",
}


@dataclass
class Options:
    """What the suite runs against and how (the flags of ``tokenspec mutants``)."""

    target: str
    engine: str | None = None
    reference: str | None = None
    tokenizer: str | None = None
    profile: str | None = None
    expectations: str | None = None
    model: str | None = None
    seed: int = 20261201
    workers: str = "2"
    max_examples: int = 3
    timeout: float = 60.0
    select: str | None = None  # a pytest -k expression: only these tests (a project test's narrow campaign)
    #: Credentials, TLS and limits of the suite runs (the proxies pass the headers through untouched).
    transport: Transport = field(default_factory=Transport)


@dataclass
class DefectResult:
    name: str
    area: str
    requirements: list[str]
    imitates: str
    detected: bool
    caught_by: list[str] = field(default_factory=list)
    charged: list[str] = field(default_factory=list)  # requirements the catching tests charged
    #: tests the clean run judged that the defect made "not tested" or "unsupported": a gap it opened quietly
    silenced: list[str] = field(default_factory=list)
    seconds: float = 0.0
    verdict: str = ""


@dataclass
class CampaignReport:
    target: str
    seed: int
    clean_failures: list[str]
    clean_passed: int
    results: list[DefectResult]
    started: str
    seconds: float
    #: clean-run failures that passed when run again at once: the server's flake, not the suite's false alarm
    clean_flaky: list[str] = field(default_factory=list)

    @property
    def detection_rate(self) -> float:
        return sum(r.detected for r in self.results) / len(self.results) if self.results else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "seed": self.seed, "started": self.started, "seconds": round(self.seconds, 1),
                "detection_rate": round(self.detection_rate, 4), "planted": len(self.results),
                "detected": sum(r.detected for r in self.results),
                "clean": {"passed": self.clean_passed, "failures": self.clean_failures, "flaky": self.clean_flaky},
                "defects": [asdict(r) for r in self.results]}

    def to_markdown(self) -> str:
        detected = sum(r.detected for r in self.results)
        lines = [
            f"# Mutant campaign: {detected}/{len(self.results)} defects detected"
            f" ({self.detection_rate:.0%}); clean run: {len(self.clean_failures)} false alarm(s)",
            "",
            f"- target `{self.target}` (through the mutant proxy), seed {self.seed}, started {self.started},"
            f" {seconds(self.seconds)}",
            f"- clean run: {self.clean_passed} passed, {len(self.clean_failures)} failing",
            *(f"  - FALSE ALARM: {failure}" for failure in self.clean_failures),
            *(f"  - flaky (failed, then passed when run again): {failure}" for failure in self.clean_flaky),
            *(f"- left out of every run: tests matching `{name}`: {why}" for name, why in EXCLUDED.items()),
            "",
            "| defect | area | imitates | breaks | detected | caught by (tests) | charged | silenced |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in self.results:
            caught = ", ".join(f"`{t}`" for t in r.caught_by[:4]) + (f" +{len(r.caught_by) - 4}"
                                                                    if len(r.caught_by) > 4 else "")
            lines.append(f"| `{r.name}` | {r.area} | {r.imitates} | {', '.join(r.requirements)} |"
                         f" {'yes' if r.detected else '**ESCAPED**'} | {caught} | {', '.join(r.charged)} |"
                         f" {len(r.silenced) or ''} |")
        escaped = [r for r in self.results if not r.detected]
        if escaped:
            lines += ["", "## Escaped", "", *(f"- `{r.name}`: {r.imitates}" for r in escaped)]
        silenced = [r for r in self.results if r.silenced]
        if silenced:
            lines += ["", "## Silenced (judged clean, not judged with the defect)", "",
                      *(f"- `{r.name}`: {', '.join(f'`{t}`' for t in r.silenced)}" for r in silenced)]
        return "\n".join(lines) + "\n"


    def to_html(self) -> str:
        """One self-contained page (no network): the headline, then one row per defect, escaped ones first."""
        from html import escape

        detected = sum(r.detected for r in self.results)
        rows = []
        for r in sorted(self.results, key=lambda r: (r.detected, r.area, r.name)):
            state = "detected" if r.detected else "escaped"
            rows.append(
                f"<tr class='{state}'><td><code>{escape(r.name)}</code></td><td>{escape(r.area)}</td>"
                f"<td>{escape(r.imitates)}</td><td>{escape(', '.join(r.requirements))}</td><td>{state}</td>"
                f"<td>{len(r.caught_by)}</td><td>{escape(', '.join(r.charged))}</td></tr>")
        alarms = "".join(f"<li>{escape(f)}</li>" for f in self.clean_failures) or "<li>none</li>"
        alarms += "".join(f"<li>flaky (failed, then passed when run again): {escape(f)}</li>" for f in self.clean_flaky)
        return f"""<!doctype html><html><head><meta charset="utf-8"><title>tokenspec mutants</title><style>
body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:4px}}
tr.escaped{{background:#fdd}} tr.detected td:nth-child(5){{color:#070}}</style></head><body>
<h1>{detected}/{len(self.results)} defects detected ({self.detection_rate:.0%})</h1>
<p>target {escape(self.target)} through the mutant proxy, seed {self.seed}, {escape(self.started)}</p>
<h2>Clean run: {len(self.clean_failures)} false alarm(s)</h2><ul>{alarms}</ul>
<table><tr><th>defect</th><th>area</th><th>imitates</th><th>breaks</th><th>result</th><th>tests that caught it</th>
<th>requirements charged</th></tr>{"".join(rows)}</table></body></html>
"""


def select(only: Sequence[str] | None) -> list[Defect]:
    """The defects named by ``--only`` (all when empty); an unknown name is a usage error."""
    if not only:
        return list(CATALOGUE)
    unknown = [name for name in only if name not in DEFECTS]
    if unknown:
        raise UsageError(f"unknown defect(s): {', '.join(unknown)} (see `tokenspec mutants --list`)")
    return [DEFECTS[name] for name in only]


@contextmanager
def _proxies(options: Options) -> Iterator[tuple[MutantProxy, ...]]:
    """One proxy per URL under test (target, and engine when separate); the reference is never mutated:
    it is the oracle."""
    with ExitStack() as stack:
        proxies = [MutantProxy(options.target, None)]
        urls = [stack.enter_context(running_app(proxies[0], health=None))]
        if options.engine:
            proxies.append(MutantProxy(options.engine, None))
            urls.append(stack.enter_context(running_app(proxies[1], health=None)))
        for proxy, url in zip(proxies, urls, strict=True):
            proxy.url = url
        yield tuple(proxies)


def _suite(options: Options, proxies: Sequence[MutantProxy], report: Path) -> dict[str, Any]:
    # Every role's timeout is the campaign's, unless the transport sets its own.
    access = {role: a if a.timeout != DEFAULT_TIMEOUTS[role] else replace(a, timeout=options.timeout)
              for role, a in options.transport.access.items()}
    run = RunConfig(
        target=proxies[0].url, engine=proxies[1].url if len(proxies) > 1 else None, reference=options.reference,
        tokenizer=options.tokenizer, profile=options.profile, expectations=options.expectations, model=options.model,
        report=str(report), seed=options.seed, workers=options.workers, max_examples=options.max_examples,
        keyword=" and ".join([f"not {name}" for name in EXCLUDED] + ([f"({options.select})"] if options.select
                                                                     else [])),
        no_shrink=True,  # detection needs one failing example, not the smallest one
        transport=replace(options.transport, access=access))
    command = run.child_command()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    path = report / "report.json"
    if not path.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"the suite did not run through the proxy: {tail[0]}")
    data = json.loads(path.read_text())
    if data.get("lost_servers"):  # what a run that lost its server did not see is neither caught nor escaped
        raise UsageError(f"no verdict through the proxy ({report.name}): {data['headline'][:300]}")
    return data


def _outcomes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["nodeid"]: t for t in report["tests"]}


def _settle_clean_failures(options: Options, proxies: Sequence[MutantProxy], tests: dict[str, dict[str, Any]],
                           report: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The clean run's failing tests run once more at once. One that passes then was the server's flake (vLLM 0.32's
    engine at times runs a stream on after an abort it answered), not the suite's false alarm: it counts as passed
    on the clean run, so a defect that makes it fail is still caught, and the report lists it as flaky."""
    failing = [nodeid for nodeid, t in tests.items() if t["outcome"] in FAILING]
    if not failing:
        return tests, []
    names = " or ".join(sorted({nodeid.split("::")[-1].split("[")[0] for nodeid in failing}))
    say(f"clean run: {len(failing)} failing test(s), run again once to tell a flake from a false alarm ...")
    again = _outcomes(_suite(replace(options, select=f"({options.select}) and ({names})" if options.select
                                     else names), proxies, report))
    flaky = [f"{nodeid}: {tests[nodeid]['message'][:300]}" for nodeid in failing
             if again.get(nodeid, {}).get("outcome") == "passed"]
    return {nodeid: again[nodeid] if again.get(nodeid, {}).get("outcome") == "passed" else t
            for nodeid, t in tests.items()}, flaky


def run_campaign(options: Options, defects: Sequence[Defect], report_dir: Path) -> CampaignReport:
    from datetime import UTC, datetime

    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    report_dir.mkdir(parents=True, exist_ok=True)
    runs = report_dir / "runs"
    with _proxies(options) as proxies:
        say(f"clean run through the proxy (no defect), seed {options.seed} ...")
        clean = _suite(options, proxies, runs / "clean")
        say(f"clean run: {clean['headline']}")
        clean_tests, flaky = _settle_clean_failures(options, proxies, _outcomes(clean), runs / "clean-again")
        clean_failures = [f"{t['nodeid']}: {t['message'][:300]}" for t in clean_tests.values()
                          if t["outcome"] in FAILING]
        results = []
        for number, defect in enumerate(defects, 1):
            for proxy in proxies:
                proxy.defect = defect
            began = time.monotonic()
            run = _suite(options, proxies, runs / defect.name)
            caught = [t for t in run["tests"] if t["outcome"] in FAILING
                      and clean_tests.get(t["nodeid"], {}).get("outcome") not in FAILING]
            result = DefectResult(
                defect.name, defect.area, list(defect.requirements), defect.imitates, bool(caught),
                caught_by=[t["nodeid"] for t in caught],
                silenced=[t["nodeid"] for t in run["tests"] if t["outcome"] in SILENT
                          and clean_tests.get(t["nodeid"], {}).get("outcome") not in SILENT],
                charged=sorted({r for t in caught for r in (t.get("failed_requirements") or t["requirement_ids"])}),
                seconds=round(time.monotonic() - began, 1), verdict=run["headline"])
            results.append(result)
            say(f"[{number}/{len(defects)}] {defect.name}: "
                + (f"detected by {len(caught)} test(s)" if caught else "ESCAPED")
                + (f"; {len(result.silenced)} judged test(s) silenced" if result.silenced else "")
                + f" ({seconds(result.seconds)})")
        for proxy in proxies:
            proxy.defect = None
    report = CampaignReport(options.target, options.seed, clean_failures,
                            sum(1 for t in clean_tests.values() if t["outcome"] == "passed"), results, started_at,
                            time.monotonic() - started, flaky)
    (report_dir / "mutants.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    (report_dir / "mutants.md").write_text(report.to_markdown())
    (report_dir / "mutants.html").write_text(report.to_html())
    redact_folder(report_dir, options.transport.secrets())
    return report
