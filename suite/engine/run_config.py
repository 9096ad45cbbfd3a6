"""The run's one configuration inside pytest: the typed ``RunConfig`` the runner hands over, found in one place.

``tokenspec run`` builds a :class:`~tokenspec.core.config.RunConfig` and passes it to ``pytest.main`` as an object
(:class:`Handover`, a plugin that also carries the run's report back); each xdist worker receives the same
configuration from the controller (``workerinput``). Someone who calls pytest directly with the plugin's
``--tokenspec-*`` options gets the same object built from those options here, the only place that reads them.
Everything else in the suite (the target, the transport, the report's run facts) derives from it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from tokenspec.core.config import RunConfig
from tokenspec.core.transport import Transport

#: The key of the configuration in an xdist worker's ``workerinput``.
WORKER_KEY = "tokenspec_run_config"
#: Where a direct pytest run keeps the seed it chose (the workers receive it with the configuration).
SEED_ENV = "TOKENSPEC_SEED"

_RUN = pytest.StashKey["RunConfig | None"]()


class Handover:
    """What ``tokenspec run`` gives pytest and gets back: the run's configuration in, the report's data out (the
    dict report.json holds, set by the plugin when it writes the reports)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.report: dict[str, Any] | None = None


def run_config(config: pytest.Config) -> RunConfig | None:
    """The run's configuration, or None when pytest runs without the suite (no target given)."""
    if _RUN not in config.stash:
        config.stash[_RUN] = _build(config)
    return config.stash[_RUN]


def active_run(config: pytest.Config) -> RunConfig:
    """The configuration of a run with a target: what the suite's hooks and fixtures, active only then, read."""
    found = run_config(config)
    assert found is not None, "the suite's hooks and fixtures run only when a target is given"
    return found


def handover(config: pytest.Config) -> Handover | None:
    """The runner's :class:`Handover`, registered as a plugin object by ``pytest.main(..., plugins=[...])``."""
    return next((p for p in config.pluginmanager.get_plugins() if isinstance(p, Handover)), None)


def suite_dir(config: pytest.Config) -> Path | None:
    """The folder of conformance tests held to the suite's rules, when it is not the shipped suite."""
    folder = config.getoption("--tokenspec-suite-dir", default=None)
    return Path(folder).resolve() if folder else None


def _build(config: pytest.Config) -> RunConfig | None:
    if (given := handover(config)) is not None:
        return given.config
    if (text := getattr(config, "workerinput", {}).get(WORKER_KEY)) is not None:
        return RunConfig.from_json(text)
    return _from_options(config)


def _from_options(config: pytest.Config) -> RunConfig | None:
    """The configuration of a direct ``pytest --tokenspec-target URL ...`` run."""
    def option(name: str, default: Any = None) -> Any:
        return config.getoption(f"--tokenspec-{name}", default=default)

    if not option("target"):
        return None
    seed = option("seed")
    if seed is None:  # chosen once, in the controller; the workers receive the whole configuration from it
        seed = int(os.environ.setdefault(SEED_ENV, str(random.randrange(1 << 31))))
    transport = Transport.from_flags(
        api_key_env=option("api-key-env") or (), header=option("header") or (), timeout=option("timeout") or (),
        ca_bundle=option("ca-bundle"), insecure=bool(option("insecure")),
        max_concurrency=option("max-concurrency"), max_rps=option("max-rps"))
    return RunConfig(
        target=option("target"), engine=option("engine"), reference=option("reference"), model=option("model"),
        tokenizer=option("tokenizer"), report=option("report"), level=option("level", "may"),
        expectations=option("expectations"), profile=option("profile"), seed=seed,
        max_examples=option("max-examples", 25), no_shrink=bool(option("no-shrink")), transport=transport)
