"""The pytest plugin that turns pytest into a conformance runner.

Data flows one way: requirement catalogue -> ``@pytest.mark.req`` on each test -> result per test ->
report files. The plugin

- validates at collection that every suite test cites known requirement IDs (an uncited test is an error),
- derives each test's level (the strongest level among its requirements) and applies ``--tokenspec-level``,
- applies the expectations file as strict xfail,
- gates every test through ``suite/engine/gating.py`` (requirement features, roles, profile and probe decisions):
  ``unsupported`` and ``not_tested`` results are counted apart, never as passes or failures,
- reports a test that completed without a single check as an error (a vacuous pass is not a pass),
- charges a failure to the requirement(s) its message names (``[AREA-NNN]``), so a SHOULD check never fails
  a MUST test,
- attaches the last request to every failure (a ``curl`` command, and its body saved byte for byte under
  ``<report>/bodies/``) and the failing comparison's two operands (``expected``, ``actual``),
- writes ``report.json``, ``junit.xml`` (via pytest's own writer), ``summary.md`` and ``report.html``.

It is installed as a pytest11 entry point but stays inert unless ``--tokenspec-target`` is given.
"""

from __future__ import annotations

import base64
import json
import operator
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from _pytest.junitxml import xml_key

from tokenspec.core.liveness import LIVENESS, LIVENESS_ENV, ServerLost
from tokenspec.core.phases import CLOCK
from tokenspec.core.progress import Counter
from tokenspec.specs.catalogue import Requirement
from tokenspec.suite.engine.checks import CHECKS, LAST_REQUEST, SERVER
from tokenspec.suite.engine.gating import anchored_roles
from tokenspec.suite.engine.results import (
    LEVELS,
    MAX_OPERAND,
    NOT_TESTED_PREFIX,
    UNSUPPORTED_PREFIX,
    TestResult,
    safe_name,
)
from tokenspec.suite.engine.run_config import WORKER_KEY, active_run, handover, run_config, suite_dir

SUITE_DIR = Path(__file__).resolve().parent
_REQ_ID = re.compile(r"\[([A-Z]+-\d{3})\]")
#: Modules outside the test files whose asserts are checks of the running test (rewritten, so they count).
HELPER_MODULES = ("tokenspec.suite.engine.client", "tokenspec.suite.oracles.pipeline",
                  "tokenspec.suite.oracles.derender_checks")
#: A failing request's body larger than this is not saved under bodies/ (the oversized-body tests send 64 MiB).
MAX_SAVED_BODY = 4 << 20


def pytest_addoption(parser: pytest.Parser) -> None:
    """For a direct pytest run; ``tokenspec run`` hands its configuration over as an object instead
    (tokenspec/suite/run_config.py builds the one configuration from these options)."""
    g = parser.getgroup("tokenspec", "tokenspec conformance suite")
    g.addoption("--tokenspec-target", help="base URL hosting render/derender")
    g.addoption("--tokenspec-engine", help="base URL hosting /inference/v1/generate")
    g.addoption("--tokenspec-reference", help="standard serve endpoint for parity")
    g.addoption("--tokenspec-model", help="model name (default: the target's /v1/models)")
    g.addoption("--tokenspec-tokenizer", help="local model folder with the target's tokenizer")
    g.addoption("--tokenspec-report", help="folder for report.json and summary.md")
    g.addoption("--tokenspec-level", default="may", choices=["must", "should", "may"])
    g.addoption("--tokenspec-expectations", help="YAML of known failures (requirement + pattern each)")
    g.addoption("--tokenspec-profile", help="YAML target profile (specs/profile.schema.json)")
    g.addoption("--tokenspec-seed", type=int, help="seed for hypothesis and schemathesis")
    # The transport (tokenspec/core/transport.py): the same values as `tokenspec run`'s flags of the same names.
    g.addoption("--tokenspec-timeout", action="append", metavar="[ROLE=]SECONDS",
                help="request timeout per role (default: target=30 engine=60 reference=60)")
    g.addoption("--tokenspec-api-key-env", action="append", metavar="[ROLE=]NAME",
                help="environment variable holding the API key, sent as Authorization: Bearer"
                     " (default: TOKENSPEC_API_KEY when set)")
    g.addoption("--tokenspec-header", action="append", metavar="[ROLE=]'NAME: VALUE'",
                help="extra header; VALUE may be $ENV_VAR")
    g.addoption("--tokenspec-ca-bundle", metavar="FILE", help="CA bundle that signs the servers' certificates")
    g.addoption("--tokenspec-insecure", action="store_true", help="do not verify TLS certificates")
    g.addoption("--tokenspec-max-concurrency", type=int, metavar="N", help="requests in flight, whole run")
    g.addoption("--tokenspec-max-rps", type=float, metavar="R", help="requests started per second, whole run")
    g.addoption("--tokenspec-max-examples", type=int, default=25)
    g.addoption("--tokenspec-no-shrink", action="store_true",
                help="report the first failing example as found, without shrinking it (faster verdicts)")
    g.addoption("--tokenspec-suite-dir", help="folder of conformance tests held to the suite's rules (default: the"
                " shipped suite; an implementer's own tests citing requirement IDs can live elsewhere)")


