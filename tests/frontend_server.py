"""Run the reference frontend under a real uvicorn server in a thread, on a free loopback port.

A fixture helper (not a test module): session fixtures that need our frontend over real HTTP, next to a real
vLLM server, use ``running_frontend`` as a context manager. In-process threads start in well under a second
and share the test's interpreter, so a failing request's traceback lands in the test log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.loopback import running_app


@contextmanager
def running_frontend(config: FrontendConfig, timeout: float = 20.0) -> Iterator[str]:
    """Serve ``config`` until the block ends; yields the base URL. The server is always shut down."""
    with running_app(create_app(config), timeout) as url:
        yield url


__all__ = ["running_app", "running_frontend"]
