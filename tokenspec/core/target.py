"""What a target URL is and whether it answers, decided before any test runs.

A conformance verdict is only worth something if the target was reachable and spoke HTTP: a typo'd URL
must end the run with one line and exit code 2, never with a wall of failed tests.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from tokenspec.core.errors import UsageError
from tokenspec.core.transport import DEFAULT_API_KEY_ENV, Transport

__all__ = [
    "ACCESS_PROBES", "KEY_FLAG", "ROUTE_ROOTS", "check_access", "check_llm_server", "check_model_served",
    "check_reachable", "normalise_url", "served_model",
]

#: First path segments of the routes the suite calls: a base URL that contains one is a route, not a base.
ROUTE_ROOTS = frozenset({"v1", "inference"})


def normalise_url(url: str) -> str:
    """Return ``url`` without a trailing slash, or raise UsageError if it is not an http(s) base URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"not an http(s) URL: {url!r} (expected e.g. http://127.0.0.1:8000)")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise UsageError(f"bad port in URL: {url!r}") from None
    if parts.query or parts.fragment:
        raise UsageError(f"a base URL takes no query or fragment: {url!r}")
    segments = [segment for segment in parts.path.split("/") if segment]
    route_at = next((i for i, segment in enumerate(segments) if segment in ROUTE_ROOTS), None)
    if route_at is not None:
        base = "/".join([f"{parts.scheme}://{parts.netloc}", *segments[:route_at]])
        raise UsageError(f"{url!r} includes a route; give the server's base URL, e.g. {base}"
                         " (the suite adds /v1/..., /inference/... itself)")
    return url.strip().rstrip("/")


def check_reachable(url: str, transport: Transport | None = None, role: str = "target", timeout: float = 5.0) -> None:
    """Raise UsageError unless something answers HTTP at ``url`` (any status counts as an answer)."""
    try:
        with (transport or Transport()).client(role, timeout=timeout) as client:
            client.get(f"{url}/health")
    except httpx.HTTPError as exc:
        raise UsageError(f"{role} {url} is unreachable: {type(exc).__name__}: {_tls_hint(exc)}") from None


def _tls_hint(exc: httpx.HTTPError) -> str:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return f"{text} (pass --ca-bundle FILE with the server's CA, or --insecure)"
    return text


#: The flag that gives each role its key.
KEY_FLAG = {"target": "--api-key-env NAME", "engine": "--api-key-env engine=NAME",
            "reference": "--api-key-env reference=NAME"}


#: Per role, the requests whose refusal (401/403) means the run's credentials do not open the server: the model
#: list, and one route of the role's own (an empty body: a server that authenticates first answers 401, else 4xx).
ACCESS_PROBES = {"target": (("GET", "/v1/models"), ("POST", "/v1/chat/completions/render")),
                 "engine": (("GET", "/v1/models"), ("POST", "/inference/v1/generate")),
                 "reference": (("GET", "/v1/models"), ("POST", "/v1/chat/completions"))}


def check_access(url: str, transport: Transport, role: str = "target", timeout: float = 10.0) -> None:
    """A 401 or 403 to a role's access probes stops the run before any test: every answer would be a refusal."""
    status, route = 0, ""
    try:
        with transport.client(role, timeout=timeout) as client:
            for method, route in ACCESS_PROBES[role]:
                status = client.request(method, f"{url}{route}", json={} if method == "POST" else None).status_code
                if status in (401, 403):
                    break
    except httpx.HTTPError:
        return
    if status in (401, 403):
        env = transport.access[role].api_key_env
        sent = transport.access[role].api_key()
        how = (f"the key in ${env} was refused" if sent else
               f"no API key was sent (${env} is not set)" if env else "no API key was sent to it")
        raise UsageError(f"{role} {url} answered {status} to {method} {route}: {how}; put the key in an environment"
                         f" variable and pass {KEY_FLAG[role]} (default {DEFAULT_API_KEY_ENV})")


def check_model_served(url: str, model: str, transport: Transport | None = None, timeout: float = 10.0) -> None:
    """Refuse (one line) a --model the target's /v1/models does not list; a target without the list is trusted,
    one that answers it with a web page is not an LLM server at all."""
    try:
        with (transport or Transport()).client("target", timeout=timeout) as client:
            resp = client.get(f"{url}/v1/models")
    except httpx.HTTPError:
        return
    check_llm_server(url, resp)
    try:
        ids = [str(card["id"]) for card in resp.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return
    if ids and model not in ids:
        raise UsageError(f"--model {model} is not served by {url} (its /v1/models lists: {', '.join(ids)})")


def served_model(url: str, transport: Transport | None = None, timeout: float = 10.0) -> str:
    """The first model id of ``GET /v1/models``; the suite's default model name."""
    where = f"cannot read the model name from {url}/v1/models"
    try:
        with (transport or Transport()).client("target", timeout=timeout) as client:
            resp = client.get(f"{url}/v1/models")
    except httpx.HTTPError as exc:
        raise UsageError(f"{where} ({type(exc).__name__}: {exc}); pass --model NAME") from None
    check_llm_server(url, resp)
    if not resp.is_success:
        raise UsageError(f"{where} (it answered {resp.status_code} {_media_type(resp)}); pass --model NAME")
    try:
        return str(resp.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise UsageError(f"{where} ({type(exc).__name__}: {exc}); pass --model NAME") from None


def check_llm_server(url: str, models: httpx.Response) -> None:
    """An OpenAI-compatible server answers ``/v1/models`` with JSON, or at worst a framework's plain-text 404; a web
    page there means the URL is some other web server, and every test would fail for that one reason."""
    if _media_type(models) in ("text/html", "application/xhtml+xml"):
        raise UsageError(f"{url} is not an LLM server: /v1/models answered {models.status_code}"
                         f" {_media_type(models)} (expected JSON from an OpenAI-compatible server)")


def _media_type(resp: httpx.Response) -> str:
    return resp.headers.get("content-type", "").split(";")[0].strip().lower() or "with no content type"
