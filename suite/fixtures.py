"""Fixtures of the conformance tests: the target, its codec and capabilities, and per-test clients.

Registered by the plugin only when a target is given, so the project's own test runs never see them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tokenspec.suite.client import SuiteClient
from tokenspec.suite.plugin import LAST_REQUEST
from tokenspec.suite.probe import Capabilities, probe
from tokenspec.suite.results import UNSUPPORTED_PREFIX
from tokenspec.suite.target import Codec, Target, card_max_model_len


def pytest_configure(config: pytest.Config) -> None:
    settings.register_profile(
        "tokenspec",
        max_examples=config.getoption("--tokenspec-max-examples"),
        deadline=None,
        derandomize=False,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    settings.load_profile("tokenspec")


@pytest.fixture(scope="session")
def target(pytestconfig: pytest.Config) -> Target:
    from tokenspec.target import served_model

    url = pytestconfig.getoption("--tokenspec-target")
    tokenizer = pytestconfig.getoption("--tokenspec-tokenizer")
    return Target(
        url=url,
        engine_url=pytestconfig.getoption("--tokenspec-engine"),
        reference_url=pytestconfig.getoption("--tokenspec-reference"),
        model=pytestconfig.getoption("--tokenspec-model") or served_model(url),
        tokenizer_dir=Path(tokenizer) if tokenizer else None,
        timeout=pytestconfig.getoption("--tokenspec-timeout"),
        max_examples=pytestconfig.getoption("--tokenspec-max-examples"),
        seed=pytestconfig.getoption("--tokenspec-seed"),
    )


@pytest.fixture(scope="session")
def codec(target: Target) -> Codec:
    return Codec(target)


@pytest.fixture(scope="session")
def capabilities(target: Target, codec: Codec) -> Capabilities:
    return probe(target, codec)


def _client(request: pytest.FixtureRequest, base_url: str, timeout: float) -> Iterator[SuiteClient]:
    client = SuiteClient(base_url, timeout)
    request.node.stash.setdefault(LAST_REQUEST, []).append(client)
    yield client
    client.close()


@pytest.fixture
def api(request: pytest.FixtureRequest, target: Target) -> Iterator[SuiteClient]:
    """Client for the target (render, derender, utilities)."""
    yield from _client(request, target.url, target.timeout)


@pytest.fixture
def engine(request: pytest.FixtureRequest, target: Target) -> Iterator[SuiteClient]:
    """Client for the generate endpoint (the engine, or the target itself)."""
    yield from _client(request, target.generate_url, max(target.timeout, 60.0))


@pytest.fixture
def reference(request: pytest.FixtureRequest, target: Target) -> Iterator[SuiteClient]:
    """Client for the standard serve endpoint used for parity."""
    if not target.reference_url:
        pytest.skip(f"{UNSUPPORTED_PREFIX}no --reference (standard serve endpoint) given")
    yield from _client(request, target.reference_url, max(target.timeout, 60.0))


@pytest.fixture(scope="session")
def max_model_len(target: Target) -> int:
    """The target's context length: its /v1/models card, else the model folder's configuration."""
    import json

    if (reported := card_max_model_len(target.url, target.timeout)) is not None:
        return reported
    if target.tokenizer_dir and (target.tokenizer_dir / "tokenizer_config.json").exists():
        config = json.loads((target.tokenizer_dir / "tokenizer_config.json").read_text())
        if isinstance(config.get("model_max_length"), int):
            return int(config["model_max_length"])
    pytest.fail("the target's context length is unknown: its /v1/models card has no max_model_len (UTIL-008)")
