"""`tokenspec spec lint|drift|parsers`: the OpenAPI documents, the requirement catalogue, the parser table."""

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
    import json

    from tokenspec.core.errors import UsageError
    from tokenspec.core.target import normalise_url
    from tokenspec.core.transport import Transport
    from tokenspec.specs.drift import drift, drift_documents

    if bool(args.target) == bool(args.openapi):
        raise UsageError("give exactly one of --target URL and --openapi FILE")
    if args.openapi:
        try:
            theirs = json.loads(Path(args.openapi).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {args.openapi} as an OpenAPI document: {exc}") from None
        if not isinstance(theirs, dict) or "paths" not in theirs:
            raise UsageError(f"{args.openapi} is not an OpenAPI document (no 'paths')")
        report = drift_documents(args.openapi, theirs, generation=args.generation)
    else:
        transport = Transport.from_args(args, timeout=())
        report = drift(normalise_url(args.target), timeout=args.timeout, transport=transport,
                       generation=args.generation)
    text = report.to_markdown()
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out = out.with_suffix("") if out.suffix in (".md", ".json") else out  # "vllm-0.34-render" keeps its dots
        out.with_name(out.name + ".md").write_text(text)
        out.with_name(out.name + ".json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    print(text)
    if args.strict and report.undocumented:
        print(f"{len(report.undocumented)} undocumented difference(s)", file=sys.stderr)
        return 1
    return 0


def _spec_parsers(args: argparse.Namespace) -> int:
    from tokenspec.campaigns.parser_table import record, write_rows
    from tokenspec.core.errors import UsageError
    from tokenspec.specs.parser_families import configurations, shapes

    known = configurations()
    names = {f"{r or 'none'}+{t or 'none'}": (r, t) for r, t in known}
    configs = known
    if args.configurations:
        unknown = [c for c in args.configurations if c not in names]
        if unknown:
            raise UsageError(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(names)}")
        configs = [names[c] for c in args.configurations]
    if args.shapes and (unknown := [s for s in args.shapes if s not in shapes()]):
        raise UsageError(f"unknown shape(s) {', '.join(unknown)}; the table's shapes: {', '.join(shapes())}")
    diff = record(configs, args.shapes or None)
    for line in diff.added:
        print(f"{'added' if args.write else 'missing'}: {line}")
    for line in diff.differing:
        print(f"differs: {line}")
    if args.write and diff.added:
        write_rows(diff.rows)
    print(f"{len(diff.added)} row(s) {'added' if args.write else 'missing'}, {len(diff.differing)} differing")
    return 1 if diff.differing or (diff.added and not args.write) else 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    spec = command(sub, "spec", "the OpenAPI documents and requirement catalogue",
                    examples=["tokenspec spec lint", "tokenspec spec drift --target http://127.0.0.1:8000"])
    spec_sub = spec.add_subparsers(dest="action", required=True, metavar="ACTION")
    command(spec_sub, "lint", "check documents, catalogue and cross-references",
             exits=(EXIT_OK, "1  the specs have problems (listed on stdout)", EXIT_USAGE),
             examples=["tokenspec spec lint"]).set_defaults(handler=_spec_lint)
    drift = command(spec_sub, "drift", "compare a live server's /openapi.json with the spec",
                     exits=(EXIT_OK, "1  --strict, and a difference specs/drift.yaml does not document", EXIT_USAGE),
                     examples=["tokenspec spec drift --target http://127.0.0.1:8000 --out out/drift",
                               "tokenspec spec drift --openapi openapi.json --generation 0.34 --strict"])
    drift.add_argument("--target", metavar="URL", help="base URL of the server")
    drift.add_argument("--openapi", metavar="FILE", help="a saved openapi.json instead of a live server")
    drift.add_argument("--generation", help="the server's API generation (default: from its GET /version)")
    drift.add_argument("--strict", action="store_true",
                       help="exit 1 when a difference is not documented in specs/drift.yaml")
    drift.add_argument("--out", metavar="PATH", help="write PATH.md and PATH.json")
    drift.add_argument("--timeout", type=float, default=10.0, help="request timeout in seconds")
    add_transport_arguments(drift)
    drift.set_defaults(handler=_spec_drift)
    parsers = command(spec_sub, "parsers", "record specs/parsers.yaml's rows from vLLM's own parsers",
                      exits=(EXIT_OK, "1  a row differs from vLLM's answer, or rows are missing without --write",
                             EXIT_USAGE),
                      examples=["tokenspec spec parsers --configurations none+qwen3_coder --write",
                                "tokenspec spec parsers   # re-record every row and report what differs"])
    parsers.add_argument("--configurations", nargs="+", metavar="R+T",
                         help="reasoning+tool parser pairs, e.g. qwen3+hermes none+qwen3_coder (default: all)")
    parsers.add_argument("--shapes", nargs="+", metavar="SHAPE", help="only these shapes (default: all)")
    parsers.add_argument("--write", action="store_true", help="add the missing rows to specs/parsers.yaml")
    parsers.set_defaults(handler=_spec_parsers)
