"""``tokenspec bench token-loop``: the token-native proposal's payoff, the token loop against the text loop on the
same stored records through the reference server."""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import Any

from tokenspec.benchmarks.clients import CHAT, WARMUP, TimedConnection, post_ok, timeit_ms
from tokenspec.benchmarks.lifecycle import machine_facts, model_folder, start_reference
from tokenspec.benchmarks.payloads import mixed_text
from tokenspec.benchmarks.statistics import percentile, ratio, table
from tokenspec.core.errors import UsageError
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

LOOP_PROMPT_TOKENS = 200
LOOP_OUTPUT_TOKENS = 32
NO_THINKING = {"enable_thinking": False}  # the answer's text is then all content: the text loop stores it whole


def stored_records(tokenizer: Any, count: int, size: int) -> list[list[int]]:
    """``count`` records as a token-native store holds them: corpus text cut at spaces into pieces of about
    ``size`` tokens, each encoded once when it was written (so decoding a record gives its text back)."""
    words = " ".join(mixed_text()).split(" ")
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

    model_dir = model_folder(args)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    with contextlib.ExitStack() as stack:
        server, _ = start_reference(stack, model_dir)
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
        a, _ = post_ok(conn, CHAT, token_body(ids, return_token_ids=True))
        b, _ = post_ok(conn, CHAT, text_body(decode(ids), return_token_ids=True))
        same_prompt += a["prompt_token_ids"] == b["prompt_token_ids"]
    # what the token loop's render still encodes: the template's own text around the block
    prompt, block = a["prompt_token_ids"], checked[-1]
    at = next(k for k in range(len(prompt)) if prompt[k:k + len(block)] == block)
    template_texts = [decode(prompt[:at]), decode(prompt[at + len(block):])]
    for ids in records[: min(WARMUP, len(records))]:
        post_ok(conn, CHAT, token_body(ids))
        post_ok(conn, CHAT, text_body(decode(ids)))

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
    server_text_ms = percentile([timeit_ms(lambda t=t, o=o: (encode(t), decode(o)), repeat)
                                 for t, o in server_text], 50)
    server_token_ms = timeit_ms(lambda: [encode(t) for t in template_texts], repeat * 20)
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
    return {"benchmark": "token-loop", "machine": machine_facts(), "requests": len(records), "warmup": WARMUP,
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
