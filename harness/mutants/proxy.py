"""The mutant proxy: a reverse proxy in front of a correct server that plants one defect.

Everything else passes through untouched (method, path, query, headers, body bytes, status), so a run through
the proxy with no defect gives the same verdict as a run against the server itself; the campaign checks that
with its clean run. JSON answers are buffered whole (a defect may rewrite them); SSE answers are relayed
event by event, and a defect's ``on_event`` sees each ``data:`` value.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from tokenspec.harness.mutants.defects import Defect, Reply, parse

#: Hop-by-hop headers, and those the proxy recomputes (body length, encoding after decompression).
DROPPED = frozenset({b"host", b"content-length", b"transfer-encoding", b"connection", b"keep-alive",
                     b"content-encoding", b"upgrade", b"te", b"trailer", b"proxy-connection"})

Send = Callable[[dict[str, Any]], Any]


class MutantProxy:
    """ASGI app forwarding every request to ``upstream`` with ``defect`` planted (``None``: a faithful copy)."""

    def __init__(self, upstream: str, defect: Defect | None, timeout: float = 300.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.defect = defect
        self.timeout = timeout
        self.url = ""  # where the proxy listens, once it is served
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        # Created inside the server's event loop, on first use.
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=httpx.Limits(max_connections=64))
        return self._client

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Any], send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        body = await _read_body(receive)
        if self.defect is not None and self.defect.on_request is not None:
            rewritten = self.defect.on_request(path, body)
            if isinstance(rewritten, Reply):
                await _send_reply(send, rewritten, [])
                return
            body = rewritten
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{self.upstream}{path}" + (f"?{query}" if query else "")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() not in DROPPED]
        request = self.client().build_request(scope["method"], url, headers=headers, content=body)
        try:
            upstream = await self.client().send(request, stream=True)
        except httpx.HTTPError as exc:
            await _send_reply(send, Reply.of_json(502, {"error": {
                "message": f"mutant proxy: upstream unreachable: {type(exc).__name__}", "type": "BadGateway",
                "param": None, "code": 502}}), [])
            return
        try:
            response_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in upstream.headers.items()
                                if k.lower().encode("latin-1") not in DROPPED]
            content_type = upstream.headers.get("content-type", "")
            # Parsed once, and only when a defect will look at it (bodies reach 64 MiB).
            wants_request = self.defect is not None and (self.defect.on_response or self.defect.on_event)
            parsed_request = parse(body) if wants_request else None
            if content_type.startswith("text/event-stream"):
                await self._relay_events(send, upstream, response_headers, path, parsed_request)
                return
            reply = Reply(upstream.status_code, content_type, await upstream.aread())
            if self.defect is not None and self.defect.on_response is not None:
                reply = self.defect.on_response(path, parsed_request, reply)
            await _send_reply(send, reply, response_headers)
        finally:
            await upstream.aclose()

    async def _relay_events(self, send: Send, upstream: httpx.Response, headers: list[tuple[bytes, bytes]],
                            path: str, request: Any) -> None:
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
        hook = self.defect.on_event if self.defect is not None else None
        async for event in _events(upstream.aiter_bytes()):
            if hook is None or not event.startswith(b"data:"):
                out = [event]
            else:
                data = event[5:].strip()
                value: Any = data.decode() if data == b"[DONE]" else parse(data)
                out = [event] if value is None else [_event(v) for v in hook(path, request, value)]
            for item in out:
                await send({"type": "http.response.body", "body": item + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _event(value: Any) -> bytes:
    return b"data: " + (value.encode() if isinstance(value, str) else json.dumps(value).encode())


async def _events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """SSE events (without their blank-line separator) as they arrive."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            if event.strip():
                yield event
    if buffer.strip():
        yield buffer.rstrip(b"\n")


async def _read_body(receive: Callable[[], Any]) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_reply(send: Send, reply: Reply, headers: list[tuple[bytes, bytes]]) -> None:
    kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
    kept += [(b"content-type", reply.content_type.encode()), (b"content-length", str(len(reply.body)).encode())]
    await send({"type": "http.response.start", "status": reply.status, "headers": kept})
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})
