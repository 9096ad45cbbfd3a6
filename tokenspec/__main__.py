"""``python -m tokenspec`` and the ``tokenspec`` console script."""

import sys

from tokenspec.core.interrupts import INTERRUPTS

INTERRUPTS.install()  # before the CLI's imports: a signal during them is deferred, then a clean interrupted exit


def main() -> int:
    from tokenspec.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
