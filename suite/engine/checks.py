"""What the running test did, as the plugin judges it: the checks it made and the clients it sent with.

The client and the fixtures write here, the plugin reads; none of them imports the plugin. A test that completes
with zero checks passed vacuously, and the plugin reports it as an error; a failing test's last request (from
the clients it used) becomes its curl and replay command.
"""

from __future__ import annotations

from typing import Any

import pytest

#: The SuiteClients a test used (in the test item's stash).
LAST_REQUEST = pytest.StashKey[list[Any]]()  # SuiteClient (checks.py is below client.py)
#: The server (role, base URL) a test judges when it talks to it other than through the suite's clients.
SERVER = pytest.StashKey[tuple[str, str]]()


class _CheckCounter:
    """Checks made by the running test: passing asserts (pytest's assertion-pass hook) and schema validations."""

    def __init__(self) -> None:
        self.count = 0
        self.active = False

    def note(self) -> None:
        self.count += 1


CHECKS = _CheckCounter()


def note_check() -> None:
    """Count one check of the running test (the client calls this for every validated response)."""
    CHECKS.note()


def note_server(node: pytest.Item, role: str, base_url: str) -> None:
    """For a test that talks to a server other than through the suite's clients (schemathesis, a raw socket):
    which server (role, URL) its checks judge, so a failure is charged to it."""
    node.stash[SERVER] = (role, base_url)
