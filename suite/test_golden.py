"""Golden cases for the target's tokenizer (RENDER-005, DERENDER-*): exact token IDs and exact splits.

Applied only when ``--tokenizer`` names a model folder whose tokenizer fingerprint has a golden file
(``tokenspec golden build`` makes one); otherwise they are not tested. Derender expectations come from
``specs/parsers.yaml`` for the target's parsers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenspec.suite.derender_checks import assert_split, configured_split
from tokenspec.suite.gating import not_tested


def _cases(config: pytest.Config) -> list:
    from tokenspec.golden_cases import find_golden

    tokenizer = config.getoption("--tokenspec-tokenizer", default=None)
    golden = find_golden(Path(tokenizer)) if tokenizer else None
    if golden is None:
        return [pytest.param(None, id="no-golden-file", marks=pytest.mark.req("RENDER-005"))]
    return [pytest.param(case, id=case["id"], marks=pytest.mark.req(*case["requirements"]))
            for case in golden["cases"]]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "golden" in metafunc.fixturenames:
        metafunc.parametrize("golden", _cases(metafunc.config))


def test_golden_case(api, target, capabilities, golden) -> None:
    if golden is None:
        not_tested("no golden file for this tokenizer's fingerprint (pass --tokenizer with a model that has one)")
    if golden["kind"] == "render":
        if golden.get("feature"):
            capabilities.require(golden["feature"])
        out = api.post_ok("/v1/chat/completions/render", {"model": target.model, **golden["request"]})
        assert out["token_ids"] == golden["expect"]["token_ids"]
    else:
        text = golden["output"] if golden.get("like") else None
        want = configured_split(capabilities, golden.get("shape") or golden["like"], golden["variant"], text)
        assert_split(api, target.model, capabilities, golden["token_ids"], want, golden["variant"],
                     golden["requirements"][0])
