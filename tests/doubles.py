"""TEST DOUBLES: scripted servers the project's own tests point the suite at. Not for real use.

- ``padded_engine``: a generate endpoint on a model whose embedding has more rows (``vocab_size``) than the
  tokenizer has ids, as real models do (Qwen3: 151936 rows, 151669 ids). It samples padding ids too and
  refuses only ids at or past ``vocab_size``, which is what a correct engine does.
- ``forcing_ignoring_reference``: a coupled ``/v1/chat/completions`` that ignores ``structured_outputs`` and
  answers a run of newlines, as an engine without structured-outputs support would.
- ``render_only_host``: the frontend behind a proxy that hosts render alone: both derender routes and
  ``/version`` answer a framework 404, and the ``/v1/models`` card reports no ``max_model_len``.
- ``rate_limited``: an app behind a gateway that answers every third request 429 with ``Retry-After``.
- ``echoing_the_key``: an app whose ``/version`` answers 404 quoting the request's API key.
- ``ignoring_abort``: an app whose abort route answers an empty 200 to a well-formed body and tells nobody, so
  the generation it names runs on (the frontend's gateway behind it keeps its own stream relay).
- ``generate_only_engine``: a generate-only engine as such servers ship: ``/inference/v1/generate`` (passed to
  a real engine), ``/v1/models``, ``/version`` and ``/health``, and nothing else (no render, derender, tokenize,
  abort: a framework 404); ``stream: true`` answers 501. Switches turn streaming on and host an abort route
  that is forwarded, ignored (answered 200 while the generation runs on) or careless (200 to any body).

Both answer the spec's shapes so that only the behaviour under test differs from a real server.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def _error(message: str, status: int = 400, param: str | None = None) -> JSONResponse:
    kind = {400: "BadRequestError", 501: "NotImplementedError", 502: "BadGatewayError",
            504: "GatewayTimeoutError"}.get(status, "NotFoundError")
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status)


def _common(model: str) -> list[Route]:
    async def health(_: Request) -> JSONResponse:
        return JSONResponse({})

    async def models(_: Request) -> JSONResponse:
        card = {"id": model, "object": "model", "created": 0, "owned_by": "test-double", "max_model_len": 2048}
        return JSONResponse({"object": "list", "data": [card]})

    return [Route("/health", health), Route("/v1/models", models)]


def padded_engine(model: str, vocab_size: int, tokenizer_size: int) -> Starlette:
    rng = random.Random(0)

    async def generate(request: Request) -> JSONResponse:
        body = await request.json()
        ids = body.get("token_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
            return _error("token_ids must be a non-empty list of ints", param="token_ids")
        if bad := [i for i in ids if not 0 <= i < vocab_size]:
            return _error(f"Token id {bad[0]} is out of vocabulary (vocab_size {vocab_size})", param="token_ids")
        params = body.get("sampling_params") or {}
        n, max_tokens = int(params.get("n", 1)), int(params.get("max_tokens") or 16)
        choices = []
        for index in range(n):
            # Padding ids (tokenizer_size .. vocab_size-1) are sampled too, as random weights do.
            out = [rng.randrange(tokenizer_size, vocab_size)] + [rng.randrange(vocab_size)
                                                                 for _ in range(max_tokens - 1)]
            choices.append({"index": index, "token_ids": out, "finish_reason": "length", "stop_reason": None})
        completion = sum(len(c["token_ids"]) for c in choices)
        usage = {"prompt_tokens": len(ids), "completion_tokens": completion, "total_tokens": len(ids) + completion}
        return JSONResponse({"request_id": body.get("request_id") or "double", "choices": choices, "usage": usage})

    return Starlette(routes=[*_common(model), Route("/inference/v1/generate", generate, methods=["POST"])])


def forcing_ignoring_reference(model: str, frontend_url: str, newline_id: int) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        rendered = httpx.post(f"{frontend_url}/v1/chat/completions/render", json=body, timeout=30).json()
        prompt = rendered["token_ids"]
        out = [newline_id] * int(body.get("max_tokens") or 16)
        message = {"role": "assistant", "content": "\n" * len(out), "reasoning": None, "tool_calls": []}
        choice = {"index": 0, "message": message, "finish_reason": "length", "stop_reason": None,
                  "logprobs": None, "token_ids": out}
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(out), "total_tokens": len(prompt) + len(out)}
        return JSONResponse({"id": "chatcmpl-double", "object": "chat.completion", "created": 0, "model": model,
                             "choices": [choice], "usage": usage, "prompt_token_ids": prompt})

    return Starlette(routes=[*_common(model), Route("/v1/chat/completions", chat, methods=["POST"])])


def padded_copy(model_dir: Path, dest: Path, rows: int) -> Path:
    """The model folder with config.json's vocab_size raised to ``rows`` (the tokenizer is unchanged)."""

    shutil.copytree(model_dir, dest)
    config = json.loads((dest / "config.json").read_text())
    config["vocab_size"] = rows
    (dest / "config.json").write_text(json.dumps(config))
    return dest


