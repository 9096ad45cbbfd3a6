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
                    "hosted is reported as not tested (with the flag that enables it), never as a failure. Every\n"
                    "option can live in tokenspec.toml (or [tool.tokenspec] in pyproject.toml) under its flag's\n"
                    "name without the dashes; a flag given here overrides the file.",
        exits=RUN_EXITS,
        examples=[
            "tokenspec run --target http://127.0.0.1:8000",
            "tokenspec run --target http://render:8000 --engine http://gpu:8000 --reference http://serve:8000 "
            "--report out/run",
            "tokenspec run --target http://127.0.0.1:8000 --expectations known-failures.yaml --seed 20261201",
            "tokenspec run    # the settings of ./tokenspec.toml (tokenspec init writes one)",
        ],
    )
    add_run_arguments(run)
    run.set_defaults(handler=_run)
