"""A slow or silent engine is not a missing feature: the probe asks again with a longer timeout, and a feature
that never answered is left to its tests (which then fail on the hang) instead of being called unsupported.
The engine is a labelled test double whose logprobs requests are slow or never answered."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx
import pytest
from frontend_server import running_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tokenspec.suite.engine import probe
from tokenspec.suite.engine.gating import Capabilities


def slow_logprobs_engine(delay: float) -> Starlette:
    """Test double: generate answers at once, but takes ``delay`` seconds when logprobs are asked for."""
    async def generate(request: Request) -> JSONResponse:
        body = await request.json()
        params = body.get("sampling_params") or {}
        choice = {"index": 0, "token_ids": [5], "finish_reason": "length", "stop_reason": None}
        if params.get("logprobs"):
            await asyncio.sleep(delay)
            choice["logprobs"] = [{"5": {"logprob": -0.1, "rank": 1}}]
        out = {"request_id": "double", "choices": [choice] * int(params.get("n", 1))}
        if params.get("prompt_logprobs"):
            out["prompt_logprobs"] = [None]
        return JSONResponse(out)

    return Starlette(routes=[Route("/inference/v1/generate", generate, methods=["POST"]),
                             Route("/health", lambda r: JSONResponse({}), methods=["GET"])])


def _decisions(url: str) -> dict[str, tuple[str, str]]:
    caps = Capabilities()
    target = SimpleNamespace(generate_url=url, model="tiny")
    with httpx.Client(timeout=probe.PROBE_TIMEOUT) as client:
        probe._probe_generate(client, caps, target, probe.Answer("render", 0, None))
    return {d.feature: (d.status, d.evidence) for d in caps.decisions.values()}


@pytest.mark.parametrize(("delay", "evidence"), [(1.0, "answered 200"), (30.0, "no answer")],
                         ids=["slow-then-answers", "never-answers"])
def test_a_slow_or_silent_feature_is_not_called_unsupported(monkeypatch, delay: float, evidence: str) -> None:
    monkeypatch.setattr(probe, "PROBE_TIMEOUT", 0.4)
    monkeypatch.setattr(probe, "PROBE_RETRY_TIMEOUT", 2.5)
    with running_app(slow_logprobs_engine(delay)) as url:
        decided = _decisions(url)
    status, why = decided["logprobs"]
    assert status == "offered" and evidence in why, decided["logprobs"]
    assert decided["generate"][0] == "offered" and decided["multi-choice"][0] == "offered"
