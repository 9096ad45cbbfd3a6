"""Schema-driven fuzzing with schemathesis: no 5xx, no hang, and every answer in its documented shape.

schemathesis generates positive (schema-valid) and negative (schema-violating) requests for every operation
of render.yaml, derender.yaml, generate.yaml (sent to the engine) and utilities.yaml. Every field of every
request body is in reach, embedded generate responses of derender bodies included, because the cases come
from the request schemas themselves. A negative case that the spec's own request validator confirms is
invalid must be refused with a 4xx: a 2xx fails ERROR-015 (bad input rejected, not just survived). It is driven
programmatically, one test per operation and mode, because its pytest integration would bypass the suite's
fixtures. Runs are bounded (``--max-examples``, no shrinking) and reproducible: hypothesis is seeded with the
run's seed, which the plugin prints in the header. Failures are collected and reported together, each as a
curl command.

Cases are drawn from a copy of the spec whose arrays without a ``maxItems`` get one (FUZZ_MAX_ITEMS): unbounded,
hypothesis nests lists of choices of logprobs of alternatives into bodies of tens of KB, and drawing 25 derender
bodies took 13-21 s of a 30 s run. Every field stays in reach; lengths past the cap are the dedicated limit tests'
work (ERROR-014, STREAM-012, the max_model_len bounds). The oracle is still the spec itself.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from jsonschema.exceptions import best_match

from tokenspec.core.transport import EXHAUSTED
from tokenspec.core.yaml_files import load_yaml
from tokenspec.specs.openapi import SPEC_DIR, load_document
from tokenspec.suite.engine.checks import note_server
from tokenspec.suite.engine.client import RecordedRequest, check_schema
from tokenspec.suite.engine.gating import GET_ROLES, not_tested
from tokenspec.suite.oracles.schemas import SchemaViolation

DOCUMENTS = ("render.yaml", "derender.yaml", "generate.yaml", "utilities.yaml")
MAX_REPORTED = 5
# Generated generate requests may ask for thousands of tokens; the fuzzer is after validation, not load.
MAX_FUZZ_TOKENS = 16
FUZZ_MAX_ITEMS = 4


def _operations() -> list[tuple[str, str, str, str]]:
    """(document, METHOD, path, mode) for every operation; negative only where there is a body to break."""
    found = []
    for document in DOCUMENTS:
        for path, item in load_document(document).get("paths", {}).items():
            for method, op in item.items():
                if not isinstance(op, dict) or method.startswith("x-"):
                    continue
                modes = ["positive", "negative"] if "requestBody" in op else ["positive"]
                found += [(document, method.upper(), path, mode) for mode in modes]
    return found


OPERATIONS = _operations()


@functools.cache
def _schema(document: str):
    import schemathesis

    # Loading from a file lets schemathesis resolve the relative components.yaml refs itself.
    return schemathesis.openapi.from_path(str(_fuzz_spec_dir() / document))


def _capped(node: Any) -> Any:
    """``node`` with FUZZ_MAX_ITEMS as the ``maxItems`` of every array schema that sets none."""
    if isinstance(node, list):
        return [_capped(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _capped(value) for key, value in node.items()}
    kinds = out.get("type")
    if kinds == "array" or (isinstance(kinds, list) and "array" in kinds):
        out.setdefault("maxItems", FUZZ_MAX_ITEMS)
    return out


@functools.cache
def _fuzz_spec_dir() -> Path:
    """The spec's documents with their arrays capped, written once per process (their $refs are relative)."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tokenspec-fuzz-spec-"))
    atexit.register(shutil.rmtree, folder, True)
    for source in SPEC_DIR.glob("*.yaml"):
        document = _capped(load_yaml(source.read_text(encoding="utf-8")))
        (folder / source.name).write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    return folder


def _operation(document: str, method: str, path: str):
    return _schema(document)[path][method]


def _bounded(path: str, body: Any) -> Any:
    if path != "/inference/v1/generate" or not isinstance(body, dict):
        return body
    params = body.get("sampling_params")
    if isinstance(params, dict):
        tokens = params.get("max_tokens")
        if tokens is None or (isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > MAX_FUZZ_TOKENS):
            params["max_tokens"] = MAX_FUZZ_TOKENS
    return body


def _unsupported_role(capabilities, base: str, method: str, path: str, body: Any) -> bool:
    from tokenspec.suite.engine.gating import role_of

    role = role_of(base, method, path, body)
    decision = capabilities.decisions.get(role) if role else None
    return decision is not None and decision.status == "unsupported" and "501" in decision.evidence


def _violates(validator, body: Any) -> bool:
    """Whether the spec's request validator itself refuses ``body`` (schemathesis's own negative marking is
    not the oracle: a mutation can leave a body valid)."""
    if validator is None or body is None or isinstance(body, bytes | str):
        return False
    return next(iter(validator.iter_errors(body)), None) is not None


