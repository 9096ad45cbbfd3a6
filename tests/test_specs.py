"""Tests of tokenspec.specs: lint, catalogue, schema validators and drift.

No server is needed: drift runs against a real ``http.server`` on loopback serving a small
hand-written openapi.json (a labelled test double), and the GenerateResponse below was captured
from vLLM 0.32.0's engine (`/inference/v1/generate`, tiny model, logprobs 1).
"""

from __future__ import annotations

import copy
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenspec.core.errors import UsageError
from tokenspec.specs import catalogue, openapi
from tokenspec.specs.drift import drift
from tokenspec.specs.lint import lint

VLLM_GENERATE_RESPONSE: dict[str, Any] = {
    "request_id": "generate-tokens-t1",
    "model": "tokenspec-tiny",
    "created": 1795945295,
    "usage": {
        "prompt_tokens": 4,
        "total_tokens": 7,
        "completion_tokens": 3,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    },
    "prompt_logprobs": None,
    "prompt_token_id_logprobs": None,
    "prompt_token_ids": None,
    "mm_placeholders": None,
    "metrics": None,
    "kv_transfer_params": None,
    "ec_transfer_params": None,
    "output_mode": "tokens",
    "choices": [
        {
            "index": 0,
            "finish_reason": "length",
            "stop_reason": None,
            "token_ids": [638, 654, 350],
            "routed_experts": None,
            "sampling_mask": None,
            "weight_versions": [{"version": "default", "start": 0, "end": 3}],
            "logprobs": {
                "content": [
                    {
                        "token_id": 638,
                        "logprob": -6.72,
                        "rank": 166,
                        "top_logprobs": [{"token_id": 638, "logprob": -6.72, "rank": 166}],
                    }
                ]
            },
        }
    ],
}

GENERATE = "/inference/v1/generate"


# --- lint and catalogue ---------------------------------------------------------------------


def test_installed_spec_lints_clean() -> None:
    assert lint() == []


def test_catalogue_has_at_least_90_requirements_in_every_area() -> None:
    reqs = catalogue.load_catalogue()
    assert len(reqs) >= 90
    areas = {r.area for r in reqs.values()}
    assert areas >= {
        "RENDER",
        "GENERATE",
        "DERENDER",
        "STREAM",
        "ERROR",
        "UTIL",
        "PARITY",
        "TOKNAT",
        "SCHEMA",
    }
    assert all(r.level in catalogue.LEVELS for r in reqs.values())
    assert {r.feature for r in reqs.values() if r.feature} <= catalogue.load_features()


@pytest.fixture
def spec_copy(tmp_path: Path) -> Path:
    """A writable copy of the installed spec, so a test can break it."""
    target = tmp_path / "specs"
    shutil.copytree(catalogue.SPEC_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return target


def _edit_requirements(spec_dir: Path, stem: str, edit: Any) -> None:
    path = spec_dir / "requirements" / f"{stem}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["requirements"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_lint_of_an_untouched_copy_is_clean(spec_copy: Path) -> None:
    assert lint(spec_copy) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            lambda reqs: reqs.append(copy.deepcopy(reqs[0])), "RENDER-001: duplicate ID", id="duplicate-id"
        ),
        pytest.param(
            lambda reqs: reqs[0].update(anchor="render.yaml#/paths/~1nowhere/post"),
            "RENDER-001: anchor 'render.yaml#/paths/~1nowhere/post' does not resolve",
            id="dangling-anchor",
        ),
        pytest.param(
            lambda reqs: reqs[0].update(anchor="nosuch.yaml#/paths"),
            "names no spec document",
            id="unknown-document",
        ),
        pytest.param(
            lambda reqs: reqs[0].update(feature="telepathy"),
            "unknown feature 'telepathy'",
            id="unknown-feature",
        ),
        pytest.param(
            lambda reqs: reqs[0].update(level="MUSTN'T"), 'level "MUSTN\'T" not one of', id="bad-level"
        ),
        pytest.param(
            lambda reqs: reqs[0].update(level="SHOULD"), "does not contain its level keyword", id="level-word"
        ),
        pytest.param(lambda reqs: reqs[0].update(id="RENDER-01"), "ID does not match AREA-NNN", id="bad-id"),
        pytest.param(
            lambda reqs: reqs[0].update(id="GENERATE-999"), "does not match its file's area", id="wrong-area"
        ),
        pytest.param(
            lambda reqs: reqs[0].update(statement="Render MUST do one thing. It MUST do another."),
            "more than one sentence",
            id="two-sentences",
        ),
    ],
)
def test_lint_catches_a_broken_catalogue(spec_copy: Path, edit: Any, expected: str) -> None:
    _edit_requirements(spec_copy, "render", edit)
    problems = lint(spec_copy)
    assert any(expected in p for p in problems), problems


