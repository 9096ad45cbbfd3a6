"""TEST DOUBLE: the reference frontend with ONE deliberately injected fault, served over real HTTP.

Not a test module and not a server anyone should run for real. It exists to check the checker: the
conformance suite is run against a server that breaks exactly one requirement, and the suite must report
the test aimed at that requirement as failed ("a test asserts something that can fail").

``BrokenServer`` is a plain ASGI wrapper around ``create_app(FrontendConfig(...))``. The real frontend does
all the work; the wrapper only rewrites the request body before the frontend sees it, or the response after
the frontend answered, as the chosen fault says. Everything passes through uvicorn on loopback, so the suite
sees the fault exactly as it would see a buggy implementation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontend_server import running_app

from tokenspec.harness.frontend import FrontendConfig, create_app

CHAT_RENDER = "/v1/chat/completions/render"
COMPLETIONS_RENDER = "/v1/completions/render"
CHAT_DERENDER = "/v1/chat/completions/derender"
COMPLETIONS_DERENDER = "/v1/completions/derender"
RENDERS = (CHAT_RENDER, COMPLETIONS_RENDER)
DERENDERS = (CHAT_DERENDER, COMPLETIONS_DERENDER)
ONE_MIB = 1 << 20


@dataclass
class Reply:
    """A whole HTTP answer (the frontend answers JSON in one piece, so buffering it changes nothing)."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.content_type.startswith("application/json") else None

    @classmethod
    def of_json(cls, status: int, value: Any) -> Reply:
        return cls(status, "application/json", json.dumps(value, ensure_ascii=False).encode())


# on_request(path, raw body) -> the body the frontend gets, or a Reply that answers without the frontend
RequestHook = Callable[[str, bytes], "bytes | Reply"]
# on_response(path, parsed request body or None, the frontend's reply) -> the reply the client gets
ResponseHook = Callable[[str, Any, Reply], Reply]


@dataclass(frozen=True)
class Fault:
    name: str
    requirement: str  # the requirement the fault violates
    what: str
    on_request: RequestHook | None = None
    on_response: ResponseHook | None = None


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _is_stream(request: Any) -> bool:
    return isinstance(request, dict) and request.get("stream") is True


def _edit_json(reply: Reply, edit: Callable[[Any], None]) -> Reply:
    """Apply ``edit`` in place to a 2xx JSON reply; anything else passes untouched."""
    value = reply.json() if reply.status < 300 else None
    if value is None:
        return reply
    edit(value)
    return Reply.of_json(reply.status, value)


# -- the faults -------------------------------------------------------------------------------------------


def _drop_usage(path: str, request: Any, reply: Reply) -> Reply:
    if path != CHAT_DERENDER or _is_stream(request):
        return reply
    return _edit_json(reply, lambda out: out.pop("usage", None))


def _error_without_error_object(path: str, request: Any, reply: Reply) -> Reply:
    return Reply.of_json(reply.status, {"detail": "bad"}) if 400 <= reply.status < 500 else reply


def _500_on_bad_input(path: str, request: Any, reply: Reply) -> Reply:
    return Reply(500, "text/plain; charset=utf-8", b"Internal Server Error") if 400 <= reply.status < 500 else reply


def _drop_default_sampling_params(path: str, request: Any, reply: Reply) -> Reply:
    if path not in RENDERS:
        return reply

    def edit(out: Any) -> None:
        for generate_request in out if isinstance(out, list) else [out]:
            params = generate_request.get("sampling_params") or {}
            if params.get("n") == 1:
                del params["n"]
            if params.get("top_k") == 0:
                del params["top_k"]

    return _edit_json(reply, edit)


_NOISE = random.Random()  # unseeded on purpose: the fault is that two equal requests render differently


def _nondeterministic_render(path: str, request: Any, reply: Reply) -> Reply:
    if path not in RENDERS:
        return reply

    def edit(out: Any) -> None:
        for generate_request in out if isinstance(out, list) else [out]:
            generate_request["token_ids"].append(_NOISE.randrange(1, 1000))

    return _edit_json(reply, edit)


