"""Golden cases for the target's tokenizer (RENDER-005, DERENDER-*): exact token IDs and exact splits.

Applied only when ``--tokenizer`` names a model folder whose tokenizer fingerprint has a golden file
(``tokenspec golden build`` makes one); otherwise the cases are reported as unsupported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenspec.compare import tool_signature
from tokenspec.suite.results import UNSUPPORTED_PREFIX


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
        pytest.skip(f"{UNSUPPORTED_PREFIX}no golden file for this tokenizer (pass --tokenizer with a known model)")
    if golden.get("feature") and not capabilities.has(golden["feature"]):
        pytest.skip(f"{UNSUPPORTED_PREFIX}target does not offer {golden['feature']}")
    request = {"model": target.model, **golden["request"]}
    if golden["kind"] == "render":
        out = api.post_ok("/v1/chat/completions/render", request)
        assert out["token_ids"] == golden["expect"]["token_ids"]
        return
    body = {
        "model": target.model,
        "generate_response": {"request_id": "golden", "choices": [
            {"index": 0, "token_ids": golden["token_ids"], "finish_reason": "stop", "stop_reason": None}]},
        "prompt_tokens": 5,
        "chat_request": request,
    }
    choice = api.post_ok("/v1/chat/completions/derender", body)["choices"][0]
    message, expect = choice["message"], golden["expect"]
    got = {
        "content": message.get("content") or None,
        "reasoning": message.get("reasoning") or message.get("reasoning_content") or None,
        "tool_calls": [list(sig) for sig in tool_signature(message.get("tool_calls"))] or None,
        "finish_reason": choice["finish_reason"],
    }
    want = {k: expect.get(k) for k in got}
    assert got == want
