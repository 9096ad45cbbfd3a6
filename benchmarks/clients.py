"""HTTP clients that time requests: keep-alive connections that send prebuilt bytes and parse the answer with
httptools (the C parser uvicorn uses), so the client adds as little as possible to both sides of a ratio;
bursts for throughput (interleaved between servers so noise hits both sides alike); in-process timing.

A request is built once, outside the timing, with the transport's headers (API key, extra headers) and over
its TLS settings: the same clients time a key-protected HTTPS target.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httptools
import httpx

from tokenspec.benchmarks.statistics import percentile
from tokenspec.core.errors import UsageError
from tokenspec.core.transport import Transport

CHAT = "/v1/chat/completions"
WARMUP = 20  # untimed requests per server (and endpoint) before the timed ones


def request_bytes(url: str, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 request, whole, ready to write on a keep-alive connection."""
    host = httpx.URL(url).netloc.decode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if data is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b"")


class _Answer:
    """httptools callbacks collecting one response."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = False

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done = True


def _new_parser() -> tuple[_Answer, httptools.HttpResponseParser]:
    answer = _Answer()
    return answer, httptools.HttpResponseParser(answer)


def _failed(path: str, status: int, body: bytes) -> UsageError:
    return UsageError(f"benchmark request to {path} answered {status}: {body[:300]!r}")


class TimedConnection:
    """One keep-alive connection; :meth:`send` times a request from its first byte written to the answer's last
    byte read."""

    def __init__(self, url: str, timeout: float = 60.0, transport: Transport | None = None,
                 role: str = "target") -> None:
        self.url = url
        self.transport = transport or Transport()
        self.headers = self.transport.access[role].request_headers()
        self.timeout = timeout
        self.sock = self.transport.connect(url, timeout)

    def prepare(self, method: str, path: str, data: bytes | None = None) -> bytes:
        return request_bytes(self.url, method, path, data, self.headers)

    def exchange(self, raw: bytes) -> tuple[int, bytes, float]:
        """(status, body, elapsed milliseconds) for a prepared request."""
        answer, parser = _new_parser()
        start = time.perf_counter()
        self.sock.sendall(raw)
        while not answer.done:
            chunk = self.sock.recv(262144)
            if not chunk:
                raise UsageError(f"{self.url} closed the connection mid-answer")
            parser.feed_data(chunk)
        elapsed = (time.perf_counter() - start) * 1000
        if not parser.should_keep_alive():
            self.sock.close()
            self.sock = self.transport.connect(self.url, self.timeout)
        return parser.get_status_code(), b"".join(answer.parts), elapsed

    def send(self, method: str, path: str, data: bytes | None = None) -> tuple[int, bytes, float]:
        return self.exchange(self.prepare(method, path, data))

    def close(self) -> None:
        self.sock.close()


def post_ok(conn: TimedConnection, path: str, data: bytes) -> tuple[Any, float]:
    status, body, ms = conn.send("POST", path, data)
    if status != 200:
        raise _failed(path, status, body)
    return json.loads(body), ms


async def _throughput(url: str, raw: bytes, path: str, total: int, concurrency: int, transport: Transport,
                      timeout: float) -> float:
    """Requests per second for ``total`` copies of a prepared request with ``concurrency`` connections."""
    parsed = httpx.URL(url)
    context = transport.ssl_context(url)
    port = parsed.port or (443 if context else 80)
    left = total

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection(parsed.host, port, ssl=context), timeout)

    async def worker() -> None:
        nonlocal left
        reader, writer = await connect()
        try:
            while left > 0:
                left -= 1
                answer, parser = _new_parser()
                writer.write(raw)
                while not answer.done:
                    chunk = await asyncio.wait_for(reader.read(262144), timeout)
                    if not chunk:
                        raise UsageError(f"{url} closed the connection mid-answer")
                    parser.feed_data(chunk)
                if parser.get_status_code() != 200:
                    raise _failed(path, parser.get_status_code(), b"".join(answer.parts))
                if not parser.should_keep_alive():  # the server's choice; its cost counts
                    writer.close()
                    reader, writer = await connect()
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - start)


def interleaved_throughput(conns: dict[str, TimedConnection], path: str, data: bytes, total: int,
                           concurrency: int, rounds: int = 4) -> dict[str, float]:
    """Requests/s per server: ``rounds`` alternating bursts (A, B, B, A...), combined as total / total time."""
    per_round = max(1, total // rounds)
    elapsed = {name: 0.0 for name in conns}
    for i in range(rounds):
        for name, conn in (list(conns.items()) if i % 2 == 0 else list(conns.items())[::-1]):  # ABBA
            rate = asyncio.run(_throughput(conn.url, conn.prepare("POST", path, data), path, per_round,
                                           concurrency, conn.transport, conn.timeout))
            elapsed[name] += per_round / rate
    return {name: per_round * rounds / seconds for name, seconds in elapsed.items()}


def timeit_ms(fn: Callable[[], object], repeat: int) -> float:
    """p50 of ``repeat`` calls of fn, in milliseconds (in process, no HTTP)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50)