def _usage_off_by_one(path: str, request: Any, reply: Reply) -> Reply:
    if path not in DERENDERS or _is_stream(request):
        return reply

    def edit(out: Any) -> None:
        usage = out.get("usage")
        if usage:
            usage["completion_tokens"] += 1
            usage["total_tokens"] += 1

    return _edit_json(reply, edit)


def _stream_drops_last_char(path: str, request: Any, reply: Reply) -> Reply:
    if path not in DERENDERS or not _is_stream(request):
        return reply

    def edit(out: Any) -> None:
        for choice in (out.get("chunk") or {}).get("choices") or []:
            delta = choice.get("delta")
            if isinstance(delta, dict) and delta.get("content"):
                delta["content"] = delta["content"][:-1]
            if choice.get("text"):
                choice["text"] = choice["text"][:-1]

    return _edit_json(reply, edit)


def _replacement_char(path: str, request: Any, reply: Reply) -> Reply:
    if path != CHAT_DERENDER or _is_stream(request):
        return reply

    def edit(out: Any) -> None:
        for choice in out.get("choices") or []:
            message = choice.get("message") or {}
            content = message.get("content")
            if content:
                multi_byte = next((i for i, ch in enumerate(content) if len(ch.encode()) > 1), None)
                if multi_byte is not None:
                    message["content"] = content[:multi_byte] + "\ufffd" + content[multi_byte + 1 :]

    return _edit_json(reply, edit)


def _content_upper(path: str, request: Any, reply: Reply) -> Reply:
    if path != CHAT_DERENDER:
        return reply

    def edit(out: Any) -> None:
        for choice in out.get("choices") or []:
            message = choice.get("message") or {}
            if message.get("content"):
                message["content"] = message["content"].upper()

    return _edit_json(reply, edit)


def _reasoning_into_content(path: str, request: Any, reply: Reply) -> Reply:
    """The parser splits, then the server forgets the split: reasoning text lands in content."""
    if path != CHAT_DERENDER or _is_stream(request):
        return reply

    def edit(out: Any) -> None:
        for ch in out.get("choices") or []:
            message = ch.get("message") or {}
            if message.get("reasoning"):
                message["content"] = message.pop("reasoning") + (message.get("content") or "")
                message["reasoning"] = None

    return _edit_json(reply, edit)


def _non_negative(ids: Any) -> Any:
    if isinstance(ids, list):
        return [_non_negative(i) for i in ids]
    return 0 if isinstance(ids, int) and not isinstance(ids, bool) and ids < 0 else ids


def _accept_negative_ids(path: str, body: bytes) -> bytes | Reply:
    request = _parse(body)
    if path not in DERENDERS or not isinstance(request, dict):
        return body
    responses = [request.get("generate_response"), request.get("generate_chunk"),
                 *(request.get("generate_responses") or [])]
    for response in responses:
        choices = response.get("choices") if isinstance(response, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict) and "token_ids" in choice:
                choice["token_ids"] = _non_negative(choice["token_ids"])
    if "prompt_token_ids" in request:
        request["prompt_token_ids"] = _non_negative(request["prompt_token_ids"])
    return json.dumps(request).encode()


