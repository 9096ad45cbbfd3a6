"""Profile the frontend's chat render / derender handlers in process (no HTTP), on the benchmark's payloads.

    .venv/bin/python benchmarks/profile_frontend.py derender [--calls 500] [--top 25]

Prints the per-call time and cProfile's top functions by cumulative time: where to look when
``tokenspec bench frontend`` misses a target.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

from tokenizers import Tokenizer

from tokenspec.benchmarks.payloads import TARGET_TOKENS, conversation, output_ids
from tokenspec.harness.frontend.app import create_app
from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.implementations.reference import REASONING_PARSER, TOOL_PARSER, default_model
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME


class _NoHeaders:
    headers: dict[str, str] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", choices=["render", "derender"])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    model_dir = default_model()
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    app = create_app(FrontendConfig(model_dir, DEFAULT_MODEL_NAME, tool_parser=TOOL_PARSER,
                                    reasoning_parser=REASONING_PARSER))
    fe = app.state.frontend
    name = DEFAULT_MODEL_NAME
    derender: dict[str, Any] = {
        "model": name, "prompt_tokens": 300,
        "generate_response": {"request_id": "bench", "choices": [
            {"index": 0, "token_ids": output_ids(tok, TARGET_TOKENS), "finish_reason": "length"}]},
        "chat_request": {"model": name, "messages": [{"role": "user", "content": "Say something."}],
                         "chat_template_kwargs": {"enable_thinking": False}}}
    render = {"model": name, "messages": conversation(tok, TARGET_TOKENS - 10)}
    if args.endpoint == "derender":
        def call() -> object:
            return fe.chat_derender(derender, _NoHeaders())
    else:
        def call() -> object:
            return fe.chat_render(render, _NoHeaders())
    for _ in range(50):
        call()
    start = time.perf_counter()
    for _ in range(args.calls):
        call()
    print(f"{args.endpoint}: {(time.perf_counter() - start) * 1000 / args.calls:.3f} ms per call (no HTTP)")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        call()
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
