"""A profile's declarations as the gating sees them: a target that declares it does not host generate has no
generate-dependent features either (their tests are unsupported, the target's declared shape), instead of
leaving them "not tested" (a gap of the run that --require-judged fails on)."""

from __future__ import annotations

from pathlib import Path

from tokenspec.suite.engine.gating import ENGINE_ROLES, GENERATE_FEATURES, Capabilities
from tokenspec.suite.engine.profile import load_profile


def _probed_without_generate() -> Capabilities:
    caps = Capabilities()
    caps.decide("chat-render", "offered", "probe", "POST /v1/chat/completions/render answered 200")
    caps.decide("generate", "not-tested", "probe", "not hosted: POST /inference/v1/generate answered 404")
    for feature in (*GENERATE_FEATURES, *ENGINE_ROLES):
        caps.decide(feature, "not-tested", "probe", "no generate endpoint to probe it with; pass --engine URL")
    return caps


def test_declaring_generate_absent_makes_what_needs_it_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("implementation: {name: r, version: '1'}\nfeatures: {generate: false, logprobs: true}\n")
    caps = _probed_without_generate()
    load_profile(path).apply(caps)
    assert caps.decisions["generate"].status == "unsupported"
    assert caps.decisions["logprobs"].status == "offered"  # a declaration of its own wins
    for feature in (*GENERATE_FEATURES, *ENGINE_ROLES):
        if feature != "logprobs":
            decision = caps.decisions[feature]
            assert decision.status == "unsupported" and "needs generate" in decision.evidence, feature
    assert caps.decisions["chat-render"].status == "offered"


def test_without_the_declaration_the_gap_stays_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("implementation: {name: r, version: '1'}\nfeatures: {chat-render: true}\n")
    caps = _probed_without_generate()
    load_profile(path).apply(caps)
    assert all(caps.decisions[f].status == "not-tested" for f in ("generate", *GENERATE_FEATURES, *ENGINE_ROLES))
