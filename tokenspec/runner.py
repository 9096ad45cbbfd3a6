"""``tokenspec run``: check the target, then hand over to pytest with the suite plugin.

Everything a user can get wrong is checked here first (bad URLs, an unreachable target, a missing
expectations file), so a bad invocation ends with one line and exit code 2 rather than a failed run.
The exit code of a completed run comes from the results, not from pytest: 0 when no MUST-level test
failed unexpectedly, 1 when one did.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import tempfile
from pathlib import Path

from tokenspec.errors import UsageError
from tokenspec.target import check_model_served, check_reachable, normalise_url, served_model


def pytest_args(args: argparse.Namespace, report_dir: Path) -> list[str]:
    from tokenspec.suite.plugin import SUITE_DIR

    target = normalise_url(args.target)
    out = [
        str(SUITE_DIR),
        "--rootdir",
        str(SUITE_DIR),
        "-c",
        str(SUITE_DIR / "pytest.ini"),
        "--import-mode=importlib",
        "-p",
        "no:cacheprovider",
        # The runner imports the plugin module before pytest does; its asserts need no rewriting.
        "-W",
        "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        # Plugins are named, not autoloaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD, set by run_from_args): an autoloaded
        # plugin's whole distribution is assertion-rewritten, and with the suite's assertion-pass hook every
        # passing assert inside hypothesis then formats its operands (40x slower fuzzing).
        "-p",
        "tokenspec.suite.plugin",
        "-p",
        "xdist.plugin",
        "-p",
        "_hypothesis_pytestplugin",
        "--tokenspec-target",
        target,
        "--tokenspec-report",
        str(report_dir),
        "--tokenspec-level",
        args.level,
        "--tokenspec-timeout",
        str(args.timeout),
        "--tokenspec-max-examples",
        str(args.max_examples),
    ]
    for flag, value in (
        ("--tokenspec-engine", args.engine and normalise_url(args.engine)),
        ("--tokenspec-reference", args.reference and normalise_url(args.reference)),
        ("--tokenspec-model", args.model),
        ("--tokenspec-tokenizer", args.tokenizer),
        ("--tokenspec-expectations", args.expectations),
        ("--tokenspec-profile", args.profile),
    ):
        if value:
            out += [flag, value]
    # One seed drives hypothesis (every property test) and schemathesis; it is printed in the report header
    # and recorded in report.json, and `--seed` replays the same examples.
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    out += ["--tokenspec-seed", str(seed), f"--hypothesis-seed={seed}"]
    out += ["--tokenspec-command", replay_command(args, seed)]
    if str(args.workers) not in ("0", "1"):
        out += ["-n", str(args.workers), "--dist", "loadgroup"]
    if args.keyword:
        out += ["-k", args.keyword]
    if args.no_shrink:
        out += ["--tokenspec-no-shrink"]
    return out


def replay_command(args: argparse.Namespace, seed: int) -> str:
    """The ``tokenspec run`` command that replays this run: same servers, model, files, seed, level and examples.

    Paths are kept as given (relative to where the run was started). A report appends ``-k NAME`` to replay
    one test: argparse keeps the last ``-k``, so it overrides the run's own.
    """
    parts = ["tokenspec", "run", "--target", normalise_url(args.target)]
    for flag, value in (
        ("--engine", args.engine and normalise_url(args.engine)),
        ("--reference", args.reference and normalise_url(args.reference)),
        ("--model", args.model),
        ("--tokenizer", args.tokenizer),
        ("--expectations", args.expectations),
        ("--profile", args.profile),
    ):
        if value:
            parts += [flag, str(value)]
    parts += ["--seed", str(seed), "--level", args.level, "--max-examples", str(args.max_examples)]
    if args.timeout != 30.0:
        parts += ["--timeout", str(args.timeout)]
    if args.no_shrink:
        parts.append("--no-shrink")
    if getattr(args, "require_judged", None):
        parts += ["--require-judged", args.require_judged]
    if args.keyword:
        parts += ["-k", args.keyword]
    return shlex.join(parts)


def _prepare_pytest_environment() -> None:
    """The suite's asserts are rewritten with the assertion-pass hook; pytest caches rewritten modules by
    interpreter and pytest version only, so the suite keeps its bytecode apart from other pytest runs (the
    workers inherit the setting through the environment)."""
    import os
    import sys

    prefix = str(Path(os.environ.get("TOKENSPEC_CACHE", Path.home() / ".cache" / "tokenspec")) / "suite-bytecode")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


def run_from_args(args: argparse.Namespace) -> int:
    import pytest

    target = normalise_url(args.target)
    for url in filter(None, (target, args.engine, args.reference)):
        check_reachable(normalise_url(url))
    if args.model is None:
        args.model = served_model(target)
    else:
        check_model_served(target, args.model)
    if args.tokenizer and not (Path(args.tokenizer) / "tokenizer.json").exists():
        raise UsageError(f"--tokenizer {args.tokenizer}: no tokenizer.json in that folder")
    if args.expectations:
        from tokenspec.suite.expectations import load_expectations

        load_expectations(args.expectations)
    if args.profile:
        from tokenspec.suite.profile import load_profile

        load_profile(args.profile)
    report_dir = Path(args.report) if args.report else Path(tempfile.mkdtemp(prefix="tokenspec-"))
    _prepare_pytest_environment()
    code = pytest.main(pytest_args(args, report_dir))
    report = report_dir / "report.json"
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not report.exists():
        raise UsageError(f"the suite could not run (pytest exit code {int(code)}); see the output above")
    data = json.loads(report.read_text())
    if data.get("collection_errors"):
        first = data["collection_errors"][0].splitlines()[-1] if data["collection_errors"][0] else ""
        raise UsageError(f"{len(data['collection_errors'])} suite module(s) failed to load ({first.strip()})")
    print(f"tokenspec: {data['headline']}; seed {data.get('seed')}")
    print(f"tokenspec: report in {report_dir}/ (open {report_dir}/report.html in a browser or summary.md;"
          " report.json and junit.xml beside them)")
    from tokenspec.suite.coverage import blind, unjudged
    from tokenspec.suite.report import top_failing
    from tokenspec.suite.results import LEVELS, TestResult, exit_code

    tests = [TestResult(**t) for t in data["tests"]]
    if worst := top_failing(tests):
        print("tokenspec: top failing requirements:\n" + "\n".join(f"  {line}" for line in worst))
    if never := unjudged(tests):
        print("tokenspec: requirements never judged (summary.md lists why and the flag that would judge each):")
        for level in LEVELS:
            ids = [u.id for u in never if u.level == level]
            if ids:
                print(f"  {level} {len(ids)}: {', '.join(ids[:12])}{' ...' if len(ids) > 12 else ''}")
    code = exit_code(tests)
    if getattr(args, "require_judged", None) and (gaps := blind(tests, args.require_judged)):
        print(f"tokenspec: FAIL (--require-judged {args.require_judged}): {len(gaps)} requirement(s) cited by this"
              f" run's tests were never judged: {', '.join(u.id for u in gaps[:12])}"
              f"{' ...' if len(gaps) > 12 else ''}")
        code = 1
    return code
