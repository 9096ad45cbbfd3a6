"""`tokenspec run`: the conformance suite against a URL (tokenspec/runner.py does the work)."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    RUN_EXITS,
    add_run_arguments,
    command,
)


def _run(args: argparse.Namespace) -> int:
    from tokenspec.runner import run_from_args

    return run_from_args(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    run = command(
        sub, "run", "run the conformance suite against a URL",
        description="The suite first probes which roles each URL hosts and which features it offers; what is not\n"
                    "hosted is reported as not tested (with the flag that enables it), never as a failure.",
        exits=RUN_EXITS,
        examples=[
            "tokenspec run --target http://127.0.0.1:8000",
            "tokenspec run --target http://render:8000 --engine http://gpu:8000 --reference http://serve:8000 "
            "--report out/run",
            "tokenspec run --target http://127.0.0.1:8000 --expectations reports/expectations/vllm-0.32.0-cpu.yaml "
            "--seed 20261201",
        ],
    )
    add_run_arguments(run)
    run.set_defaults(handler=_run)
