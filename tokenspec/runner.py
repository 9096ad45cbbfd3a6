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
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest  # imported with the runner, while interrupts are still held (tokenspec/core/interrupts.py)

from tokenspec.core.config import RunConfig
from tokenspec.core.errors import UsageError, writable_folder
from tokenspec.core.interrupts import INTERRUPTS
from tokenspec.core.target import check_access, check_model_served, check_reachable, served_model
from tokenspec.core.transport import Transport, redact, redact_folder
from tokenspec.github_actions import announce


def pytest_args(config: RunConfig) -> list[str]:
    """pytest's own flags for a suite run: where the suite is, which plugins, workers, -k and the hypothesis seed.
    The run's configuration is not among them: it is handed to pytest as an object (``Handover``)."""
    from tokenspec.suite.plugin import SUITE_DIR

    out = [
        str(SUITE_DIR), "--rootdir", str(SUITE_DIR), "-c", str(SUITE_DIR / "pytest.ini"), "--import-mode=importlib",
        "-p", "no:cacheprovider",
        # The runner imports the plugin module before pytest does; its asserts need no rewriting.
        "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        # Plugins are named, not autoloaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD, set by run): an autoloaded
        # plugin's whole distribution is assertion-rewritten, and with the suite's assertion-pass hook every
        # passing assert inside hypothesis then formats its operands (40x slower fuzzing).
        "-p", "tokenspec.suite.plugin", "-p", "xdist.plugin", "-p", "_hypothesis_pytestplugin",
        # One seed drives hypothesis (every property test) and schemathesis; report.json records it, and
        # `--seed` replays the same examples.
        f"--hypothesis-seed={config.seed}",
    ]
    # pytest's header (rootdir, plugins, site-packages paths) and xdist's lines only when asked for, with each
    # test's name and outcome.
    out.append("-v" if config.verbose else "-q")
    if config.workers not in ("0", "1"):
        out += ["-n", config.workers, "--dist", "loadgroup"]
    if config.keyword:
        out += ["-k", config.keyword]
    return out


def _prepare_pytest_environment() -> None:
    """The suite's asserts are rewritten with the assertion-pass hook; pytest caches rewritten modules by
    interpreter and pytest version only, so the suite keeps its bytecode apart from other pytest runs, in
    tokenspec's cache (the workers inherit the setting through the environment).

    That cache is written even where ``PYTHONDONTWRITEBYTECODE`` is set: the setting keeps ``__pycache__`` folders
    out of source trees, and this bytecode goes to tokenspec's own folder, never beside a source. Without it every
    process of every run compiled the suite and its imports anew: 3.4 s for a one-test run instead of 1.5 s."""
    import os
    import sys

    prefix = str(Path(os.environ.get("TOKENSPEC_CACHE", Path.home() / ".cache" / "tokenspec")) / "suite-bytecode")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


def run_from_args(args: argparse.Namespace) -> int:
    from tokenspec.core.config_file import find_config, load_config

    settings = load_config(None if args.no_config else Path(args.config) if args.config else find_config(Path.cwd()))
    config = RunConfig.from_args(args, settings)
    report_dir = _fresh_report_dir(config.report)
    try:
        INTERRUPTS.arm()
    except KeyboardInterrupt:
        return _interrupted(report_dir, config.target, "")
    return run(replace(config, report=str(report_dir))).exit_code


def check_servers(config: RunConfig) -> RunConfig:
    """Every URL answers, the credentials are accepted, the model is served: else one line and exit 2."""
    transport = config.transport
    for role, url in config.urls().items():
        check_reachable(url, transport, role)
    for role, url in config.urls().items():
        check_access(url, transport, role)
    if config.model is None:
        config = replace(config, model=served_model(config.target, transport))
    else:
        check_model_served(config.target, config.model, transport)
    if config.tokenizer and not (Path(config.tokenizer) / "tokenizer.json").exists():
        raise UsageError(f"--tokenizer {config.tokenizer}: no tokenizer.json in that folder")
    if config.expectations:
        from tokenspec.suite.engine.expectations import load_expectations

        load_expectations(config.expectations)
    if config.profile:
        from tokenspec.suite.engine.profile import load_profile

        load_profile(config.profile)
    return config


