"""The HTTP client every conformance test talks through.

It does three things a bare httpx client does not, so individual tests stay short:

1. every call has a timeout, and a timeout or connection failure becomes a test failure naming the URL;
2. every response body is validated against the spec's schema for its path, method and status, so the
   schema family covers every response the suite ever receives (SCHEMA-* requirements);
3. the last request is remembered, so a failing test's report carries a ``curl`` command that replays it.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tokenspec.core.transport import EXHAUSTED, RETRY_STATUSES, Transport
from tokenspec.specs.openapi import component_validator
from tokenspec.suite.engine.checks import note_check
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles.schemas import SchemaViolation, validate_response

MAX_REPRODUCE_BODY = 16_384
_SEQUENCE = itertools.count()


@dataclass
class RecordedRequest:
    method: str
    url: str
    body: bytes | None
    content_type: str | None
    seq: int = field(default_factory=lambda: next(_SEQUENCE))
    #: The run's extra headers as a reproduction shows them (secrets as ``$NAME``, expanded by the shell).
    headers: tuple[tuple[str, str], ...] = ()

    def curl(self) -> str:
        parts = ["curl", "-sS", "-X", self.method, self.url]
        if self.content_type:
            parts += ["-H", f"content-type: {self.content_type}"]
        head = " ".join(shlex.quote(p) for p in parts) + "".join(f" -H {_shell_expanding(f'{name}: {value}')}"
                                                                  for name, value in self.headers)
        if self.body is not None:
            if len(self.body) > MAX_REPRODUCE_BODY:
                return (
                    head
                    + f" --data-binary @body.json  # body of {len(self.body)} bytes, too large to inline:"
                    " re-run the test with -k to regenerate it"
                )
            try:
                text = self.body.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is None or "\x00" in text:
                # Bytes no shell argument can carry: printf writes them exactly, curl reads them from stdin.
                return f"printf {shlex.quote(_printf_escape(self.body))} | {head} --data-binary @-"
            return f"{head} --data-binary {shlex.quote(text)}"
        return head


def _shell_expanding(text: str) -> str:
    """``text`` in double quotes: ``$NAME`` expands (a secret the shell holds), nothing else is special."""
    return '"' + re.sub(r'(["\\`]|\$(?!\{?\w))', r"\\\1", text) + '"'


def _printf_escape(body: bytes) -> str:
    """A printf format that prints ``body`` byte for byte (octal escapes for everything not plain ASCII)."""
    out = []
    for byte in body:
        char = chr(byte)
        if char == "%":
            out.append("%%")
        elif char == "\\":
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


@dataclass
class SuiteClient:
    """One test's client for one base URL (target, engine or reference)."""

    base_url: str
    timeout: float
    #: Called with (method, path, body) before anything is sent: ends the test as not tested / unsupported
    #: when the route is one the probe found missing (see suite/engine/gating.py), so such a 404 is never a failure.
    gate: Callable[[str, str, Any], None] | None = None
    validate: bool = True
    history: list[RecordedRequest] = field(default_factory=list, repr=False)
    #: Which server of the run this is ("target", "engine", "reference"): a failure is charged to it.
    role: str = "target"
    transport: Transport = field(default_factory=Transport)

    def __post_init__(self) -> None:
        self._http = self.transport.client(self.role, self.base_url, self.timeout)
        self._shown = tuple(self.transport.shown_headers(self.role))

    def close(self) -> None:
        self._http.close()

    @property
    def last_request(self) -> RecordedRequest | None:
        return self.history[-1] if self.history else None

    def _record(self, method: str, path: str, body: bytes | None, content_type: str | None,
                extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.history.append(RecordedRequest(method, f"{self.base_url}{path}", body, content_type,
                                            headers=self._shown + extra))

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        validate: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send a request; with ``validate`` (default on) the response must match the spec's schema. ``headers``
        are sent as given (never secrets: the reproduction prints them)."""
        if json_body is not None:
            content = json.dumps(json_body, ensure_ascii=False).encode()
            content_type = content_type or "application/json"
        extra = dict(headers or {})
        headers = {**({"content-type": content_type} if content_type else {}), **extra}
        if self.gate is not None:
            self.gate(method, path, json_body if json_body is not None else content)
        self._record(method, path, content, content_type, tuple(extra.items()))
        try:
            resp = self._http.request(method, path, content=content, headers=headers)
        except httpx.TimeoutException:
            raise AssertionError(f"{method} {self.base_url}{path} timed out after {self.timeout:.0f}s") from None
        except httpx.HTTPError as exc:
            raise AssertionError(f"{method} {self.base_url}{path} failed: {type(exc).__name__}: {exc}") from None
        _not_throttled(method, f"{self.base_url}{path}", resp)
        if validate if validate is not None else self.validate:
            check_schema(method, path, resp)
        return resp

    def check_route(self, method: str, path: str, body: Any = None) -> None:
        """Apply the route gate for a request sent some other way (a raw socket)."""
        if self.gate is not None:
            self.gate(method, path, body)

    def post(self, path: str, body: Any, **kw: Any) -> httpx.Response:
        return self.request("POST", path, json_body=body, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post_ok(self, path: str, body: Any) -> Any:
        """POST and demand a 2xx; returns the parsed JSON body."""
        resp = self.post(path, body)
        assert resp.status_code < 300, f"POST {path} answered {resp.status_code}: {resp.text[:500]}"
        return resp.json()

    def stream_events(self, path: str, body: Any) -> Iterator[Any]:
        """POST a streaming request and yield each SSE ``data:`` payload parsed as JSON, up to ``[DONE]``.

        Each event is validated against the spec's chunk schema; the stream must end with ``[DONE]``.
        """
        content = json.dumps(body).encode()
        if self.gate is not None:
            self.gate("POST", path, body)
        self._record("POST", path, content, "application/json")
        done = False
        try:
            with self._http.stream(
                "POST", path, content=content, headers={"content-type": "application/json"}
            ) as resp:
                if resp.status_code >= 300:
                    resp.read()
                    _not_throttled("POST", f"{self.base_url}{path}", resp)
                    check_schema("POST", path, resp)
                    raise AssertionError(f"streaming POST {path} answered {resp.status_code}: {resp.text[:500]}")
                ctype = resp.headers.get("content-type", "")
                assert ctype.startswith("text/event-stream"), f"stream content-type is {ctype!r}"
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    event = json.loads(data)
                    if isinstance(event, dict) and "error" in event and "choices" not in event:
                        _failed_midway(path, event, resp.iter_lines())
                    if self.validate:
                        problems = validate_response("POST", path, 200, event, content_type="text/event-stream")
                        if problems:
                            raise SchemaViolation(f"SSE event of POST {path}", problems, event)
                        note_check()
                    yield event
        except httpx.TimeoutException:
            raise AssertionError(f"streaming POST {self.base_url}{path} timed out after {self.timeout:.0f}s") from None
        assert done, f"stream of POST {path} ended without `data: [DONE]`"


def _failed_midway(path: str, event: dict[str, Any], rest: Iterator[str]) -> None:
    """A stream that failed after it started must say so in the stream: the error object as a ``data:`` event, then
    ``[DONE]`` and nothing else (STREAM-006). Checked on every stream read, since no client input provokes it."""
    problems = [e.message for e in component_validator("ErrorResponse").iter_errors(event)]
    after = [line[5:].strip() for line in rest if line.startswith("data:")]
    if problems or after[:1] != ["[DONE]"] or len(after) > 1:
        shape = "is not the error object: " + "; ".join(problems[:2]) if problems else "is well formed"
        raise AssertionError(f"[STREAM-006] POST {path} failed after the stream started: the error event"
                             f" {json.dumps(event)[:300]} {shape}, and the events after it are {after[:3]} where"
                             " only [DONE] belongs")
    raise AssertionError(f"POST {path} failed after the stream started: {json.dumps(event['error'])[:300]}")


def _not_throttled(method: str, url: str, resp: httpx.Response) -> None:
    """A 429/503 still there after every retry says nothing of the requirement under test: not tested."""
    if resp.status_code in RETRY_STATUSES and EXHAUSTED in resp.extensions:
        not_tested(f"{method} {url} kept answering {resp.status_code} (rate limited or overloaded) after"
                   f" {resp.extensions[EXHAUSTED]} retries; lower --max-rps or --max-concurrency")


def check_schema(method: str, path: str, resp: httpx.Response) -> None:
    """Raise SchemaViolation when a JSON response body does not match the spec for its status."""
    ctype = resp.headers.get("content-type", "")
    if not ctype.startswith("application/json"):
        if resp.status_code >= 400:
            raise SchemaViolation(
                f"[ERROR-001] {method} {path} -> {resp.status_code}",
                [f"error responses must be application/json with the error object, got {ctype!r}"],
                resp.text[:300],
            )
        return
    try:
        body = resp.json()
    except ValueError:
        where = f"{method} {path} -> {resp.status_code}"
        raise SchemaViolation(where, ["body is not valid JSON"], resp.text[:300]) from None
    problems = validate_response(method, path, resp.status_code, body)
    if problems:
        tag = "[ERROR-001] " if resp.status_code >= 400 else ""  # an error answer without the error object
        raise SchemaViolation(f"{tag}{method} {path} -> {resp.status_code}", problems, body)
    note_check()
