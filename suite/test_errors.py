"""Errors: every endpoint answers bad input with a 4xx and the OpenAI error object (ERROR-*).

The client validates every 4xx body against the error schema (ERROR-001), so most tests only send the bad
request and check the status. /tokenize and /detokenize are left out of the oversized-body test: a server
without a body limit tokenizes the whole payload, which can keep a shared server busy for minutes.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tokenspec.core.transport import retry_wait
from tokenspec.suite.engine.checks import note_server
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.oracles.builders import (
    ENDPOINT_ROUTES,
    chat_derender,
    choice,
    generate_response,
    valid_body,
)

#: Per endpoint: a required field and a wrongly typed value for it.
_WRONG_FIELD: dict[str, tuple[str, Any]] = {
    "chat-render": ("messages", "hello"),
    "completions-render": ("prompt", {"text": "x"}),
    "messages-render": ("messages", "hello"),
    "responses-render": ("input", {"text": "x"}),
    "chat-derender": ("generate_response", [1, 2]),
    "completions-derender": ("generate_responses", {"choices": []}),
    "generate": ("token_ids", "1 2 3"),
    "tokenize": ("prompt", {"x": 1}),
    "detokenize": ("tokens", "1 2"),
}
#: name -> (client fixture, path, required field, a wrongly typed value for it)
ENDPOINTS: dict[str, tuple[str, str, str, Any]] = {name: (*ENDPOINT_ROUTES[name], *_WRONG_FIELD[name])
                                                   for name in ENDPOINT_ROUTES}
NAMES = list(ENDPOINTS)
OVERSIZED = 64 << 20
# Bodies of the endpoint's own shape, padded inside a string: a server without a size limit must parse all
# of it and cannot answer a shape error instead (that would hide a missing limit).
_CHAT = b'"messages":[{"role":"user","content":"'
OVERSIZED_SHAPES = {
    "chat-render": (b'{"model":"MODEL",' + _CHAT, b'"}]}'),
    "completions-render": (b'{"model":"MODEL","prompt":"', b'"}'),
    "messages-render": (b'{"model":"MODEL","max_tokens":2,' + _CHAT, b'"}]}'),
    "responses-render": (b'{"model":"MODEL","input":"', b'"}'),
    "chat-derender": (b'{"model":"MODEL","generate_response":{"choices":[{"index":0,"token_ids":[5]}]},'
                      b'"chat_request":{' + _CHAT, b'"}]}}'),
    "completions-derender": (b'{"model":"MODEL","generate_responses":[{"choices":[{"index":0,"token_ids":[5]}]}],'
                             b'"completion_request":{"prompt":"', b'"}}'),
    "generate": (b'{"model":"MODEL","token_ids":[5],"sampling_params":{"max_tokens":1},"request_id":"', b'"}'),
}


def endpoint(request: pytest.FixtureRequest, name: str):
    client_name, path, _, _ = ENDPOINTS[name]
    return request.getfixturevalue(client_name), path


@pytest.mark.req("ERROR-005", "ERROR-001")
@pytest.mark.parametrize("name", NAMES)
def test_malformed_json_rejected(request, name) -> None:
    client, path = endpoint(request, name)
    resp = client.request("POST", path, content=b"{not json", content_type="application/json")
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("ERROR-005", "ERROR-001")
@pytest.mark.parametrize("name", NAMES)
def test_invalid_utf8_body_rejected_with_the_error_object(request, name) -> None:
    """JSON text must be UTF-8; a stray 0xFF byte inside a string is malformed JSON like any other."""
    client, path = endpoint(request, name)
    resp = client.request("POST", path, content=b'{"model": "\xff"}', content_type="application/json")
    assert resp.status_code == 400, resp.text[:300]


@pytest.mark.req("ERROR-006", "ERROR-001")
@pytest.mark.parametrize("name", NAMES)
def test_non_json_content_type_rejected(request, target, codec, name) -> None:
    import json

    client, path = endpoint(request, name)
    content = json.dumps(valid_body(name, target.model, codec)).encode()
    resp = client.request("POST", path, content=content, content_type="text/plain")
    assert resp.status_code in (400, 415), resp.text[:300]


@pytest.mark.req("ERROR-004", "ERROR-001")
@pytest.mark.parametrize("name", NAMES)
def test_unknown_model_is_404_with_param_model(request, codec, name) -> None:
    client, path = endpoint(request, name)
    resp = client.post(path, valid_body(name, "tokenspec-no-such-model", codec))
    assert resp.status_code == 404, resp.text[:300]
    assert resp.json()["error"].get("param") == "model"


@pytest.mark.req("ERROR-007", "ERROR-001")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fault", ["missing", "wrong-type"])
def test_missing_or_wrongly_typed_field_rejected(request, target, codec, name, fault) -> None:
    client, path = endpoint(request, name)
    _, _, field, wrong = ENDPOINTS[name]
    body = valid_body(name, target.model, codec)
    if fault == "missing":
        body.pop(field)
    else:
        body[field] = wrong
    resp = client.post(path, body)
    assert resp.status_code in (400, 422), f"{fault} {field}: {resp.status_code} {resp.text[:300]}"


@pytest.mark.req("ERROR-008", "ERROR-003", "ERROR-001")
# 64 MiB per route: the dialect renders are left to the declared-length test (ERROR-014), which sends 1 KiB of it
@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("tokenize", "detokenize", "messages-render",
                                                                "responses-render")])
def test_oversized_body_rejected(request, target, name) -> None:
    client, path = endpoint(request, name)
    head, tail = OVERSIZED_SHAPES[name]
    head = head.replace(b"MODEL", target.model.encode())
    content = head + b"a" * (OVERSIZED - len(head) - len(tail)) + tail
    resp = client.request("POST", path, content=content, content_type="application/json")
    assert resp.status_code in (400, 413), f"a {len(content) >> 20} MiB body answered {resp.status_code}"


@pytest.mark.req("ERROR-009")
@pytest.mark.parametrize("name", [n for n in NAMES if n != "messages-render"])  # Anthropic requires model
@pytest.mark.parametrize("how", ["omitted", "null"])
def test_model_omitted_or_null_selects_the_served_model(request, target, codec, name, how) -> None:
    client, path = endpoint(request, name)
    body = valid_body(name, None, codec)
    if how == "null":
        body["model"] = None
    resp = client.post(path, body)
    assert resp.status_code == 200, resp.text[:300]
    out = resp.json()
    if isinstance(out, dict) and out.get("model") is not None:
        assert out["model"] == target.model


@pytest.mark.req("ERROR-011")
@pytest.mark.parametrize("name", NAMES)
def test_unknown_keys_are_ignored(request, target, codec, name) -> None:
    client, path = endpoint(request, name)
    body = valid_body(name, target.model, codec) | {"tokenspec_unknown_key": {"nested": [1, 2]}}
    if name == "generate":
        body["sampling_params"]["tokenspec_unknown_param"] = 3
    resp = client.post(path, body)
    assert resp.status_code == 200, resp.text[:300]


@pytest.mark.req("ERROR-002")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fault", ["malformed-json", "unknown-model"])
def test_error_code_equals_http_status(request, codec, name, fault) -> None:
    client, path = endpoint(request, name)
    if fault == "malformed-json":
        resp = client.request("POST", path, content=b"[1,", content_type="application/json")
    else:
        resp = client.post(path, valid_body(name, "tokenspec-no-such-model", codec))
    assert resp.status_code >= 400, resp.text[:300]
    assert resp.json()["error"]["code"] == resp.status_code


PARAM_CASES = {
    "max_tokens": ("generate", "max_tokens", lambda b: b["sampling_params"].update(max_tokens=0)),
    "temperature": ("generate", "temperature", lambda b: b["sampling_params"].update(temperature=-1)),
    "cache_salt": ("chat-render", "cache_salt", lambda b: b.update(cache_salt="a/b")),
    "prompt": ("completions-render", "prompt", lambda b: b.update(prompt=[])),
}


@pytest.mark.req("ERROR-010")
@pytest.mark.parametrize("case", list(PARAM_CASES))
def test_error_param_names_the_offending_field(request, target, codec, case) -> None:
    name, field, spoil = PARAM_CASES[case]
    client, path = endpoint(request, name)
    body = valid_body(name, target.model, codec)
    spoil(body)
    resp = client.post(path, body)
    assert 400 <= resp.status_code < 500, resp.text[:300]
    param = resp.json()["error"].get("param")
    assert param is None or field in param, f"param {param!r} does not name {field}"


@pytest.mark.req("ERROR-012")
def test_bound_violation_message_states_limit_and_value(api, target, codec, max_model_len) -> None:
    body = chat_derender(target.model, generate_response(choice([5] * (max_model_len + 1))))
    resp = api.post("/v1/chat/completions/derender", body)
    assert resp.status_code == 400, resp.text[:300]
    message = resp.json()["error"]["message"]
    assert str(max_model_len) in message and str(max_model_len + 1) in message, message[:300]


@pytest.mark.req("ERROR-014")
@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("tokenize", "detokenize")])
def test_oversized_body_refused_from_its_declared_length(request, target, name) -> None:
    """Declare a 64 MiB body, send 1 KiB of it, and wait: a server that checks Content-Length answers at once;
    one that reads (and would parse) the whole body first is still waiting when the test gives up."""
    from urllib.parse import urlsplit

    client, path = endpoint(request, name)
    client.check_route("POST", path)
    note_server(request.node, client.role, client.base_url)
    url = urlsplit(client.base_url)
    extra = "".join(f"{k}: {v}\r\n" for k, v in client.transport.access[client.role].request_headers().items())
    head = (f"POST {url.path}{path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {OVERSIZED}\r\nConnection: close\r\n\r\n").encode()
    for attempt in range(client.transport.retries + 1):
        with client.transport.connect(client.base_url, timeout=5, role=client.role) as sock:
            sock.sendall(head + OVERSIZED_SHAPES[name][0] + b"a" * 1024)
            try:
                answer = sock.recv(4096)
            except TimeoutError:
                answer = b""
        throttled = re.match(rb"HTTP/1\.[01] (429|503) ", answer)
        if not throttled:
            break
        retry_after = re.search(rb"(?im)^retry-after:\s*(\S+)", answer)
        time.sleep(retry_wait(retry_after and retry_after.group(1).decode(), attempt, client.transport.max_wait))
    else:
        not_tested(f"POST {path} kept answering {throttled.group(1).decode()} (rate limited) to the raw request")
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else None
    assert status in ("413", "400"), (
        f"with only 1 KiB of a declared {OVERSIZED >> 20} MiB body sent, the server "
        + ("was still waiting after 5 s: it reads the whole body before checking its size" if status is None
           else f"answered {status}"))
