"""`tokenspec spec lint|drift`: the OpenAPI documents and the requirement catalogue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenspec.commands.parsing import (
    EXIT_OK,
    EXIT_USAGE,
    add_transport_arguments,
    command,
)


def _spec_lint(args: argparse.Namespace) -> int:
    from tokenspec.specs.lint import lint

    problems = lint()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return 1
    from tokenspec.specs.catalogue import load_catalogue

    print(f"specs clean: {len(load_catalogue())} requirements")
    return 0


def _spec_drift(args: argparse.Namespace) -> int:
    from tokenspec.specs.drift import drift
    from tokenspec.target import normalise_url
    from tokenspec.transport import Transport

    transport = Transport.from_args(args, timeout=())
    report = drift(normalise_url(args.target), timeout=args.timeout, transport=transport)
    text = report.to_markdown()
    if args.out:
        import json

        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    print(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    spec = command(sub, "spec", "the OpenAPI documents and requirement catalogue",
                    examples=["tokenspec spec lint", "tokenspec spec drift --target http://127.0.0.1:8000"])
    spec_sub = spec.add_subparsers(dest="action", required=True, metavar="ACTION")
    command(spec_sub, "lint", "check documents, catalogue and cross-references",
             exits=(EXIT_OK, "1  the specs have problems (listed on stdout)", EXIT_USAGE),
             examples=["tokenspec spec lint"]).set_defaults(handler=_spec_lint)
    drift = command(spec_sub, "drift", "compare a live server's /openapi.json with the spec",
                     examples=["tokenspec spec drift --target http://127.0.0.1:8000 --out out/drift"])
    drift.add_argument("--target", required=True, metavar="URL", help="base URL of the server")
    drift.add_argument("--out", metavar="PATH", help="write PATH.md and PATH.json")
    drift.add_argument("--timeout", type=float, default=10.0, help="request timeout in seconds")
    add_transport_arguments(drift)
    drift.set_defaults(handler=_spec_drift)
