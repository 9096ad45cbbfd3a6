"""``tokenspec bench target --target URL``: any implementation's chat render and derender speed, with the bundled
reference frontend on the same model measured in the same run as the baseline (ratios, never bare times).

The target is reached through the run's transport (its API key, headers, TLS); the baseline frontend is started
here on ``--model`` (default: the embedded tiny model) under the target's served model name, with the given
parsers. With ``--engine`` the whole split path (render, generate on that engine, derender) is timed too, on
each side, against the same engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from tokenspec.benchmarks.clients import WARMUP, TimedConnection, post_ok
from tokenspec.benchmarks.frontend import DERENDER, RENDER, measure_pair
from tokenspec.benchmarks.lifecycle import machine_facts, model_folder
from tokenspec.benchmarks.statistics import ratio, summarize
from tokenspec.core.errors import UsageError
from tokenspec.core.transport import Transport
from tokenspec.harness.implementations.reference import frontend_process

SUBJECT, BASELINE = "target", "tokenspec"
GENERATE = "/inference/v1/generate"
CHAIN_TOKENS = 16


def bench_target(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from tokenspec.core.target import served_model

    transport = Transport.from_args(args)
    model_dir = model_folder(args)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    name = served_model(args.target, transport)
    frontend = frontend_process(model_dir, name, None, tool_parser=_parser(args.tool_parser),
                                reasoning_parser=_parser(args.reasoning_parser))
    with contextlib.ExitStack() as stack:
        stack.callback(frontend.stop)
        print(f"starting the bundled frontend on {model_dir} as {name!r} (the baseline) ...", flush=True)
        frontend.start()
        conns = {SUBJECT: TimedConnection(args.target, transport=transport),
                 BASELINE: TimedConnection(frontend.url)}
        for conn in conns.values():
            stack.callback(conn.close)
        doc = measure_pair(conns, name, tokenizer, args.requests, subject=SUBJECT, baseline=BASELINE,
                           floor_side=BASELINE)
        if args.engine:
            engine = TimedConnection(args.engine, timeout=120, transport=transport, role="engine")
            stack.callback(engine.close)
            doc["split_path"] = _split_path(conns, engine, name, args.requests)
    return {"benchmark": "target", "machine": machine_facts(), "target": args.target, "engine": args.engine,
            "model": name, **doc}


def _parser(value: str) -> str | None:
    return None if value == "none" else value


def _split_path(conns: dict[str, TimedConnection], engine: TimedConnection, name: str, n: int) -> dict[str, Any]:
    """p50 of render -> generate (the shared engine) -> derender, per side, interleaved; printed."""
    chat = {"model": name, "messages": [{"role": "user", "content": "Count to twenty, please."}],
            "max_tokens": CHAIN_TOKENS, "temperature": 0, "ignore_eos": True,
            "chat_template_kwargs": {"enable_thinking": False}}
    chat_data = json.dumps(chat).encode()

    def once(conn: TimedConnection) -> float:
        rendered, t1 = post_ok(conn, RENDER, chat_data)
        generated, t2 = post_ok(engine, GENERATE, json.dumps(rendered).encode())
        body = {"model": name, "generate_response": generated, "chat_request": chat,
                "prompt_tokens": len(rendered.get("token_ids") or [])}
        _, t3 = post_ok(conn, DERENDER, json.dumps(body).encode())
        return t1 + t2 + t3

    for _ in range(max(2, WARMUP // 4)):
        for conn in conns.values():
            once(conn)
    times: dict[str, list[float]] = {side: [] for side in conns}
    for _ in range(max(10, n // 4)):
        for side, conn in conns.items():
            times[side].append(once(conn))
    stats = {side: summarize(values) for side, values in times.items()}
    if not stats[BASELINE]["p50"]:
        raise UsageError("the split path took no time: nothing was measured")
    out = {"tokens": CHAIN_TOKENS, "latency_ms": stats,
           "ratio_p50": ratio(stats[SUBJECT]["p50"], stats[BASELINE]["p50"])}
    print(f"split path (render -> generate {CHAIN_TOKENS} tokens on {engine.url} -> derender), p50: "
          f"{SUBJECT} {stats[SUBJECT]['p50']:.2f} ms, {BASELINE} {stats[BASELINE]['p50']:.2f} ms "
          f"({out['ratio_p50']:.2f}x)")
    return out
