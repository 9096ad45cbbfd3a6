"""``tokenspec matrix``: the suite on each implementation x model family, and the page that lines them up.

Each cell deploys one implementation plug-in (harness/implementations/) on one family's model folder with
that family's parsers, runs ``tokenspec run`` against it in a child process (with the committed
expectations and profile of that configuration, a fixed seed), and keeps the run folder as
``<out>/<implementation>-<version>-<platform>-<family>/``. The page (``index.html``, ``matrix.md``,
``matrix.json``) is rebuilt from whatever run folders are there, so a committed matrix can be re-rendered
without re-running anything (``--page-only``). A committed run keeps its data (report.json, summary.md,
cell.json); its report.html is written again by ``--page-only``, and its junit.xml and failing request bodies stay
out of git (re-running the cell writes them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import Any

from tokenspec.core.config import RunConfig
from tokenspec.core.errors import UsageError
from tokenspec.core.progress import step

#: Cell states, best first; a requirement's state in a run is the worst over the tests that cite it.
STATES = ("passed", "known", "unsupported", "not_tested", "failed")
_STATE_OF_OUTCOME = {"passed": "passed", "xfailed": "known", "unsupported": "unsupported",
                     "not_tested": "not_tested", "failed": "failed", "error": "failed", "xpassed": "failed"}
_SYMBOL = {"passed": "pass", "known": "known", "unsupported": "unsup.", "not_tested": "n/t", "failed": "FAIL",
           None: ""}


@dataclass(frozen=True)
class CellRun:
    """One finished cell: which configuration ran, where its report is, and its verdict."""

    implementation: str
    version: str
    platform: str
    family: str
    folder: str  # relative to the matrix folder
    headline: str
    exit_code: int
    seconds: float
    roles: str
    expectations: str | None
    command: str
    #: ``tokenspec bench target`` against the cell's target, the bundled frontend as baseline: subject/baseline
    #: ratios, or {"error": why it could not be measured}; None when speed was not asked for.
    speed: dict[str, Any] | None = None
    #: The implementation plug-in that ran it (``tokenspec matrix --implementations`` name).
    plugin: str | None = None
    #: The tokenspec version that ran it, and the digest of each requirement then (None: recorded before cells
    #: kept them, so whether the catalogue changed since is unknown and the cell counts as stale).
    suite: str | None = None
    catalogue: dict[str, str] | None = None
    #: The git commit of the suite that ran it ("+changes" when its checkout had uncommitted ones; None: not run
    #: from a git checkout, or recorded before cells kept it).
    commit: str | None = None

    @property
    def plugin_name(self) -> str:
        if self.plugin:
            return self.plugin
        if self.implementation == "vllm" and not self.version.startswith("0.32"):
            return "vllm-" + ".".join(self.version.split(".")[:2])
        return self.implementation

    def stale(self, digests: dict[str, str]) -> str:
        """Why this run no longer judges today's catalogue (the requirements added or changed since it ran), or
        "" when it does."""
        if self.catalogue is None:
            return "ran before cells recorded the catalogue"
        changed = [rid for rid, digest in digests.items() if self.catalogue.get(rid) != digest]
        if not changed:
            return ""
        return (f"{len(changed)} requirement(s) added or changed since it ran: {', '.join(changed[:6])}"
                + (" ..." if len(changed) > 6 else ""))

    @property
    def column(self) -> str:
        return f"{self.implementation} {self.version} · {self.family}"


def _configuration(impl_name: str, family: str, install: bool) -> tuple[Any, Any]:
    """The implementation plug-in (installed) and the family's configuration (its model folder built)."""
    from tokenspec.campaigns.golden_corpus import family_folder
    from tokenspec.harness.implementations import Configuration, implementation
    from tokenspec.harness.models.families import FAMILY_PARSERS
    from tokenspec.harness.processes import cache_dir

    impl = implementation(impl_name)
    if not impl.installed():
        if not install:
            raise UsageError(f"{impl.title} is not installed: add --install (cached after the first time)")
        impl.install()
    with step(f"building the {family} model folder"):
        # A folder of the matrix's own: another job's rebuild never rewrites files under a running server.
        folder = family_folder(family, cache_dir() / "matrix" / family)
    name = json.loads((folder / "tokenspec-model.json").read_text())["name"]
    tool, reasoning = FAMILY_PARSERS[family]
    return impl, Configuration(folder, name, family, tool, reasoning)


