"""``tokenspec bench``: speed figures for the reference frontend, each against a baseline measured in the same run.

Speed targets live here and not in timed tests: a shared 2-core host is too noisy for a pass/fail test on
absolute times, but a ratio measured in one run, with requests interleaved (A, B, A, B) so that noise
hits both sides alike, is stable enough to report against a target.

- ``frontend``: our CPU frontend vs vLLM's GPU-less render server on the same model and parsers: chat render
  of a ~300-token conversation and chat derender of ~300 output tokens; sequential p50/p95, throughput at
  concurrency 1 and 8, and the floor (empty endpoint + in-process ``tokenizers`` work for the same payload).
- ``gateway``: the whole reference server; a 16-token greedy generation through vLLM's coupled endpoint vs
  through our gateway, then a load test of mixed streaming / non-streaming requests with RSS samples and a
  parity sample.
- ``suite``: wall time of a full ``tokenspec run`` against the reference server (start-up excluded).
- ``token-loop``: the token-native proposal's payoff through the reference server: stored ids -> token prompt ->
  token answer -> stored, against detokenize -> text prompt -> text answer -> re-tokenize, on the same records;
  encode/decode work and bytes on the wire per request, as token/text ratios.

Every benchmark writes ``<out>/<what>.json``. Servers are started on free ports and always stopped, also on
an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import platform
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tokenspec.errors import UsageError
from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.reference import (
    REASONING_PARSER,
    TOOL_PARSER,
    ReferenceServer,
    default_model,
    frontend_process,
)
from tokenspec.harness.tinymodel import DEFAULT_MODEL_NAME, corpus_texts

RENDER = "/v1/chat/completions/render"
DERENDER = "/v1/chat/completions/derender"
CHAT = "/v1/chat/completions"
WARMUP = 20
TARGET_TOKENS = 300

# -- statistics ------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values_ms: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, p99, mean, min and max of latencies in milliseconds."""
    return {"n": len(values_ms), "p50": percentile(values_ms, 50), "p95": percentile(values_ms, 95),
            "p99": percentile(values_ms, 99), "mean": sum(values_ms) / len(values_ms),
            "min": min(values_ms), "max": max(values_ms)}


def ratio(ours: float, baseline: float) -> float:
    """ours / baseline; a non-positive baseline is a measuring error, not an infinitely good result."""
    if baseline <= 0:
        raise ValueError(f"baseline must be positive, got {baseline}")
    return ours / baseline


@dataclass(frozen=True)
class Target:
    """A speed target of the form ``measured <= limit`` (both ratios), with its verdict."""

    name: str
    measured: float
    limit: float

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'MISS'}  {self.name}: {self.measured:.2f}x (target <= {self.limit:g}x)"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "measured": round(self.measured, 4), "limit": self.limit,
                "verdict": "PASS" if self.passed else "MISS"}


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (floats to 2 decimals)."""
    cells = [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- clients ---------------------------------------------------------------------------------------------


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


def _post_ok(conn: TimedConnection, path: str, data: bytes) -> tuple[Any, float]:
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


def _timeit_ms(fn: Callable[[], object], repeat: int) -> float:
    """p50 of ``repeat`` calls of fn, in milliseconds (in process, no HTTP)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50)


# -- lifecycle --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so the ``finally`` blocks that stop the servers run."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _model(args: argparse.Namespace) -> Path:
    model_dir = Path(args.model) if args.model else default_model()
    if not (model_dir / "tokenizer.json").exists():
        raise UsageError(f"--model {model_dir}: no tokenizer.json in that folder")
    return model_dir


