"""``python -m tokenspec`` and the ``tokenspec`` console script."""

import os
import sys

from tokenspec.core.interrupts import INTERRUPTS

# Every Python process tokenspec starts (its own commands as children, pytest-xdist's workers, servers) imports the
# installed package, never a folder of the working directory: run from a checkout of this repository, whose
# tokenspec/ is only the application layer (suite/, harness/ ... sit beside it), a child would otherwise import
# that folder and miss the rest.
os.environ.setdefault("PYTHONSAFEPATH", "1")

INTERRUPTS.install()  # before the CLI's imports: a signal during them is deferred, then a clean interrupted exit


def main() -> int:
    from tokenspec.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