LLAMA3_NAMES = {"<|im_start|>": "<|start_header_id|>", "<|im_end|>": "<|eot_id|>",
                "<|endoftext|>": "<|end_of_text|>"}
LLAMA3_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|start_header_id|>{{ message['role'] }}<|end_header|>\n\n"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}{{ part['text'] }}{%- endfor -%}{%- endif -%}"
    "<|eot_id|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|start_header_id|>assistant<|end_header|>\n\n{%- endif -%}"
)


def llama3_style_copy(model_dir: Path, dest: Path) -> Path:
    """The model folder with Llama-3 special-token names and markup (no <|im_end|>, <|im_start|>, </s>)."""

    shutil.copytree(model_dir, dest)
    text = (dest / "tokenizer.json").read_text()
    for old, new in LLAMA3_NAMES.items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    (dest / "tokenizer.json").write_text(text)
    config: dict[str, Any] = json.loads((dest / "tokenizer_config.json").read_text())
    text = json.dumps(config)
    for old, new in LLAMA3_NAMES.items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    config = json.loads(text)
    config["chat_template"] = LLAMA3_TEMPLATE
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    special = dest / "special_tokens_map.json"
    if special.exists():
        text = special.read_text()
        for old, new in LLAMA3_NAMES.items():
            text = text.replace(old, new)
        special.write_text(text)
    return dest


_UNHOSTED = ("/v1/chat/completions/derender", "/v1/completions/derender", "/version")


def render_only_host(app: Any) -> Any:
    """The frontend's ASGI ``app`` hosting render and the utilities only (in-process, so the frontend's own body
    handling is untouched): derender and ``/version`` answer a framework 404, the card has no max_model_len."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in (*_UNHOSTED, "/v1/models"):
            await app(scope, receive, send)
            return
        if scope["path"] in _UNHOSTED:
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        messages: list[dict] = []

        async def keep(message: dict) -> None:
            messages.append(message)

        await app(scope, receive, keep)
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        start = next(m for m in messages if m["type"] == "http.response.start")
        cards = json.loads(body)
        for card in cards.get("data") or []:
            card.pop("max_model_len", None)
        await JSONResponse(cards, status_code=start["status"])(scope, receive, send)

    return wrapped


def rate_limited(app: Any, every: int = 3, retry_after: str | None = "0") -> Any:
    """The ``app`` behind a rate limiter that answers every ``every``-th request 429 (with ``Retry-After``
    unless it is None), the way a gateway in front of a shared deployment does."""
    import itertools

    counter = itertools.count(1)
    body = json.dumps({"error": {"message": "rate limit exceeded", "type": "RateLimitError", "param": None,
                                 "code": 429}}).encode()

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/health" or next(counter) % every:
            await app(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json")] + (
            [(b"retry-after", retry_after.encode())] if retry_after is not None else [])
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped


def echoing_the_key(app: Any) -> Any:
    """The ``app`` with a /version that answers 404 quoting the request's Authorization header, as a careless
    server's error message can: the key then reaches a failing test's message, and only redaction keeps it out
    of the report."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/version":
            await app(scope, receive, send)
            return
        auth = next((v.decode() for k, v in scope["headers"] if k == b"authorization"), "")
        body = json.dumps({"error": {"message": f"no /version for {auth}", "type": "NotFoundError", "param": None,
                                     "code": 404}}).encode()
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return wrapped


#: How the generate-only double hosts abort: not at all (a framework 404), forwarded to the engine, answered 200
#: and never forwarded (the generation runs on), or answered 200 to any body, a malformed one too.
AbortMode = Literal["none", "forwarded", "ignored", "careless"]
GENERATE = "/inference/v1/generate"
ABORT = "/inference/v1/abort_requests"