def _active(config: pytest.Config) -> bool:
    return run_config(config) is not None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: each worker receives the controller's configuration as it is, never re-parsed from flags."""
    if (found := run_config(node.config)) is not None:
        node.workerinput[WORKER_KEY] = found.to_json()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "req(*ids): requirement IDs (AREA-NNN) this test checks")
    if not _active(config):
        return
    pytest.register_assert_rewrite(*HELPER_MODULES)
    config.pluginmanager.register(_LostDuringSetup(), "tokenspec-lost-during-setup")
    CHECKS.active = bool(config.getini("enable_assertion_pass_hook"))
    config.pluginmanager.import_plugin("tokenspec.suite.engine.fixtures")
    report_dir = active_run(config).report
    if report_dir and not config.option.xmlpath:
        # Runs before pytest's junitxml plugin configures itself, so it picks the path up.
        config.option.xmlpath = str(Path(report_dir) / "junit.xml")
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        import tokenizers  # noqa: F401 - C extensions load before the probe arms interrupts, never halfway

        import tokenspec.suite.engine.probe  # noqa: F401
        from tokenspec.core.interrupts import INTERRUPTS
        from tokenspec.suite.engine.fixtures import decide_capabilities

        INTERRUPTS.arm()  # the suite's modules are loaded: a signal from now on stops the run
        config.stash[_CAPABILITIES] = decide_capabilities(config)
        _watch_servers(config)
    elif hasattr(config, "workerinput"):
        from tokenspec.core.interrupts import INTERRUPTS

        # A worker's one forwarded SIGINT can land in hypothesis's gc callback and be swallowed: the worker then runs
        # on until xdist's 10 s teardown kills it. It insists as the controller does, until pytest takes the interrupt.
        INTERRUPTS.install()
        INTERRUPTS.arm()
        INTERRUPTS.insisting(True)
        if folder := os.environ.get(LIVENESS_ENV):
            LIVENESS.watch(folder)
    config.stash[_RESULTS] = []
    config.stash[_STARTED] = (time.time(), datetime.now(UTC).isoformat(timespec="seconds"))


def _watch_servers(config: pytest.Config) -> None:
    """From the first test on, a server that stops answering is lost for the run (tokenspec/core/liveness.py); the
    folder where the run's processes share their losses is handed to the xdist workers in the environment.
    Each server is asked once now: one that died while it was probed is lost before any test."""
    import tempfile

    from tokenspec.suite.engine.fixtures import transport_from_config

    os.environ[LIVENESS_ENV] = tempfile.mkdtemp(prefix="tokenspec-liveness-")
    LIVENESS.watch(os.environ[LIVENESS_ENV])
    LIVENESS.current = "the probe"
    verify = transport_from_config(config).verify()
    for role, url in active_run(config).urls().items():
        LIVENESS.check(role, url, verify)
    LIVENESS.current = ""


