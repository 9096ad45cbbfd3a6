"""``tokenspec bench frontend``: our CPU frontend vs vLLM's GPU-less render server, chat render and derender."""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from tokenspec.harness.benchmarks.clients import WARMUP, TimedConnection, interleaved_throughput, post_ok, timeit_ms
from tokenspec.harness.benchmarks.lifecycle import machine_facts, model_folder
from tokenspec.harness.benchmarks.payloads import TARGET_TOKENS, conversation, output_ids
from tokenspec.harness.benchmarks.statistics import Target, ratio, summarize, table
from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.reference import REASONING_PARSER, TOOL_PARSER, frontend_process
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

RENDER = "/v1/chat/completions/render"
DERENDER = "/v1/chat/completions/derender"


def bench_frontend(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    model_dir = model_folder(args)
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
        rendered, _ = post_ok(conn, RENDER, json.dumps(body).encode())
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
    answers = {side: {ep: post_ok(conns[side], path, data)[0] for ep, (path, data) in payloads.items()}
               for side in conns}
    same_render = answers["vllm"]["render"]["token_ids"] == answers["ours"]["render"]["token_ids"]
    msg = {side: answers[side]["derender"]["choices"][0]["message"] for side in conns}
    same_derender = all(msg["vllm"].get(k) == msg["ours"].get(k) for k in ("content", "reasoning"))
    print(f"same render token_ids: {same_render}; same derender content/reasoning: {same_derender}", flush=True)

    for _ in range(WARMUP):
        for conn in conns.values():
            for path, data in payloads.values():
                post_ok(conn, path, data)
            conn.send("GET", "/health")

    latencies: dict[str, dict[str, list[float]]] = {side: {"render": [], "derender": [], "health": []}
                                                    for side in conns}
    for _ in range(n):  # interleaved: vllm render, ours render, vllm derender, ours derender, ...
        for endpoint, (path, data) in payloads.items():
            for side, conn in conns.items():
                latencies[side][endpoint].append(post_ok(conn, path, data)[1])
        for side, conn in conns.items():
            status, _, ms = conn.send("GET", "/health")
            if status == 200:
                latencies[side]["health"].append(ms)
    stats = {side: {ep: summarize(vals) for ep, vals in eps.items() if vals} for side, eps in latencies.items()}

    print("throughput (interleaved bursts) ...", flush=True)
    throughput = {endpoint: {f"c{c}": interleaved_throughput(urls, path, data, n, c) for c in (1, 8)}
                  for endpoint, (path, data) in payloads.items()}

    rendered_text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
    encode_ms = timeit_ms(lambda: tokenizer.encode(rendered_text, add_special_tokens=False), max(n, 200))
    decode_ms = timeit_ms(lambda: tokenizer.decode(derender_ids, skip_special_tokens=False), max(n, 200))
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
    return {"benchmark": "frontend", "machine": machine_facts(), "requests": n, "warmup": WARMUP,
            "prompt_tokens": len(prompt_ids), "output_tokens": len(derender_ids),
            "same_render_token_ids": same_render, "same_derender_message": same_derender,
            "latency_ms": stats, "throughput_rps": throughput, "floor_ms": floor,
            "targets": [t.to_dict() for t in targets]}
