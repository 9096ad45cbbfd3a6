"""``tokenspec bench``: speed figures for the reference frontend, each against a baseline measured in the same run.

Speed targets live here and not in timed tests: a shared 2-core host is too noisy for a pass/fail test on
absolute times, but a ratio measured in one run, with requests interleaved (A, B, A, B) so that noise
hits both sides alike, is stable enough to report against a target.

- ``frontend``: our CPU frontend vs vLLM's GPU-less render server on the same model and parsers: chat render
  of a ~300-token conversation and chat derender of ~300 output tokens; sequential p50/p95/p99, throughput at
  concurrency 1 and 16, the floor (empty endpoint + in-process ``tokenizers`` work for the same payload) and the
  render floor server (``floor_server.py``: only body, template, encode and answer, on the same stack).
- ``gateway``: the whole reference server; a 16-token greedy generation through vLLM's coupled endpoint vs
  through our gateway, then a load test of mixed streaming / non-streaming requests with RSS samples and a
  parity sample.
- ``scale``: how the cost grows with the work, against vLLM's render server: chat render from 1k to 128k prompt
  tokens, whole derender from 1k to 32k output tokens, and a streamed derender's cost per chunk and state size from
  token 50 to token 32,000, with whole-stream totals.
- ``suite``: wall time of a full ``tokenspec run`` against an implementation's deployment (start-up excluded),
  and with ``--profile`` where a profiled run spends its time, per test file and phase.
- ``target``: any implementation's render and derender speed against the bundled frontend on the same model,
  measured in the same run (the matrix shows these ratios beside each verdict).
- ``token-loop``: the token-native proposal's payoff through the reference server: stored ids -> token prompt ->
  token answer -> stored, against detokenize -> text prompt -> text answer -> re-tokenize, on the same records;
  encode/decode work and bytes on the wire per request, as token/text ratios.

Every benchmark writes ``<out>/<what>.json``. Servers are started on free ports and always stopped, also on
an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenspec.benchmarks.frontend import bench_frontend
from tokenspec.benchmarks.gateway import bench_gateway
from tokenspec.benchmarks.lifecycle import sigterm_as_interrupt, write_result
from tokenspec.benchmarks.scale import bench_scale
from tokenspec.benchmarks.suite import bench_suite
from tokenspec.benchmarks.target import bench_target
from tokenspec.benchmarks.token_loop import bench_token_loop
from tokenspec.core.errors import UsageError

BENCHMARKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "frontend": bench_frontend, "gateway": bench_gateway, "suite": bench_suite, "token-loop": bench_token_loop,
    "target": bench_target, "scale": bench_scale}


def bench_from_args(args: argparse.Namespace) -> int:
    """Run one benchmark, print its figures, write ``<out>/<what>.json``.

    Exit code 0 when it ran (a MISS is a figure to report, not a crash), 1 with ``--strict`` and a MISS."""
    if getattr(args, "requests", 1) < 1:
        raise UsageError("--requests must be at least 1")
    args.duration = getattr(args, "duration", 60.0)
    args.clients = getattr(args, "clients", 32)
    if args.duration <= 0 or args.clients < 1:
        raise UsageError("--duration must be positive and --clients at least 1")
    if args.what == "target" and not getattr(args, "target", None):
        raise UsageError("bench target needs --target URL")
    out_dir = Path(getattr(args, "out", None) or "benchmarks/results")
    with sigterm_as_interrupt():
        doc = BENCHMARKS[args.what](args)
    path = write_result(out_dir, args.what, doc)
    print(f"\nwrote {path}")
    missed = [t for t in doc.get("targets", []) if t["verdict"] == "MISS"]
    return 1 if missed and getattr(args, "strict", False) else 0