def _server_lost(raised: BaseException | None) -> ServerLost | None:
    """The loss that ended a test, wherever it sits: raised, the cause of what was raised, or one of a group."""
    pending = [raised]
    seen: set[int] = set()
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, ServerLost):
            return error
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        pending += [error.__cause__, error.__context__]
    return None


def _hypothesis_statistics(stats: dict) -> None:
    """Hypothesis's own account of a test (``bench suite --profile``; what ``--hypothesis-show-statistics`` prints,
    collected always and cheaply): the time its examples spent drawing data, and its shrink phase."""
    phases = [v for k, v in stats.items() if k.endswith("-phase") and isinstance(v, dict)]
    CLOCK.add("generation", sum(case.get("drawtime", 0.0) for p in phases for case in p.get("test-cases", ())))
    CLOCK.add("shrinking", stats.get("shrink-phase", {}).get("duration-seconds", 0.0))


_RESULTS = pytest.StashKey[list[TestResult]]()
_CAPABILITIES = pytest.StashKey[object]()
_STARTED = pytest.StashKey[tuple[float, str]]()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not _active(config):
        return None
    run = active_run(config)
    return [
        f"tokenspec target: {run.target} engine: {run.engine} reference: {run.reference}",
        f"tokenspec seed: {run.seed} (re-run with --seed to reproduce)",
    ]


def _in_suite(item: pytest.Item) -> bool:
    return (suite_dir(item.config) or SUITE_DIR) in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite_items = [item for item in items if _in_suite(item)]
    if not suite_items:
        return
    from tokenspec.specs.catalogue import load_catalogue

    catalogue = load_catalogue()
    expectations = []
    run = run_config(config)
    if run is not None and run.expectations:
        from tokenspec.suite.engine.expectations import folder_family, for_family, load_expectations

        expectations = for_family(load_expectations(run.expectations), folder_family(run.tokenizer))
    threshold = LEVELS.index((run.level if run is not None else "may").upper())
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
        item.stash[_CITED] = [catalogue[i] for i in ids]
        item.stash[_ROLES] = anchored_roles(catalogue[i] for i in ids)
        if LEVELS.index(level) > threshold:
            drop.append(item)
            continue
        keep.append(item)
        from tokenspec.suite.engine.expectations import find

        if expected := find(expectations, item.nodeid, ids):
            item.stash[_EXPECTATION] = expected
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if i not in drop]


_FEATURES = pytest.StashKey[list[str]]()
_CITED = pytest.StashKey[list[Requirement]]()  # the Requirement objects a test cites (their since/until gate it)
_EXPECTATION = pytest.StashKey[object]()


_ROLES = pytest.StashKey[list[str]]()


@contextmanager
def _not_tested_when_lost(item: pytest.Item) -> Iterator[None]:
    """A test (or its fixtures) that reached a lost server ends as not tested, by a skip: pytest would otherwise
    format the whole traceback of each such test, a tenth of a second apiece, for a report that never shows it."""
    try:
        yield
    except BaseException as error:
        if (lost := _server_lost(error)) is None:
            raise
        item.user_properties.append(("lost", lost.loss.role))
        pytest.skip(str(lost))