def generate_only_engine(engine_url: str, *, streams: bool = False, abort: AbortMode = "none") -> Starlette:
    """A generate-only engine in front of a real one at ``engine_url``: whole generations are the real engine's
    answers byte for byte; ``stream: true`` is answered 501 (unless ``streams``, then relayed as it comes); the
    abort route is there only as ``abort`` says. Render, derender and the utilities are a framework 404."""
    clients: list[httpx.AsyncClient] = []

    def engine() -> httpx.AsyncClient:
        """The one client to the real engine, made on first use on the server's own event loop."""
        if not clients:
            clients.append(httpx.AsyncClient(base_url=engine_url, timeout=httpx.Timeout(120.0, connect=5.0)))
        return clients[0]

    async def send(method: str, path: str, content: bytes | None = None, headers: dict[str, str] | None = None,
                   stream: bool = False) -> httpx.Response | Response:
        """One call to the real engine. A pooled connection the engine closed under the request (uvicorn drops one
        idle for 5 s) is tried once more on a new one, as a real gateway does; an engine that does not answer is a
        502/504 with the error object, never this double's own 500."""
        client = engine()
        for last in (False, True):
            try:
                return await client.send(client.build_request(method, path, content=content, headers=headers),
                                         stream=stream)
            except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError):
                if last:
                    return _error("the engine is unreachable", 502)
            except httpx.TimeoutException:
                return _error("the engine did not answer in time", 504)
        raise AssertionError("unreachable")

    async def relay(method: str, path: str, content: bytes | None = None,
                    headers: dict[str, str] | None = None) -> Response:
        resp = await send(method, path, content, headers)
        if isinstance(resp, Response):
            return resp
        return Response(resp.content, resp.status_code, media_type=resp.headers.get("content-type"))

    async def relay_get(request: Request) -> Response:
        return await relay("GET", request.url.path)

    async def generate(request: Request) -> Response:
        raw = await request.body()
        sent = {k: v for k, v in request.headers.items() if k == "content-type"}  # the engine judges it, not we
        try:  # the engine judges the body; this only looks for stream: true (a 64 MiB body is not parsed twice)
            body = json.loads(raw) if b'"stream"' in raw else None
        except (ValueError, RecursionError):
            body = None
        if not (isinstance(body, dict) and body.get("stream") is True):
            return await relay("POST", GENERATE, raw, sent)
        if not streams:
            return _error("stream=true is not supported by this engine", 501, param="stream")
        upstream = await send("POST", GENERATE, raw, sent, stream=True)
        if isinstance(upstream, Response):
            return upstream
        if upstream.status_code != 200:
            content = await upstream.aread()
            await upstream.aclose()
            return Response(content, upstream.status_code, media_type=upstream.headers.get("content-type"))
        return StreamingResponse(_relayed(upstream), media_type="text/event-stream")

    async def abort_requests(request: Request) -> Response:
        if abort in ("ignored", "careless"):
            if abort == "ignored":
                body = await _json_or_none(request)
                if not isinstance(body, dict) or not isinstance(body.get("request_ids"), str | list):
                    return _error("request_ids is required", param="request_ids")
            return Response(status_code=200)  # an empty 200, as vLLM answers; nothing reaches the engine
        sent = {k: v for k, v in request.headers.items() if k == "content-type"}
        return await relay("POST", ABORT, await request.body(), sent)

    async def health(_: Request) -> Response:
        return Response(status_code=200)

    routes = [Route("/health", health), *(Route(path, relay_get) for path in ("/v1/models", "/version"))]
    routes.append(Route(GENERATE, generate, methods=["POST"]))
    if abort != "none":
        routes.append(Route(ABORT, abort_requests, methods=["POST"]))
    return Starlette(routes=routes)


async def _relayed(upstream: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    finally:
        await upstream.aclose()


async def _json_or_none(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (ValueError, RecursionError):
        return None


def ignoring_abort(app: Any) -> Any:
    """The ``app`` with an abort route that answers an empty 200 (as vLLM does) to a body with request_ids and
    never passes it on: every check of the answer holds, only the generation runs on to its end."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != ABORT:
            await app(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await _json_or_none(request)
        if isinstance(body, dict) and isinstance(body.get("request_ids"), str | list):
            response: Response = Response(status_code=200)
        else:
            response = _error("request_ids is required", param="request_ids")
        await response(scope, receive, send)

    return wrapped


#: How the suite's abort test says it could not be judged (timing-bound: the stream's first event came too late for
#: any abort to be shown to precede the generation's end); suite/test_generate_extensions.py writes it.
ABORT_NOT_PROVEN = "no abort sent after the stream's first event was answered before half the generation's time"
