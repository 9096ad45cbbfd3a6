"""`tokenspec expectations draft|evidence|prune`: known-failure files of an implementation."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenspec.commands.parsing import (
    command,
)
from tokenspec.core.errors import UsageError


def _expectations_draft(args: argparse.Namespace) -> int:
    import json

    from tokenspec.suite.engine.expectations import draft

    path = Path(args.report)
    path = path / "report.json" if path.is_dir() else path
    if not path.is_file():
        raise UsageError(f"no report.json at {args.report}")
    name, _, version = args.implementation.partition(" ")
    if not version:
        raise UsageError("--implementation needs 'NAME VERSION'")
    config = dict(item.split("=", 1) for item in args.configuration.split(",") if "=" in item)
    print(draft(json.loads(path.read_text()), {"name": name, "version": version}, config), end="")
    return 0


def _expectations_evidence(args: argparse.Namespace) -> int:
    import json

    from tokenspec.suite.engine.expectations import with_evidence

    reports = []
    for folder in args.reports:
        path = Path(folder) / "report.json"
        if not path.is_file():
            raise UsageError(f"no report.json in {folder}")
        reports.append(json.loads(path.read_text()))
    Path(args.file).write_text(with_evidence(args.file, reports))
    print(f"evidence recorded in {args.file}")
    return 0


def _expectations_prune(args: argparse.Namespace) -> int:
    import json

    from tokenspec.suite.engine.expectations import pruned

    runs = []
    for folder in args.reports:
        report, cell = Path(folder) / "report.json", Path(folder) / "cell.json"
        if not report.is_file():
            raise UsageError(f"no report.json in {folder}")
        family = args.family or (json.loads(cell.read_text()).get("family") if cell.is_file() else None)
        if not family:
            raise UsageError(f"{folder} has no cell.json naming its model family: give --family")
        runs.append((family, json.loads(report.read_text())))
    text, dropped = pruned(args.file, runs, only_seen=args.only_seen)
    Path(args.file).write_text(text)
    for line in dropped:
        print(f"dropped {line}")
    print(f"{len(dropped)} entr{'y' if len(dropped) == 1 else 'ies'} dropped from {args.file}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    expectations = command(sub, "expectations", "known-failure files of an implementation",
                            examples=["tokenspec expectations draft out/run --implementation 'vllm 0.32.0'"])
    exp_sub = expectations.add_subparsers(dest="action", required=True, metavar="ACTION")
    exp_draft = command(exp_sub, "draft", "draft an expectations file from a run's report.json",
                         description="Prints YAML on stdout: one entry per failed test, to be reviewed and given "
                                     "a reason.",
                         examples=["tokenspec expectations draft out/run --implementation 'vllm 0.32.0' "
                                   "--configuration reasoning_parser=qwen3 > vllm.yaml"])
    exp_draft.add_argument("report", metavar="REPORT", help="a run's report folder (or its report.json)")
    exp_draft.add_argument("--implementation", required=True, help="NAME VERSION, e.g. 'vllm 0.32.0'")
    exp_draft.add_argument("--configuration", default="", help="KEY=VALUE,... (model, parsers, roles)")
    exp_draft.set_defaults(handler=_expectations_draft)
    exp_evidence = command(exp_sub, "evidence", "record, per entry, the request and answer of a run",
                            examples=["tokenspec expectations evidence vllm.yaml out/run"])
    exp_evidence.add_argument("file", metavar="FILE", help="the expectations file (rewritten in place)")
    exp_evidence.add_argument("reports", metavar="REPORT", nargs="+",
                              help="report folders of runs made with this file")
    exp_evidence.set_defaults(handler=_expectations_evidence)
    exp_prune = command(exp_sub, "prune", "drop the entries no failure of the given runs explains",
                        description="For a file copied from an older release: every entry that applied to one of "
                                    "the runs (its families) and explained none of their failures is dropped; "
                                    "seed-dependent entries and entries of families no run covered are kept.",
                        examples=["tokenspec expectations prune known-failures.yaml out/run-tiny out/run-qwen3"])
    exp_prune.add_argument("file", metavar="FILE", help="the expectations file (rewritten in place)")
    exp_prune.add_argument("reports", metavar="REPORT", nargs="+",
                           help="report folders of runs made with this file (a matrix cell's cell.json names"
                                " its family)")
    exp_prune.add_argument("--family", help="the model family of every REPORT (default: each cell.json's)")
    exp_prune.add_argument("--only-seen", action="store_true",
                           help="keep only the entries a failure of these runs explained (so every entry's evidence"
                                " can come from them), dropping unjudged and seed-dependent ones too")
    exp_prune.set_defaults(handler=_expectations_prune)
