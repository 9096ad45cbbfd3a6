"""`tokenspec bench`: benchmarks against vLLM measured in the same run."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    EXIT_OK,
    EXIT_USAGE,
    add_transport_arguments,
    command,
)


def _bench(args: argparse.Namespace) -> int:
    from tokenspec.benchmarks import bench_from_args

    return bench_from_args(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    bench = command(
        sub, "bench", "benchmarks against vLLM measured in the same run",
        exits=(EXIT_OK, "1  --strict and a target was missed", EXIT_USAGE),
        examples=["tokenspec bench frontend --requests 100", "tokenspec bench scale",
                  "tokenspec bench suite --implementation vllm --profile",
                  "tokenspec bench target --target https://render.internal:8443 --api-key-env RENDER_KEY"],
    )
    bench.add_argument("what", choices=["frontend", "gateway", "scale", "suite", "token-loop", "target"],
                       help="what to measure")
    bench.add_argument("--model", metavar="DIR", help="model folder (default: the embedded tiny model)")
    bench.add_argument("--requests", type=int, default=200, help="timed requests per server and endpoint")
    bench.add_argument("--duration", type=float, default=60.0, help="gateway: load-test seconds")
    bench.add_argument("--clients", type=int, default=32, help="gateway: concurrent load-test clients")
    bench.add_argument("--implementation", choices=["reference", "vllm", "aphrodite"], default="reference",
                       help="suite: whose deployment (matrix plug-in) the suite runs against")
    bench.add_argument("--profile", action="store_true",
                       help="suite: a second, profiled run; prints where it spends its time per test file and phase")
    bench.add_argument("--target", metavar="URL", help="target: the implementation to measure (render + derender)")
    bench.add_argument("--engine", metavar="URL", help="target: also time render -> generate -> derender on it")
    bench.add_argument("--tool-parser", default="hermes", help="target: the baseline frontend's tool parser")
    bench.add_argument("--reasoning-parser", default="qwen3",
                       help="target: the baseline frontend's reasoning parser")
    bench.add_argument("--out", default="benchmarks/results", metavar="DIR", help="folder for the JSON results")
    bench.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    add_transport_arguments(bench)
    bench.set_defaults(handler=_bench)
