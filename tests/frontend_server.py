"""Run the reference frontend under a real uvicorn server in a thread, on a free loopback port.

A fixture helper (not a test module): session fixtures that need our frontend over real HTTP, next to a real
vLLM server, use ``running_frontend`` as a context manager. In-process threads start in well under a second
and share the test's interpreter, so a failing request's traceback lands in the test log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.vllm import free_port


@contextmanager
def running_frontend(config: FrontendConfig, timeout: float = 20.0) -> Iterator[str]:
    """Serve ``config`` until the block ends; yields the base URL. The server is always shut down."""
    with running_app(create_app(config), timeout) as url:
        yield url


@contextmanager
def running_app(app: object, timeout: float = 20.0, health: str = "/health") -> Iterator[str]:
    """Serve any ASGI app on a free loopback port until the block ends; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, name=f"frontend-{port}", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the frontend did not start on {url}")
            time.sleep(0.05)
        assert httpx.get(f"{url}{health}", timeout=5).status_code == 200
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