def test_lint_catches_an_unanchored_path(spec_copy: Path) -> None:
    # Retarget every requirement that anchors /version somewhere else.
    _edit_requirements(
        spec_copy,
        "utilities",
        lambda reqs: [
            r.update(anchor="utilities.yaml#/paths/~1health/get") for r in reqs if "version" in r["anchor"]
        ],
    )
    assert "utilities.yaml: path /version is anchored by no requirement" in lint(spec_copy)


def test_lint_catches_an_invalid_openapi_document(spec_copy: Path) -> None:
    path = spec_copy / "generate.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["paths"]["/inference/v1/generate"]["post"]["responses"] = "nope"
    path.write_text(yaml.safe_dump(doc))
    assert any(p.startswith("generate.yaml: not a valid OpenAPI 3.1 document") for p in lint(spec_copy))


# --- validators -----------------------------------------------------------------------------


def test_generate_validator_accepts_a_real_vllm_response() -> None:
    validator = openapi.response_schema(GENERATE, "post", 200)
    assert validator is not None
    assert list(validator.iter_errors(VLLM_GENERATE_RESPONSE)) == []


@pytest.mark.parametrize(
    ("pointer_edit", "why"),
    [
        (lambda r: r["choices"][0].update(token_ids=[638, -1]), "negative token id"),
        (lambda r: r["choices"][0].update(finish_reason="exhausted"), "unknown finish_reason"),
        (
            lambda r: r["choices"][0]["logprobs"]["content"][0].update(token_id=-5),
            "negative logprob token id",
        ),
        (lambda r: r["usage"].update(prompt_tokens=-1), "negative count"),
        (lambda r: r.pop("choices"), "missing choices"),
    ],
)
def test_generate_validator_rejects_contract_violations(pointer_edit: Any, why: str) -> None:
    broken = copy.deepcopy(VLLM_GENERATE_RESPONSE)
    pointer_edit(broken)
    validator = openapi.response_schema(GENERATE, "post", 200)
    assert validator is not None
    assert not validator.is_valid(broken), why


def test_stream_chunk_schema_allows_one_choice_only() -> None:
    validator = openapi.response_schema(GENERATE, "post", 200, "text/event-stream")
    assert validator is not None
    choice = {"index": 0, "finish_reason": None, "token_ids": [5]}
    assert validator.is_valid({"request_id": "x", "choices": [choice]})
    assert validator.is_valid(
        {"request_id": "x", "choices": [], "usage": {"prompt_tokens": 1, "total_tokens": 2}}
    )
    assert not validator.is_valid({"request_id": "x", "choices": [choice, dict(choice, index=1)]})


def test_error_responses_fall_back_to_range_and_require_the_error_object() -> None:
    error = {"error": {"message": "bad", "type": "BadRequestError", "param": None, "code": 400}}
    for status in (400, 404, 422, 503):
        validator = openapi.response_schema("/v1/chat/completions/derender", "post", status)
        assert validator is not None, status
        assert validator.is_valid(dict(error, error=dict(error["error"], code=status)))
    v400 = openapi.response_schema(GENERATE, "post", 400)
    assert v400 is not None
    assert not v400.is_valid({"detail": "Not Found"})
    assert not v400.is_valid({"error": {"message": "bad", "type": "x"}})  # no code


def test_request_schemas_and_components() -> None:
    render = openapi.request_schema("/v1/completions/render", "post")
    assert render is not None
    for prompt in ("hi", ["a", "b"], [1, 2], [[1], [2, 3]]):
        assert render.is_valid({"prompt": prompt}), prompt
    for prompt in ([], [[]], [-1], ["a", [1]]):
        assert not render.is_valid({"prompt": prompt}), prompt
    state = openapi.component_validator("DerenderStreamState")
    assert state.is_valid({"prev_tokens": ["a"], "prefix_offset": 0, "read_offset": 1, "role_sent": True})
    assert not state.is_valid({"read_offset": -1})
    assert openapi.response_schema("/nowhere", "get", 200) is None


def test_derender_request_is_chosen_by_stream() -> None:
    validator = openapi.request_schema("/v1/chat/completions/derender", "post")
    assert validator is not None
    non_stream = {"generate_response": {"choices": [{"index": 0, "token_ids": [305]}]}}
    stream = {"stream": True, "generate_chunk": {"choices": [{"index": 0, "token_ids": [305]}]}}
    assert validator.is_valid(non_stream)
    assert validator.is_valid(stream)
    assert not validator.is_valid(dict(non_stream, stream=True))  # stream body without generate_chunk


