"""A server behind an API key: what it refuses without the key, and how (AUTH-*).

Judged when the run sends the target a key (feature ``api-key``): each request here is sent again without it,
with another scheme, and with a key the server cannot hold. The rest of the suite runs with the key, so a
server that refuses its own key never gets this far (the runner stops on a 401 from /v1/models).
"""

from __future__ import annotations

import pytest

from tokenspec.suite.engine.checks import LAST_REQUEST
from tokenspec.suite.engine.client import SuiteClient
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles.builders import ENDPOINT_ROUTES, valid_body
from tokenspec.suite.oracles.schemas import validate_response

#: What a refused request carries in place of the run's key.
REFUSED = {"no Authorization": None, "Basic scheme": "Basic dG9rZW5zcGVjOnRva2Vuc3BlYw==",
           "unknown key": "Bearer tokenspec-not-the-key"}
ROUTES = ["models", *(name for name in ENDPOINT_ROUTES if name not in ("tokenize", "detokenize"))]


def _keyless(request: pytest.FixtureRequest, name: str) -> tuple[SuiteClient, str, str, dict | None]:
    """The suite client of ``name``'s server with the run's key taken off, the method, path and a valid body."""
    if name == "models":
        client, method, path, body = request.getfixturevalue("api"), "GET", "/v1/models", None
    else:
        fixture, path = ENDPOINT_ROUTES[name]
        client, method = request.getfixturevalue(fixture), "POST"
        body = valid_body(name, request.getfixturevalue("target").model, request.getfixturevalue("codec"))
    access = client.transport.access[client.role]
    if not access.api_key():
        not_tested(f"the run sends the {client.role} no API key; pass --api-key-env {client.role}=NAME")
    keyless = SuiteClient(client.base_url, client.timeout, gate=client.gate, role=client.role,
                          transport=client.transport.without_key(client.role))
    request.node.stash.setdefault(LAST_REQUEST, []).append(keyless)  # the failing request's curl is keyless
    request.addfinalizer(keyless.close)
    return keyless, method, path, body


@pytest.mark.req("AUTH-001")
@pytest.mark.parametrize("credentials", list(REFUSED), ids=list(REFUSED))
@pytest.mark.parametrize("name", ROUTES)
def test_a_request_without_the_key_is_refused(request, name, credentials) -> None:
    client, method, path, body = _keyless(request, name)
    header = REFUSED[credentials]
    resp = client.request(method, path, json_body=body, headers={"Authorization": header} if header else None,
                          validate=False)
    assert resp.status_code == 401, f"{method} {path} with {credentials} answered {resp.status_code}: {resp.text[:300]}"


@pytest.mark.req("AUTH-002")
def test_the_refusal_is_the_error_object(request) -> None:
    client, method, path, body = _keyless(request, "chat-render")
    resp = client.request(method, path, json_body=body, validate=False)
    assert resp.status_code == 401, f"{method} {path} without a key answered {resp.status_code}"
    try:
        answer = resp.json()
    except ValueError:
        answer = resp.text[:300]
    problems = validate_response(method, path, 401, answer)
    assert not problems and answer["error"]["code"] == 401, (
        f"the 401 body {answer!r} is not the error object: {problems}")
    assert resp.headers.get("www-authenticate", "").lower().startswith("bearer"), (
        f"WWW-Authenticate is {resp.headers.get('www-authenticate')!r}, not the Bearer scheme")


@pytest.mark.req("AUTH-003")
def test_health_answers_without_the_key(request) -> None:
    client, _, _, _ = _keyless(request, "models")
    resp = client.request("GET", "/health", validate=False)
    assert resp.status_code == 200, f"GET /health without a key answered {resp.status_code}: {resp.text[:200]}"
