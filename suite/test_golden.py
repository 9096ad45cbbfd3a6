"""Golden cases for the target's tokenizer (RENDER-005, RENDER-023, DERENDER-*): exact token IDs and exact splits.

Applied when ``--tokenizer`` names a model folder whose tokenizer fingerprint has a golden file (``tokenspec golden
build`` makes one), or, without a folder, when the target's ``/v1/models`` card reports that fingerprint as its
``tokenizer_version``; otherwise they are not tested. Each case records its oracle(s): render ids
from transformers (chat, completions, and Messages and Responses after the spec's mapping to a chat request,
RENDER-026/RENDER-030; cross-checked with vLLM's render server), recorded derender splits from vLLM's derender with the
family's parsers (corrected by the spec where vLLM deviates; the file lists each correction). A recorded derender
case applies only to a target running the same parsers; the hand-written derender cases take their split from
``specs/parsers.yaml`` for the target's parsers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenspec.golden import RECORDED_WITH
from tokenspec.specs.catalogue import read_generations
from tokenspec.specs.parser_families import Split, reading_changed
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles.derender_checks import assert_split, configured_split


def _cases(config: pytest.Config) -> list:
    """The golden file of the model folder's fingerprint; without a folder, of the fingerprint the target itself
    reports as its ``tokenizer_version`` (a claim its render and derender answers then have to bear out)."""
    from tokenspec.golden import find_golden, golden_of_fingerprint
    from tokenspec.suite.engine.fixtures import transport_from_config
    from tokenspec.suite.engine.run_config import run_config
    from tokenspec.suite.engine.target import model_card

    run = run_config(config)
    if run is not None and run.tokenizer:
        golden = find_golden(Path(run.tokenizer))
    elif run is not None:
        card = model_card(run.target, transport_from_config(config), model=run.model)
        golden = golden_of_fingerprint(str(card.get("tokenizer_version") or ""))
    else:
        golden = None
    if golden is None:
        return [pytest.param(None, id="no-golden-file", marks=pytest.mark.req("RENDER-005"))]
    return [pytest.param(case, id=case["id"], marks=pytest.mark.req(*case["requirements"]))
            for case in golden["cases"]]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "golden" in metafunc.fixturenames:
        metafunc.parametrize("golden", _cases(metafunc.config))


def _first_difference(a: list[int], b: list[int]) -> str:
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at index {k}: got {a[k:k + 8]}, expected {b[k:k + 8]} ({len(a)} vs {len(b)} ids)"


#: The render route of each golden render kind; every kind but completions answers one prompt.
_RENDER_PATHS = {"render": "/v1/chat/completions/render", "completions-render": "/v1/completions/render",
                 "messages-render": "/v1/messages/render", "responses-render": "/v1/responses/render"}


def _check_render(api, target, capabilities, golden) -> None:
    if golden.get("feature"):
        capabilities.require(golden["feature"])
    chat = golden["kind"] != "completions-render"
    path = _RENDER_PATHS[golden["kind"]]
    body = {"model": target.model, **golden["request"]}
    expect = golden["expect"]
    if "status" in expect:
        status = api.post(path, body).status_code
        assert 400 <= status < 500, (f"[{golden['requirements'][0]}] the template refuses this conversation "
                                     f"({expect.get('reason', '')}); render answered {status}")
        return
    out = api.post_ok(path, body)
    got = [out["token_ids"]] if chat else [r["token_ids"] for r in out]
    want = [expect["token_ids"]] if chat else expect["token_ids"]
    assert len(got) == len(want), f"{len(got)} prompts rendered, {len(want)} expected"
    for g, w in zip(got, want, strict=True):
        oracles = "+".join(golden.get("oracles") or ["the hand-written golden case"])
        assert g == w, f"[{golden['requirements'][0]}] render differs from {oracles}: {_first_difference(g, w)}"


def _check_recorded_derender(api, target, capabilities, golden) -> None:
    configured = (capabilities.parsers.get("tool"), capabilities.parsers.get("reasoning"))
    recorded = (golden["parsers"]["tool"], golden["parsers"]["reasoning"])
    if configured != recorded:
        not_tested(f"recorded with tool parser {recorded[0]} and reasoning parser {recorded[1]}; the target runs "
                   f"{configured[0]} and {configured[1]}")
    want_choices = _recorded_expectation(golden, capabilities.generations)
    body = json.loads(json.dumps(golden["request"]))
    body["model"] = body["chat_request"]["model"] = target.model
    out = api.post_ok("/v1/chat/completions/derender", body)
    choices = sorted(out["choices"], key=lambda c: c["index"])
    assert len(choices) == len(want_choices), "one derendered choice per generated choice"
    for choice, want in zip(choices, want_choices, strict=True):
        expected = Split.from_entry(want)
        diffs = expected.differences(choice["message"], choice["finish_reason"])
        split = [d for d in diffs if not d.startswith("finish_reason")]
        assert not split, f"[DERENDER-001] split differs from {'+'.join(golden['oracles'])}: " + "; ".join(split)
        assert not diffs, f"[DERENDER-006] {'; '.join(diffs)}"


def _recorded_expectation(golden: dict, generations: list[str]) -> list[dict]:
    """The recorded choices that hold in every generation the target may speak: the first recording, or a later
    release's (``expect_in``) from a generation in which the configuration's parsers read outputs differently."""
    tool, reasoning = golden["parsers"]["tool"], golden["parsers"]["reasoning"]
    wants = []
    for generation in generations or list(read_generations()):
        changed = reading_changed(reasoning, tool, RECORDED_WITH, [generation])
        if not changed:
            wants.append(golden["expect"]["choices"])
        elif changed[-1] in golden.get("expect_in", {}):
            wants.append(golden["expect_in"][changed[-1]]["choices"])
        else:
            not_tested(f"recorded from vLLM {RECORDED_WITH}, and {tool or reasoning} reads outputs differently from"
                       f" {changed[-1]} (specs/parsers.yaml changed), a generation the target may speak, which the"
                       " golden file has no recording of (tokenspec golden build --family re-records it)")
    if any(w != wants[0] for w in wants):
        not_tested("the generations the target may speak expect different splits of this output (the golden file's"
                   " recordings); declare the generation with --profile")
    return wants[0]


def test_golden_case(api, target, capabilities, golden) -> None:
    if golden is None:
        not_tested("no golden file for this tokenizer's fingerprint (the target's /v1/models card reports no"
                   " tokenizer_version that has one); pass --tokenizer DIR with a model that has one")
    if golden["kind"] in _RENDER_PATHS:
        _check_render(api, target, capabilities, golden)
    elif golden["kind"] == "derender-recorded":
        _check_recorded_derender(api, target, capabilities, golden)
    else:
        text = golden["output"] if golden.get("like") else None
        want = configured_split(capabilities, golden.get("shape") or golden["like"], golden["variant"], text)
        assert_split(api, target.model, capabilities, golden["token_ids"], want, golden["variant"],
                     golden["requirements"][0])