class _LostDuringSetup:
    """The fixtures of a test that reach a lost server end it as not tested (a hook wrapper of its own: the
    plugin's setup hook is the requirement gate, which runs after every wrapper has begun)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        with _not_tested_when_lost(item):
            return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The requirement gate, before any fixture is set up (a session fixture that needs a fact of an unhosted
    route must never turn a not-tested test into an error): a test whose requirements need a feature the run does
    not offer, or whose requirements all live on routes no URL of the run hosts, is not run."""
    from tokenspec.core.transport import RETRIES

    item.stash[_RETRIES_BEFORE] = RETRIES.count
    LIVENESS.current = item.nodeid
    if _active(item.config) and (loss := LIVENESS.lost(active_run(item.config).target)):
        # A run that lost its target learns nothing more from it: every test left ends at once, not tested.
        item.user_properties.append(("lost", loss.role))
        pytest.skip(str(ServerLost(loss)))
    features, roles = item.stash.get(_FEATURES, []), item.stash.get(_ROLES, [])
    cited = item.stash.get(_CITED, [])
    versioned = any(r.since or r.until for r in cited)
    if not (features or roles or versioned):
        return
    from tokenspec.suite.engine.fixtures import run_capabilities

    caps = run_capabilities(item.config)
    if roles and not any(caps.has(role) for role in roles):
        caps.require(roles[0])
    caps.require(*features)
    caps.require_generation(cited)


def pytest_assertion_pass(item: pytest.Item, lineno: int, orig: str, expl: str) -> None:
    CHECKS.note()


