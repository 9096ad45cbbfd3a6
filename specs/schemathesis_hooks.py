"""schemathesis hooks that let a plain ``schemathesis run specs/<doc>.yaml`` judge by the whole spec.

A document's request schema states every refusal JSON Schema can; the rest it names under
``x-tokenspec-unstated`` (``specs/unstated.py``). Two kinds of schemathesis failure are then not the server's:

- "schema-valid request rejected" for a body that breaks one of those named rules (min_tokens above max_tokens):
  the refusal is the spec's, and vLLM makes it too;
- a failure whose positive / negative label the document's own compiled validator contradicts (schemathesis's
  coverage phase can mark a body valid that the schema refuses, and a mutation can leave a body valid).

Everything else is kept, so the run stays as strict as the documents. ``schemathesis.toml`` at the repository root
loads this module; schemathesis prints each failure it drops.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
import schemathesis

from tokenspec.core.transport import Transport
from tokenspec.specs.unstated import Limits, broken_rules, declared_rules

_REJECTED_VALID = "ST202"
_ACCEPTED_INVALID = "ST201"


@functools.lru_cache(maxsize=16)
def _limits(origin: str, authorization: str | None) -> Limits:
    """The deployment's max_model_len, from its /v1/models (None when it does not say)."""
    headers = {"authorization": authorization} if authorization else {}
    try:
        with Transport().client("target", origin, timeout=10.0) as client:
            models = client.get("/v1/models", headers=headers).json().get("data") or []
    except (httpx.HTTPError, ValueError, AttributeError):
        return Limits()
    lengths = [m.get("max_model_len") for m in models if isinstance(m, dict)]
    return Limits(max_model_len=next((n for n in lengths if isinstance(n, int)), None))


def _body_schema(case: Any) -> Any:
    bodies = case.operation.body
    return bodies[0] if len(bodies) else None


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep a failure unless the document itself says the server was right (see the module docstring)."""
    code = getattr(failure, "code", None)
    body = _body_schema(case)
    if code not in (_REJECTED_VALID, _ACCEPTED_INVALID) or body is None or not isinstance(case.body, dict):
        return True
    valid = body.is_valid(case.body)
    if code == _ACCEPTED_INVALID:
        return not valid
    if not valid:
        return False
    url = httpx.URL(str(response.request.url))
    limits = _limits(f"{url.scheme}://{url.netloc.decode()}", response.request.headers.get("authorization"))
    return next(broken_rules(case.body, declared_rules(body.resolved_schema), limits), None) is None
