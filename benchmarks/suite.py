"""``tokenspec bench suite``: wall time of a full ``tokenspec run`` against an implementation's deployment (the
reference server by default; ``--implementation vllm`` for vLLM's render server + engine) with its committed
expectations, as the matrix runs it, in a child process (the harness never imports the CLI); the servers'
start-up is excluded.

With ``--profile`` a second, profiled run follows: every process of it records where its time goes
(``tokenspec.core.phases``), and the benchmark prints it per test file and per phase.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tokenspec.benchmarks.lifecycle import machine_facts, model_folder
from tokenspec.benchmarks.statistics import Target, table
from tokenspec.core.config import RunConfig
from tokenspec.core.errors import UsageError
from tokenspec.core.phases import ENV, SESSION, merged
from tokenspec.harness.implementations import Configuration, Deployment, implementation
from tokenspec.harness.implementations.reference import REASONING_PARSER, TOOL_PARSER
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

SUITE_TARGET_S = 90.0
WORKERS = 2
#: Phases inside a test's own time, in the order the table shows them; "other" is the wall they leave.
INNER = ("http", "validation", "generation")


def bench_suite(args: argparse.Namespace) -> dict[str, Any]:
    model_dir = model_folder(args)
    config = Configuration(model_dir, DEFAULT_MODEL_NAME, "tiny", TOOL_PARSER, REASONING_PARSER)
    plugin = implementation(args.implementation)
    if not plugin.installed():
        plugin.install()
    with contextlib.ExitStack() as stack:
        print(f"starting {plugin.title} ({config.describe()}) ...", flush=True)
        started = time.perf_counter()
        deployment = stack.enter_context(plugin.deploy(config))
        startup_s = time.perf_counter() - started
        wall, code, summary = _timed_run(deployment, model_dir, stack, profile=None)
        phases = None
        if args.profile:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenspec-phases-")))
            profiled_wall, _, _ = _timed_run(deployment, model_dir, stack, profile=folder)
            phases = _phase_table(merged(folder), profiled_wall)
    target = Target(f"suite wall time / {SUITE_TARGET_S:.0f} s", wall / SUITE_TARGET_S, 1.0)
    print(f"\n{deployment.roles}; start-up (excluded): {startup_s:.1f} s")
    print(f"tokenspec run -n {WORKERS} wall time: {wall:.1f} s (exit code {code}); {summary}")
    print(f"{'PASS' if target.passed else 'MISS'}  suite wall time {wall:.1f} s (target <= {SUITE_TARGET_S:.0f} s)")
    return {"benchmark": "suite", "machine": machine_facts(), "implementation": deployment.key,
            "workers": WORKERS, "startup_s": startup_s, "wall_s": wall, "target_s": SUITE_TARGET_S,
            "exit_code": code, "summary": summary, "phases": phases,
            "targets": [{**target.to_dict(), "measured_s": round(wall, 2)}]}


def _timed_run(deployment: Deployment, model_dir: Path, stack: contextlib.ExitStack, profile: Path | None
               ) -> tuple[float, int, dict[str, Any]]:
    report_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenspec-bench-")))
    expectations = deployment.expectations("tiny")  # as the matrix runs it: known failures do not shrink
    command = RunConfig(target=deployment.target, engine=deployment.engine, reference=deployment.reference,
                        tokenizer=str(model_dir), model=DEFAULT_MODEL_NAME, report=str(report_dir),
                        workers=str(WORKERS), expectations=str(expectations) if expectations else None
                        ).child_command()
    env = {**os.environ, ENV: str(profile)} if profile else None
    print(f"{'profiled ' if profile else ''}tokenspec run ...", flush=True)
    start = time.perf_counter()
    code = subprocess.call(command, env=env)  # the wall time includes the child's interpreter start-up and imports
    wall = time.perf_counter() - start
    report = report_dir / "report.json"
    if code not in (0, 1) or not report.exists():  # 0 or 1 is the suite's verdict; else it could not run
        raise UsageError(f"tokenspec run could not run the suite (exit code {code}); see its output above")
    counts = json.loads(report.read_text())["summary"]
    summary = {k: counts.get(k) for k in ("passed", "failed", "errors", "unsupported", "xfailed", "xpassed",
                                          "total")}
    return wall, code, summary


def _phase_table(totals: dict[str, dict[str, float]], wall: float) -> dict[str, Any]:
    """Per test file: its tests' summed wall, the inner phases, what they leave, and shrinking; printed."""
    files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for test, phases in totals.items():
        if test == SESSION:
            continue
        row = files[test.split("::")[0].rsplit("/", 1)[-1]]
        row["tests"] += 1
        for phase, seconds in phases.items():
            row[phase] += seconds
    for row in files.values():
        row["other"] = max(0.0, row["wall"] - sum(row[p] for p in INNER))
    session = totals.get(SESSION, {})
    test_seconds = sum(row["wall"] for row in files.values())
    ordered = sorted(files.items(), key=lambda kv: -kv[1]["wall"])
    columns = ["wall", *INNER, "other", "shrinking"]
    rows = [[name, int(row["tests"]), *(row[c] for c in columns)] for name, row in ordered]
    rows.append(["all tests", sum(int(r["tests"]) for r in files.values()),
                 *(sum(r[c] for r in files.values()) for c in columns)])
    print(f"\nprofiled run: {wall:.1f} s wall; tests {test_seconds:.1f} s summed over {WORKERS} workers; "
          f"probe {session.get('probe', 0):.1f} s; report {session.get('report', 0):.1f} s; "
          f"HTTP outside tests (probe included) {session.get('http', 0):.1f} s")
    print(table(["file (seconds)", "tests", *columns], rows))
    return {"wall_s": wall, "tests_s": test_seconds, "session": session,
            "files": {name: dict(row) for name, row in ordered}}
