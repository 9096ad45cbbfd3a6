"""The vLLM launcher without starting vLLM: both spellings, and a clear error when a server dies at start."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tokenspec.harness.implementations import vllm


def test_cpu_spelling_uses_the_entry_modules() -> None:
    cmd = vllm.VllmInstall("cpu", Path("/venv/bin/python")).command("engine", Path("/m"), "tiny", 8200, ["--x"])
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry"]
    assert cmd[3:5] == ["--model", "/m"] and "--enable-scale-out" in cmd and cmd[-1] == "--x"
    render = vllm.VllmInstall("cpu", Path("/p")).command("render", Path("/m"), "tiny", 8100, [])
    assert render[2] == "vllm.entrypoints.launchers.render.entry" and "--enable-scale-out" not in render


def test_cuda_spelling_uses_vllm_serve_and_launch_render() -> None:
    install = vllm.VllmInstall("cuda", Path("/usr/bin/vllm"))
    assert install.command("engine", Path("/m"), "tiny", 8200, [])[:4] == ["/usr/bin/vllm", "serve", "/m",
                                                                             "--enable-scale-out"]
    assert install.command("render", Path("/m"), "tiny", 8100, [])[:4] == ["/usr/bin/vllm", "launch", "render", "/m"]


def test_cpu_environment_selects_the_cpu_platform() -> None:
    env = vllm.VllmInstall("cpu", Path("/p")).environment()
    assert env["VLLM_TARGET_DEVICE"] == "cpu" and env["HF_HUB_OFFLINE"] == "1"


def test_a_server_that_dies_at_start_is_a_launch_error_with_its_log(tmp_path: Path) -> None:
    """This interpreter has no vllm module, so the 'server' exits at once: the error must say so, fast."""
    server = vllm.VllmServer(vllm.VllmInstall("cpu", Path(sys.executable)), "engine", tmp_path, "tiny",
                             log_path=tmp_path / "engine.log", startup_timeout=60)
    started = time.monotonic()
    with pytest.raises(vllm.LaunchError, match="exited with code") as info:
        server.start()
    assert time.monotonic() - started < 30
    assert "No module named" in str(info.value), "the log tail must be in the message"


def test_missing_install_names_the_fix(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOKENSPEC_CACHE", str(tmp_path))
    monkeypatch.delenv("TOKENSPEC_VLLM_PYTHON", raising=False)
    with pytest.raises(vllm.LaunchError, match="tokenspec vllm install"):
        vllm.find_vllm("cpu")
