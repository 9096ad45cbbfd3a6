"""``python -m tokenspec`` is the ``tokenspec`` command."""

import sys

from tokenspec.cli import main

sys.exit(main())