def _oversized_500(path: str, body: bytes) -> bytes | Reply:
    if len(body) <= ONE_MIB:
        return body
    error = {"message": "body too large", "type": "InternalServerError", "param": None, "code": 500}
    return Reply.of_json(500, {"error": error})


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in [
        Fault("derender-drops-usage", "SCHEMA-006", "chat derender answers lack `usage`",
              on_response=_drop_usage),
        Fault("error-without-error-object", "ERROR-001", 'every 4xx body becomes {"detail": "bad"}',
              on_response=_error_without_error_object),
        Fault("500-on-bad-input", "ERROR-003", "every 4xx becomes a 500 with a plain-text body",
              on_response=_500_on_bad_input),
        Fault("render-drops-defaults", "RENDER-008", "render omits n=1 and top_k=0 from sampling_params",
              on_response=_drop_default_sampling_params),
        Fault("render-nondeterministic", "RENDER-003", "render appends a random token id to token_ids",
              on_response=_nondeterministic_render),
        Fault("usage-off-by-one", "DERENDER-003", "derender usage counts one completion token too many",
              on_response=_usage_off_by_one),
        Fault("stream-derender-drops-last-char", "STREAM-008",
              "streaming derender drops the last character of every content/text delta",
              on_response=_stream_drops_last_char),
        Fault("derender-replacement-char", "DERENDER-007",
              "chat derender replaces the first multi-byte character of content with U+FFFD",
              on_response=_replacement_char),
        Fault("accept-negative-ids", "DERENDER-013", "negative ids in derender requests are rewritten to 0",
              on_request=_accept_negative_ids),
        Fault("oversized-500", "ERROR-008", "bodies over 1 MiB are answered 500",
              on_request=_oversized_500),
        Fault("reasoning-into-content", "DERENDER-001", "chat derender puts the reasoning text into content",
              on_response=_reasoning_into_content),
        Fault("derender-content-upper", "PARITY-002", "chat derender upper-cases message content",
              on_response=_content_upper),
    ]
}


# -- the ASGI wrapper -------------------------------------------------------------------------------------


class BrokenServer:
    """ASGI app: the real frontend behind one fault. With ``fault=None`` it is a faithful pass-through, which
    is what the control runs use, so the wrapper itself cannot be what makes a test fail."""

    def __init__(self, app: Any, fault: Fault | None) -> None:
        self.app = app
        self.fault = fault

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or self.fault is None:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        body = await _read_body(receive)
        if self.fault.on_request is not None:
            rewritten = self.fault.on_request(path, body)
            if isinstance(rewritten, Reply):
                await _send_reply(send, rewritten, [])
                return
            if rewritten != body:
                scope = {**scope, "headers": _with_length(scope["headers"], len(rewritten))}
                body = rewritten
        request = _parse(body)

        sent_body = False

        async def replay() -> dict:
            nonlocal sent_body
            if sent_body:
                return await receive()  # the client's disconnect, if it comes
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}

        if self.fault.on_response is None:
            await self.app(scope, replay, send)
            return
        start: dict = {}
        chunks: list[bytes] = []

        async def capture(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, replay, capture)
        headers = [(k, v) for k, v in start.get("headers", [])]
        content_type = next((v.decode() for k, v in headers if k.lower() == b"content-type"), "")
        reply = self.fault.on_response(path, request, Reply(start["status"], content_type, b"".join(chunks)))
        await _send_reply(send, reply, headers)


async def _read_body(receive: Callable) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"transfer-encoding")]
    return [*kept, (b"content-length", str(length).encode())]


async def _send_reply(send: Callable, reply: Reply, headers: list[tuple[bytes, bytes]]) -> None:
    kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
    kept += [(b"content-type", reply.content_type.encode()), (b"content-length", str(len(reply.body)).encode())]
    await send({"type": "http.response.start", "status": reply.status, "headers": kept})
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})


def frontend_config(model_dir: Path, served_model_name: str, **overrides: Any) -> FrontendConfig:
    """The frontend as the suite expects the reference to be configured: hermes tools, qwen3 reasoning."""
    return FrontendConfig(model_dir, served_model_name, **{"tool_parser": "hermes", "reasoning_parser": "qwen3",
                                                           **overrides})


@contextmanager
def running_broken_server(fault: str | None, config: FrontendConfig, timeout: float = 20.0) -> Iterator[str]:
    """Serve the frontend behind ``fault`` (a FAULTS name, or None for none) on loopback; yields the URL."""
    with running_app(BrokenServer(create_app(config), FAULTS[fault] if fault else None), timeout) as url:
        yield url
