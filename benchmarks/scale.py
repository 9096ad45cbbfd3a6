"""``tokenspec bench scale``: how the frontend's cost grows with the size of the work, against vLLM's render server
on the same model and parsers, in the same run.

- chat render of a prompt of about 1k, 8k, 32k and 128k tokens: p50, and p50 per prompt token;
- whole chat derender of a 1k, 8k and 32k-token reasoning output;
- streamed chat derender: the cost of one more chunk (1 or 8 tokens) once the stream is at token 50, 1k, 4k, 16k
  and 32k (each side primed to that point by one call, then the same next chunk timed from its own state), and the
  size of the stream_state there;
- 64 clients of short chat renders for ``--duration`` seconds on each side: errors, p50/p99, and our RSS;
- the whole stream, chunk by chunk, with its running total at 1k, 4k, 16k and 32k tokens: ours to 32k; vLLM, whose
  chunks grow dearer as the stream grows, to 1k (1-token chunks) and 4k (8-token chunks), and beyond that the
  integral of its measured per-chunk p50s, labelled as an estimate.

Both sides get the same requests, alternating; a figure whose two answers differ is marked "not the same work" and
no ratio is drawn from it. The targets (issue 40) are printed against their lines with three significant digits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from typing import Any

from tokenspec.benchmarks.clients import TimedConnection
from tokenspec.benchmarks.lifecycle import machine_facts, model_folder
from tokenspec.benchmarks.payloads import mixed_text
from tokenspec.benchmarks.statistics import Target, ratio, summarize, table
from tokenspec.core.errors import UsageError
from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.reference import REASONING_PARSER, TOOL_PARSER, frontend_process

RENDER_SIZES = (1_000, 8_000, 32_000, 128_000)
DERENDER_SIZES = (1_000, 8_000, 32_000)
STREAM_AT = (50, 1_000, 4_000, 16_000, 32_000)
CHUNKS = (1, 8)
#: how far vLLM's stream is run chunk by chunk, per chunk size (beyond: estimated from its per-chunk p50s)
VLLM_STREAM_TO = {1: 1_000, 8: 4_000}
MAX_MODEL_LEN = 140_000
LOAD_CLIENTS = 64
NAME = "scale"
RENDER = "/v1/chat/completions/render"
DERENDER = "/v1/chat/completions/derender"
REQUEST = {"model": NAME, "messages": [{"role": "user", "content": "Think it over."}]}


def _repeats(size: int, base: int) -> int:
    """Fewer timed requests for bigger work: the figure is a median either way."""
    return max(5, min(base, base * 1_000 // size))


def bench_scale(args: argparse.Namespace) -> dict[str, Any]:
    from tokenizers import Tokenizer

    model_dir = model_folder(args)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # the tiny model's config says 4,096 positions
    install = vllm.find_vllm("auto", install=True)
    theirs = vllm.VllmServer(install, "render", model_dir, NAME, extra_args=[
        *vllm.parser_args(TOOL_PARSER, REASONING_PARSER), "--max-model-len", str(MAX_MODEL_LEN)])
    ours = frontend_process(model_dir, NAME, None, max_model_len=MAX_MODEL_LEN)
    with contextlib.ExitStack() as stack:
        for server in (theirs, ours):
            stack.callback(server.stop)
        print("starting our frontend and vLLM's render server ...", flush=True)
        ours.start()
        theirs.start()
        conns = {"ours": TimedConnection(ours.url, timeout=600), "vllm": TimedConnection(theirs.url, timeout=600)}
        for conn in conns.values():
            stack.callback(conn.close)
        return _measure(args, tokenizer, conns, {"ours": ours.process.pid})
    raise AssertionError("unreachable")


class _Pair:
    """Both servers, one request at a time, alternating which goes first; answers kept for the same-work check."""

    def __init__(self, conns: dict[str, TimedConnection]) -> None:
        self.conns = conns
        self.turn = 0

    def post(self, side: str, path: str, body: dict[str, Any]) -> tuple[Any, float]:
        status, raw, ms = self.conns[side].send("POST", path, json.dumps(body).encode())
        if status != 200:
            raise UsageError(f"{side} {path} answered {status}: {raw[:300]!r}")
        return json.loads(raw), ms

    def timed(self, path: str, bodies: dict[str, dict[str, Any]], repeats: int) -> dict[str, dict[str, Any]]:
        """p50 (and the rest) of ``repeats`` requests per side, each side its own body; plus the last answer."""
        raw = {side: self.conns[side].prepare("POST", path, json.dumps(body).encode()) for side, body in bodies.items()}
        times: dict[str, list[float]] = {side: [] for side in bodies}
        answers: dict[str, Any] = {}
        for _ in range(repeats):
            order = list(bodies) if self.turn % 2 == 0 else list(bodies)[::-1]
            self.turn += 1
            for side in order:
                status, body, ms = self.conns[side].exchange(raw[side])
                if status != 200:
                    raise UsageError(f"{side} {path} answered {status}: {body[:300]!r}")
                times[side].append(ms)
                answers[side] = json.loads(body)
        return {side: {**summarize(times[side]), "answer": answers[side]} for side in bodies}


def _prompt_text(tokenizer: Any, tokens: int) -> str:
    text = "\n".join(mixed_text())
    per = len(tokenizer.encode(text).ids)
    return (text + "\n") * (tokens // per) + tokenizer.decode(tokenizer.encode(text).ids[: tokens % per])


def _plain_text(tokenizer: Any) -> str:
    """The corpus without the added tokens' text (its chat transcripts spell ``<|im_end|>`` and ``<tool_call>``), so
    that the output is reasoning from start to end, and so that no special token is shown by one side and dropped by
    the other (a parser that turns skip_special_tokens off shows them: DERENDER-025, not the cost of the work)."""
    text = "\n".join(mixed_text())
    for token in tokenizer.get_added_tokens_decoder().values():
        text = text.replace(token.content, "")
    return text


def _reasoning_ids(tokenizer: Any, tokens: int) -> list[int]:
    """``<think>`` and prose for ``tokens`` tokens, closed and answered in its last 8."""
    ids = tokenizer.encode("<think>\n", add_special_tokens=False).ids
    text = _plain_text(tokenizer)
    body = tokenizer.encode(text, add_special_tokens=False).ids
    while len(ids) < tokens:
        ids += body
    return ids[: tokens - 8] + tokenizer.encode("</think>\n\nYes, done.", add_special_tokens=False).ids[:8]


def _message(answer: dict[str, Any]) -> tuple[Any, Any]:
    message = answer["choices"][0]["message"]
    return message.get("content"), message.get("reasoning") or message.get("reasoning_content")


def _delta(answer: dict[str, Any]) -> tuple[Any, Any]:
    choices = answer["chunk"]["choices"]
    delta = choices[0].get("delta") or {} if choices else {}
    return delta.get("content"), delta.get("reasoning") or delta.get("reasoning_content")


def _stream_body(ids: list[int], finish: bool, state: Any, prompt: list[int]) -> dict[str, Any]:
    return {"model": NAME, "stream": True, "stream_state": state, "prompt_token_ids": prompt,
            "prompt_tokens": len(prompt), "chat_request": REQUEST,
            "generate_chunk": {"request_id": "scale", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "length" if finish else None}]}}


def _measure(args: argparse.Namespace, tokenizer: Any, conns: dict[str, TimedConnection],
             pids: dict[str, int]) -> dict[str, Any]:
    pair = _Pair(conns)
    base = max(3, min(args.requests, 30))
    doc: dict[str, Any] = {"benchmark": "scale", "machine": machine_facts(), "render": {}, "derender": {},
                           "stream": {}, "stream_total_s": {}, "state_bytes": {}}

    print("chat render ...", flush=True)
    for size in RENDER_SIZES:
        body = {"model": NAME, "messages": [{"role": "user", "content": _prompt_text(tokenizer, size)}]}
        got = pair.timed(RENDER, {"ours": body, "vllm": body}, _repeats(size, base))
        prompt = len(got["ours"]["answer"]["token_ids"])
        same = got["ours"]["answer"]["token_ids"] == got["vllm"]["answer"]["token_ids"]
        doc["render"][size] = {"prompt_tokens": prompt, "same_work": same,
                               **{side: {k: v for k, v in got[side].items() if k != "answer"} for side in got}}

    print("whole chat derender ...", flush=True)
    prompt_ids = tokenizer.encode("<|im_start|>user\nThink it over.<|im_end|>\n<|im_start|>assistant\n",
                                  add_special_tokens=False).ids
    for size in DERENDER_SIZES:
        body = {"model": NAME, "prompt_token_ids": prompt_ids, "prompt_tokens": len(prompt_ids),
                "chat_request": REQUEST, "generate_response": {"request_id": "scale", "choices": [
                    {"index": 0, "token_ids": _reasoning_ids(tokenizer, size), "finish_reason": "length"}]}}
        got = pair.timed(DERENDER, {"ours": body, "vllm": body}, _repeats(size, base))
        same = _message(got["ours"]["answer"]) == _message(got["vllm"]["answer"])
        doc["derender"][size] = {"same_work": same,
                                 **{side: {k: v for k, v in got[side].items() if k != "answer"} for side in got}}

    output = _reasoning_ids(tokenizer, STREAM_AT[-1] + 16)
    print("streamed chat derender, one more chunk at each point ...", flush=True)
    for chunk in CHUNKS:
        for at in STREAM_AT:
            primed = {side: pair.post(side, DERENDER, _stream_body(output[:at], False, None, prompt_ids))[0]
                      ["stream_state"] for side in conns}
            bodies = {side: _stream_body(output[at:at + chunk], False, primed[side], prompt_ids) for side in conns}
            got = pair.timed(DERENDER, bodies, _repeats(at // 4 + 250, base))
            same = _delta(got["ours"]["answer"]) == _delta(got["vllm"]["answer"])
            doc["stream"].setdefault(chunk, {})[at] = {
                "same_work": same, **{side: {k: v for k, v in got[side].items() if k != "answer"} for side in got}}
            if chunk == 1:
                doc["state_bytes"][at] = {side: len(json.dumps(primed[side], separators=(",", ":")))
                                          for side in conns}

    print("whole streams, chunk by chunk ...", flush=True)
    for chunk in CHUNKS:
        for side in conns:
            limit = STREAM_AT[-1] if side == "ours" else VLLM_STREAM_TO[chunk]
            doc["stream_total_s"].setdefault(chunk, {})[side] = _stream_total(pair, side, output, chunk, limit,
                                                                              prompt_ids)
        _estimate_beyond(doc, chunk)

    doc["load"] = _load(args, conns, pids)
    return {**doc, "targets": _report(doc)}


def _load(args: argparse.Namespace, conns: dict[str, TimedConnection], pids: dict[str, int]) -> dict[str, Any]:
    """64 clients of short chat renders for ``--duration`` s on each side in turn; errors, p50/p99, and our RSS."""
    import asyncio

    from tokenspec.benchmarks.gateway import load_test, rss_kib

    out: dict[str, Any] = {}
    for side, conn in conns.items():
        print(f"load: {LOAD_CLIENTS} clients of short renders for {args.duration:.0f} s on {side} ...", flush=True)
        before = rss_kib(pids[side]) if side in pids else None
        result = asyncio.run(load_test(conn.url, NAME, LOAD_CLIENTS, args.duration, path=RENDER,
                                       body_of=lambda rng, k: {"model": NAME, "messages": [
                                           {"role": "user", "content": f"Question {k}: {rng.random():.6f}?"}]}))
        after = rss_kib(pids[side]) if side in pids else None
        ok = result.statuses.get("200", 0)
        figures = summarize(result.latencies_ms) if result.latencies_ms else {"p50": 0.0, "p99": 0.0}
        out[side] = {"sent": result.sent, "ok": ok, "errors": result.sent - ok, "per_s": ok / result.seconds,
                     "p50": figures["p50"], "p99": figures["p99"], "rss_kib": [before, after]}
    return out


def _stream_total(pair: _Pair, side: str, output: list[int], chunk: int, limit: int,
                  prompt: list[int]) -> dict[int, float]:
    """Seconds spent on the stream, chunk by chunk, when it reaches each point of STREAM_AT up to ``limit``."""
    state, spent, totals = None, 0.0, {}
    for start in range(0, limit, chunk):
        answer, ms = pair.post(side, DERENDER, _stream_body(output[start:start + chunk], False, state, prompt))
        state, spent = answer["stream_state"], spent + ms / 1000
        if start + chunk in STREAM_AT:
            totals[start + chunk] = round(spent, 3)
    return totals


def _estimate_beyond(doc: dict[str, Any], chunk: int) -> None:
    """vLLM's total past its measured stream: the measured total plus the trapezoid of its per-chunk p50s."""
    measured = doc["stream_total_s"][chunk]["vllm"]
    points = [(at, doc["stream"][chunk][at]["vllm"]["p50"] / 1000) for at in STREAM_AT]
    estimate = dict(measured)
    last = max(measured)
    total = measured[last]
    for (a, cost_a), (b, cost_b) in zip(points, points[1:], strict=False):
        if b <= last:
            continue
        lo = max(a, last)
        cost_lo = cost_a + (cost_b - cost_a) * (lo - a) / (b - a)
        total += (cost_lo + cost_b) / 2 * (b - lo) / chunk
        estimate[b] = round(total, 1)
    doc["stream_total_s"][chunk]["vllm_estimated"] = {k: v for k, v in estimate.items() if k not in measured}