def _write(out_dir: Path, what: str, doc: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{what}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def _machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_at_start": load,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


# -- payloads ---------------------------------------------------------------------------------------------


def _mixed_text() -> list[str]:
    """The shipped corpus, one string per file (prose, accented Latin, CJK, emoji, code, JSON)."""
    return [text for _, text in corpus_texts()]


def conversation(tokenizer: Any, content_tokens: int) -> list[dict[str, str]]:
    """A system + user + assistant + user conversation whose message text is about ``content_tokens`` tokens
    of mixed corpus text."""
    texts = _mixed_text()
    per_part = max(1, content_tokens // 3)
    parts = []
    for i in range(3):
        ids = tokenizer.encode(texts[i % len(texts)] + "\n" + texts[(i + 3) % len(texts)]).ids
        parts.append(tokenizer.decode(ids[:per_part]).strip())
    return [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": parts[0]},
            {"role": "assistant", "content": parts[1]},
            {"role": "user", "content": parts[2]}]


def output_ids(tokenizer: Any, count: int) -> list[int]:
    """About ``count`` token ids of mixed text: an equal share from every corpus file, cut at whole tokens."""
    texts = _mixed_text()
    share = math.ceil(count / len(texts))
    ids: list[int] = []
    for text in texts:
        ids += tokenizer.encode(text).ids[:share]
    return ids[:count]


# -- frontend ---------------------------------------------------------------------------------------------


def bench_frontend(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    model_dir = _model(args)
    name = DEFAULT_MODEL_NAME
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    install = vllm.find_vllm("auto", install=True)
    render_server = vllm.VllmServer(install, "render", model_dir, name,
                                    extra_args=vllm.parser_args(TOOL_PARSER, REASONING_PARSER))
    frontend = frontend_process(model_dir, name, None)
    with contextlib.ExitStack() as stack:
        stack.callback(render_server.stop)
        stack.callback(frontend.stop)
        print("starting our frontend and vLLM's render server ...", flush=True)
        frontend.start()
        render_server.start()
        urls = {"vllm": render_server.url, "ours": frontend.url}
        conns = {side: TimedConnection(url) for side, url in urls.items()}
        for conn in conns.values():
            stack.callback(conn.close)
        return _measure_frontend(args, name, tokenizer, urls, conns)
    raise AssertionError("unreachable")


def _render_body(name: str, tokenizer: Any, conn: TimedConnection) -> tuple[bytes, list[int]]:
    """A render body whose prompt renders to about TARGET_TOKENS tokens (adjusted once by the overhead seen)."""
    content = TARGET_TOKENS
    for _ in range(3):
        body = {"model": name, "messages": conversation(tokenizer, content)}
        rendered, _ = _post_ok(conn, RENDER, json.dumps(body).encode())
        ids = rendered["token_ids"]
        if abs(len(ids) - TARGET_TOKENS) <= 5:
            break
        content += TARGET_TOKENS - len(ids)
    return json.dumps(body).encode(), ids


def _measure_frontend(args: argparse.Namespace, name: str, tokenizer: Any, urls: dict[str, str],
                      conns: dict[str, TimedConnection]) -> dict[str, Any]:
    n = args.requests
    render_data, prompt_ids = _render_body(name, tokenizer, conns["vllm"])
    derender_ids = output_ids(tokenizer, TARGET_TOKENS)
    derender_body = {
        "model": name,
        "generate_response": {"request_id": "bench", "choices": [
            {"index": 0, "token_ids": derender_ids, "finish_reason": "length"}]},
        "prompt_tokens": len(prompt_ids),
        "chat_request": {"model": name, "messages": [{"role": "user", "content": "Say something."}],
                         "chat_template_kwargs": {"enable_thinking": False}},
    }
    derender_data = json.dumps(derender_body).encode()
    payloads = {"render": (RENDER, render_data), "derender": (DERENDER, derender_data)}
    print(f"render prompt: {len(prompt_ids)} tokens; derender output: {len(derender_ids)} tokens", flush=True)

    # Same request, same answer? (a benchmark of two servers doing different work would mean nothing)
    answers = {side: {ep: _post_ok(conns[side], path, data)[0] for ep, (path, data) in payloads.items()}
               for side in conns}
    same_render = answers["vllm"]["render"]["token_ids"] == answers["ours"]["render"]["token_ids"]
    msg = {side: answers[side]["derender"]["choices"][0]["message"] for side in conns}
    same_derender = all(msg["vllm"].get(k) == msg["ours"].get(k) for k in ("content", "reasoning"))
    print(f"same render token_ids: {same_render}; same derender content/reasoning: {same_derender}", flush=True)

    for _ in range(WARMUP):
        for conn in conns.values():
            for path, data in payloads.values():
                _post_ok(conn, path, data)
            conn.send("GET", "/health")

    latencies: dict[str, dict[str, list[float]]] = {side: {"render": [], "derender": [], "health": []}
                                                    for side in conns}
    for _ in range(n):  # interleaved: vllm render, ours render, vllm derender, ours derender, ...
        for endpoint, (path, data) in payloads.items():
            for side, conn in conns.items():
                latencies[side][endpoint].append(_post_ok(conn, path, data)[1])
        for side, conn in conns.items():
            status, _, ms = conn.send("GET", "/health")
            if status == 200:
                latencies[side]["health"].append(ms)
    stats = {side: {ep: summarize(vals) for ep, vals in eps.items() if vals} for side, eps in latencies.items()}

    print("throughput (interleaved bursts) ...", flush=True)
    throughput = {endpoint: {f"c{c}": interleaved_throughput(urls, path, data, n, c) for c in (1, 8)}
                  for endpoint, (path, data) in payloads.items()}

    rendered_text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
    encode_ms = _timeit_ms(lambda: tokenizer.encode(rendered_text, add_special_tokens=False), max(n, 200))
    decode_ms = _timeit_ms(lambda: tokenizer.decode(derender_ids, skip_special_tokens=False), max(n, 200))
    health_ms = stats["ours"]["health"]["p50"]
    floor = {"health_p50": health_ms, "encode_p50": encode_ms, "decode_p50": decode_ms,
             "render": health_ms + encode_ms, "derender": health_ms + decode_ms}

    p50 = {side: {ep: stats[side][ep]["p50"] for ep in ("render", "derender")} for side in stats}
    targets = [
        Target("render p50 ours/vLLM", ratio(p50["ours"]["render"], p50["vllm"]["render"]), 0.5),
        Target("derender p50 ours/vLLM", ratio(p50["ours"]["derender"], p50["vllm"]["derender"]), 0.2),
        Target("derender p50 ours/floor", ratio(p50["ours"]["derender"], floor["derender"]), 3.0),
    ]

    rows = []
    for endpoint in ("render", "derender"):
        for side in ("vllm", "ours"):
            s = stats[side][endpoint]
            t = throughput[endpoint]
            rows.append([f"{endpoint} {side}", s["p50"], s["p95"], t["c1"][side], t["c8"][side]])
        rows.append([f"{endpoint} ours/vLLM", ratio(p50["ours"][endpoint], p50["vllm"][endpoint]),
                     ratio(stats["ours"][endpoint]["p95"], stats["vllm"][endpoint]["p95"]),
                     ratio(throughput[endpoint]["c1"]["ours"], throughput[endpoint]["c1"]["vllm"]),
                     ratio(throughput[endpoint]["c8"]["ours"], throughput[endpoint]["c8"]["vllm"])])
        rows.append([f"{endpoint} floor", floor[endpoint], "", "", ""])
    for side in ("vllm", "ours"):
        rows.append([f"GET /health {side}", stats[side]["health"]["p50"], stats[side]["health"]["p95"], "", ""])
    print()
    print(table(["what (ms, req/s)", "p50 ms", "p95 ms", "req/s c1", "req/s c8"], rows))
    print(f"floor: GET /health {health_ms:.3f} ms + tokenizers encode {encode_ms:.3f} ms (render) "
          f"/ decode {decode_ms:.3f} ms (derender)")
    print()
    for target in targets:
        print(target.line())
    return {"benchmark": "frontend", "machine": _machine(), "requests": n, "warmup": WARMUP,
            "prompt_tokens": len(prompt_ids), "output_tokens": len(derender_ids),
            "same_render_token_ids": same_render, "same_derender_message": same_derender,
            "latency_ms": stats, "throughput_rps": throughput, "floor_ms": floor,
            "targets": [t.to_dict() for t in targets]}


# -- gateway ----------------------------------------------------------------------------------------------

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


async def _one_request(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, float]:
    """(outcome, ms): outcome is "200", another status, or "stream-error" (an error event or no [DONE])."""
    start = time.perf_counter()
    if not body.get("stream"):
        resp = await client.post(CHAT, json=body)
        await resp.aread()
        return str(resp.status_code), (time.perf_counter() - start) * 1000
    async with client.stream("POST", CHAT, json=body) as resp:
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


async def load_test(url: str, name: str, clients: int, duration: float) -> LoadResult:
    """``clients`` concurrent loops of mixed streaming / non-streaming greedy requests for ``duration`` s."""
    result = LoadResult([], Counter(), Counter(), 0, 0.0)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    rng = random.Random(0)
    async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as client:
        start = time.perf_counter()
        deadline = start + duration

        async def loop(i: int) -> None:
            k = 0
            while time.perf_counter() < deadline:
                body = generation(name, rng.choice(PROMPTS), stream=(i + k) % 2 == 0,
                                  max_tokens=rng.choice((8, 16, 32)))
                k += 1
                result.sent += 1
                try:
                    outcome, ms = await _one_request(client, body)
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


def _start_reference(stack: contextlib.ExitStack, model_dir: Path) -> tuple[ReferenceServer, float]:
    """Start the reference server, stopped when ``stack`` closes (also on errors); returns it and its start-up s."""
    server = ReferenceServer(model_dir, DEFAULT_MODEL_NAME)
    stack.callback(server.stop)
    print("starting the reference server (vLLM engine + our frontend) ...", flush=True)
    started = time.perf_counter()
    server.start()
    return server, time.perf_counter() - started


def bench_gateway(args: argparse.Namespace) -> dict[str, Any]:
    model_dir = _model(args)
    name = DEFAULT_MODEL_NAME
    with contextlib.ExitStack() as stack:
        server, _ = _start_reference(stack, model_dir)
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
            _post_ok(conn, CHAT, data)
    latencies: dict[str, list[float]] = {side: [] for side in conns}
    for _ in range(n):
        for side, conn in conns.items():
            latencies[side].append(_post_ok(conn, CHAT, data)[1])
    stats = {side: summarize(vals) for side, vals in latencies.items()}
    latency_ratio = ratio(stats["gateway"]["p50"], stats["coupled"]["p50"])
    print(table(["16 greedy tokens", "p50 ms", "p95 ms"],
                [[side, s["p50"], s["p95"]] for side, s in stats.items()]))
    print(f"gateway/coupled p50 ratio: {latency_ratio:.2f} (vLLM's own render server path: 1.07)\n", flush=True)

    parity = []
    for prompt in PROMPTS:
        body = {**generation(name, prompt), "return_token_ids": True}
        raw = json.dumps(body).encode()
        views = {side: _message_view(_post_ok(conn, CHAT, raw)[0]) for side, conn in conns.items()}
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
    return {"benchmark": "gateway", "machine": _machine(), "requests": n, "warmup": WARMUP,
            "latency_ms": stats, "gateway_over_coupled_p50": latency_ratio,
            "vllm_render_server_ratio_seen": 1.07,
            "parity": {"same": parity_ok, "total": len(parity), "cases": parity},
            "load": {"clients": args.clients, "duration_s": load.seconds, "sent": load.sent, "answered": answered,
                     "every_request_answered": every, "ok": ok, "throughput_rps": ok / load.seconds,
                     "latency_ms": load_stats, "statuses": dict(load.statuses),
                     "exceptions": dict(load.exceptions), "rss_kib": rss_points,
                     "rss_samples": [{"t": round(t, 1), "kib": k} for t, k in rss]}}


# -- token loop: the token-native proposal's payoff --------------------------------------------------------

LOOP_PROMPT_TOKENS = 200
LOOP_OUTPUT_TOKENS = 32
NO_THINKING = {"enable_thinking": False}  # the answer's text is then all content: the text loop stores it whole


def stored_records(tokenizer: Any, count: int, size: int) -> list[list[int]]:
    """``count`` records as a token-native store holds them: corpus text cut at spaces into pieces of about
    ``size`` tokens, each encoded once when it was written (so decoding a record gives its text back)."""
    words = " ".join(_mixed_text()).split(" ")
    records: list[list[int]] = []
    start = 0
    while len(records) < count:
        piece: list[str] = []
        while len(tokenizer.encode(" ".join(piece), add_special_tokens=False).ids) < size:
            piece.append(words[start % len(words)])
            start += 1
        records.append(tokenizer.encode(" ".join(piece), add_special_tokens=False).ids)
    return records


def _loop_body(name: str, content: Any, **fields: Any) -> dict[str, Any]:
    return {"model": name, "messages": [{"role": "user", "content": content}], "max_tokens": LOOP_OUTPUT_TOKENS,
            "temperature": 0, "ignore_eos": True, "chat_template_kwargs": NO_THINKING, **fields}


def bench_token_loop(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    model_dir = _model(args)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    with contextlib.ExitStack() as stack:
        server, _ = _start_reference(stack, model_dir)
        assert server.frontend is not None
        conn = TimedConnection(server.frontend.url, timeout=120)
        stack.callback(conn.close)
        return _measure_token_loop(args, DEFAULT_MODEL_NAME, tokenizer, conn)
    raise AssertionError("unreachable")


def _measure_token_loop(args: argparse.Namespace, name: str, tokenizer: Any, conn: TimedConnection
                        ) -> dict[str, Any]:
    """Both loops on the same stored records, interleaved (token, text, token, text ...) on one connection.

    token loop: stored ids -> input_tokens block (pinned) -> response_format_tokens + return_tokens_only ->
    answer ids stored as they come. text loop: stored ids decoded -> text prompt -> text answer -> encoded to be
    stored. Client codec work is timed inline; the server's share (render's encode, derender's decode) is
    timed in process with the same tokenizer on the same strings, since the server runs in another process.
    """
    status, raw, _ = conn.send("GET", "/v1/models")
    version = json.loads(raw)["data"][0]["tokenizer_version"]
    records = stored_records(tokenizer, args.requests, LOOP_PROMPT_TOKENS)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731

    def token_body(ids: list[int], **extra: Any) -> bytes:
        block = {"type": "input_tokens", "token_ids": ids}
        return json.dumps(_loop_body(name, block, tokenizer_version=version, response_format_tokens=True,
                                     return_tokens_only=True, **extra)).encode()

    def text_body(text: str, **extra: Any) -> bytes:
        return json.dumps(_loop_body(name, text, **extra)).encode()

    # fairness first (untimed): both loops must run the same prompt, or the comparison is of two workloads
    same_prompt = 0
    checked = records[: min(10, len(records))]
    for ids in checked:
        a, _ = _post_ok(conn, CHAT, token_body(ids, return_token_ids=True))
        b, _ = _post_ok(conn, CHAT, text_body(decode(ids), return_token_ids=True))
        same_prompt += a["prompt_token_ids"] == b["prompt_token_ids"]
    # what the token loop's render still encodes: the template's own text around the block
    prompt, block = a["prompt_token_ids"], checked[-1]
    at = next(k for k in range(len(prompt)) if prompt[k:k + len(block)] == block)
    template_texts = [decode(prompt[:at]), decode(prompt[at + len(block):])]
    for ids in records[: min(WARMUP, len(records))]:
        _post_ok(conn, CHAT, token_body(ids))
        _post_ok(conn, CHAT, text_body(decode(ids)))

    sides = ("token", "text")
    latency: dict[str, list[float]] = {s: [] for s in sides}
    client_ms: dict[str, list[float]] = {s: [] for s in sides}
    sent: dict[str, list[int]] = {s: [] for s in sides}
    received: dict[str, list[int]] = {s: [] for s in sides}
    stored: dict[str, list[list[int]]] = {s: [] for s in sides}
    server_text: list[tuple[str, list[int]]] = []  # (rendered prompt text, generated ids) of the text loop
    for ids in records:
        data = token_body(ids)
        status, raw, ms = conn.send("POST", CHAT, data)
        if status != 200:
            raise UsageError(f"token loop request answered {status}: {raw[:300]!r}")
        stored["token"].append(json.loads(raw)["choices"][0]["message"]["token_ids"])  # stored as they come
        latency["token"].append(ms)
        client_ms["token"].append(0.0)
        sent["token"].append(len(data))
        received["token"].append(len(raw))

        start = time.perf_counter()
        text = decode(ids)
        codec = time.perf_counter() - start
        data = text_body(text)
        status, raw, ms = conn.send("POST", CHAT, data)
        if status != 200:
            raise UsageError(f"text loop request answered {status}: {raw[:300]!r}")
        content = json.loads(raw)["choices"][0]["message"]["content"] or ""
        start = time.perf_counter()
        stored["text"].append(encode(content))
        codec += time.perf_counter() - start
        latency["text"].append(ms + codec * 1000)
        client_ms["text"].append(codec * 1000)
        sent["text"].append(len(data))
        received["text"].append(len(raw))
        server_text.append((text, stored["token"][-1]))

    # the server's codec share of the text loop, the same calls in process (render encodes the prompt text,
    # derender decodes the output); the token loop's render encodes only the template's text around the block
    repeat = 5
    server_text_ms = percentile([_timeit_ms(lambda t=t, o=o: (encode(t), decode(o)), repeat)
                                 for t, o in server_text], 50)
    server_token_ms = _timeit_ms(lambda: [encode(t) for t in template_texts], repeat * 20)
    tokens_text = [2 * len(r) + 2 * len(o) for r, o in zip(records, stored["token"], strict=True)]
    tokens_token = len(prompt) - len(block)

    p50 = {s: percentile(latency[s], 50) for s in sides}
    client_p50 = {s: percentile(client_ms[s], 50) for s in sides}
    wire = {s: percentile([a + b for a, b in zip(sent[s], received[s], strict=True)], 50) for s in sides}
    req = {s: percentile(sent[s], 50) for s in sides}
    resp = {s: percentile(received[s], 50) for s in sides}
    codec_all = {"token": client_p50["token"] + server_token_ms, "text": client_p50["text"] + server_text_ms}
    same_store = sum(a == b for a, b in zip(stored["token"], stored["text"], strict=True))
    rows = [
        ["end-to-end p50 ms (incl. client codec)", p50["token"], p50["text"], ratio(p50["token"], p50["text"])],
        ["client encode+decode p50 ms", client_p50["token"], client_p50["text"], "-"],
        ["client+server encode+decode ms", codec_all["token"], codec_all["text"],
         ratio(codec_all["token"], codec_all["text"])],
        ["tokens through encode/decode", tokens_token, percentile(tokens_text, 50),
         ratio(tokens_token, percentile(tokens_text, 50))],
        ["request bytes p50", req["token"], req["text"], ratio(req["token"], req["text"])],
        ["response bytes p50", resp["token"], resp["text"], ratio(resp["token"], resp["text"])],
        ["wire bytes per request p50", wire["token"], wire["text"], ratio(wire["token"], wire["text"])],
    ]
    print(table(["per request", "token loop", "text loop", "token/text"], rows))
    print(f"same prompt through both loops: {same_prompt}/{len(checked)}; answers stored identically "
          f"(re-tokenized text == generated ids): {same_store}/{len(records)}")
    return {"benchmark": "token-loop", "machine": _machine(), "requests": len(records), "warmup": WARMUP,
            "prompt_tokens": LOOP_PROMPT_TOKENS, "output_tokens": LOOP_OUTPUT_TOKENS,
            "latency_ms_p50": p50, "latency_ratio_token_over_text": ratio(p50["token"], p50["text"]),
            "client_codec_ms_p50": client_p50, "server_codec_ms_in_process": {"token": server_token_ms,
                                                                           "text": server_text_ms},
            "codec_ms": codec_all, "codec_ratio_token_over_text": ratio(codec_all["token"], codec_all["text"]),
            "codec_tokens": {"token": tokens_token, "text": percentile(tokens_text, 50)},
            "wire_bytes_p50": {"request": req, "response": resp, "total": wire},
            "wire_ratio_token_over_text": ratio(wire["token"], wire["text"]),
            "same_prompt": {"same": same_prompt, "checked": len(checked)},
            "stored_identically": {"same": same_store, "total": len(records)}}


# -- suite ------------------------------------------------------------------------------------------------

SUITE_TARGET_S = 120.0


def bench_suite(args: argparse.Namespace) -> dict[str, Any]:
    from tokenspec.cli import build_parser
    from tokenspec.runner import run_from_args

    model_dir = _model(args)
    name = DEFAULT_MODEL_NAME
    with contextlib.ExitStack() as stack:
        server, startup_s = _start_reference(stack, model_dir)
        assert server.engine is not None and server.frontend is not None
        report_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tokenspec-bench-")))
        run_args = build_parser().parse_args([
            "run", "--target", server.frontend.url,
            "--reference", server.engine.url, "--tokenizer", str(model_dir), "--model", name,
            "--report", str(report_dir), "-n", "2",
        ])
        start = time.perf_counter()
        code = run_from_args(run_args)
        wall = time.perf_counter() - start
        summary = json.loads((report_dir / "report.json").read_text())["summary"]
    target = Target("suite wall time / 120 s", wall / SUITE_TARGET_S, 1.0)
    print(f"\nserver start-up (excluded): {startup_s:.1f} s")
    print(f"tokenspec run -n 2 wall time: {wall:.1f} s (exit code {code})")
    print(f"{'PASS' if target.passed else 'MISS'}  suite wall time {wall:.1f} s (target <= {SUITE_TARGET_S:.0f} s)")
    return {"benchmark": "suite", "machine": _machine(), "workers": 2, "startup_s": startup_s,
            "wall_s": wall, "target_s": SUITE_TARGET_S, "exit_code": code,
            "summary": {k: summary.get(k) for k in ("passed", "failed", "errors", "unsupported", "xfailed",
                                                    "xpassed", "total")},
            "targets": [{**target.to_dict(), "measured_s": round(wall, 2)}]}


# -- entry ------------------------------------------------------------------------------------------------

BENCHMARKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "frontend": bench_frontend, "gateway": bench_gateway, "suite": bench_suite, "token-loop": bench_token_loop}


def bench_from_args(args: argparse.Namespace) -> int:
    """Run one benchmark, print its figures, write ``<out>/<what>.json``.

    Exit code 0 when it ran (a MISS is a figure to report, not a crash), 1 with ``--strict`` and a MISS."""
    if getattr(args, "requests", 1) < 1:
        raise UsageError("--requests must be at least 1")
    args.duration = getattr(args, "duration", 60.0)
    args.clients = getattr(args, "clients", 32)
    if args.duration <= 0 or args.clients < 1:
        raise UsageError("--duration must be positive and --clients at least 1")
    out_dir = Path(getattr(args, "out", None) or "benchmarks/results")
    with sigterm_as_interrupt():
        doc = BENCHMARKS[args.what](args)
    path = _write(out_dir, args.what, doc)
    print(f"\nwrote {path}")
    missed = [t for t in doc.get("targets", []) if t["verdict"] == "MISS"]
    return 1 if missed and getattr(args, "strict", False) else 0