def run_cell(impl_name: str, family: str, out_dir: Path, *, seed: int, workers: int, max_examples: int,
             install: bool, speed_requests: int = 0) -> CellRun:
    """Deploy, run the suite in a child process, then (``speed_requests``) its speed; stop everything. The run
    folder lands in ``out_dir``."""
    impl, config = _configuration(impl_name, family, install)
    folder, name = config.model_dir, config.served_model_name
    started = time.monotonic()
    with impl.deploy(config) as deployment:
        run_dir = out_dir / f"{deployment.key}-{family}"
        expectations = deployment.expectations(family)
        run = RunConfig(target=deployment.target, engine=deployment.engine, reference=deployment.reference,
                        tokenizer=str(folder), model=name, seed=seed, max_examples=max_examples,
                        report=str(run_dir), expectations=_relative(expectations) if expectations else None,
                        profile=_relative(deployment.profile) if deployment.profile else None, workers=str(workers))
        print(f"tokenspec: {impl.title} {deployment.version} on {family} ({config.describe()}): {deployment.roles}",
              flush=True)
        code = subprocess.call(run.child_command())
        speed = _speed(deployment.target, folder, config, run_dir, speed_requests) if speed_requests else None
    if code not in (0, 1):
        raise UsageError(f"the suite could not run against {deployment.key} on {family} (exit {code})")
    report = json.loads((run_dir / "report.json").read_text())
    from tokenspec.specs.catalogue import requirement_digests

    cell = CellRun(deployment.implementation, deployment.version, deployment.platform, family, run_dir.name,
                   report["headline"], code, round(time.monotonic() - started, 1), deployment.roles,
                   _relative(expectations) if expectations else None,
                   " ".join(["tokenspec", *run.child_command()[3:]]), speed, plugin=impl_name,
                   suite=report.get("tokenspec_version"), catalogue=requirement_digests(), commit=_suite_commit())
    (run_dir / "cell.json").write_text(json.dumps(asdict(cell), indent=2) + "\n")
    return cell


def measure_speed(impl_name: str, family: str, out_dir: Path, *, install: bool, requests: int) -> CellRun:
    """Deploy a cell that already ran and measure only its speed, into its cell.json (``--speed-only``)."""
    impl, config = _configuration(impl_name, family, install)
    with impl.deploy(config) as deployment:
        run_dir = out_dir / f"{deployment.key}-{family}"
        if not (run_dir / "cell.json").exists():
            raise UsageError(f"{run_dir} holds no run of the suite: run the matrix on it first")
        speed = _speed(deployment.target, config.model_dir, config, run_dir, requests)
    cell = CellRun(**{**json.loads((run_dir / "cell.json").read_text()), "speed": speed})
    (run_dir / "cell.json").write_text(json.dumps(asdict(cell), indent=2) + "\n")
    return cell


