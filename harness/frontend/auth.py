"""API-key protection of the frontend, drawn the way vLLM's ``--api-key`` draws it (AUTH-001..003).

vLLM 0.32 guards every path under ``/v1``, ``/v2``, ``/inference`` and ``/cohere``, lets ``OPTIONS`` and
every other path (``/health``, ``/tokenize``, ``/version``, ``/metrics``) through, and compares SHA-256
digests in constant time. It answers ``{"error": "Unauthorized"}``; this frontend answers the OpenAI
error object instead (AUTH-002), with ``WWW-Authenticate: Bearer`` (RFC 6750).

Only digests of the keys are kept, so no key sits in the frontend's configuration or its repr.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def digests_from_env(name: str) -> tuple[bytes, ...]:
    """The digests of the keys in environment variable ``name`` (comma-separated, as vLLM's VLLM_API_KEY)."""
    import os

    from tokenspec.core.errors import UsageError

    keys = [k.strip() for k in os.environ.get(name, "").split(",") if k.strip()]
    if not keys:
        raise UsageError(f"--api-key-env {name}: that environment variable is not set (or empty)")
    return tuple(digest(k) for k in keys)


class ApiKeyGate:
    """ASGI middleware: a guarded request without ``Authorization: Bearer <one of the keys>`` gets a 401."""

    def __init__(self, app: ASGIApp, digests: tuple[bytes, ...]) -> None:
        self.app = app
        self.digests = digests

    def _authorised(self, scope: Scope) -> bool:
        header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key:
            return False
        given = digest(key.strip())
        matched = False
        for expected in self.digests:  # every digest is compared: the time says nothing of which one matched
            matched |= hmac.compare_digest(given, expected)
        return matched

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if not path.startswith(GUARDED_PREFIXES) or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": {"message": "missing or invalid API key: send `Authorization: Bearer <key>`",
                                     "type": "AuthenticationError", "param": None, "code": 401}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
