"""The one transport (tokenspec/core/transport.py): flags, secrets, retries, limits."""

from __future__ import annotations

import email.utils
import time
from dataclasses import replace

import pytest
from doubles import rate_limited
from frontend_server import running_app
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tokenspec.core.errors import UsageError
from tokenspec.core.transport import EXHAUSTED, RETRIES, Transport, redact, retry_wait


def _ok() -> Starlette:
    async def hello(_):
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/health", hello), Route("/x", hello)])


def test_retry_after_seconds_dates_and_backoff_are_bounded() -> None:
    assert retry_wait("2", 0) == 2.0 and retry_wait("0", 5) == 0.0
    in_three = email.utils.formatdate(time.time() + 3, usegmt=True)
    assert 1.5 <= retry_wait(in_three, 0) <= 3.5
    assert [retry_wait(None, a) for a in range(4)] == [0.25, 0.5, 1.0, 2.0]
    assert retry_wait("3600", 0, max_wait=30) == 30 and retry_wait(None, 20, max_wait=30) == 30
    assert retry_wait("soon", 1) == 0.5, "an unreadable Retry-After falls back to backoff"


def test_flags_are_checked_and_round_trip_without_secrets(monkeypatch) -> None:
    monkeypatch.setenv("K", "sk-secret-value")
    monkeypatch.setenv("ORG", "org-secret-id")
    transport = Transport.from_flags(api_key_env=["K", "reference="], header=["X-Org: $ORG", "engine=X-Pin: 1"],
                                     timeout=["5", "engine=90"], max_rps=4)
    assert transport.access["target"].request_headers() == {"X-Org": "org-secret-id",
                                                            "Authorization": "Bearer sk-secret-value"}
    assert "Authorization" not in transport.access["reference"].request_headers(), "reference= sends no key"
    assert transport.access["engine"].request_headers()["X-Pin"] == "1"
    assert (transport.timeout("target"), transport.timeout("engine")) == (5.0, 90.0)
    flags = transport.flags()
    assert "sk-secret-value" not in " ".join(flags) and "org-secret-id" not in " ".join(flags)
    given = {name: [v for f, v in zip(flags, flags[1:], strict=False) if f == f"--{name.replace('_', '-')}"]
             for name in ("api_key_env", "header", "timeout")}
    again = Transport.from_flags(**given, max_rps=4)
    assert again == transport
    assert dict(transport.shown_headers("target"))["Authorization"] == "Bearer $K"
    assert redact("key sk-secret-value, org org-secret-id", transport.secrets()) == "key $K, org $ORG"
    for bad, match in ((dict(api_key_env=["UNSET_VAR_X"]), "not set"), (dict(header=["no colon"]), "Name: value"),
                       (dict(header=["X: $UNSET_VAR_X"]), "UNSET_VAR_X"), (dict(timeout=["gpu=3"]), "not a role"),
                       (dict(timeout=["-1"]), "positive"), (dict(ca_bundle="/nonexistent.pem"), "no such file"),
                       (dict(max_concurrency=0), "at least 1")):
        with pytest.raises(UsageError, match=match):
            Transport.from_flags(**bad)


def test_a_429_is_retried_counted_and_marked_when_it_never_ends() -> None:
    before = RETRIES.count
    with running_app(rate_limited(_ok(), every=2)) as url, Transport().client(base_url=url) as client:
        answers = [client.get("/x").status_code for _ in range(6)]
    # The limiter counts retries too: after the first, every request's first try is a 429 and its retry passes.
    assert answers == [200] * 6 and RETRIES.count - before == 5
    with running_app(rate_limited(_ok(), every=1)) as url:
        with replace(Transport(), retries=2).client(base_url=url) as client:
            resp = client.get("/x")
    assert resp.status_code == 429 and resp.extensions[EXHAUSTED] == 2


def test_max_rps_spaces_request_starts() -> None:
    with running_app(_ok()) as url, Transport.from_flags(max_rps=20).client(base_url=url) as client:
        started = time.monotonic()
        for _ in range(11):
            client.get("/x")
        took = time.monotonic() - started
    assert took >= 0.45, f"11 requests at 20 per second took {took:.2f} s"
