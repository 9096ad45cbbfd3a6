"""The one place tokenspec builds HTTP clients: credentials, TLS, retries, rate and concurrency limits.

Real deployments sit behind API keys, TLS and rate limits. Every client of a run (the suite's, the probe's,
the fuzzer's, parity, target discovery, drift) is made by :meth:`Transport.client` for one *role* (target,
engine, reference), so a header, a CA bundle or a retry rule exists once.

Secrets are never values of this object: an API key is the *name* of an environment variable, a header's
value may be ``$NAME``. That keeps a ``Transport`` safe to print, to serialise for xdist workers, and to
record in a report; :meth:`Transport.secrets` reads the values only to redact them from what a run writes.
"""

from __future__ import annotations

import email.utils
import functools
import json
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from tokenspec.core.errors import UsageError
from tokenspec.core.liveness import LIVENESS
from tokenspec.core.phases import CLOCK

__all__ = [
    "Access", "DEFAULT_API_KEY_ENV", "DEFAULT_TIMEOUTS", "EXHAUSTED", "Header", "RETRIES", "RETRY_STATUSES", "ROLES",
    "Transport", "redact", "redact_folder", "retry_wait",
]

ROLES = ("target", "engine", "reference")
#: The environment variable an API key is read from when no --api-key-env says otherwise.
DEFAULT_API_KEY_ENV = "TOKENSPEC_API_KEY"
#: Statuses that mean "not now" (rate limit, overload): retried with bounded backoff, never a verdict.
RETRY_STATUSES = frozenset({429, 503})
#: Response extension set when a 429/503 was still the answer after every retry.
EXHAUSTED = "tokenspec_retries_exhausted"
DEFAULT_TIMEOUTS = {"target": 30.0, "engine": 60.0, "reference": 60.0}
_ENV_REF = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Header:
    """An extra request header; ``value`` is literal, or ``$NAME`` / ``${NAME}`` read from the environment."""

    name: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Header:
        name, sep, value = text.partition(":")
        if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name.strip()):
            raise UsageError(f"--header {text!r}: expected 'Name: value' (value may be $ENV_VAR)")
        return cls(name.strip(), value.strip())

    @property
    def env(self) -> list[str]:
        return [a or b for a, b in _ENV_REF.findall(self.value)]

    def resolved(self) -> str:
        def value_of(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in os.environ:
                raise UsageError(f"--header {self.name}: environment variable {name} is not set")
            return os.environ[name]

        return _ENV_REF.sub(value_of, self.value)


@dataclass(frozen=True)
class Access:
    """What one role's requests carry and how long they may take."""

    api_key_env: str | None = DEFAULT_API_KEY_ENV
    headers: tuple[Header, ...] = ()
    timeout: float = 30.0
    #: True when --api-key-env named the variable (then it must be set); the default may be unset.
    key_required: bool = False

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if value is None and self.key_required:
            raise UsageError(f"--api-key-env {self.api_key_env}: that environment variable is not set")
        return value or None

    def request_headers(self) -> dict[str, str]:
        """The real header values (secrets included): only ever handed to httpx."""
        out = {h.name: h.resolved() for h in self.headers}
        if key := self.api_key():
            out["Authorization"] = f"Bearer {key}"
        return out

    def shown_headers(self) -> list[tuple[str, str]]:
        """The headers as a reproduction shows them: every secret as the ``$NAME`` that holds it."""
        out = [(h.name, h.value) for h in self.headers]
        if self.api_key():
            out.append(("Authorization", f"Bearer ${self.api_key_env}"))
        return out


def _role_values(values: Iterable[str], flag: str) -> Iterator[tuple[str | None, str]]:
    """``[ROLE=]VALUE`` items: the role is None for a value that applies to every role."""
    for item in values:
        role, sep, rest = item.partition("=")
        if sep and role in ROLES:
            yield role, rest
        elif sep and re.fullmatch(r"\w+", role) and flag != "--header":
            raise UsageError(f"{flag} {item!r}: {role!r} is not a role ({', '.join(ROLES)})")
        else:
            yield None, item


@dataclass(frozen=True)
class Transport:
    """How every request of a run is sent. Build it with :meth:`from_flags` (CLI, pytest options) or directly."""

    access: Mapping[str, Access] = field(default_factory=lambda: {r: Access(timeout=t)
                                                                  for r, t in DEFAULT_TIMEOUTS.items()})
    ca_bundle: str | None = None
    insecure: bool = False
    max_concurrency: int | None = None
    max_rps: float | None = None
    #: Retries of a 429/503 answer before it is handed to the caller (marked with ``EXHAUSTED``).
    retries: int = 6
    #: The longest wait between two tries, whatever Retry-After asks.
    max_wait: float = 30.0

    @classmethod
    def from_flags(cls, *, api_key_env: Iterable[str] = (), header: Iterable[str] = (),
                   timeout: Iterable[str] = (), ca_bundle: str | None = None, insecure: bool = False,
                   max_concurrency: int | None = None, max_rps: float | None = None) -> Transport:
        """The values of ``--api-key-env``, ``--header`` and ``--timeout`` (each ``[ROLE=]VALUE``, repeatable;
        without ROLE for every role) and the TLS and rate flags, checked: a bad one is a UsageError."""
        keys: dict[str, str | None] = {}
        for role, name in _role_values(api_key_env, "--api-key-env"):
            if name and not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise UsageError(f"--api-key-env {name!r}: not an environment variable name")
            for r in [role] if role else ROLES:
                keys[r] = name or None
        headers: dict[str, list[Header]] = {r: [] for r in ROLES}
        for role, text in _role_values(header, "--header"):
            parsed = Header.parse(text)
            for r in [role] if role else ROLES:
                headers[r].append(parsed)
        timeouts = dict(DEFAULT_TIMEOUTS)
        for role, text in _role_values(timeout, "--timeout"):
            try:
                seconds = float(text)
            except ValueError:
                raise UsageError(f"--timeout {text!r}: expected [ROLE=]SECONDS") from None
            if seconds <= 0:
                raise UsageError(f"--timeout {text!r}: must be positive")
            for r in [role] if role else ROLES:
                timeouts[r] = seconds
        if ca_bundle is not None and not os.path.isfile(ca_bundle):
            raise UsageError(f"--ca-bundle {ca_bundle}: no such file")
        if max_concurrency is not None and max_concurrency < 1:
            raise UsageError("--max-concurrency must be at least 1")
        if max_rps is not None and max_rps <= 0:
            raise UsageError("--max-rps must be positive")
        access = {r: Access(api_key_env=keys.get(r, DEFAULT_API_KEY_ENV), headers=tuple(headers[r]),
                            timeout=timeouts[r], key_required=r in keys and keys[r] is not None) for r in ROLES}
        transport = cls(access=access, ca_bundle=ca_bundle, insecure=insecure,
                        max_concurrency=max_concurrency, max_rps=max_rps)
        for r in ROLES:
            transport.access[r].request_headers()  # an unset variable is a usage error now, not a 401 later
        return transport

    @classmethod
    def from_args(cls, args: Any, timeout: Iterable[str] | None = None) -> Transport:
        """From the parsed flags of ``add_transport_arguments`` (``timeout``: the command's own, when it has
        no ``[ROLE=]SECONDS`` flag)."""
        return cls.from_flags(api_key_env=args.api_key_env or (), header=args.header or (),
                              timeout=timeout if timeout is not None else (getattr(args, "timeout", None) or ()),
                              ca_bundle=args.ca_bundle, insecure=bool(args.insecure),
                              max_concurrency=args.max_concurrency, max_rps=args.max_rps)

    def flags(self) -> list[str]:
        """The ``tokenspec run`` flags that rebuild this transport (names of variables, never their values)."""
        out: list[str] = []
        keys = {r: self.access[r].api_key_env for r in ROLES}
        if len(set(keys.values())) == 1 and keys["target"] is not None:
            out += [] if keys["target"] == DEFAULT_API_KEY_ENV else ["--api-key-env", str(keys["target"])]
        else:
            out += [x for r in ROLES if keys[r] != DEFAULT_API_KEY_ENV
                    for x in ("--api-key-env", f"{r}={keys[r] or ''}")]
        shared = [h for h in self.access["target"].headers if all(h in self.access[r].headers for r in ROLES)]
        out += [x for h in shared for x in ("--header", f"{h.name}: {h.value}")]
        out += [x for r in ROLES for h in self.access[r].headers if h not in shared
                for x in ("--header", f"{r}={h.name}: {h.value}")]
        out += [x for r in ROLES if self.access[r].timeout != DEFAULT_TIMEOUTS[r]
                for x in ("--timeout", f"{r}={self.access[r].timeout:g}")]
        if self.ca_bundle:
            out += ["--ca-bundle", self.ca_bundle]
        if self.insecure:
            out.append("--insecure")
        if self.max_concurrency:
            out += ["--max-concurrency", str(self.max_concurrency)]
        if self.max_rps:
            out += ["--max-rps", f"{self.max_rps:g}"]
        return out

    # Serialisation for the pytest plugin's workers: names only, so the environment carries no secret twice.
    def to_json(self) -> str:
        return json.dumps({"access": {r: {"api_key_env": a.api_key_env, "timeout": a.timeout,
                                          "key_required": a.key_required,
                                          "headers": [[h.name, h.value] for h in a.headers]}
                                      for r, a in self.access.items()},
                           "ca_bundle": self.ca_bundle, "insecure": self.insecure,
                           "max_concurrency": self.max_concurrency, "max_rps": self.max_rps})

    @classmethod
    def from_json(cls, text: str) -> Transport:
        data = json.loads(text)
        access = {r: Access(a["api_key_env"], tuple(Header(*h) for h in a["headers"]), a["timeout"],
                            a["key_required"]) for r, a in data.pop("access").items()}
        return cls(access=access, **data)

    def per_process(self, processes: int) -> Transport:
        """This transport's limits shared out over ``processes`` (xdist workers), so the run as a whole keeps them."""
        if processes <= 1:
            return self
        return replace(self, max_concurrency=self.max_concurrency and max(1, self.max_concurrency // processes),
                       max_rps=self.max_rps and self.max_rps / processes)

    def without_key(self, role: str) -> Transport:
        """This transport with no API key for ``role`` (what a client without credentials sends)."""
        return replace(self, access={**self.access, role: replace(self.access[role], api_key_env=None)})

    def timeout(self, role: str) -> float:
        return self.access[role].timeout

    def secrets(self) -> dict[str, str]:
        """Every secret value this run sends, mapped to the ``$NAME`` that holds it (for redaction)."""
        out: dict[str, str] = {}
        for access in self.access.values():
            if access.api_key_env and (value := os.environ.get(access.api_key_env)):
                out[value] = f"${access.api_key_env}"
            for header in access.headers:
                for name in header.env:
                    if value := os.environ.get(name):
                        out[value] = f"${name}"
        return {value: ref for value, ref in out.items() if len(value) >= 4}

    def redact(self, text: str) -> str:
        return redact(text, self.secrets())

    def verify(self) -> ssl.SSLContext:
        """The TLS context of every connection (one per process and setting: building one loads the CA store,
        about 20 ms, which every client of every test used to pay)."""
        return _tls_context(self.ca_bundle, self.insecure)

    def client(self, role: str = "target", base_url: str = "", timeout: float | None = None) -> httpx.Client:
        """An httpx client for ``role``: its credentials and timeout, TLS settings, retries and limits."""
        access = self.access[role]
        inner = httpx.HTTPTransport(verify=self.verify())
        return httpx.Client(base_url=base_url, timeout=access.timeout if timeout is None else timeout,
                            headers=access.request_headers(), transport=_Sender(inner, _policy(self), role,
                                                                               self.verify()))

    def shown_headers(self, role: str) -> list[tuple[str, str]]:
        return self.access[role].shown_headers()

    def ssl_context(self, base_url: str) -> ssl.SSLContext | None:
        """The TLS context for a raw connection to ``base_url`` (None when it is plain http)."""
        return self.verify() if httpx.URL(base_url).scheme == "https" else None

    def connect(self, base_url: str, timeout: float, role: str = "target") -> socket.socket:
        """A raw connection to ``base_url`` (TLS when it is https, with this transport's verification), for a
        client that writes its own bytes; send :meth:`Access.request_headers` on it yourself."""
        url = httpx.URL(base_url)
        context = self.ssl_context(base_url)
        LIVENESS.raise_if_lost(base_url)
        try:
            sock = socket.create_connection((url.host, url.port or (443 if context else 80)), timeout=timeout)
        except OSError as exc:
            LIVENESS.after_error(role, base_url, exc, self.verify())
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock if context is None else context.wrap_socket(sock, server_hostname=url.host)


@functools.lru_cache(maxsize=8)
def _tls_context(ca_bundle: str | None, insecure: bool) -> ssl.SSLContext:
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    # httpx's own default store (certifi) unless a bundle is named, as `verify=True` gave before
    return ssl.create_default_context(cafile=ca_bundle) if ca_bundle else httpx.create_ssl_context()


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """``text`` with every secret value replaced by the ``$NAME`` that holds it."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, secrets[value])
    return text


def redact_folder(out: Path, secrets: Mapping[str, str]) -> None:
    """Every file of a report folder with each secret value replaced by the ``$NAME`` that holds it, as written
    plainly, JSON-escaped or HTML-escaped: a server that echoes a key into an answer cannot leak it to a report."""
    if not secrets or not out.is_dir():
        return
    import html

    pairs: list[tuple[bytes, bytes]] = []
    for value, ref in secrets.items():
        for form in {value, json.dumps(value)[1:-1], html.escape(value), html.escape(value, quote=False)}:
            pairs.append((form.encode(), ref.encode()))
    pairs.sort(key=lambda p: len(p[0]), reverse=True)
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        clean = data
        for secret, name in pairs:
            clean = clean.replace(secret, name)
        if clean != data:
            path.write_bytes(clean)


class _Retries:
    """How many 429/503 answers this process has retried (the plugin charges each test its share)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def note(self) -> None:
        with self._lock:
            self.count += 1


RETRIES = _Retries()


class _Policy:
    """Limits shared by every client of one process: requests in flight, and the spacing of request starts."""

    def __init__(self, max_concurrency: int | None, max_rps: float | None, retries: int, max_wait: float) -> None:
        self.slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self.interval = 1.0 / max_rps if max_rps else 0.0
        self.retries = retries
        self.max_wait = max_wait
        self._lock = threading.Lock()
        self._next_start = 0.0

    def acquire(self) -> None:
        if self.slots is not None:
            self.slots.acquire()
        if self.interval:
            with self._lock:
                now = time.monotonic()
                start = max(now, self._next_start)
                self._next_start = start + self.interval
            if start > now:
                time.sleep(start - now)

    def release(self) -> None:
        if self.slots is not None:
            self.slots.release()

    def wait(self, response: httpx.Response, attempt: int) -> float:
        return retry_wait(response.headers.get("retry-after"), attempt, self.max_wait)


def retry_wait(retry_after: str | None, attempt: int, max_wait: float = 30.0) -> float:
    """Seconds before try ``attempt + 1``: the server's Retry-After (seconds or an HTTP date), else exponential
    backoff from 0.25 s; never more than ``max_wait``."""
    header = (retry_after or "").strip()
    seconds: float | None = None
    if header:
        try:
            seconds = float(header)
        except ValueError:
            try:
                seconds = email.utils.parsedate_to_datetime(header).timestamp() - time.time()
            except (TypeError, ValueError):
                seconds = None
    if seconds is None:
        seconds = 0.25 * 2 ** attempt
    return min(max_wait, max(0.0, seconds))


_POLICIES: dict[tuple[int | None, float | None, int, float], _Policy] = {}
_POLICIES_LOCK = threading.Lock()


def _policy(transport: Transport) -> _Policy:
    key = (transport.max_concurrency, transport.max_rps, transport.retries, transport.max_wait)
    with _POLICIES_LOCK:
        if key not in _POLICIES:
            _POLICIES[key] = _Policy(*key)
        return _POLICIES[key]


class _Released(httpx.SyncByteStream):
    """A response body that gives its concurrency slot back when it is closed (streams hold theirs); a body cut
    off because its server went away is the server's loss, not a verdict (tokenspec/core/liveness.py)."""

    def __init__(self, stream: Any, release: Any, started: float, lost: Any) -> None:
        self._stream = stream
        self._release = release
        self._started = started
        self._lost = lost

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except httpx.TransportError as exc:
            self._lost(exc)
            raise

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                CLOCK.add("http", time.perf_counter() - self._started)
                release()


class _Sender(httpx.BaseTransport):
    """Sends through ``inner`` within the policy's limits; a 429/503 is retried after the wait it asks for; a
    request that got no answer asks whether its server is lost (tokenspec/core/liveness.py), and none is sent to a
    server the run has lost."""

    def __init__(self, inner: httpx.HTTPTransport, policy: _Policy, role: str = "target",
                 verify: ssl.SSLContext | bool = True) -> None:
        self.inner = inner
        self.policy = policy
        self.role = role
        self.verify = verify

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        LIVENESS.raise_if_lost(request.url)

        def lost(error: BaseException) -> None:
            LIVENESS.after_error(self.role, request.url, error, self.verify)

        for attempt in range(self.policy.retries + 1):
            self.policy.acquire()
            try:
                response = self.inner.handle_request(request)
            except httpx.TransportError as exc:
                self.policy.release()
                lost(exc)
                raise
            except BaseException:
                self.policy.release()
                raise
            last = attempt == self.policy.retries
            if response.status_code not in RETRY_STATUSES or last:
                if response.status_code in RETRY_STATUSES:
                    response.extensions[EXHAUSTED] = attempt
                return httpx.Response(response.status_code, headers=response.headers,
                                      stream=_Released(response.stream, self.policy.release, started, lost),
                                      extensions=response.extensions)
            wait = self.policy.wait(response, attempt)
            response.read()
            response.close()
            self.policy.release()
            RETRIES.note()
            time.sleep(wait)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.inner.close()

