"""``tokenspec bench suite``: wall time of a full ``tokenspec run`` against the reference server, run as a child
process (the harness never imports the CLI); the server's start-up is excluded."""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenspec.errors import UsageError
from tokenspec.harness.benchmarks.lifecycle import machine_facts, model_folder, start_reference
from tokenspec.harness.benchmarks.statistics import Target
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

SUITE_TARGET_S = 120.0


def bench_suite(args: argparse.Namespace) -> dict[str, Any]:
    model_dir = model_folder(args)
    name = DEFAULT_MODEL_NAME
    with contextlib.ExitStack() as stack:
        server, startup_s = start_reference(stack, model_dir)
        assert server.engine is not None and server.frontend is not None
        report_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenspec-bench-")))
        command = [
            sys.executable, "-m", "tokenspec", "run", "--target", server.frontend.url,
            "--reference", server.engine.url, "--tokenizer", str(model_dir), "--model", name,
            "--report", str(report_dir), "-n", "2",
        ]
        start = time.perf_counter()
        code = subprocess.call(command)  # the wall time includes the child's interpreter start-up and imports
        wall = time.perf_counter() - start
        report = report_dir / "report.json"
        if code not in (0, 1) or not report.exists():  # 0 or 1 is the suite's verdict; else it could not run
            raise UsageError(f"tokenspec run could not run the suite (exit code {code}); see its output above")
        summary = json.loads(report.read_text())["summary"]
    target = Target("suite wall time / 120 s", wall / SUITE_TARGET_S, 1.0)
    print(f"\nserver start-up (excluded): {startup_s:.1f} s")
    print(f"tokenspec run -n 2 wall time: {wall:.1f} s (exit code {code})")
    print(f"{'PASS' if target.passed else 'MISS'}  suite wall time {wall:.1f} s (target <= {SUITE_TARGET_S:.0f} s)")
    return {"benchmark": "suite", "machine": machine_facts(), "workers": 2, "startup_s": startup_s,
            "wall_s": wall, "target_s": SUITE_TARGET_S, "exit_code": code,
            "summary": {k: summary.get(k) for k in ("passed", "failed", "errors", "unsupported", "xfailed",
                                                    "xpassed", "total")},
            "targets": [{**target.to_dict(), "measured_s": round(wall, 2)}]}
