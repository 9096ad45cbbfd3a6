"""`tokenspec init`: set up the conformance gate in an implementer's repository (tokenspec/scaffold.py)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from tokenspec.commands.parsing import RUN_EXITS, add_run_arguments, command
from tokenspec.core.errors import UsageError


def _init(args: argparse.Namespace) -> int:
    import yaml

    from tokenspec import scaffold
    from tokenspec.core.config import RunConfig
    from tokenspec.runner import check_servers, run

    for flag, value in (("--config", args.config), ("--report", args.report), ("--profile", args.profile),
                        ("--expectations", args.expectations)):
        if value:
            raise UsageError(f"tokenspec init writes its own {flag.lstrip('-')}; run it without {flag}")
    root = Path(args.dir or ".").resolve()
    scaffold.refuse_overwrite(root, args.force)
    if not args.target and sys.stdin.isatty():
        args.target = input("URL of the server to test (its base URL, without /v1): ").strip() or None
    if not args.target:
        raise UsageError("pass --target URL: the server the gate tests")
    given = {dest: value for dest, value in vars(args).items() if value is not None}
    root.mkdir(parents=True, exist_ok=True)
    config = check_servers(scaffold.with_first_run_settings(RunConfig.from_args(args), root))
    implementation = scaffold.implementation_of(config, args.implementation)

    print(f"tokenspec init: probing {config.target} for what it offers ...")
    profile = scaffold.probe_profile(config, implementation)
    _write(root, scaffold.PROFILE, "# What this server offers, as the probe saw it when `tokenspec init` ran: each"
           " feature here is\n# a commitment (PROFILE-001 fails when the probe cannot confirm it). Edit to declare"
           " more.\n" + yaml.safe_dump(profile, sort_keys=False))
    print(f"tokenspec init: first run (seed {config.seed}), to record what fails today ...")
    result = run(replace(config, profile=str(root / scaffold.PROFILE)))
    if result.report is None or result.exit_code not in (0, 1):
        print(f"tokenspec init: the first run had no verdict ({result.headline}); no settings written (the"
              f" profile draft is in {scaffold.PROFILE})", file=sys.stderr)
        return result.exit_code
    report = result.report
    from tokenspec.suite.engine.results import TestResult
    from tokenspec.suite.reporting.coverage import blind

    failures = [t for t in report["tests"] if t["outcome"] in ("failed", "error")]
    unjudged_must = len(blind([TestResult(**t) for t in report["tests"]], "must"))  # what require-judged fails on
    _write(root, scaffold.EXPECTATIONS, scaffold.expectations_text(report, implementation))
    _write(root, Path("tokenspec.toml"), scaffold.settings_text(config, given, unjudged_must))
    install = args.install or "tokenspec"
    written = [scaffold.PROFILE, scaffold.EXPECTATIONS, Path("tokenspec.toml")]
    if args.force or not (root / scaffold.WORKFLOW).exists():
        keys = tuple(dict.fromkeys(v.rpartition("=")[2] for v in args.api_key_env or () if v.rpartition("=")[2]))
        _write(root, scaffold.WORKFLOW, scaffold.workflow_text(install, args.start, config.target, keys))
        written.append(scaffold.WORKFLOW)
    noxfile = root / "noxfile.py"
    text = scaffold.noxfile_text(noxfile.read_text() if noxfile.exists() else None, install)
    if text is not None:
        noxfile.write_text(text)
        written.append(Path("noxfile.py"))
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    if f"/{scaffold.REPORT}/" not in lines:
        ignore.write_text("".join(f"{line}\n" for line in [*lines, f"/{scaffold.REPORT}/"]))
    print(f"tokenspec init: wrote {', '.join(str(p) for p in written)} in {root}")
    print(f"tokenspec init: {len(failures)} failure(s) of today recorded as known in {scaffold.EXPECTATIONS}"
          " (write each reason, or fix it and delete the entry)")
    if unjudged_must:
        print(f"tokenspec init: the first run could not judge {unjudged_must} MUST requirement(s) (report: "
              f"{scaffold.REPORT}/summary.md says which flag judges each); require-judged is left unset")
    print("tokenspec init: the gate: `tokenspec run` here (or `nox -s conformance`); it passes with known failures"
          " only until the server changes")
    return 0


def _write(root: Path, relative: Path, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    init = command(
        sub, "init", "set up the conformance gate in your repository",
        description="Probes the target, runs the suite once, and writes the gate: tokenspec.toml (the settings),\n"
                    "conformance/profile.yaml (what the probe saw the server offer), conformance/expectations.yaml\n"
                    "(today's failures, as known ones), .github/workflows/tokenspec.yml and a nox session. Run\n"
                    "`tokenspec run` afterwards: it passes with known failures only. Takes tokenspec run's flags.",
        exits=RUN_EXITS,
        examples=[
            "tokenspec init --target http://127.0.0.1:8000",
            "tokenspec init --target http://127.0.0.1:8000 --start './serve.sh --port 8000'"
            " --install 'tokenspec==0.1.0'",
        ],
    )
    add_run_arguments(init)
    init.add_argument("--dir", help="the repository to set up (default: the working directory)")
    init.add_argument("--implementation", metavar="'NAME VERSION'",
                      help="what the server is (default: its /v1/models owner and /version)")
    init.add_argument("--install", metavar="SPEC",
                      help="what the workflow and the nox session pip-install (default: tokenspec)")
    init.add_argument("--start", metavar="COMMAND",
                      help="the shell command that starts the server in CI (the workflow waits for its /health)")
    init.add_argument("--force", action="store_true", help="rewrite an existing gate")
    init.set_defaults(handler=_init)