#: What a run writes into its report folder; a new run removes them first, so none outlives the run it describes.
ARTIFACTS = ("report.json", "summary.md", "report.html", "junit.xml")


@dataclass(frozen=True)
class RunResult:
    """What a suite run gives a program: the exit code ``tokenspec run`` exits with (0 pass, 1 fail, 3 no verdict,
    130/143 interrupted), the verdict's headline, the report folder and report.json's data (None when the run was
    interrupted before the suite wrote it)."""

    exit_code: int
    headline: str
    report_dir: Path
    report: dict[str, Any] | None


def run(config: RunConfig) -> RunResult:
    """Check the servers, run the suite, print the verdict. A bad configuration (an unreachable URL, a missing
    file) raises ``UsageError`` before any test runs."""
    report_dir = Path(config.report) if config.report else Path(tempfile.mkdtemp(prefix="tokenspec-"))
    seed = config.seed if config.seed is not None else random.randrange(1 << 31)
    config = replace(config, report=str(report_dir), seed=seed)
    from tokenspec.suite.engine.run_config import Handover

    handover = Handover(config)
    code: int = pytest.ExitCode.INTERRUPTED
    try:
        _clear(report_dir)
        INTERRUPTS.arm()  # from here to the suite's end an interrupt always leaves an INTERRUPTED report
        config = handover.config = check_servers(config)
        _prepare_pytest_environment()
        print(_opening_line(config), flush=True)
        INTERRUPTS.defer()  # pytest loads its plugins; the suite plugin arms again before the probe
        INTERRUPTS.insisting(True)
        with redacted_output(config.transport.secrets()):
            code = pytest.main(pytest_args(config), plugins=[handover])
    except KeyboardInterrupt:
        code = pytest.ExitCode.INTERRUPTED
    finally:
        INTERRUPTS.insisting(False)
    if code == pytest.ExitCode.INTERRUPTED or INTERRUPTS.requested:
        code = _interrupted(report_dir, config.target, config.replay_command(seed), config.transport)
        written = report_dir / "report.json"
        data = json.loads(written.read_text()) if written.exists() else None
        announce(code, report_dir, data, [])
        return RunResult(code, data["headline"] if data else "INTERRUPTED", report_dir, data)
    data = handover.report
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or data is None:
        raise UsageError(f"the suite could not run (pytest exit code {int(code)}); see the output above")
    if data.get("collection_errors"):
        first = data["collection_errors"][0].splitlines()[-1] if data["collection_errors"][0] else ""
        raise UsageError(f"{len(data['collection_errors'])} suite module(s) failed to load ({first.strip()})")
    print(f"tokenspec: {data['headline']}; seed {data.get('seed')}")
    print(f"tokenspec: report in {report_dir}/ (open {report_dir}/report.html in a browser or summary.md;"
          " report.json and junit.xml beside them)")
    from tokenspec.suite.engine.results import EXIT_INCONCLUSIVE, LEVELS, TestResult, exit_code
    from tokenspec.suite.reporting.causes import causes
    from tokenspec.suite.reporting.coverage import blind, blind_spot_line, unjudged
    from tokenspec.suite.reporting.report import cause_lines

    tests = [TestResult(**t) for t in data["tests"]]
    if found := causes(tests):
        failures = sum(len(c.tests) for c in found)
        print(f"tokenspec: {len(found)} unique cause(s) of {failures} unexpected failure(s):\n"
              + "\n".join(f"  {line}" for line in cause_lines(found)))
    if spots := blind_spot_line(data.get("unjudged") or []):
        print(f"tokenspec: blind spots: {spots}")
    if never := unjudged(tests):
        print("tokenspec: requirements never judged (summary.md lists why and the flag that would judge each):")
        for level in LEVELS:
            ids = [u.id for u in never if u.level == level]
            if ids:
                print(f"  {level} {len(ids)}: {', '.join(ids[:12])}{' ...' if len(ids) > 12 else ''}")
    code = exit_code(tests, data.get("lost_servers"))
    if code == EXIT_INCONCLUSIVE:
        print("tokenspec: no verdict: a server this run needs stopped answering; the tests that needed it after"
              " that are not tested (report.json: lost_servers). Restart it and run again.")
        announce(code, report_dir, data, found)
        return RunResult(code, data["headline"], report_dir, data)
    gate: list[str] = []
    if config.require_judged and (gaps := blind(tests, config.require_judged)):
        gate.append(f"FAIL (--require-judged {config.require_judged}): {len(gaps)} requirement(s) cited by this"
                    f" run's tests were never judged: {', '.join(u.id for u in gaps[:12])}"
                    f"{' ...' if len(gaps) > 12 else ''}")
        print(f"tokenspec: {gate[0]}")
        code = 1
    announce(code, report_dir, data, found, gate)
    return RunResult(code, data["headline"], report_dir, data)


