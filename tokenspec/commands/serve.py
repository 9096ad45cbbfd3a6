"""`tokenspec serve [frontend]`: the bundled reference server, or its CPU frontend alone."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenspec.commands.parsing import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    command,
)
from tokenspec.core.errors import UsageError


def _serve(args: argparse.Namespace) -> int:
    if args.what == "frontend":
        from tokenspec.harness.frontend.app import serve
        from tokenspec.harness.frontend.auth import digests_from_env
        from tokenspec.harness.frontend.config import FrontendConfig

        if args.model is None:
            raise UsageError("`tokenspec serve frontend` needs --model DIR (a Hugging Face style model folder)")
        config = FrontendConfig(
            model_dir=Path(args.model),
            served_model_name=args.served_model_name,
            tool_parser=None if args.tool_parser == "none" else args.tool_parser,
            reasoning_parser=None if args.reasoning_parser == "none" else args.reasoning_parser,
            engine_url=args.engine,
            max_model_len=args.max_model_len,
            max_concurrency=args.max_concurrency,
            max_num_seqs=args.max_num_seqs,
            text_filter=args.text_filter,
            api_generation=args.api_generation,
            api_key_digests=digests_from_env(args.api_key_env) if args.api_key_env else (),
        )
        serve(config, host=args.host, port=args.port)
        return 0
    from tokenspec.harness.implementations.reference import serve_reference

    return serve_reference(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = command(
        sub, "serve", "start the bundled reference server (or only its CPU frontend)",
        description="`serve` (all) builds the tiny model unless --model is given and starts vLLM's engine and the\n"
                    "frontend in front of it; `serve frontend` starts only the CPU frontend. Both print their URL\n"
                    "and model when ready and run until Ctrl-C.",
        exits=(EXIT_OK, "1  a server process exited on its own", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec serve --port 8000",
                  "tokenspec serve frontend --model /tmp/tiny --port 8000 --reasoning-parser deepseek_r1"],
    )
    serve.add_argument("what", nargs="?", choices=["all", "frontend"], default="all",
                       help="all: engine + frontend; frontend: the CPU frontend only (default: all)")
    serve.add_argument("--model", metavar="DIR", help="model folder (default: build and use the embedded tiny model)")
    serve.add_argument("--port", type=int, default=0, help="frontend port; 0 picks a free one")
    serve.add_argument("--engine-port", type=int, default=0, help="all: the vLLM engine's port; 0 picks a free one")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--served-model-name", default="tokenspec-tiny", help="model name in /v1/models")
    serve.add_argument("--tool-parser", default="hermes", help="hermes, or none")
    serve.add_argument("--reasoning-parser", default="qwen3", help="qwen3, deepseek_r1, or none")
    serve.add_argument("--engine", metavar="URL", help="frontend only: engine URL for the /v1/* gateway")
    serve.add_argument("--max-model-len", type=int, default=2048,
                       help="context length (all: the engine's and the frontend's)")
    serve.add_argument("--max-concurrency", type=int, help="gateway requests in flight before answering 503")
    serve.add_argument("--max-num-seqs", type=int,
                       help="the engine's largest batch, so its largest n (all: given to the engine, default 128;"
                            " frontend: the --engine's, stated in /openapi.json)")
    serve.add_argument("--text-filter", default="pass-through", metavar="NAME|MODULE:ATTR",
                       help="safety hook: judges every prompt as text (token input decoded) before generation; "
                            "a built-in name or an import path to a callable (text) -> reason|None "
                            "(default: pass-through)")
    serve.add_argument("--api-generation", choices=["0.33", "0.34"], default="0.34",
                       help="frontend: the vLLM API generation it speaks where they differ (the streaming state's"
                            " decode window, streamed output_mode derender)")
    serve.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto", help="which vLLM build to run")
    serve.add_argument("--api-key-env", metavar="NAME",
                       help="protect the frontend's /v1 and /inference routes (as vLLM's --api-key does) with the"
                            " key(s) in environment variable NAME (comma-separated); /health, /tokenize,"
                            " /detokenize and /version stay open")
    serve.set_defaults(handler=_serve)
