"""The gateway when the engine misbehaves: always an OpenAI error object with 502/503/504, never a hang.

The engine here is a labelled TEST DOUBLE (``misbehaving_engine``): a tiny ASGI app that fails in one
chosen way. Everything else is real: the reference frontend over real HTTP, the tiny model's tokenizer.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from frontend_server import running_app, running_frontend
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

CHAT = {"model": DEFAULT_MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def misbehaving_engine(mode: str, release: threading.Event) -> Starlette:
    """TEST DOUBLE of an engine's /inference/v1/generate that fails in one way (``mode``)."""

    async def generate(request: Request) -> Response:
        body = await request.json()
        if mode == "500":
            return PlainTextResponse("engine exploded", status_code=500)
        if mode == "400":
            return JSONResponse({"error": {"message": "bad sampling", "type": "BadRequestError", "param": None,
                                           "code": 400}}, status_code=400)
        if mode == "slow":
            while not release.is_set():
                await asyncio.sleep(0.05)
            return JSONResponse({})
        if mode == "stream-breaks":
            async def events():
                chunk = {"request_id": "x", "choices": [{"index": 0, "token_ids": body["token_ids"][:1],
                                                         "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                raise RuntimeError("engine died mid-stream")
            return StreamingResponse(events(), media_type="text/event-stream")
        if mode == "refuses-in-stream":  # what vLLM's generate does with stop_token_ids past the vocabulary
            async def refusal():
                error = {"error": {"message": "token_id(s) [5624] in stop_token_ids contain out-of-vocab token ids.",
                                   "type": "BadRequestError", "param": "stop_token_ids", "code": 400}}
                yield f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode()
            return StreamingResponse(refusal(), media_type="text/event-stream")
        raise AssertionError(mode)

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(routes=[Route("/inference/v1/generate", generate, methods=["POST"]),
                             Route("/health", health)])


@pytest.fixture
def gateway(request, model_dir):
    mode, concurrency = request.param
    release = threading.Event()
    with running_app(misbehaving_engine(mode, release)) as engine_url:
        config = FrontendConfig(model_dir=model_dir, served_model_name=DEFAULT_MODEL_NAME, tool_parser="hermes",
                                reasoning_parser="qwen3", engine_url=engine_url, engine_timeout=1.0,
                                max_concurrency=concurrency)
        with running_frontend(config) as url:
            yield url, release
        release.set()


def _error(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == status and error["message"] and error["type"]
    return error


@pytest.mark.parametrize("gateway", [("500", None)], indirect=True)
def test_engine_5xx_becomes_502(gateway) -> None:
    url, _ = gateway
    _error(httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=10), 502)
    _error(httpx.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=10), 502)


@pytest.mark.parametrize("gateway", [("400", None)], indirect=True)
def test_engine_refusal_is_passed_through(gateway) -> None:
    url, _ = gateway
    assert _error(httpx.post(f"{url}/v1/completions", json={**CHAT, "prompt": "x"}, timeout=10), 400)["message"] \
        == "bad sampling"


@pytest.mark.parametrize("gateway", [("slow", None)], indirect=True)
def test_engine_timeout_becomes_504_without_hanging(gateway) -> None:
    url, _ = gateway
    started = time.monotonic()
    _error(httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30), 504)
    assert time.monotonic() - started < 10, "the gateway must give up at its engine timeout"


@pytest.mark.parametrize("gateway", [("stream-breaks", None)], indirect=True)
def test_engine_dying_mid_stream_ends_with_an_error_event_and_done(gateway) -> None:
    url, _ = gateway
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=30) as resp:
        assert resp.status_code == 200
        events = [line[5:].strip() for line in resp.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]"
    assert "error" in json.loads(events[-2]), events


