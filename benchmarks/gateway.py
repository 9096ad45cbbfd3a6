"""``tokenspec bench gateway``: the whole reference server, greedy generation through vLLM's coupled endpoint vs
through our gateway, then a load test of mixed streaming / non-streaming requests with RSS samples."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tokenspec.benchmarks.clients import CHAT, WARMUP, TimedConnection, post_ok
from tokenspec.benchmarks.lifecycle import machine_facts, model_folder, start_reference
from tokenspec.benchmarks.statistics import ratio, summarize, table
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

PROMPTS = ["Tell me a story.", "What is the weather in Paris?", "Write a haiku about the sea.",
           "Explain tokenizers briefly.", "List three colours.", "Où est la gare ?", "你好，今天怎么样？",
           "Give me a JSON object with a name.", "Count to five.", "Summarize: the quick brown fox."]


def generation(name: str, prompt: str, *, stream: bool = False, max_tokens: int = 16) -> dict[str, Any]:
    body: dict[str, Any] = {"model": name, "messages": [{"role": "user", "content": prompt}],
                            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if stream:
        body["stream"] = True
    return body


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB (Linux /proc), None if it is gone or /proc is unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class LoadResult:
    """What one load test saw: every request ends in exactly one of ok / HTTP error / stream error / exception."""

    latencies_ms: list[float]
    statuses: Counter[str]
    exceptions: Counter[str]
    sent: int
    seconds: float


async def _one_request(client: httpx.AsyncClient, body: dict[str, Any], path: str = CHAT) -> tuple[str, float]:
    """(outcome, ms): outcome is "200", another status, or "stream-error" (an error event or no [DONE])."""
    start = time.perf_counter()
    if not body.get("stream"):
        resp = await client.post(path, json=body)
        await resp.aread()
        return str(resp.status_code), (time.perf_counter() - start) * 1000
    async with client.stream("POST", path, json=body) as resp:
        if resp.status_code != 200:
            await resp.aread()
            return str(resp.status_code), (time.perf_counter() - start) * 1000
        done = errored = False
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                elif '"error"' in data and "error" in json.loads(data):
                    errored = True
    outcome = "200" if done and not errored else "stream-error"
    return outcome, (time.perf_counter() - start) * 1000


async def load_test(url: str, name: str, clients: int, duration: float,
                    body_of: Callable[[random.Random, int], dict[str, Any]] | None = None,
                    path: str = CHAT) -> LoadResult:
    """``clients`` concurrent loops for ``duration`` s of requests to ``path``: by default mixed streaming /
    non-streaming greedy generations; ``body_of(rng, k)`` gives other bodies."""
    result = LoadResult([], Counter(), Counter(), 0, 0.0)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    rng = random.Random(0)
    async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as client:
        start = time.perf_counter()
        deadline = start + duration

        async def loop(i: int) -> None:
            k = 0
            while time.perf_counter() < deadline:
                body = body_of(rng, i + k) if body_of else generation(
                    name, rng.choice(PROMPTS), stream=(i + k) % 2 == 0, max_tokens=rng.choice((8, 16, 32)))
                k += 1
                result.sent += 1
                try:
                    outcome, ms = await _one_request(client, body, path)
                except httpx.HTTPError as exc:  # no answer at all: named with the request kind, to diagnose
                    result.exceptions[f"{type(exc).__name__} ({'stream' if body.get('stream') else 'plain'})"] += 1
                    continue
                result.statuses[outcome] += 1
                if outcome == "200":
                    result.latencies_ms.append(ms)

        await asyncio.gather(*(loop(i) for i in range(clients)))
        result.seconds = time.perf_counter() - start
    return result


def _message_view(response: dict[str, Any]) -> dict[str, Any]:
    choice = response["choices"][0]
    message = choice["message"]
    return {"content": message.get("content"), "reasoning": message.get("reasoning"),
            "token_ids": choice.get("token_ids"), "finish_reason": choice.get("finish_reason")}


def bench_gateway(args: argparse.Namespace) -> dict[str, Any]:
    model_dir = model_folder(args)
    name = DEFAULT_MODEL_NAME
    with contextlib.ExitStack() as stack:
        server, _ = start_reference(stack, model_dir)
        assert server.engine is not None and server.frontend is not None and server.frontend.process is not None
        conns = {"coupled": TimedConnection(server.engine.url, timeout=120),
                 "gateway": TimedConnection(server.frontend.url, timeout=120)}
        for conn in conns.values():
            stack.callback(conn.close)
        return _measure_gateway(args, name, server.frontend.url, server.frontend.process.pid, conns)
    raise AssertionError("unreachable")


def _measure_gateway(args: argparse.Namespace, name: str, gateway_url: str, frontend_pid: int,
                     conns: dict[str, TimedConnection]) -> dict[str, Any]:
    n = args.requests
    data = json.dumps(generation(name, PROMPTS[0])).encode()
    for _ in range(WARMUP):
        for conn in conns.values():
            post_ok(conn, CHAT, data)
    latencies: dict[str, list[float]] = {side: [] for side in conns}
    for _ in range(n):
        for side, conn in conns.items():
            latencies[side].append(post_ok(conn, CHAT, data)[1])
    stats = {side: summarize(vals) for side, vals in latencies.items()}
    latency_ratio = ratio(stats["gateway"]["p50"], stats["coupled"]["p50"])
    print(table(["16 greedy tokens", "p50 ms", "p95 ms"],
                [[side, s["p50"], s["p95"]] for side, s in stats.items()]))
    print(f"gateway/coupled p50 ratio: {latency_ratio:.2f} (vLLM's own render server path: 1.07)\n", flush=True)

    parity = []
    for prompt in PROMPTS:
        body = {**generation(name, prompt), "return_token_ids": True}
        raw = json.dumps(body).encode()
        views = {side: _message_view(post_ok(conn, CHAT, raw)[0]) for side, conn in conns.items()}
        tokens = views["coupled"]["token_ids"]
        parity.append({"prompt": prompt, "same": views["coupled"] == views["gateway"] and bool(tokens),
                       "tokens": len(tokens or []),
                       **({} if views["coupled"] == views["gateway"] else views)})
    parity_ok = sum(p["same"] for p in parity)
    print(f"parity sample: {parity_ok}/{len(parity)} greedy requests give the same token_ids, text and "
          f"finish_reason through the coupled endpoint and the gateway", flush=True)

    print(f"load test: {args.clients} clients for {args.duration:.0f} s against the gateway ...", flush=True)
    rss: list[tuple[float, int | None]] = [(0.0, rss_kib(frontend_pid))]
    stop = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not stop.wait(max(1.0, args.duration / 12)):
            rss.append((time.perf_counter() - t0, rss_kib(frontend_pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        load = asyncio.run(load_test(gateway_url, name, args.clients, args.duration))
    finally:
        stop.set()
        sampler.join()
    rss.append((time.perf_counter() - t0, rss_kib(frontend_pid)))
    middle = min(rss, key=lambda s: abs(s[0] - args.duration / 2))
    rss_points = {"start": rss[0][1], "middle": middle[1], "end": rss[-1][1]}
    ok = load.statuses.get("200", 0)
    answered = sum(load.statuses.values())
    load_stats = summarize(load.latencies_ms) if load.latencies_ms else {}
    print(table(["load test", "value"], [
        ["requests sent", load.sent], ["answered", answered], ["200 OK", ok],
        ["throughput req/s (200s)", ok / load.seconds],
        ["p50 ms", load_stats.get("p50", float("nan"))], ["p99 ms", load_stats.get("p99", float("nan"))],
        ["non-200 by status", dict(sorted((k, v) for k, v in load.statuses.items() if k != "200")) or "none"],
        ["client exceptions", dict(load.exceptions) or "none"],
        ["RSS KiB start/middle/end", f"{rss_points['start']}/{rss_points['middle']}/{rss_points['end']}"],
    ]))
    every = answered == load.sent and not load.exceptions
    print(f"every request got an answer: {every}")
    return {"benchmark": "gateway", "machine": machine_facts(), "requests": n, "warmup": WARMUP,
            "latency_ms": stats, "gateway_over_coupled_p50": latency_ratio,
            "vllm_render_server_ratio_seen": 1.07,
            "parity": {"same": parity_ok, "total": len(parity), "cases": parity},
            "load": {"clients": args.clients, "duration_s": load.seconds, "sent": load.sent, "answered": answered,
                     "every_request_answered": every, "ok": ok, "throughput_rps": ok / load.seconds,
                     "latency_ms": load_stats, "statuses": dict(load.statuses),
                     "exceptions": dict(load.exceptions), "rss_kib": rss_points,
                     "rss_samples": [{"t": round(t, 1), "kib": k} for t, k in rss]}}
