"""`tokenspec model build`: the embedded tiny model and the real model families."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenspec.commands.parsing import (
    MODEL_FAMILIES,
    command,
)


def _model_build(args: argparse.Namespace) -> int:
    from tokenspec.harness.models import build

    result = build(Path(args.dir), args.family)
    family = "" if args.family == "tiny" else f"{args.family} "
    print(f"built {family}{result.model_dir} (tokenizer fingerprint {result.fingerprint})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    model = command(sub, "model", "the embedded tiny model and real model families",
                     examples=["tokenspec model build /tmp/tiny"])
    model_sub = model.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = command(model_sub, "build", "write a chat model (tokenizer, template, random weights) into DIR",
                     description="DIR must be new, empty, or an earlier build: nothing else is overwritten.\n"
                                 "--family tiny is the embedded tiny model. The real families carry the real\n"
                                 "tokenizer, chat template, special tokens and generation defaults with random\n"
                                 "tiny weights: qwen3 (Qwen3-0.6B), llama3 (Llama-3.1-8B-Instruct), deepseek-r1\n"
                                 "(DeepSeek-R1-Distill-Qwen-1.5B), qwen3-coder (Qwen3-Coder-30B-A3B-Instruct's\n"
                                 "template on the Qwen3 tokenizer) and gemma-4 (gemma-4-31B-it, text only); their\n"
                                 "sources (llama-cpp-python's sdist, 77 MB) are downloaded once.",
                     examples=["tokenspec model build /tmp/tiny",
                               "tokenspec model build /tmp/qwen3 --family qwen3"])
    build.add_argument("dir", metavar="DIR", help="folder to write")
    build.add_argument("--family", choices=MODEL_FAMILIES, default="tiny",
                       help="which model to build")
    build.set_defaults(handler=_model_build)
