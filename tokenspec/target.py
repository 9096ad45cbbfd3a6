"""What a target URL is and whether it answers, decided before any test runs.

A conformance verdict is only worth something if the target was reachable and spoke HTTP: a typo'd URL
must end the run with one line and exit code 2, never with a wall of failed tests.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from tokenspec.errors import UsageError

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


def check_reachable(url: str, timeout: float = 5.0) -> None:
    """Raise UsageError unless something answers HTTP at ``url`` (any status counts as an answer)."""
    try:
        with httpx.Client(timeout=timeout) as client:
            client.get(f"{url}/health")
    except httpx.HTTPError as exc:
        raise UsageError(f"target {url} is unreachable: {type(exc).__name__}: {exc}") from None


def check_model_served(url: str, model: str, timeout: float = 10.0) -> None:
    """Refuse (one line) a --model the target's /v1/models does not list; a target without the list is trusted."""
    try:
        with httpx.Client(timeout=timeout) as client:
            ids = [str(card["id"]) for card in client.get(f"{url}/v1/models").json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return
    if ids and model not in ids:
        raise UsageError(f"--model {model} is not served by {url} (its /v1/models lists: {', '.join(ids)})")


def served_model(url: str, timeout: float = 10.0) -> str:
    """The first model id of ``GET /v1/models``; the suite's default model name."""
    try:
        with httpx.Client(timeout=timeout) as client:
            resp = client.get(f"{url}/v1/models")
            resp.raise_for_status()
            data = resp.json()["data"]
            return str(data[0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise UsageError(f"cannot read the model name from {url}/v1/models ({exc}); pass --model NAME") from None
