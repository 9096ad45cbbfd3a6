"""`tokenspec embedded`: the main job (tiny model + reference server + suite + report)."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    EMBEDDED_SEED,
    RUN_EXITS,
    command,
)


def _embedded(args: argparse.Namespace) -> int:
    from tokenspec.embedded import run_embedded

    return run_embedded(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    embedded = command(
        sub, "embedded", "the main job: tiny model + reference server + suite + report",
        description="Needs no URL: builds the tiny model, starts the reference server (CPU frontend in front of a\n"
                    "real vLLM engine), runs the whole suite against it and writes the report. The seed is fixed,\n"
                    "so the job gives the same verdict on every run.",
        exits=RUN_EXITS,
        examples=["tokenspec embedded", "tokenspec embedded --seed 7 --report out/seed7"],
    )
    embedded.add_argument("--report", default="out/embedded", metavar="DIR",
                          help="report folder (default: out/embedded, untracked; reports/embedded is committed)")
    embedded.add_argument("--work", default=None, metavar="DIR",
                          help="folder for the model and logs (default: a cache folder)")
    embedded.add_argument("-n", "--workers", default="2", help="parallel workers (pytest-xdist), or 0 for none")
    embedded.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")
    embedded.add_argument("--seed", type=int, default=EMBEDDED_SEED,
                          help="hypothesis/schemathesis seed (the main job repeats)")
    embedded.set_defaults(handler=_embedded)