def _wire(case, base_url: str, shown: tuple[tuple[str, str], ...] = ()) -> RecordedRequest:
    """The request exactly as it goes on the wire: the body serialised here, once, so the reproduction that
    is printed is byte for byte what was sent (invalid bytes included, never a sanitised rendering)."""
    kwargs = case.as_transport_kwargs(base_url=base_url)
    headers = {k.lower(): v for k, v in (kwargs.get("headers") or {}).items() if not k.startswith("X-Schemathesis")}
    content: bytes | None = None
    if "json" in kwargs:
        content = json.dumps(kwargs["json"]).encode()
        headers.setdefault("content-type", "application/json")
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        content = data if isinstance(data, bytes) else str(data).encode()
    url = str(httpx.URL(kwargs["url"], params=kwargs.get("params") or None))
    return RecordedRequest(kwargs["method"], url, content, headers.get("content-type"), headers=shown)


def _send(http: httpx.Client, wire: RecordedRequest) -> httpx.Response:
    headers = {"content-type": wire.content_type} if wire.content_type else {}
    return http.request(wire.method, wire.url, content=wire.body, headers=headers)


@pytest.mark.req("ERROR-003", "ERROR-001", "SCHEMA-001", "ERROR-015")
@pytest.mark.parametrize(
    "document,method,path,mode", OPERATIONS, ids=[f"{m} {p} {mode}" for _, m, p, mode in OPERATIONS]
)
def test_fuzz_operation(request, target, capabilities, document, method, path, mode) -> None:
    from schemathesis import GenerationMode
    from schemathesis.core.errors import InvalidSchema

    from tokenspec.specs.openapi import request_schema

    base = "engine" if document == "generate.yaml" else "target"
    capabilities.require_route(base, method, path, None)
    if method == "GET" and path in GET_ROLES:
        capabilities.require(GET_ROLES[path])  # fuzzing a route the probe found missing would judge a 404 page
    base_url = target.generate_url if base == "engine" else target.url
    note_server(request.node, base, base_url)
    validator = request_schema(path, method.lower())
    operation = _operation(document, method, path)
    failures: list[str] = []
    sent = 0

    def record(wire: RecordedRequest, problem: str) -> None:
        if len(failures) < MAX_REPORTED:
            failures.append(f"{problem}\n    {wire.curl()}")

    throttled = 0
    shown = tuple(target.transport.shown_headers(base))
    with target.transport.client(base) as http:

        @seed(target.seed)
        @settings(
            max_examples=target.max_examples,
            phases=[Phase.explicit, Phase.generate],
            database=None,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
        def run(case) -> None:
            nonlocal sent, throttled
            if case.body is not None and not isinstance(case.body, bytes):
                case.body = _bounded(path, case.body)
            sent += 1
            wire = _wire(case, base_url, shown)
            try:
                resp = _send(http, wire)
            except httpx.TimeoutException:
                record(wire, f"no answer within {target.timeout:.0f}s")
                return
            except httpx.HTTPError as exc:
                record(wire, f"transport error {type(exc).__name__}: {exc}")
                return
            if EXHAUSTED in resp.extensions:
                throttled += 1  # still rate limited after every retry: this case judged nothing
                return
            if resp.status_code == 501 and _unsupported_role(capabilities, base, method, path, case.body):
                return  # a 501 for a role the probe found unsupported by its 501 is that absence, not a fault
            if resp.status_code >= 500:
                record(wire, f"[ERROR-003] answered {resp.status_code}: {resp.text[:300]}")
                return
            if mode == "negative" and resp.status_code < 300 and _violates(validator, case.body):
                error = best_match(validator.iter_errors(case.body))  # the relevant cause, not a root oneOf
                record(wire, f"[ERROR-015] accepted with {resp.status_code} a body the request schema refuses:"
                             f" at {error.json_path}: {error.message[:200]}")
                return
            try:
                check_schema(method, path, resp)
            except SchemaViolation as exc:
                tag = "" if str(exc).startswith("[") else "[SCHEMA-001] "  # error bodies are tagged ERROR-001
                record(wire, f"{tag}answered {resp.status_code} outside the spec: {str(exc)[:600]}")

        try:
            run()
        except InvalidSchema as exc:
            # schemathesis's generator, not the server: for some draws it cannot negate a schema with conditionals
            # ("not supported in canonical form"). The cases already sent are judged; none sent judges nothing.
            if not sent:
                not_tested(f"schemathesis could not generate a {mode} case: {str(exc).splitlines()[0][:200]}")
    assert sent, "schemathesis generated no case"
    if throttled == sent:
        not_tested(f"every one of the {sent} fuzzed requests was still rate limited (429/503) after its retries")
    assert not failures, (
        f"{method} {path} ({mode}, seed {target.seed}): {len(failures)} failing case(s), first ones:\n  "
        + "\n  ".join(failures)
    )
