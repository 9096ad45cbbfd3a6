"""`tokenspec parity`: two servers, or your own traffic through the split pipeline, compared."""

from __future__ import annotations

import argparse

from tokenspec.commands.parsing import (
    EXIT_OK,
    EXIT_USAGE,
    add_transport_arguments,
    command,
)


def _parity(args: argparse.Namespace) -> int:
    from tokenspec.campaigns.parity import parity_from_args

    return parity_from_args(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parity = command(
        sub, "parity", "run the same cases through two servers and compare",
        description="--a/--b: generated greedy cases through two coupled endpoints. --requests: your own requests\n"
                    "through the split pipeline and the coupled reference, at the token level where the reference\n"
                    "echoes ids (else at temperature 0 with seed 0, said per request). A is the target's\n"
                    "credentials role, B the reference's (--api-key-env reference=NAME).",
        exits=(EXIT_OK, "1  the servers disagree on at least one case, or a case failed with an error (a line says"
                       " which)", EXIT_USAGE),
        examples=["tokenspec parity --a http://127.0.0.1:8000 --b http://127.0.0.1:8100 --report out/parity",
                  "tokenspec parity --requests traffic.jsonl --target http://render:8000 --engine http://gpu:8200"
                  " --reference http://serve:8000 --report out/traffic"],
    )
    parity.add_argument("--a", metavar="URL", help="base URL of server A (generated cases)")
    parity.add_argument("--b", metavar="URL", help="base URL of server B (generated cases)")
    parity.add_argument("--requests", metavar="FILE.jsonl",
                        help="your own traffic (OpenAI Batch input lines: custom_id, method, url, body) through the"
                             " split pipeline (--target, --engine) and the coupled --reference")
    parity.add_argument("--target", metavar="URL", help="with --requests: the render/derender host")
    parity.add_argument("--engine", metavar="URL", help="with --requests: the generate host (default: --target)")
    parity.add_argument("--reference", metavar="URL", help="with --requests: the coupled serve endpoint")
    parity.add_argument("--model", metavar="NAME", help="model name (default: A's /v1/models)")
    parity.add_argument("--report", metavar="DIR", help="write parity.json and parity.html here")
    parity.add_argument("--cases", type=int, default=40, help="number of generated cases")
    parity.add_argument("--seed", type=int, default=0, help="case generator seed")
    parity.add_argument("--timeout", type=float, default=60.0, help="request timeout in seconds")
    add_transport_arguments(parity)
    parity.set_defaults(handler=_parity)
