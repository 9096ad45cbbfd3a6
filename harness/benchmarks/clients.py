"""HTTP clients that time requests: one keep-alive connection for latencies, bursts for throughput (interleaved
between servers so noise hits both sides alike), and in-process timing of a function."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from tokenspec.errors import UsageError
from tokenspec.harness.benchmarks.statistics import percentile

CHAT = "/v1/chat/completions"
WARMUP = 20  # untimed requests per server (and endpoint) before the timed ones


class TimedConnection:
    """One keep-alive HTTP/1.1 connection (standard library): a fraction of httpx's per-request cost, so the
    client adds less to both sides of a ratio. Bodies are serialized by the caller, outside the timing."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)

    def send(self, method: str, path: str, data: bytes | None = None) -> tuple[int, bytes, float]:
        """(status, body, elapsed milliseconds)."""
        headers = {"content-type": "application/json"} if data is not None else {}
        start = time.perf_counter()
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        body = resp.read()
        return resp.status, body, (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.conn.close()


def post_ok(conn: TimedConnection, path: str, data: bytes) -> tuple[Any, float]:
    status, body, ms = conn.send("POST", path, data)
    if status != 200:
        raise UsageError(f"benchmark request to {path} answered {status}: {body[:300]!r}")
    return json.loads(body), ms


async def _throughput(url: str, path: str, data: bytes, total: int, concurrency: int) -> float:
    """Requests per second for ``total`` POSTs with ``concurrency`` in flight (httpx.AsyncClient)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:
        left = total

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                resp = await client.post(path, content=data, headers=headers)
                if resp.status_code != 200:
                    raise UsageError(f"benchmark request to {path} answered {resp.status_code}: {resp.text[:300]}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - start)


def interleaved_throughput(urls: dict[str, str], path: str, data: bytes, total: int, concurrency: int,
                           rounds: int = 4) -> dict[str, float]:
    """Requests/s per server: ``rounds`` alternating bursts (A, B, A, B...), combined as total / total time."""
    per_round = max(1, total // rounds)
    elapsed = {name: 0.0 for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            rate = asyncio.run(_throughput(url, path, data, per_round, concurrency))
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