def _speed(target: str, folder: Path, config: Any, run_dir: Path, requests: int) -> dict[str, Any]:
    """``tokenspec bench target`` on the cell's target (a child process, as the suite); its ratios, or why not."""
    command = [sys.executable, "-m", "tokenspec", "bench", "target", "--target", target, "--model", str(folder),
               "--tool-parser", config.tool_parser or "none", "--reasoning-parser", config.reasoning_parser or "none",
               "--requests", str(requests), "--out", str(run_dir)]
    print(f"tokenspec: speed of {target} against the bundled frontend ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    result = run_dir / "target.json"
    if done.returncode != 0 or not result.exists():
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return {"error": lines[-1] if lines else f"exit {done.returncode}"}
    doc = json.loads(result.read_text())
    return {"baseline": doc["baseline"], "requests": doc["requests"], "same_answers":  # None: no derender served
            bool(doc["same_render_token_ids"] and doc["same_derender_message"] is not False),
            **{f"{ep}_{k}": round(v, 3) for ep, figures in doc["ratios"].items() for k, v in figures.items()}}


def _speed_text(speed: dict[str, Any] | None) -> str:
    """A cell's speed as the page shows it: render / derender p50 and c16 throughput ratios."""
    if not speed:
        return "not measured"
    if "error" in speed:
        return f"not measured: {speed['error']}"
    text = f"render p50 {speed['render_p50']:.2f}x, throughput {speed['render_c16']:.2f}x; " + (
        f"derender p50 {speed['derender_p50']:.2f}x, throughput {speed['derender_c16']:.2f}x"
        if "derender_p50" in speed else "no derender served")
    return text if speed.get("same_answers", True) else text + " (answers differ from the baseline's)"


def _suite_commit() -> str | None:
    """The commit of the checkout this suite runs from, marked when it had uncommitted changes."""
    here = str(Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        changes = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if changes.stdout.strip() else "")


def _relative(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cells_in(out_dir: Path) -> list[CellRun]:
    """Every run folder of the matrix (those with a cell.json), in implementation then family order."""
    cells = [CellRun(**json.loads(p.read_text())) for p in sorted(out_dir.glob("*/cell.json"))]
    return sorted(cells, key=lambda c: (c.implementation != "reference", c.implementation, c.version, c.family))


def requirement_states(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Per requirement: its state in this run and the test to link (the first test in its worst state).

    A requirement some test judged takes the worst judged state (passed, known, failed); "not_tested" and
    "unsupported" mark only a requirement no test of the run judged at all, the run's blind spots."""
    judged: dict[str, tuple[str, str | None]] = {}
    unjudged: dict[str, tuple[str, str | None]] = {}
    for test in report["tests"]:
        state = _STATE_OF_OUTCOME[test["outcome"]]
        states = unjudged if state in ("unsupported", "not_tested") else judged
        for rid in test["requirement_ids"]:
            broken = test.get("failed_requirements")
            if state in ("failed", "known") and broken and rid not in broken:
                continue  # a test fails for the requirement whose check broke, not for every one it cites
            old = states.get(rid)
            if old is None or STATES.index(state) > STATES.index(old[0]):
                states[rid] = (state, test["nodeid"] if state != "passed" else None)
    return {**{rid: s for rid, s in unjudged.items() if rid not in judged}, **judged}


def _run_page(folder: Path, report: dict[str, Any]) -> None:
    """A cell's report.html, the page its matrix cells link to, written from its report.json when it is missing:
    committed runs keep only their data (report.json, summary.md, cell.json); pages are built on demand."""
    if not (folder / "report.html").is_file():
        from tokenspec.suite.reporting.report_html import write_html

        write_html(folder, report)


def build_page(out_dir: Path) -> dict[str, Any]:
    """Write ``matrix.json``, ``matrix.md`` and ``index.html`` from the run folders in ``out_dir`` (and each run's
    report.html where it is missing)."""
    from tokenspec.specs.catalogue import load_catalogue

    cells = cells_in(out_dir)
    if not cells:
        raise UsageError(f"no matrix runs in {out_dir} (each run folder has a cell.json)")
    catalogue = load_catalogue()
    columns = []
    for cell in cells:
        report = json.loads((out_dir / cell.folder / "report.json").read_text())
        columns.append((cell, report, requirement_states(report)))
        _run_page(out_dir / cell.folder, report)
    rows = {rid: [states.get(rid) for _, _, states in columns]
            for rid, req in sorted(catalogue.items()) if not req.withdrawn}
    doc = {"cells": [asdict(c) for c in cells],
           "requirements": {rid: [s[0] if s else None for s in row] for rid, row in rows.items()}}
    (out_dir / "matrix.json").write_text(json.dumps(doc, indent=2) + "\n")
    comparisons = sorted(p.parent.name for p in out_dir.glob("*/compare.md"))
    links = "".join(f"\n- `tokenspec compare`: [{c}]({c}/compare.md)" for c in comparisons)
    releases = release_table(cells, rows, catalogue)
    (out_dir / "matrix.md").write_text(_markdown(cells, rows, catalogue, grid_markdown(columns, rows, catalogue))
                                       + links + ("\n" if links else "")
                                       + ("\n" + releases if releases else ""))
    (out_dir / "index.html").write_text(_html(cells, columns, rows, catalogue, comparisons))
    return doc


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


#: Other render servers of a vLLM release, shown beside its releases in the release table (same wheel, other code).
RENDERERS = ("vllm-rs", "vllm-rs-nolen")


def release_table(cells: list[CellRun], rows: dict[str, list], catalogue: dict, implementation: str = "vllm",
                  renderers: tuple[str, ...] = RENDERERS) -> str:
    """Markdown: per requirement some release of ``implementation`` (or a renderer beside it) does not pass, its
    state per release (every family of that release's cells) and the first release from which all later ones pass
    it: what a team pairing a renderer of one release with an engine of another asks. The other render servers of
    a release (``renderers``, such as the Rust one) follow as columns of their own, outside "first passing", so a
    user choosing between them sees what switching changes. Empty with fewer than two releases."""
    by_column: dict[tuple[str, str], list[int]] = {}
    for i, cell in enumerate(cells):
        if cell.implementation == implementation or cell.implementation in renderers:
            by_column.setdefault((cell.implementation, cell.version), []).append(i)
    versions = sorted((c for c in by_column if c[0] == implementation), key=lambda c: _version_key(c[1]))
    others = sorted((c for c in by_column if c[0] != implementation), key=lambda c: (renderers.index(c[0]),
                                                                                   _version_key(c[1])))
    if len(versions) < 2:
        return ""
    order = ("failed", "known", "not_tested", "unsupported", "passed")  # the worst state of a release wins
    families = sorted({cells[i].family for c in versions + others for i in by_column[c]})
    lines = [f"## {implementation} releases: the first that passes each requirement", "",
             "Per release, the worst state over its families' runs (" + ", ".join(families) + "); only"
             " requirements some release fails (known or not). \"first passing\" is the first release from which"
             " every later one passes" + ("; the columns after it are the other render servers of a release." if
                                          others else "."), "",
             "| requirement | level | area | " + " | ".join(v for _, v in versions) + " | first passing |"
             + "".join(f" {name} {version} |" for name, version in others),
             "|---|---|---|" + "---|" * (len(versions) + 1 + len(others))]
    for rid, row in rows.items():
        states = []
        for column in versions + others:
            seen = [row[i][0] for i in by_column[column] if row[i]]
            states.append(min(seen, key=order.index) if seen else None)
        if not any(s in ("failed", "known") for s in states):
            continue  # passed everywhere, or never judged (the blind spots are in the table above)
        ours = states[:len(versions)]
        first = next((v for k, (_, v) in enumerate(versions) if all(s == "passed" for s in ours[k:])), "none yet")
        lines.append(f"| {rid} | {catalogue[rid].level} | {catalogue[rid].area} | "
                     + " | ".join(_SYMBOL[s] for s in ours) + f" | {first} |"
                     + "".join(f" {_SYMBOL[s]} |" for s in states[len(versions):]))
    return "\n".join(lines) + "\n"


def _counts(row_states: list[str | None]) -> str:
    return " ".join(f"{row_states.count(s)} {s}" for s in STATES if row_states.count(s))


def _markdown(cells: list[CellRun], rows: dict[str, list], catalogue: dict, glance: str = "") -> str:
    from tokenspec.specs.catalogue import requirement_digests

    lines = ["# tokenspec implementation matrix", "",
             "Each column is one run of the suite (seed, options and the command in its folder's cell.json).", "",
             "Speed: `tokenspec bench target` against the run's target, the bundled frontend on the same model as"
             " baseline, measured in the same run: target/baseline ratios (p50 latency: lower is faster;"
             " throughput at 16 clients: higher is faster). The reference server's own ratios show the noise.", "",
             "| run | verdict | against today's catalogue | requirements | seconds | expectations |"
             " speed vs the bundled frontend |",
             "|---|---|---|---|---:|---|---|"]
    digests = requirement_digests()
    lines += [f"| [{c.column}]({c.folder}/summary.md) | {c.headline} | {_staleness(c.stale(digests), c.commit)} |"
              f" {_counts([row[i][0] for row in rows.values() if row[i]])} | {c.seconds:.0f} |"
              f" {c.expectations or 'none'} | {_speed_text(c.speed)} |" for i, c in enumerate(cells)]
    if glance:
        lines += ["", glance.rstrip("\n")]
    lines += ["", "## Requirements", "", "| requirement | level | " + " | ".join(c.column for c in cells) + " |",
              "|---|---|" + "---|" * len(cells)]
    for rid, row in rows.items():
        if all(s is None for s in row):
            continue
        lines.append(f"| {rid} | {catalogue[rid].level} | "
                     + " | ".join(_SYMBOL[s[0] if s else None] for s in row) + " |")
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th.run{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
td.cell{text-align:center;font-weight:600}
td.passed{background:#e6f4ea;color:#137333} td.known{background:#fef7e0;color:#8a6100}
td.failed{background:#fce8e6;color:#a50e0e} td.unsupported,td.not_tested{background:#f1f3f4;color:#5f6368}
td.cell a{color:inherit}
.verdict{font-weight:700} .FAIL{color:#a50e0e} .PASS{color:#137333} .KNOWN{color:#8a6100} .NOVERDICT{color:#555}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px}
"""


def _verdict_class(headline: str) -> str:
    if headline.startswith(("INCONCLUSIVE", "INTERRUPTED")):
        return "NOVERDICT"  # a run that lost a server or was stopped: never shown as a pass
    return "FAIL" if headline.startswith("FAIL") else "KNOWN" if "KNOWN" in headline else "PASS"


@dataclass
class Tally:
    """Tests of one run counted for one grid cell (the run, an area, or a requirement): passed, known failures
    and unexpected failures are judged; unsupported, not tested, and failures charged to another server are not."""

    passed: int = 0
    known: int = 0
    failed: int = 0
    unjudged: int = 0
    #: The first test that did not pass (a known or unexpected failure), the one the cell links to.
    first_broken: str | None = None

    @property
    def judged(self) -> int:
        return self.passed + self.known + self.failed

    @property
    def share(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    def add(self, kind: str, nodeid: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if kind in ("known", "failed") and self.first_broken is None:
            self.first_broken = nodeid


#: What a test's outcome counts as in the grid.
_GRID_KIND = {"passed": "passed", "xfailed": "known", "failed": "failed", "error": "failed", "xpassed": "failed",
              "unsupported": "unjudged", "not_tested": "unjudged"}


def grid_tallies(report: dict[str, Any], area_of: dict[str, str]) -> tuple[Tally, dict[str, Tally],
                                                                           dict[str, Tally]]:
    """One run's tests counted for the grid: all of them, per area, per requirement (``area_of``: requirement id
    -> area, the requirements shown).

    A test counts once for each requirement it cites and once for each area of those. A failing test that names
    the requirements whose checks broke (``failed_requirements``) counts against those only, as in
    :func:`requirement_states`; a failure charged to another server (the engine or the reference) did not judge
    the target and counts as not judged."""
    total = Tally()
    areas: dict[str, Tally] = {}
    reqs: dict[str, Tally] = {}
    for test in report["tests"]:
        kind = _GRID_KIND[test["outcome"]]
        if kind == "failed" and test.get("charged_to", "target") != "target":
            kind = "unjudged"
        total.add(kind, test["nodeid"])
        broken = test.get("failed_requirements") if kind in ("known", "failed") else None
        cited = [rid for rid in dict.fromkeys(test["requirement_ids"])
                 if rid in area_of and (not broken or rid in broken)]
        for rid in cited:
            reqs.setdefault(rid, Tally()).add(kind, test["nodeid"])
        for area in dict.fromkeys(area_of[rid] for rid in cited):
            areas.setdefault(area, Tally()).add(kind, test["nodeid"])
    return total, areas, reqs


def _shade(share: float | None) -> str:
    return ("none" if share is None else "full" if share == 1 else "high" if share >= 0.9
            else "mid" if share >= 0.6 else "low")


def share_text(tally: Tally) -> str:
    """``97% (312/322)``: the share of judged tests that passed, then passed/judged; ``-`` when none was judged."""
    if tally.share is None:
        return "-"
    percent = 100 * tally.share
    # Never round a share with a failure up to 100%, nor a share with a pass down to 0%.
    shown = min(int(percent + 0.5), 99) if tally.passed < tally.judged else 100
    shown = max(shown, 1) if tally.passed else 0
    return f"{shown}% ({tally.passed}/{tally.judged})"


def _apart(tally: Tally) -> str:
    """The counts shown apart from the share: known failures, unexpected failures, tests not judged."""
    return " · ".join(x for x in (f"{tally.known} known" if tally.known else "",
                                   f"{tally.failed} FAIL" if tally.failed else "",
                                   f"{tally.unjudged} n/j" if tally.unjudged else "") if x)


def _grid_cell(cell: CellRun, tally: Tally | None, family: str) -> str:
    from tokenspec.suite.reporting.report_html import failure_anchor

    tally = tally or Tally()
    href = f"{cell.folder}/report.html"
    if tally.first_broken:
        href += "#" + failure_anchor(tally.first_broken)
    title = (f"{cell.column}: {tally.passed} passed of {tally.judged} judged; {tally.known} known failure(s),"
             f" {tally.failed} unexpected, {tally.unjudged} not judged (unsupported or not tested)")
    if not tally.judged and not tally.unjudged:
        title = f"{cell.column}: no test of this run cites it"
    apart = _apart(tally)
    text, _, counts = share_text(tally).partition(" ")
    return (f"<td class='share {_shade(tally.share)}' data-family='{escape(family)}' title='{escape(title)}'>"
            f"<a href='{escape(href)}'>{escape(text)}</a>"
            + (f" <span class='n'>{escape(counts)}</span>" if counts else "")
            + (f"<br><small>{escape(apart)}</small>" if apart else "") + "</td>")


_GRID_JS = """
(function(){
 var g=document.getElementById('grid');
 function unfold(b,open){b.setAttribute('aria-expanded',open?'true':'false');
  g.querySelectorAll("tr.req[data-area='"+b.dataset.area+"']").forEach(function(r){r.hidden=!open;});}
 g.addEventListener('click',function(e){var b=e.target.closest('button.unfold');
  if(b)unfold(b,b.getAttribute('aria-expanded')!=='true');});
 document.getElementById('grid-all').addEventListener('click',function(){
  var bs=g.querySelectorAll('button.unfold'),open=Array.prototype.some.call(bs,function(b){
   return b.getAttribute('aria-expanded')!=='true';});bs.forEach(function(b){unfold(b,open);});});
 var s=document.getElementById('grid-family');
 s.addEventListener('change',function(){var f=s.value;
  g.querySelectorAll('[data-family]').forEach(function(c){c.hidden=!!f&&c.dataset.family!==f;});
  g.querySelectorAll('tr.releases th[data-group]').forEach(function(h){var n=g.querySelectorAll(
   "tr.families th[data-group='"+h.dataset.group+"']:not([hidden])").length;h.colSpan=Math.max(n,1);h.hidden=!n;});});
})();
"""


def _grid(columns: list, rows: dict[str, list], catalogue: dict) -> str:
    """The matrix at a glance, in the manner of wpt.fyi: requirement areas down (each unfolds into its
    requirements), implementation x release then family across (a selector keeps one family). Each cell: the
    share of the tests judged that passed, ``97% (312/322)``, coloured by that share, with known failures,
    unexpected failures and tests not judged counted apart; it opens the run (at its first failure where one
    broke). The first row counts every test of the run."""
    cells = [cell for cell, _, _ in columns]
    area_of = {rid: catalogue[rid].area for rid in rows}
    tallies = [grid_tallies(report, area_of) for _, report, _ in columns]
    groups: list[tuple[str, int]] = []
    for cell in cells:
        title = f"{cell.implementation} {cell.version}"
        if groups and groups[-1][0] == title:
            groups[-1] = (title, groups[-1][1] + 1)
        else:
            groups.append((title, 1))
    group_of = [g for g, (_, n) in enumerate(groups) for _ in range(n)]
    head = ("<tr class='releases'><th rowspan='2'>area <small>(requirements)</small></th>"
            + "".join(f"<th colspan='{n}' data-group='{g}'>{escape(t)}</th>" for g, (t, n) in enumerate(groups))
            + "</tr><tr class='families'>"
            + "".join(f"<th data-group='{group_of[i]}' data-family='{escape(c.family)}'>{escape(c.family)}</th>"
                      for i, c in enumerate(cells)) + "</tr>")
    body = ["<tr class='total'><th>all tests</th>"
            + "".join(_grid_cell(c, t[0], c.family) for c, t in zip(cells, tallies, strict=True)) + "</tr>"]
    areas: dict[str, list[str]] = {}
    for rid in rows:
        areas.setdefault(area_of[rid], []).append(rid)
    for area, ids in sorted(areas.items()):
        body.append(f"<tr class='area' data-area='{escape(area)}'><th><button class='unfold' type='button'"
                    f" data-area='{escape(area)}' aria-expanded='false'>{escape(area)}</button>"
                    f" <small>({len(ids)})</small></th>"
                    + "".join(_grid_cell(c, t[1].get(area), c.family) for c, t in zip(cells, tallies, strict=True))
                    + "</tr>")
        for rid in ids:
            req = catalogue[rid]
            name = (f"<a href='#{escape(rid)}'>{escape(rid)}</a>" if any(rows[rid]) else escape(rid))
            body.append(f"<tr class='req' data-area='{escape(area)}' data-req='{escape(rid)}' hidden>"
                        f"<th title='{escape(req.statement)}'>{name} <small>{escape(req.level)}</small></th>"
                        + "".join(_grid_cell(c, t[2].get(rid), c.family) for c, t in zip(cells, tallies,
                                                                                           strict=True))
                        + "</tr>")
    families = sorted({c.family for c in cells})
    controls = ("<p class='grid-controls'><label>family <select id='grid-family'><option value=''>all</option>"
                + "".join(f"<option>{escape(f)}</option>" for f in families)
                + "</select></label> <button id='grid-all' type='button'>unfold / fold every area</button></p>")
    return (f"{controls}<div class='grid-scroll'><table id='grid'>{head}{''.join(body)}</table></div>"
            f"<script>{_GRID_JS}</script>")


def grid_markdown(columns: list, rows: dict[str, list], catalogue: dict) -> str:
    """The grid for matrix.md: areas down, runs across, each cell ``97% (312/322)`` then the counts apart."""
    cells = [cell for cell, _, _ in columns]
    area_of = {rid: catalogue[rid].area for rid in rows}
    tallies = [grid_tallies(report, area_of) for _, report, _ in columns]

    def text(tally: Tally | None) -> str:
        tally = tally or Tally()
        apart = _apart(tally)
        return share_text(tally) + (f" <sub>{apart}</sub>" if apart else "")

    lines = ["## At a glance", "",
             "Per area, the share of the tests judged that passed (known failures count as not passed); known"
             " failures, unexpected failures (FAIL) and tests not judged (n/j: unsupported or not tested) apart.",
             "", "| area | " + " | ".join(c.column for c in cells) + " |", "|---|" + "---|" * len(cells),
             "| all tests | " + " | ".join(text(t[0]) for t in tallies) + " |"]
    for area in sorted(set(area_of.values())):
        lines.append(f"| {area} | " + " | ".join(text(t[1].get(area)) for t in tallies) + " |")
    return "\n".join(lines) + "\n"


def _staleness(reason: str, commit: str | None = None) -> str:
    ran = f" (suite {commit})" if commit else ""
    return f"stale: {reason}{ran} (tokenspec matrix --stale re-runs it)" if reason else f"current{ran}"


def _staleness_cell(reason: str, commit: str | None) -> str:
    return f"<td class='{'stale' if reason else 'current'}'>{escape(_staleness(reason, commit))}</td>"


def _html(cells: list[CellRun], columns: list, rows: dict[str, list], catalogue: dict,
          comparisons: Sequence[str] = ()) -> str:
    from tokenspec.specs.catalogue import requirement_digests
    from tokenspec.suite.reporting.report_html import failure_anchor

    digests = requirement_digests()
    runs = "".join(
        f"<tr><td><a href='{escape(c.folder)}/report.html'>{escape(c.column)}</a></td>"
        f"<td class='verdict {_verdict_class(c.headline)}'>{escape(c.headline)}</td>"
        f"{_staleness_cell(c.stale(digests), c.commit)}"
        f"<td>{escape(_counts([s for s, _ in states.values()]))}</td>"
        f"<td>{escape(c.roles)}</td><td>{escape(c.expectations or 'none')}</td><td>{c.seconds:.0f} s</td>"
        f"<td>{escape(_speed_text(c.speed))}</td></tr>"
        for c, _, states in columns)
    head = "".join(f"<th class='run'>{escape(c.column)}</th>" for c in cells)
    body = []
    for rid, row in rows.items():
        if all(s is None for s in row):
            continue
        tds = []
        for (cell, _, _), state in zip(columns, row, strict=True):
            if state is None:
                tds.append("<td class='cell'></td>")
                continue
            label = _SYMBOL[state[0]]
            if state[1] and state[0] in ("failed", "known"):
                label = (f"<a href='{escape(cell.folder)}/report.html#{escape(failure_anchor(state[1]))}'"
                         f" title='{escape(state[1])}'>{label}</a>")
            tds.append(f"<td class='cell {state[0]}'>{label}</td>")
        req = catalogue[rid]
        body.append(f"<tr id='{escape(rid)}'><td><b>{escape(rid)}</b></td><td>{req.level}</td>{''.join(tds)}"
                    f"<td>{escape(req.statement)}</td></tr>")
    legend = "".join(f"<span class='cell {s}' style='border:1px solid #ddd'>{_SYMBOL[s]} = {s.replace('_', ' ')}"
                     f"</span>" for s in STATES)
    legend = legend.replace("<span class='cell ", "<span class='")
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>tokenspec implementation matrix</title><style>{_CSS}
.legend span.passed{{background:#e6f4ea}} .legend span.known{{background:#fef7e0}}
.legend span.failed{{background:#fce8e6}} .legend span.unsupported,.legend span.not_tested{{background:#f1f3f4}}
td.stale{{background:#fef7e0}}
#grid td.share{{text-align:center;min-width:4.5em;white-space:nowrap}}
#grid td.share a{{color:inherit;font-weight:700;text-decoration:none}} #grid td.share .n{{font-size:11px}}
#grid [hidden]{{display:none}} #grid tr.total td,#grid tr.total th{{border-bottom:2px solid #999}}
#grid tr.req th{{font-weight:400;padding-left:1.6em}} #grid tr.req td.share{{font-size:12px}}
#grid button.unfold{{border:0;background:none;font:inherit;font-weight:700;cursor:pointer;padding:0}}
#grid button.unfold::before{{content:'\\25B8 ';color:#777}}
#grid button.unfold[aria-expanded=true]::before{{content:'\\25BE '}}
#grid tr.families th{{font-weight:400}} .grid-controls{{font-size:13px}} #grid th{{white-space:nowrap}}
#grid td.share{{padding:2px 4px}} .grid-scroll{{overflow-x:auto;max-width:100%}}
#grid tr>th:first-child{{position:sticky;left:0;background:#fff;z-index:1}}
#grid td.full{{background:#ceead6;color:#0d652d}} #grid td.high{{background:#e6f4ea;color:#137333}}
#grid td.mid{{background:#fef7e0;color:#8a6100}} #grid td.low{{background:#fce8e6;color:#a50e0e}}
#grid td.none{{background:#f1f3f4;color:#5f6368}} #grid small{{font-weight:400}}
</style></head><body>
<h1>tokenspec implementation matrix</h1>
<p>Each cell: the share of the tests that passed of those the run judged, for the tests citing the area's
requirements (a known failure counts as not passed), as <i>percent (passed/judged)</i>; below it, apart: known
failures, unexpected failures (FAIL), and tests not judged (n/j: unsupported or not tested). Colour by share:
all passed, 90% or more, 60% or more, less, nothing judged. A cell opens its run (at its first failure where one
broke); an area unfolds into its requirements, whose names lead to their rows in the table below.</p>
{_grid(columns, rows, catalogue)}
<h2>Runs</h2>
<table id="runs"><tr><th>run</th><th>verdict</th><th>against today's catalogue</th><th>requirements</th>
<th>roles</th><th>expectations</th><th>time</th><th>speed vs the bundled frontend (target/baseline: p50 lower is
faster, throughput at 16 clients higher is faster)</th></tr>{runs}</table>
{"<p>Comparisons (<code>tokenspec compare</code>): " + ", ".join(
    f"<a href='{escape(c)}/compare.md'>{escape(c)}</a>" for c in comparisons) + "</p>" if comparisons else ""}
<h2>Requirements</h2>
<p class="legend">{legend}. A failed or known cell links to the first test that broke that requirement in that
run. A cell marked unsup. or n/t is a blind spot: no test of that run judged the requirement at all (a
requirement judged by some of its tests shows the worst judged state).</p>
<table id="matrix"><tr><th>requirement</th><th>level</th>{head}<th>statement</th></tr>{''.join(body)}</table>
</body></html>
"""


def matrix_from_args(args: Any) -> int:
    out_dir = Path(args.report)
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = 0
    if args.speed_only:
        for impl_name in args.implementations:
            for family in args.families:
                cell = measure_speed(impl_name, family, out_dir, install=args.install,
                                     requests=args.speed_requests or 100)
                print(f"tokenspec: {cell.column}: {_speed_text(cell.speed)}", flush=True)
    elif args.stale:
        from tokenspec.specs.catalogue import requirement_digests

        digests = requirement_digests()
        for old, reason in [(c, r) for c in cells_in(out_dir) if (r := c.stale(digests))]:
            print(f"tokenspec: {old.column} is {_staleness(reason)}; running it again", flush=True)
            cell = run_cell(old.plugin_name, old.family, out_dir, seed=args.seed, workers=args.workers,
                            max_examples=args.max_examples, install=args.install,
                            speed_requests=args.speed_requests)
            print(f"tokenspec: {cell.column}: {cell.headline} ({cell.seconds:.0f} s)", flush=True)
            failures += cell.exit_code != 0
    elif not args.page_only:
        for impl_name in args.implementations:
            for family in args.families:
                cell = run_cell(impl_name, family, out_dir, seed=args.seed, workers=args.workers,
                                max_examples=args.max_examples, install=args.install,
                                speed_requests=args.speed_requests)
                print(f"tokenspec: {cell.column}: {cell.headline} ({cell.seconds:.0f} s)", flush=True)
                failures += cell.exit_code != 0
    build_page(out_dir)
    print(f"tokenspec: matrix page {out_dir / 'index.html'} (and matrix.md, matrix.json)")
    return 1 if failures else 0


def implementations_and_families(names: Sequence[str], families: Sequence[str]) -> None:
    """Usage errors for unknown names, before anything is started."""
    from tokenspec.harness.implementations import IMPLEMENTATIONS
    from tokenspec.harness.models.families import FAMILY_NAMES

    for name in names:
        if name not in IMPLEMENTATIONS:
            raise UsageError(f"unknown implementation {name!r}; choose from {', '.join(IMPLEMENTATIONS)}")
    for family in families:
        if family not in FAMILY_NAMES:
            raise UsageError(f"unknown model family {family!r}; choose from {', '.join(FAMILY_NAMES)}")
