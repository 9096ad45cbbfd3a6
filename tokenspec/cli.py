"""The ``tokenspec`` command: one entry point, one module per subcommand (``tokenspec/commands/``).

User mistakes surface as ``UsageError``: one line on stderr, exit code 2. SIGINT and SIGTERM end any
subcommand with 130 / 143 (``tokenspec/core/interrupts.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tokenspec.commands import COMMANDS
from tokenspec.commands.parsing import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    MODEL_FAMILIES,  # noqa: F401 - the families the CLI offers, read by tests
    HelpFormatter,
    Parser,
)
from tokenspec.core.errors import UsageError, one_line
from tokenspec.core.version import __version__

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tokenspec",
        description="tokenspec: the conformance suite and reference harness for token-in/token-out LLM serving\n"
        "APIs (render, generate, derender). Each subcommand has its own --help.",
        epilog="exit codes:\n  " + "\n  ".join((EXIT_OK, "1  the job ran and its verdict is a failure",
                                                 EXIT_USAGE, EXIT_INTERRUPTED))
        + "\n\nexamples:\n  tokenspec embedded\n  tokenspec run --target http://127.0.0.1:8000",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tokenspec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    from tokenspec.core.interrupts import INTERRUPTS

    INTERRUPTS.install()
    try:
        if args.command != "run":  # `tokenspec run` arms once its report folder holds nothing stale
            INTERRUPTS.arm()
        return handler(args)
    except UsageError as exc:
        print(f"tokenspec: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        INTERRUPTS.finishing()
        print(f"tokenspec: interrupted ({INTERRUPTS.name})", file=sys.stderr)
        return INTERRUPTS.exit_code
    finally:
        INTERRUPTS.finishing()
        INTERRUPTS.uninstall()


if __name__ == "__main__":
    sys.exit(main())
