"""`tokenspec mutants`: plant realistic defects one at a time and see which tests catch them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenspec.commands.parsing import (
    EMBEDDED_SEED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    MODEL_FAMILIES,
    add_transport_arguments,
    command,
)


def _mutants(args: argparse.Namespace) -> int:
    from tokenspec.campaigns.mutants import Options, run_campaign, select
    from tokenspec.core.target import check_reachable, normalise_url

    defects = select(args.only)
    if not args.list:
        from tokenspec.suite.engine.expectations import folder_family

        family = args.family if not args.target else folder_family(args.tokenizer)
        shown = [d for d in defects if d.shows_on(family)]
        if len(shown) < len(defects):
            print(f"tokenspec: {len(defects) - len(shown)} defect(s) cannot show on the {family} family's tokenizer "
                  f"and template, left out: {', '.join(d.name for d in defects if d not in shown)}")
        defects = shown
    if args.list:
        for defect in defects:
            print(f"{defect.name:42} {defect.area:16} {','.join(defect.requirements):24} {defect.imitates}")
        return 0
    if not args.target:
        return _mutants_on_the_reference_server(args, defects)
    from tokenspec.core.transport import Transport

    transport = Transport.from_args(args)
    urls = {name: normalise_url(url) if url else None
            for name, url in (("target", args.target), ("engine", args.engine), ("reference", args.reference))}
    for role, url in urls.items():
        if url:
            check_reachable(url, transport, role)
    options = Options(urls["target"] or "", urls["engine"], urls["reference"], args.tokenizer, args.profile,
                      args.expectations, args.model, args.seed, str(args.workers), args.max_examples,
                      transport=transport)
    return _mutants_report(args, run_campaign(options, defects, Path(args.report)))


def _mutants_on_the_reference_server(args: argparse.Namespace, defects: list) -> int:
    """No --target: judge the suite on the bundled reference server, on the tiny model or a real family served
    with that family's parsers and the reference server's profile declaring them."""
    import json

    from tokenspec.campaigns.mutants import Options, run_campaign
    from tokenspec.harness.implementations.reference import ReferenceServer, default_model, reference_profile
    from tokenspec.harness.models.families import FAMILY_PARSERS

    if args.family == "tiny":
        model_dir = default_model()
    else:
        from tokenspec.campaigns.golden_corpus import family_folder

        model_dir = family_folder(args.family)
    name = json.loads((model_dir / "tokenspec-model.json").read_text())["name"]
    tool, reasoning = FAMILY_PARSERS[args.family]
    profile = str(reference_profile(tool, reasoning))
    with ReferenceServer(model_dir, name, tool_parser=tool, reasoning_parser=reasoning) as server:
        assert server.frontend is not None and server.engine is not None
        options = Options(server.frontend.url, None, server.engine.url, str(model_dir), profile, None,
                          name, args.seed, str(args.workers), args.max_examples)
        return _mutants_report(args, run_campaign(options, defects, Path(args.report)))


def _mutants_report(args: argparse.Namespace, report: Any) -> int:
    print(f"tokenspec: {sum(r.detected for r in report.results)}/{len(report.results)} defects detected"
          f" ({report.detection_rate:.0%}); clean run: {len(report.clean_failures)} false alarm(s)")
    print(f"tokenspec: report in {args.report}/ (mutants.md, mutants.html, mutants.json, and each run under runs/)")
    escaped = [r.name for r in report.results if not r.detected]
    return 1 if escaped or report.clean_failures else 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    mutants = command(
        sub, "mutants", "judge the suite: plant realistic defects one at a time and see which tests catch them",
        description="A reverse proxy between the suite and a correct target plants one named defect per suite run\n"
                    "(the reference URL is never mutated: it is the oracle). A clean run through the proxy comes\n"
                    "first and must have no failure; a defect is detected when a test that did not fail clean fails.",
        exits=(EXIT_OK + ": every defect detected, no false alarm",
               "1  a defect escaped or the clean run failed", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec mutants --list",
                  "tokenspec mutants --only render-drops-system derender-drops-usage",
                  "tokenspec mutants --target http://127.0.0.1:8000 --reference http://127.0.0.1:8200 "
                  "--tokenizer /tmp/tiny --only render-drops-system derender-drops-usage --report out/mutants"],
    )
    mutants.add_argument("--target", metavar="URL",
                         help="a correct target (base URL, as for tokenspec run); without it, the bundled reference "
                              "server on the tiny model, with its profile and vLLM's coupled endpoint as reference")
    mutants.add_argument("--engine", metavar="URL", help="a correct engine, proxied and mutated like the target")
    mutants.add_argument("--reference", metavar="URL", help="coupled reference for parity (never mutated)")
    mutants.add_argument("--tokenizer", metavar="DIR", help="model folder, as for tokenspec run")
    mutants.add_argument("--profile", metavar="FILE", help="target profile, as for tokenspec run")
    mutants.add_argument("--expectations", metavar="FILE", help="the target's known failures, as for tokenspec run")
    mutants.add_argument("--model", metavar="NAME", help="model name, as for tokenspec run")
    mutants.add_argument("--family", choices=MODEL_FAMILIES, default="tiny",
                         help="without --target: the model family the bundled reference server serves, with that "
                              "family's parsers")
    mutants.add_argument("--only", nargs="+", metavar="NAME", help="plant only these defects (default: all)")
    mutants.add_argument("--list", action="store_true", help="list the catalogue and exit")
    mutants.add_argument("--report", default="out/mutants", metavar="DIR", help="report folder")
    mutants.add_argument("--seed", type=int, default=EMBEDDED_SEED, help="suite seed, the same for every run")
    mutants.add_argument("-n", "--workers", default="2", help="parallel workers per suite run")
    mutants.add_argument("--max-examples", type=int, default=3,
                         help="hypothesis examples per property test (the committed campaign ran 3)")
    add_transport_arguments(mutants)
    mutants.set_defaults(handler=_mutants)
