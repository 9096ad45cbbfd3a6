"""Aphrodite Engine as an implementation: the render/derender server seed 000 describes.

Aphrodite's GPU-less render server (``aphrodite launch render``) runs on CPU; it hosts no generate, so a
deployment pairs it with the vLLM engine (Aphrodite's render output is accepted there), which is also the
parity reference. It lives in a cached virtualenv of its own: it pins torch 2.13.0, whose CPU wheel the
machine's local wheel folder provides, and pulls CUDA-only packages that the render server never loads.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.base import Configuration, Deployment, started
from tokenspec.harness.processes import (
    LaunchError,
    ServerProcess,
    cache_dir,
    distribution_version,
    free_port,
    install_venv,
    venv_ready,
)

APHRODITE_VERSION = "0.24.1"


def aphrodite_venv() -> Path:
    return cache_dir() / f"aphrodite-{APHRODITE_VERSION}"


class Aphrodite:
    name = "aphrodite"
    title = "Aphrodite Engine"

    def __init__(self, venv: Path | None = None) -> None:
        self.venv = venv or aphrodite_venv()

    def installed(self) -> bool:
        return venv_ready(self.venv) or (self.venv / "bin" / "aphrodite").exists()

    def install(self) -> None:
        if self.installed():
            return
        install_venv(self.venv, f"aphrodite-engine {APHRODITE_VERSION}", [
            ["install", "-q", "torch==2.13.0+cpu"],
            ["install", "-q", f"aphrodite-engine=={APHRODITE_VERSION}"],
            ["uninstall", "-y", "-q", *vllm.MISMATCHED_EXTRAS],
        ], expect="first run only: about 5 min, 5.5 GB",
            hint="Aphrodite pins torch==2.13.0; pip needs the CPU build of that wheel (a local wheel folder or"
                 " PyTorch's CPU index via PIP_EXTRA_INDEX_URL)")

    def version(self) -> str:
        return distribution_version(self.venv / "bin" / "python", ("aphrodite-engine",))

    def deploy(self, config: Configuration) -> Deployment:
        if not self.installed():
            raise LaunchError(f"Aphrodite is not installed in {self.venv}: run `tokenspec matrix --install`")
        env = dict(os.environ, APHRODITE_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        render = ServerProcess(
            "Aphrodite render",
            [str(self.venv / "bin" / "aphrodite"), "launch", "render", "--model", str(config.model_dir),
             "--served-model-name", config.served_model_name, "--host", "127.0.0.1", "--port", "{port}",
             *vllm.parser_args(config.tool_parser, config.reasoning_parser)],
            env=env, port=free_port(), expect="about 25 s on CPU")
        install = vllm.find_vllm()
        engine = vllm.VllmServer(install, "engine", config.model_dir, config.served_model_name, port=free_port(),
                                 extra_args=vllm.parser_args(config.tool_parser, config.reasoning_parser)
                                 + vllm.engine_args())
        deployment = Deployment(self.name, self.version(), "cpu", target=render.url, engine=engine.url,
                                reference=engine.url,
                                roles=f"render server (aphrodite launch render) as target; the vLLM"
                                      f" {install.version()} engine as engine and parity reference")
        return started(deployment, engine, render)