def _opening_line(config: RunConfig) -> str:
    """What is tested, with what seed, and where the settings came from: the line a CI log starts with."""
    roles = ", ".join(f"{role} {url}" for role, url in config.urls().items())
    files = sorted({origin for origin in config.origins.values() if origin != "command line"})
    where = f"; settings from {', '.join(files)}" if files else ""
    return f"tokenspec: testing {roles} (model {config.model}); seed {config.seed}{where}"


def _fresh_report_dir(report: str | None) -> Path:
    """The run's report folder, created, proven writable and without the artifacts of an earlier run (none may
    outlive the run it describes). Checked before any test runs: a folder the reports cannot be written to would
    otherwise surface only after the whole suite, as a traceback."""
    report_dir = writable_folder(report, "--report") if report else Path(tempfile.mkdtemp(prefix="tokenspec-"))
    try:
        _clear(report_dir)
    except OSError as exc:
        raise UsageError(f"--report {report_dir}: cannot remove an earlier run's reports ({exc})") from None
    return report_dir


def _clear(report_dir: Path) -> None:
    for name in ARTIFACTS:
        (report_dir / name).unlink(missing_ok=True)
    shutil.rmtree(report_dir / "bodies", ignore_errors=True)


def _interrupted(report_dir: Path, target: str, command: str, transport: Transport | None = None) -> int:
    """An interrupted run: its report says INTERRUPTED (written here when the suite stopped before writing one);
    exit 130 for SIGINT, 143 for SIGTERM."""
    INTERRUPTS.finishing()
    report = report_dir / "report.json"
    if not report.exists():
        from datetime import UTC, datetime

        from tokenspec.suite.reporting.report import RunInfo, write_reports

        info = RunInfo(target=target, engine=None, reference=None, model=None, seed=None,
                       started_at=datetime.now(UTC).isoformat(timespec="seconds"), duration_s=0.0, command=command,
                       interrupted=INTERRUPTS.name, insecure=bool(transport and transport.insecure))
        write_reports(report_dir, info, [])
        if transport is not None:
            redact_folder(report_dir, transport.secrets())
    headline = json.loads(report.read_text())["headline"]
    print(f"tokenspec: {headline}", flush=True)
    print(f"tokenspec: partial report in {report_dir}/", flush=True)
    return INTERRUPTS.exit_code


class _Redacting:
    """A text stream that writes through ``stream`` with every secret replaced by the variable that holds it."""

    def __init__(self, stream, secrets: dict[str, str]) -> None:  # noqa: ANN001 - any text stream
        self._stream = stream
        self._secrets = secrets

    def write(self, text: str) -> int:
        self._stream.write(redact(text, self._secrets))
        return len(text)

    def __getattr__(self, name: str):  # noqa: ANN204 - delegate flush, isatty, encoding, fileno...
        return getattr(self._stream, name)


@contextmanager
def redacted_output(secrets: dict[str, str]) -> Iterator[None]:
    """What the suite prints (failures quote servers' answers, which may echo a key) passes through redaction."""
    if not secrets:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(sys.stdout, secrets), _Redacting(sys.stderr, secrets)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
