"""`tokenspec golden build`: golden cases of a model folder or a model family."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenspec.commands.parsing import (
    MODEL_FAMILIES,
    command,
)
from tokenspec.core.errors import UsageError


def _golden_build(args: argparse.Namespace) -> int:
    from tokenspec.campaigns.golden_build import build_golden
    from tokenspec.golden import GOLDEN_DIR

    out = Path(args.out) if args.out else GOLDEN_DIR
    if not args.family:
        if not args.dir:
            raise UsageError("give a model folder DIR, or --family NAME")
        print(f"golden cases written to {build_golden(Path(args.dir), out)}")
        return 0
    from tokenspec.campaigns.golden_corpus import family_golden

    path, disagreements = family_golden(args.family, Path(args.dir) if args.dir else None, out,
                                        vllm_url=args.vllm, conversations=args.conversations)
    print(f"golden cases written to {path} ({disagreements} disagreement(s) between oracles listed in it)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    golden = command(sub, "golden", "golden cases keyed by tokenizer fingerprint",
                      examples=["tokenspec golden build /tmp/tiny"])
    golden_sub = golden.add_subparsers(dest="action", required=True, metavar="ACTION")
    golden_build = command(golden_sub, "build", "make the golden cases of a model folder or of a model family",
                            description="With DIR only: golden/cases.yaml made token-level for that folder. With\n"
                                        "--family: that family's folder is built (into DIR, or the cache), a vLLM\n"
                                        "render server is started on it with the family's parsers (unless --vllm\n"
                                        "is given), and the generated corpus is added: chat, Messages and\n"
                                        "Responses renders (transformers, cross-checked with vLLM), completions\n"
                                        "renders, and chat derenders\n"
                                        "recorded from vLLM (spec-corrected; each disagreement is listed).",
                            examples=["tokenspec golden build /tmp/tiny --out golden",
                                      "tokenspec golden build --family qwen3"])
    golden_build.add_argument("dir", metavar="DIR", nargs="?", help="model folder")
    golden_build.add_argument("--family", choices=MODEL_FAMILIES, help="build the corpus of this model family")
    golden_build.add_argument("--vllm", metavar="URL[#NAME]",
                              help="a running vLLM render server on the family's folder (#NAME: the model name "
                                   "it serves)")
    golden_build.add_argument("--conversations", type=int, default=130,
                              help="generated chat render cases (with --family)")
    golden_build.add_argument("--out", metavar="DIR", help="golden folder (default: the installed golden/)")
    golden_build.set_defaults(handler=_golden_build)