def test_validators_are_cached() -> None:
    assert openapi.response_schema(GENERATE, "post", 200) is openapi.response_schema(GENERATE, "post", 200)


# --- drift ----------------------------------------------------------------------------------

# Test double: a minimal server openapi.json in pydantic's style (anyOf-with-null, $refs).
THEIR_OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "double", "version": "0"},
    "paths": {
        GENERATE: {
            "post": {
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/GenerateRequest"}}
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/only/theirs": {"get": {"responses": {"200": {"description": "ok"}}}},
    },
    "components": {
        "schemas": {
            "GenerateRequest": {
                "type": "object",
                "properties": {
                    "token_ids": {"type": "array", "items": {"type": "integer"}},
                    "model": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "priority": {"type": "string"},
                    "surprise": {"type": "integer"},
                    "sampling_params": {
                        "type": "object",
                        "properties": {"n": {"type": "integer"}, "vendor_knob": {"type": "number"}},
                    },
                },
            }
        }
    },
}


class _Handler(http.server.BaseHTTPRequestHandler):
    body: bytes = b""
    content_type: str = "application/json"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return


def _serve(body: bytes, content_type: str = "application/json") -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"body": body, "content_type": content_type})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def openapi_double() -> Iterator[str]:
    """A real loopback HTTP server answering THEIR_OPENAPI at /openapi.json (test double)."""
    yield from _serve(json.dumps(THEIR_OPENAPI).encode())


def test_drift_against_a_local_openapi_document(openapi_double: str) -> None:
    report = drift(openapi_double, timeout=5)
    (entry,) = [e for e in report.endpoints if e.path == GENERATE]
    assert "request.surprise" in entry.extra
    assert "request.sampling_params.vendor_knob" in entry.extra
    assert "request.stream" in entry.missing
    assert "request.sampling_params.temperature" in entry.missing
    assert any(m.startswith("request.priority:") for m in entry.type_mismatch)
    # pydantic's anyOf-with-null equals our nullable string: no difference reported for model.
    assert not any(m.startswith("request.model") for m in entry.type_mismatch + entry.missing + entry.extra)
    assert "response: <body schema> (spec only)" in entry.missing
    assert "GET /only/theirs" in report.only_theirs
    assert "POST /v1/chat/completions/render" in report.only_ours
    assert json.loads(json.dumps(report.to_dict()))["target"] == openapi_double
    markdown = report.to_markdown()
    assert f"## POST {GENERATE}" in markdown and "`request.surprise`" in markdown


def test_drift_raises_usage_error_when_unreachable() -> None:
    with pytest.raises(UsageError, match="cannot fetch"):
        drift("http://127.0.0.1:9", timeout=2)


def test_drift_raises_usage_error_on_non_json() -> None:
    for url in _serve(b"<html>nope</html>", "text/html"):
        with pytest.raises(UsageError, match="did not answer JSON"):
            drift(url, timeout=5)


RELEASE_DOCUMENTS = Path(__file__).resolve().parents[1] / "reports" / "drift" / "openapi"


@pytest.mark.parametrize("release", ["0.32", "0.33", "0.34"])
def test_every_difference_with_a_vllm_release_is_documented(release: str) -> None:
    """The committed openapi.json of each release's render server leaves nothing undocumented in specs/drift.yaml."""
    from tokenspec.specs.drift import drift_documents

    theirs = json.loads((RELEASE_DOCUMENTS / f"vllm-{release}.0-render.json").read_text())
    report = drift_documents(release, theirs, generation=release)
    assert len(report.reasons) > 100, "the comparison found almost nothing: the documents did not load"
    assert not report.undocumented, report.undocumented


def test_a_new_field_or_a_wrong_generation_is_undocumented() -> None:
    """Break what drift checks: a field vLLM adds is undocumented, and so is a versioned difference read at a
    generation its entry does not cover."""
    from tokenspec.specs.drift import drift_documents

    theirs = json.loads((RELEASE_DOCUMENTS / "vllm-0.34.0-render.json").read_text())
    request = theirs["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    request["brand_new_knob"] = {"type": "integer"}
    report = drift_documents("0.34", theirs, generation="0.34")
    assert report.undocumented == ["POST /v1/chat/completions/derender: request.chat_request.brand_new_knob",
                                   "POST /v1/chat/completions/render: request.brand_new_knob"], report.undocumented
    misread = drift_documents("0.32", json.loads((RELEASE_DOCUMENTS / "vllm-0.34.0-render.json").read_text()),
                              generation="0.32")
    assert any("prev_tokens" in d for d in misread.undocumented), misread.undocumented
