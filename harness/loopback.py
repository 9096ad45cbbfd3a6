"""Serve an ASGI app on a free loopback port in a background thread, for as long as a ``with`` block lasts.

The mutant proxy (and the project's tests, for the in-process frontend) need a real HTTP server that starts
in well under a second and is always shut down, even when the block raises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from tokenspec.harness.processes import free_port


@contextmanager
def running_app(app: object, timeout: float = 20.0, health: str | None = "/health",
                tls: tuple[str, str] | None = None) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL. ``health`` (if given) must answer 200 first.
    ``tls`` (certificate file, key file) serves https."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off",
                                           timeout_keep_alive=75, ssl_certfile=tls[0] if tls else None,
                                           ssl_keyfile=tls[1] if tls else None))
    thread = threading.Thread(target=server.run, name=f"loopback-{port}", daemon=True)
    thread.start()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {url}")
            time.sleep(0.05)
        if health is not None:  # our own loopback server; on a loaded machine one poll may time out
            while True:
                try:
                    status = httpx.get(f"{url}{health}", timeout=5, verify=not tls).status_code
                    break
                except httpx.TimeoutException:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{url}{health} did not answer within {timeout} s") from None
            if status != 200:
                raise RuntimeError(f"{url}{health} answered {status}")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