@pytest.mark.parametrize("gateway", [("refuses-in-stream", None)], indirect=True)
def test_an_engine_refusal_in_the_first_event_is_answered_as_a_refusal(gateway) -> None:
    """Nothing was streamed yet, so the client gets the 400 a coupled vLLM server gives before it streams; the
    generate pass-through keeps the engine's own stream."""
    url, _ = gateway
    for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", {**CHAT, "prompt": "x"})):
        assert _error(httpx.post(f"{url}{path}", json={**body, "stream": True}, timeout=10), 400)["param"] \
            == "stop_token_ids"
    generate = {"token_ids": [1, 2], "sampling_params": {"max_tokens": 2}, "stream": True}
    with httpx.stream("POST", f"{url}/inference/v1/generate", json=generate, timeout=10) as resp:
        assert resp.status_code == 200 and "error" in resp.read().decode()


@pytest.mark.parametrize("gateway", [("slow", 1)], indirect=True)
def test_concurrency_limit_answers_503_at_once(gateway) -> None:
    url, release = gateway
    with httpx.Client(timeout=30) as client:
        first = threading.Thread(target=lambda: client.post(f"{url}/v1/chat/completions", json=CHAT))
        first.start()
        time.sleep(0.5)  # the first request now holds the only slot
        started = time.monotonic()
        _error(httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=10), 503)
        assert time.monotonic() - started < 2
        release.set()
        first.join()


def test_unreachable_engine_is_502(model_dir) -> None:
    from tokenspec.harness.processes import free_port

    config = FrontendConfig(model_dir=model_dir, served_model_name=DEFAULT_MODEL_NAME,
                            engine_url=f"http://127.0.0.1:{free_port()}", engine_timeout=2.0)
    with running_frontend(config) as url:
        _error(httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=10), 502)
        _error(httpx.post(f"{url}/inference/v1/generate", json={"token_ids": [1, 2], "sampling_params": {}},
                          timeout=10), 502)


def _resetting_engine(answers: list[bytes]) -> tuple[str, threading.Thread]:
    """TEST DOUBLE of an engine on a raw socket: the first connection is reset (RST) once its request has arrived,
    as a server drops a pooled keep-alive connection under a request; later ones get ``answers[0]``."""
    import socket
    import struct

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        for n in range(2):
            conn, _ = listener.accept()
            conn.recv(65536)
            if n == 0:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(answers[0])).encode() + b"\r\nconnection: close\r\n\r\n" + answers[0])
            conn.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread


def test_a_connection_the_engine_resets_before_answering_is_sent_once_more(model_dir) -> None:
    answer = json.dumps({"request_id": "x", "choices": [{"index": 0, "token_ids": [35, 398, 13],
                                                         "finish_reason": "length"}]}).encode()
    engine_url, thread = _resetting_engine([answer])
    config = FrontendConfig(model_dir=model_dir, served_model_name=DEFAULT_MODEL_NAME, tool_parser="hermes",
                            reasoning_parser="qwen3", engine_url=engine_url, engine_timeout=5.0)
    with running_frontend(config) as url:
        body = {**CHAT, "chat_template_kwargs": {"enable_thinking": False}}
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    thread.join(timeout=5)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"]


def test_the_served_document_does_not_wait_on_a_stalled_engine(model_dir, monkeypatch) -> None:
    """/openapi.json asks the engine which settings-dependent fields it takes; an engine that never answers leaves
    them unstated after the probe's own timeout, not the gateway's (minutes)."""
    from tokenspec.harness.frontend import gateway

    monkeypatch.setattr(gateway, "PROBE_TIMEOUT", 0.5)
    release = threading.Event()
    with running_app(misbehaving_engine("slow", release)) as engine, \
            running_frontend(FrontendConfig(model_dir, DEFAULT_MODEL_NAME, engine_url=engine)) as url:
        started = time.monotonic()
        limits = httpx.get(f"{url}/openapi.json", timeout=30).json()["info"]["x-tokenspec-limits"]
        release.set()
    assert time.monotonic() - started < 5
    assert "prompt_logprob_token_ids" not in limits and "thinking_token_budget" not in limits
    assert limits["vocab_size"] > 0
