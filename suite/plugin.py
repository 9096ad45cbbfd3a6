"""The pytest plugin that turns pytest into a conformance runner.

Data flows one way: requirement catalogue -> ``@pytest.mark.req`` on each test -> result per test ->
report files. The plugin

- validates at collection that every suite test cites known requirement IDs (an uncited test is an error),
- derives each test's level (the strongest level among its requirements) and applies ``--tokenspec-level``,
- applies the expectations file as strict xfail,
- turns tests of features the target does not offer into ``unsupported`` results,
- attaches the last request as a ``curl`` command to every failure,
- writes ``report.json``, ``junit.xml`` (via pytest's own writer) and ``summary.md``.

It is installed as a pytest11 entry point but stays inert unless ``--tokenspec-target`` is given.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tokenspec.suite.results import LEVELS, UNSUPPORTED_PREFIX, TestResult

SUITE_DIR = Path(__file__).resolve().parent
LAST_REQUEST = pytest.StashKey[list]()  # the SuiteClients a test used


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("tokenspec", "tokenspec conformance suite")
    g.addoption("--tokenspec-target", help="base URL hosting render/derender")
    g.addoption("--tokenspec-engine", help="base URL hosting /inference/v1/generate")
    g.addoption("--tokenspec-reference", help="standard serve endpoint for parity")
    g.addoption("--tokenspec-model", help="model name (default: the target's /v1/models)")
    g.addoption("--tokenspec-tokenizer", help="local model folder with the target's tokenizer")
    g.addoption("--tokenspec-report", help="folder for report.json and summary.md")
    g.addoption("--tokenspec-level", default="may", choices=["must", "should", "may"])
    g.addoption("--tokenspec-expectations", help="YAML of known failures (strict xfail)")
    g.addoption("--tokenspec-seed", type=int, help="seed for hypothesis and schemathesis")
    g.addoption("--tokenspec-timeout", type=float, default=30.0)
    g.addoption("--tokenspec-max-examples", type=int, default=25)


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("--tokenspec-target", default=None))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "req(*ids): requirement IDs (AREA-NNN) this test checks")
    if not _active(config):
        return
    config.pluginmanager.import_plugin("tokenspec.suite.fixtures")
    report_dir = config.getoption("--tokenspec-report")
    if report_dir and not config.option.xmlpath:
        # Runs before pytest's junitxml plugin configures itself, so it picks the path up.
        config.option.xmlpath = str(Path(report_dir) / "junit.xml")
    seed = config.getoption("--tokenspec-seed")
    if seed is None:
        # Workers must share the controller's seed, so it is chosen once and passed down in the environment.
        seed = int(os.environ.setdefault("TOKENSPEC_SEED", str(random.randrange(1 << 31))))
        config.option.tokenspec_seed = seed
    config.stash[_RESULTS] = []
    config.stash[_STARTED] = (time.time(), datetime.now(UTC).isoformat(timespec="seconds"))


_RESULTS = pytest.StashKey[list[TestResult]]()
_STARTED = pytest.StashKey[tuple[float, str]]()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not _active(config):
        return None
    return [
        f"tokenspec target: {config.getoption('--tokenspec-target')}"
        f" engine: {config.getoption('--tokenspec-engine')} reference: {config.getoption('--tokenspec-reference')}",
        f"tokenspec seed: {config.getoption('--tokenspec-seed')} (re-run with --seed to reproduce)",
    ]


def _in_suite(item: pytest.Item) -> bool:
    return SUITE_DIR in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite_items = [item for item in items if _in_suite(item)]
    if not suite_items:
        return
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    expectations = []
    if path := config.getoption("--tokenspec-expectations", default=None):
        from tokenspec.suite.expectations import load_expectations

        expectations = load_expectations(path)
    threshold = LEVELS.index(config.getoption("--tokenspec-level", default="may").upper())
    keep, drop = [], []
    for item in suite_items:
        ids = [i for m in item.iter_markers("req") for i in m.args]
        unknown = [i for i in ids if i not in catalogue]
        if not ids or unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: every suite test must cite known requirement IDs (unknown: {unknown or 'none cited'})"
            )
        level = min((catalogue[i].level for i in ids), key=LEVELS.index)
        features = sorted({catalogue[i].feature for i in ids if catalogue[i].feature})
        item.user_properties += [("requirement_ids", ",".join(ids)), ("level", level)]
        item.stash[_FEATURES] = features
        if LEVELS.index(level) > threshold:
            drop.append(item)
            continue
        keep.append(item)
        from tokenspec.suite.expectations import find

        if expectation := find(expectations, item.nodeid):
            item.add_marker(pytest.mark.xfail(strict=True, reason=expectation.reason))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if i not in drop]


_FEATURES = pytest.StashKey[list[str]]()


@pytest.fixture(autouse=True)
def _tokenspec_features(request: pytest.FixtureRequest) -> None:
    """Skip, as unsupported, a test whose requirements need a feature the target does not offer."""
    features = request.node.stash.get(_FEATURES, [])
    if not features:
        return
    caps = request.getfixturevalue("capabilities")
    missing = [f for f in features if not caps.has(f)]
    if missing:
        pytest.skip(f"{UNSUPPORTED_PREFIX}target does not offer {', '.join(missing)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed:
        sent = [c.last_request for c in item.stash.get(LAST_REQUEST, []) if c.last_request is not None]
        if sent:
            report.user_properties.append(("reproduce", max(sent, key=lambda r: r.seq).curl()))
    return report


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed:
        if report.when == "call":
            return "xpassed" if "XPASS(strict)" in str(report.longrepr) else "failed"
        return "error"
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return "unsupported" if UNSUPPORTED_PREFIX in reason else "skipped"
    return "passed"


def _message(report: pytest.TestReport) -> str:
    if getattr(report, "wasxfail", None) and report.skipped:
        observed = _message_of(report).splitlines()[0][:300] if report.longrepr else ""
        return f"expected: {report.wasxfail}; observed: {observed}"
    return _message_of(report)


def _message_of(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if report.longrepr is None:
        return getattr(report, "wasxfail", "") or ""
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message) if crash is not None else str(report.longrepr)[-2000:]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = _CONFIG.get("config")
    if config is None or _RESULTS not in config.stash:
        return
    props = dict(report.user_properties)
    if "requirement_ids" not in props:
        return
    interesting = report.when == "call" or report.outcome != "passed"
    if not interesting:
        return
    results = config.stash[_RESULTS]
    outcome = _outcome(report)
    if results and results[-1].nodeid == report.nodeid:
        # A teardown error after a passing call replaces the pass; otherwise keep the first verdict.
        if outcome != "error" or results[-1].outcome != "passed":
            return
        results.pop()
    results.append(
        TestResult(
            nodeid=report.nodeid,
            requirement_ids=props["requirement_ids"].split(","),
            level=props.get("level", "MUST"),
            outcome=outcome,
            duration_s=round(report.duration, 4),
            message=_message(report) if outcome != "passed" else "",
            reproduce=props.get("reproduce", "") if outcome in ("failed", "error") else "",
        )
    )


_CONFIG: dict[str, pytest.Config] = {}
_COLLECTION_ERRORS = pytest.StashKey[list[str]]()


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A suite module that cannot even be imported is a broken run, not a passing one."""
    config = _CONFIG.get("config")
    if config is not None and report.failed:
        config.stash.setdefault(_COLLECTION_ERRORS, []).append(f"{report.nodeid}: {str(report.longrepr)[-500:]}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _active(config) or hasattr(config, "workerinput") or _RESULTS not in config.stash:
        return
    from tokenspec.suite.report import RunInfo, write_reports

    started, started_at = config.stash[_STARTED]
    info = RunInfo(
        target=config.getoption("--tokenspec-target"),
        engine=config.getoption("--tokenspec-engine"),
        reference=config.getoption("--tokenspec-reference"),
        model=config.getoption("--tokenspec-model"),
        seed=config.getoption("--tokenspec-seed"),
        started_at=started_at,
        duration_s=round(time.time() - started, 2),
    )
    out = config.getoption("--tokenspec-report")
    if out:
        write_reports(Path(out), info, config.stash[_RESULTS], config.stash.get(_COLLECTION_ERRORS, []))

