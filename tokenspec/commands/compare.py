"""`tokenspec compare`: what changed between two runs."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    EXIT_OK,
    EXIT_USAGE,
    command,
)


def _compare(args: argparse.Namespace) -> int:
    from tokenspec.run_diff import compare_from_args

    return compare_from_args(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    compare = command(
        sub, "compare", "what changed between two runs: fixed, regressed, changed cause, judged or not",
        description="RUN_A and RUN_B are run folders (or their report.json), typically two versions of one\n"
                    "implementation on one configuration. Tests are matched by name.",
        exits=(EXIT_OK + ": nothing regressed", "1  a test that passed in RUN_A fails in RUN_B", EXIT_USAGE),
        examples=["tokenspec compare out/main out/my-branch",
                  "tokenspec compare out/v1 out/v2 --out out/compare"],
    )
    compare.add_argument("run_a", metavar="RUN_A", help="the earlier run (folder or report.json)")
    compare.add_argument("run_b", metavar="RUN_B", help="the later run (folder or report.json)")
    compare.add_argument("--out", metavar="DIR", help="also write compare.md and compare.json here")
    compare.set_defaults(handler=_compare)