def _ms(figure: dict[str, Any], side: str) -> float:
    return float(figure[side]["p50"])


def _ratio_cell(figure: dict[str, Any]) -> str:
    if not figure["same_work"]:
        return "not the same work"
    return f"{ratio(_ms(figure, 'ours'), _ms(figure, 'vllm')):.3g}x"


def _report(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for f in doc["render"].values():
        rows.append([f"chat render, {f['prompt_tokens']:,} prompt tokens", _ms(f, "ours"), _ms(f, "vllm"),
                     _ratio_cell(f), f"{_ms(f, 'ours') / f['prompt_tokens'] * 1000:.3g} us/token"])
    for size, f in doc["derender"].items():
        rows.append([f"whole chat derender, {size:,} output tokens", _ms(f, "ours"), _ms(f, "vllm"), _ratio_cell(f),
                     f"{_ms(f, 'ours') / size * 1000:.3g} us/token"])
    for chunk, points in doc["stream"].items():
        for at, f in points.items():
            state = doc["state_bytes"].get(at, {})
            rows.append([f"streamed, {chunk}-token chunk at token {at:,}", _ms(f, "ours"), _ms(f, "vllm"),
                         _ratio_cell(f), f"state {state.get('ours', '-')} / {state.get('vllm', '-')} B"
                         if state else ""])
    print()
    print(table(["work", "ours p50 ms", "vLLM p50 ms", "ours/vLLM", "note"], rows))
    print()
    for chunk, totals in doc["stream_total_s"].items():
        estimated = totals.get("vllm_estimated", {})
        line = ", ".join(f"{at:,}: {totals['ours'].get(at, '-')} s vs "
                         f"{totals['vllm'].get(at) if at in totals['vllm'] else '~' + str(estimated.get(at, '-'))} s"
                         for at in STREAM_AT[1:])
        print(f"whole stream in {chunk}-token chunks, ours vs vLLM (~ estimated): {line}")

    load = doc["load"]
    print()
    for side, f in load.items():
        rss = f["rss_kib"]
        print(f"load on {side}: {f['ok']} of {f['sent']} answered 200 ({f['per_s']:.0f}/s), p50 {f['p50']:.1f} ms, "
              f"p99 {f['p99']:.1f} ms" + (f", RSS {rss[0]} -> {rss[1]} KiB" if rss[0] else ""))
    render, derender, stream = doc["render"], doc["derender"], doc["stream"]
    per_token = {size: _ms(f, "ours") / f["prompt_tokens"] for size, f in render.items()}
    targets = [Target(f"streamed {chunk}-token chunk at 32k / at 1k (ours)",
                      ratio(_ms(stream[chunk][32_000], "ours"), _ms(stream[chunk][1_000], "ours")), 1.5)
               for chunk in CHUNKS]
    targets.append(Target("stream_state at token 32k / 4 KB (ours)", doc["state_bytes"][32_000]["ours"] / 4096, 1.0))
    targets.append(Target("whole 32k stream in 1-token chunks / 60 s (ours)",
                          doc["stream_total_s"][1]["ours"][32_000] / 60, 1.0))
    targets.append(Target("render per token at 128k / at 8k (ours)", ratio(per_token[128_000], per_token[8_000]), 1.5))
    targets += [Target(f"render p50 ours/vLLM at {size // 1000}k", ratio(_ms(f, "ours"), _ms(f, "vllm")), 0.6)
                for size, f in render.items() if f["same_work"]]
    ours_load = load["ours"]
    targets.append(Target(f"load: requests not answered 200 of {ours_load['sent']} (ours)", ours_load["errors"], 0))
    targets.append(Target("load: p99 / p50 (ours)", ratio(ours_load["p99"], ours_load["p50"]), 10.0))
    if ours_load["rss_kib"][0]:
        targets.append(Target("load: RSS after / before (ours)",
                              ratio(ours_load["rss_kib"][1], ours_load["rss_kib"][0]), 1.1))
    targets.append(Target("whole derender per token at 32k / at 1k (ours)",
                          ratio(_ms(derender[32_000], "ours") / 32, _ms(derender[1_000], "ours")), 1.5))
    print()
    for target in targets:
        print(target.line())
    return [t.to_dict() for t in targets]
