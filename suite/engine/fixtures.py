"""Fixtures of the conformance tests: the target, its codec and capabilities, and per-test clients.

Registered by the plugin only when a target is given, so the project's own test runs never see them.
Capabilities are decided once per run, in the controlling process (:func:`decide_capabilities`), and every
xdist worker reads the same decisions, so all tests of a run are gated alike and the report lists them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from tokenspec.core.phases import CLOCK
from tokenspec.core.transport import Transport
from tokenspec.suite.engine.checks import LAST_REQUEST
from tokenspec.suite.engine.client import SuiteClient
from tokenspec.suite.engine.gating import Capabilities
from tokenspec.suite.engine.run_config import active_run
from tokenspec.suite.engine.target import Codec, Target, card_max_model_len

if TYPE_CHECKING:
    from tokenspec.suite.oracles.render_oracle import RenderOracle

CAPABILITIES_ENV = "TOKENSPEC_CAPABILITIES"


def pytest_configure(config: pytest.Config) -> None:
    settings.register_profile(
        "tokenspec",
        max_examples=active_run(config).max_examples,
        deadline=None,
        derandomize=False,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    settings.load_profile("tokenspec")


_TRANSPORT = pytest.StashKey[Transport]()


def transport_from_config(config: pytest.Config) -> Transport:
    """The run's transport, its limits shared out over the xdist workers."""
    if _TRANSPORT not in config.stash:
        workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
        config.stash[_TRANSPORT] = active_run(config).transport.per_process(workers)
    return config.stash[_TRANSPORT]


def target_from_config(config: pytest.Config) -> Target:
    from tokenspec.core.target import served_model

    run = active_run(config)
    assert run.seed is not None, "the runner and a direct pytest run always choose a seed"
    transport = transport_from_config(config)
    return Target(
        url=run.target,
        engine_url=run.engine,
        reference_url=run.reference,
        model=run.model or served_model(run.target, transport),
        tokenizer_dir=Path(run.tokenizer) if run.tokenizer else None,
        timeout=transport.timeout("target"),
        max_examples=run.max_examples,
        seed=run.seed,
        transport=transport,
    )


def decide_capabilities(config: pytest.Config) -> Capabilities:
    """Probe the target once (profile applied) and leave the decisions where workers and the report find them."""
    from tokenspec.suite.engine.probe import probe
    from tokenspec.suite.engine.profile import load_profile

    target = target_from_config(config)
    path = active_run(config).profile
    with CLOCK.timing("probe"):
        caps = probe(target, Codec(target), load_profile(path) if path else None)
    fd, file = tempfile.mkstemp(prefix="tokenspec-capabilities-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump(caps.to_dict(), out)
    os.environ[CAPABILITIES_ENV] = file
    return caps


@pytest.fixture(scope="session")
def target(pytestconfig: pytest.Config) -> Target:
    return target_from_config(pytestconfig)


@pytest.fixture(scope="session")
def codec(target: Target, capabilities: Capabilities) -> Codec:
    """Token ids of the target's tokenizer: from the model folder, else through the target's /tokenize."""
    capabilities.require("codec")
    return Codec(target)


_RUN_CAPABILITIES = pytest.StashKey[Capabilities]()


def run_capabilities(config: pytest.Config) -> Capabilities:
    """The run's decisions, read once per process (xdist workers read the controller's file)."""
    if _RUN_CAPABILITIES not in config.stash:
        file = os.environ.get(CAPABILITIES_ENV)
        if file and Path(file).exists():
            config.stash[_RUN_CAPABILITIES] = Capabilities.from_dict(json.loads(Path(file).read_text()))
        else:
            config.stash[_RUN_CAPABILITIES] = decide_capabilities(config)
    return config.stash[_RUN_CAPABILITIES]


@pytest.fixture(scope="session")
def capabilities(pytestconfig: pytest.Config) -> Capabilities:
    return run_capabilities(pytestconfig)


def _client(request: pytest.FixtureRequest, base: str, base_url: str, transport: Transport) -> Iterator[SuiteClient]:
    caps = request.getfixturevalue("capabilities")
    client = SuiteClient(base_url, transport.timeout(base), gate=lambda method, path, body: caps.require_route(
        base, method, path, body), role=base, transport=transport)
    request.node.stash.setdefault(LAST_REQUEST, []).append(client)
    yield client
    client.close()


@pytest.fixture
def api(request: pytest.FixtureRequest, target: Target) -> Iterator[SuiteClient]:
    """Client for the target (render, derender, utilities); requests to routes it does not host never run."""
    yield from _client(request, "target", target.url, target.transport)


@pytest.fixture
def engine(request: pytest.FixtureRequest, target: Target, capabilities: Capabilities) -> Iterator[SuiteClient]:
    """Client for the generate endpoint (the engine, or the target itself)."""
    capabilities.require("generate")
    yield from _client(request, "engine", target.generate_url, target.transport)


@pytest.fixture
def reference(request: pytest.FixtureRequest, target: Target, capabilities: Capabilities) -> Iterator[SuiteClient]:
    """Client for the standard serve endpoint used for parity."""
    capabilities.require("coupled")
    yield from _client(request, "reference", target.reference_url or "", target.transport)


@pytest.fixture(scope="session")
def tokenizer_dir(target: Target, capabilities: Capabilities) -> Path:
    """The model folder (``--tokenizer``); tests that truly need it are not tested without it."""
    capabilities.require("tokenizer-folder")
    assert target.tokenizer_dir is not None
    return target.tokenizer_dir


@pytest.fixture(scope="session")
def render_oracle(tokenizer_dir: Path) -> RenderOracle:
    """transformers' apply_chat_template on the model folder (suite/oracles/render_oracle.py), or not tested."""
    from tokenspec.suite.engine.gating import not_tested
    from tokenspec.suite.oracles.render_oracle import OracleUnavailable, RenderOracle

    try:
        return RenderOracle.load(tokenizer_dir)
    except OracleUnavailable as exc:
        not_tested(f"no render oracle: {exc}")


@pytest.fixture(scope="session")
def max_model_len(target: Target, capabilities: Capabilities) -> int:
    """The target's context length: its /v1/models card, the profile's limits, else the model folder's config."""
    if (reported := card_max_model_len(target.url, target.transport)) is not None:
        return reported
    if "max_model_len" in capabilities.limits:
        return int(capabilities.limits["max_model_len"])
    if target.tokenizer_dir and (target.tokenizer_dir / "tokenizer_config.json").exists():
        config = json.loads((target.tokenizer_dir / "tokenizer_config.json").read_text())
        # transformers writes int(1e30) there for "no limit"; no real context reaches 2**31 tokens
        if isinstance(config.get("model_max_length"), int) and 0 < config["model_max_length"] < 2**31:
            return int(config["model_max_length"])
    if target.engine_url:
        if (reported := card_max_model_len(target.engine_url, target.transport, "engine")) is not None:
            return reported
    # The card's own field is UTIL-008's business (test_model_card_reports_max_model_len); here it is a fact the
    # run lacks, so the tests that need it are not tested, never failed or errored.
    from tokenspec.suite.engine.gating import not_tested

    not_tested("the context length is unknown: the target's /v1/models card has no max_model_len (nor the"
               " engine's); pass --profile with limits.max_model_len, or --tokenizer DIR")