#: The running test's last failing comparison (per process: each xdist worker has its own). ``nodeid`` is set
#: while a suite test's call phase runs; ``actual``/``expected`` hold the formatted operands.
_COMPARISON: dict[str, str] = {}
_COMPARE_OPS = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "is": operator.is_, "is not": operator.is_not, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def operand_text(value: object) -> str:
    """One operand as the report shows it: pretty JSON when it is JSON-able, else its repr; capped."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)
        except Exception as exc:  # a broken __repr__ must not hide the test's own failure
            text = f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    if len(text) > MAX_OPERAND:
        text = text[:MAX_OPERAND] + f"\n... ({len(text) - MAX_OPERAND} more characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates cannot be written as UTF-8


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: object, right: object) -> None:
    """Keep the operands of the running test's failing comparison (``assert actual == expected``).

    With the assertion-pass hook on, pytest asks for an explanation of passing comparisons too, so the
    comparison is evaluated again here: a failing one is kept (formatted now: the operands may change later),
    a passing one clears it. What is left when the test fails is its last comparison, if that one failed: a
    failure that comes after a passing comparison (a schema violation, ``pytest.fail``, or hypothesis's final
    replay of an example that failed otherwise) shows no stale operands. Never adds to pytest's explanation.
    """
    if "nodeid" not in _COMPARISON or op not in _COMPARE_OPS:
        return None
    try:
        failed = not _COMPARE_OPS[op](left, right)
    except Exception:
        return None
    if failed:
        _COMPARISON.update(op=op, actual=operand_text(left), expected=operand_text(right))
    else:
        for key in ("op", "actual", "expected"):
            _COMPARISON.pop(key, None)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    if not CLOCK.on:
        return (yield)
    with CLOCK.running(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Iterator[object]:
    """Innermost around the test function, so hypothesis's statistics reach the phase clock whoever else (its own
    pytest plugin) also listens."""
    if not CLOCK.on:
        return (yield)
    from hypothesis.statistics import collector

    previous = collector.value

    def both(stats: dict) -> None:
        _hypothesis_statistics(stats)
        if previous is not None:
            previous(stats)

    with collector.with_value(both):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    CHECKS.count = 0
    _COMPARISON.clear()
    if _active(item.config) and _in_suite(item):
        _COMPARISON["nodeid"] = item.nodeid
    test = getattr(item, "obj", None)
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    no_shrink = item.stash.get(_EXPECTATION, None) is not None or bool(
        (run := run_config(item.config)) and run.no_shrink)
    if not no_shrink or current is None:
        with _not_tested_when_lost(item):
            return (yield)
    # A known failure (or a run that asked for verdicts only) costs no shrinking time: for this item only, its
    # hypothesis settings lose the shrink phase.
    from hypothesis import Phase, settings

    test._hypothesis_internal_use_settings = settings(current, phases=[p for p in current.phases
                                                                       if p is not Phase.shrink])
    try:
        with _not_tested_when_lost(item):
            return (yield)
    finally:
        test._hypothesis_internal_use_settings = current


def _group_message(group: BaseExceptionGroup) -> str:
    """Each failure's own message and failing example, then the group's verdict where it says more than a count
    (a flaky failure's "produces unreliable results" is itself the finding against a server that answers at
    random). The failures come first: a cause is read from the first line."""
    lines = []
    for i, e in enumerate(group.exceptions):
        lines.append(f"failure {i + 1} of {len(group.exceptions)}: {type(e).__name__}: {str(e)[:1500]}")
        lines += getattr(e, "__notes__", [])[:1]
    if " distinct failures" not in str(group):
        lines += [str(group)[:1500], *getattr(group, "__notes__", [])[:1]]
    return "\n".join(lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and call.excinfo is not None and (lost := _server_lost(call.excinfo.value)) is not None:
        # Nothing about the spec was learned from a server that stopped answering: not tested, never failed.
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, str(lost))
        report.user_properties.append(("lost", lost.loss.role))
        if report.when == "call":
            _COMPARISON.clear()
        return report
    if report.when == "call" and report.passed and CHECKS.active and CHECKS.count == 0:
        report.outcome = "failed"
        report.longrepr = (
            "vacuous pass: the test completed without checking anything (no assertion ran and no response was"
            " validated); a precondition that does not hold must end it with gating.not_tested(reason)"
        )
        report.user_properties.append(("vacuous", "1"))
    ids = [i for m in item.iter_markers("req") for i in m.args]
    group = call.excinfo.value if call.excinfo is not None else None
    if report.failed and isinstance(group, BaseExceptionGroup):
        # Hypothesis found several distinct failures: each one's own message, not just "2 sub-exceptions".
        report.user_properties.append(("message", _group_message(group)))
    if report.when == "call":
        from tokenspec.core.transport import RETRIES

        if retried := RETRIES.count - item.stash.get(_RETRIES_BEFORE, RETRIES.count):
            report.user_properties.append(("retries", str(retried)))
        comparison = dict(_COMPARISON) if _COMPARISON.get("nodeid") == item.nodeid else {}
        _COMPARISON.clear()
        if report.failed and "actual" in comparison:
            report.user_properties += [("expected", comparison["expected"]), ("actual", comparison["actual"]),
                                       ("comparison", comparison["op"])]
            from tokenspec.suite.oracles.token_text import decoded

            texts = decoded(comparison["expected"], comparison["actual"], lambda ids: _decode(item.config, ids))
            if any(texts):
                report.user_properties += [("expected_text", texts[0]), ("actual_text", texts[1])]
    if report.failed:
        named = [i for i in _REQ_ID.findall(_message_of(report)) if i in ids]
        report.user_properties.append(("failed_requirements", ",".join(dict.fromkeys(named or ids))))
        clients = [c for c in item.stash.get(LAST_REQUEST, []) if c.last_request is not None]
        server = item.stash.get(SERVER, None)
        if clients:
            last_client = max(clients, key=lambda c: c.last_request.seq)
            server = server or (last_client.role, last_client.base_url)
        if server is not None:
            report.user_properties.append(("charged_to", charged_server(item.config, *server, named or ids)))
        if clients:
            last = last_client.last_request
            report.user_properties += [("reproduce", last.curl()), ("request_method", last.method),
                                       ("request_url", last.url), ("request_content_type", last.content_type or "")]
            if last.body is not None and len(last.body) <= MAX_SAVED_BODY:
                # Only strings cross from an xdist worker to the controller: the bytes travel as base64.
                report.user_properties.append(("request_body", base64.b64encode(last.body).decode("ascii")))
    expectation = item.stash.get(_EXPECTATION, None)
    if expectation is not None and report.when == "call":
        _apply_expectation(report, expectation)
    return report


_CODEC = pytest.StashKey[object]()


def _decode(config: pytest.Config, ids: list[int]) -> str:
    """Token ids as the run's codec reads them, special tokens visible (a failure's ids shown as text)."""
    if _CODEC not in config.stash:
        from tokenspec.suite.engine.fixtures import target_from_config
        from tokenspec.suite.engine.target import Codec

        config.stash[_CODEC] = Codec(target_from_config(config))
    try:
        return config.stash[_CODEC].decode(ids)  # type: ignore[attr-defined]
    except ServerLost as lost:  # a lost target cannot decode: the ids still show
        raise LookupError(str(lost)) from None


#: Areas whose requirements are the target's own behaviour, whichever server's answer the test read last.
_TARGET_AREAS = frozenset({"RENDER", "DERENDER", "PARITY", "TOKNAT", "UTIL", "PROFILE"})


_RETRIES_BEFORE = pytest.StashKey[int]()


def charged_server(config: pytest.Config, role: str, base_url: str, failed: list[str]) -> str:
    """The server whose answer broke a test: the one the failing (last) request went to, when that is another
    URL than the target's. The engine is charged only for requirements that are not the target's own (a
    generate refusing what the target rendered is the target's fault); the reference for any answer of its own."""
    target = active_run(config).target.rstrip("/")
    if role == "target" or base_url.rstrip("/") == target:
        return "target"
    if role == "engine":
        from tokenspec.specs.catalogue import load_catalogue

        catalogue = load_catalogue()
        own = [r for r in failed if r in catalogue and (catalogue[r].area in _TARGET_AREAS or (
            catalogue[r].area == "STREAM" and catalogue[r].document == "derender.yaml"))]
        return "target" if own else "engine"
    return role


def _apply_expectation(report: pytest.TestReport, expected: list) -> None:
    """Known failure = every cause of the failure is explained by an expectation; anything else is new."""
    from tokenspec.suite.engine.expectations import unexplained

    described = "; ".join(e.describe() for e in expected)
    if report.passed and all(e.may_pass for e in expected):
        return  # a glob names a family of tests (some may pass); a seed-dependent failure may not show this run
    if report.passed:
        report.outcome = "failed"
        report.longrepr = f"XPASS: the known failure no longer happens ({described}); remove the expectation"
        report.user_properties.append(("expectation", described))
        return
    if not report.failed:
        return
    failed = dict(report.user_properties).get("failed_requirements", "").split(",")
    new = unexplained(expected, failed, _message_of(report))
    if not new:
        report.outcome = "skipped"
        report.wasxfail = described
        report.user_properties.append(("expectation", described))
    else:
        report.user_properties.append(
            ("expectation_mismatch", f"expected {described}; not explained: {' | '.join(new)}"))


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed:
        if dict(report.user_properties).get("vacuous"):
            return "error"
        if report.when == "call":
            return "xpassed" if str(report.longrepr).startswith("XPASS") else "failed"
        return "error"
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(UNSUPPORTED_PREFIX):
            return "unsupported"
        if reason.startswith(NOT_TESTED_PREFIX):
            return "not_tested"
        return "error"  # a skip that did not go through gating.py hides a check; it is never silent
    return "passed"


def _message(report: pytest.TestReport) -> str:
    props = dict(report.user_properties)
    if getattr(report, "wasxfail", None) and report.skipped:
        observed = _message_of(report)[:3000] if report.longrepr else ""
        return f"known failure ({report.wasxfail}); observed: {observed}"
    if "expectation_mismatch" in props:
        return f"NEW CAUSE: {props['expectation_mismatch']}:\n{_message_of(report)}"
    if report.skipped and _outcome(report) == "error":
        return f"skipped outside the gating module (suite/engine/gating.py): {_message_of(report)}"
    return _message_of(report)


def _message_of(report: pytest.TestReport) -> str:
    if message := dict(report.user_properties).get("message"):
        return str(message)
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
    from tokenspec.specs.catalogue import load_catalogue

    cited = props["requirement_ids"].split(",")
    failed_reqs = [i for i in props.get("failed_requirements", "").split(",") if i] if outcome != "passed" else []
    level = props.get("level", "MUST")
    if failed_reqs and outcome in ("failed", "xfailed", "xpassed"):
        catalogue = load_catalogue()
        level = min((catalogue[i].level for i in failed_reqs if i in catalogue), key=LEVELS.index, default=level)
    if results and results[-1].nodeid == report.nodeid:
        # A teardown error after a passing call replaces the pass; otherwise keep the first verdict.
        if outcome != "error" or results[-1].outcome != "passed":
            return
        results.pop()
    if counter := config.stash.get(_COUNTER, None):
        counter.add(outcome, (rid.split('-')[0] for rid in cited))
    evidence = outcome in ("failed", "error", "xfailed")
    request_file = ""
    if evidence and "request_body" in props and (out := active_run(config).report):
        request_file = f"bodies/{safe_name(report.nodeid)}.bin"
        (Path(out) / "bodies").mkdir(parents=True, exist_ok=True)
        (Path(out) / request_file).write_bytes(base64.b64decode(props["request_body"]))
    results.append(
        TestResult(
            nodeid=report.nodeid,
            requirement_ids=cited,
            level=level,
            outcome=outcome,
            duration_s=round(report.duration, 4),
            message=_message(report) if outcome != "passed" else "",
            reproduce=props.get("reproduce", "") if evidence else "",
            failed_requirements=failed_reqs,
            expectation=props.get("expectation", ""),
            expected=props.get("expected", "") if evidence else "",
            actual=props.get("actual", "") if evidence else "",
            comparison=props.get("comparison", "") if evidence else "",
            expected_text=props.get("expected_text", "") if evidence else "",
            actual_text=props.get("actual_text", "") if evidence else "",
            request_method=props.get("request_method", "") if evidence else "",
            request_url=props.get("request_url", "") if evidence else "",
            request_content_type=props.get("request_content_type", "") if evidence else "",
            request_file=request_file,
            retries=int(props.get("retries", 0)),
            lost=props.get("lost", ""),
            charged_to=props.get("charged_to", "target") if outcome in ("failed", "error") else "target",
        )
    )


_CONFIG: dict[str, pytest.Config] = {}
_COUNTER = pytest.StashKey[Counter]()


def _start_counter(config: pytest.Config, total: int) -> None:
    """Live counts on the controller (the one mechanism of tokenspec.core.progress), written through pytest's
    terminal so they never land in the middle of a line of dots."""
    from tokenspec.core.progress import PREFIX

    if not _active(config) or hasattr(config, "workerinput") or _COUNTER in config.stash or not total:
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    emit = (lambda line: terminal.write(f"\n{PREFIX}{line}\n")) if terminal is not None else None
    config.stash[_COUNTER] = Counter(total, **({"emit": emit} if emit else {}))
    config.stash[_COUNTER].emit(f"{total} tests; live counts below (known failures are matched at the end)")


def pytest_collection_finish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput") and session.config.pluginmanager.get_plugin("dsession") is None:
        _start_counter(session.config, len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    config = _CONFIG.get("config")
    if config is not None:
        _start_counter(config, len(ids))
_COLLECTION_ERRORS = pytest.StashKey[list[str]]()


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A suite module that cannot even be imported is a broken run, not a passing one."""
    config = _CONFIG.get("config")
    if config is not None and report.failed:
        config.stash.setdefault(_COLLECTION_ERRORS, []).append(f"{report.nodeid}: {str(report.longrepr)[-500:]}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config
    if _active(session.config) and not hasattr(session.config, "workerinput"):
        from tokenspec.core.interrupts import INTERRUPTS

        INTERRUPTS.defer()  # xdist starts its workers next; pytest_runtestloop arms again


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    if _active(session.config) and not hasattr(session.config, "workerinput"):
        from tokenspec.core.interrupts import INTERRUPTS

        INTERRUPTS.arm()


def _expectations_header(config: pytest.Config) -> str:
    path = active_run(config).expectations
    if not path:
        return ""
    from tokenspec.suite.engine.expectations import folder_family, load_expectations_file

    family = folder_family(active_run(config).tokenizer)
    scope = f"; entries of model family {family} and of every family" if family else (
        "; model family unknown: family-scoped entries apply loosely")
    return f"{path}: {load_expectations_file(path).header()}{scope}"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Writes the reports first (before xdist waits for its workers): an interrupted run's report is there in
    seconds, and says INTERRUPTED with how many tests ran."""
    config = session.config
    if not _active(config) or hasattr(config, "workerinput") or _RESULTS not in config.stash:
        return
    from tokenspec.core.interrupts import INTERRUPTS

    interrupted = INTERRUPTS.requested or exitstatus == pytest.ExitCode.INTERRUPTED
    if interrupted:
        INTERRUPTS.finishing()
    from tokenspec.suite.engine.fixtures import CAPABILITIES_ENV

    if decisions := os.environ.pop(CAPABILITIES_ENV, None):
        Path(decisions).unlink(missing_ok=True)
    from tokenspec.suite.reporting.report import RunInfo, write_reports

    started, started_at = config.stash[_STARTED]
    run = active_run(config)
    info = RunInfo(
        target=run.target, engine=run.engine, reference=run.reference, model=run.model, seed=run.seed,
        started_at=started_at,
        duration_s=round(time.time() - started, 2),
        expectations=_expectations_header(config),
        profile=run.profile or "",
        command=run.replay_command(run.seed) if run.seed is not None else "",
        interrupted=INTERRUPTS.name if interrupted else "",
        collected=counter.total if (counter := config.stash.get(_COUNTER, None)) else len(session.items),
        insecure=run.transport.insecure,
        lost=_losses(config),
        settings=dict(run.origins),
    )
    if info.lost and (xml := config.stash.get(xml_key, None)) is not None:
        xml.add_global_property("tokenspec_verdict", "INCONCLUSIVE")
    if out := run.report:
        caps = config.stash.get(_CAPABILITIES, None)
        with CLOCK.timing("report"):
            report = write_reports(Path(out), info, config.stash[_RESULTS], config.stash.get(_COLLECTION_ERRORS, []),
                                   caps.to_dict() if caps is not None else None)
        if (given := handover(config)) is not None:
            given.report = report  # the runner's verdict comes from here, not from reading report.json back


def _losses(config: pytest.Config) -> tuple[dict[str, str], ...]:
    """The run's lost servers, each named by every role of the run its URL serves; the shared folder goes."""
    import shutil

    from tokenspec.core.liveness import origin

    urls = active_run(config).urls()
    out = []
    for loss in LIVENESS.losses():
        roles = [role for role, url in urls.items() if origin(url) == loss.url] or [loss.role]
        out.append({**loss.to_dict(), "role": " and ".join(roles)})
    if LIVENESS.folder is not None:
        shutil.rmtree(LIVENESS.folder, ignore_errors=True)
        LIVENESS.stop()
    return tuple(out)


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """pytest has taken the interrupt: what follows (reports, unconfigure) is the run finishing, not to be cut.
    Only the interrupt's last frame is kept: pytest renders the whole traceback with every frame's source to print
    one line of it, which took a second of a job that must stop within seconds."""
    from tokenspec.core.interrupts import INTERRUPTS

    INTERRUPTS.finishing()
    excinfo.traceback = excinfo.traceback[-1:]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Last, after every writer (junit.xml included): no secret of the run's transport stays in its report folder."""
    if _active(config):
        CLOCK.write()
    if _active(config) and hasattr(config, "workerinput"):
        from tokenspec.core.interrupts import INTERRUPTS

        INTERRUPTS.uninstall()
    if not _active(config) or hasattr(config, "workerinput") or not (out := active_run(config).report):
        return
    from tokenspec.core.transport import redact_folder
    from tokenspec.suite.engine.fixtures import transport_from_config

    redact_folder(Path(out), transport_from_config(config).secrets())
