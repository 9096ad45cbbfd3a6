"""Schema checks of live responses against ``specs/`` (the SCHEMA family).

Validation is delegated to ``tokenspec.specs.openapi``, which owns the documents and caches one compiled
validator per (path, method, status, content type); this module only turns jsonschema errors into short,
readable assertion messages with the JSON path of each problem.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from tokenspec.core.phases import CLOCK
from tokenspec.specs.openapi import response_schema

MAX_PROBLEMS = 5


class SchemaViolation(AssertionError):
    """A response body that does not match the spec; the message lists the first few problems."""

    def __init__(self, where: str, problems: list[str], body: Any) -> None:
        shown = json.dumps(body, ensure_ascii=False)[:800] if not isinstance(body, str) else body[:800]
        lines = "\n".join(f"  - {p}" for p in problems[:MAX_PROBLEMS])
        more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        super().__init__(f"{where}: response violates the spec schema:\n{lines}{more}\n  body: {shown}")
        self.problems = problems


def validate_response(
    method: str, path: str, status: int, body: Any, content_type: str = "application/json"
) -> list[str]:
    """Problems of ``body`` against the spec's response schema; [] when valid or when the spec has none."""
    with CLOCK.timing("validation"):
        return _problems(method, path, status, body, content_type)


def _problems(method: str, path: str, status: int, body: Any, content_type: str) -> list[str]:
    validator = response_schema(path, method.lower(), status, content_type=content_type)
    if validator is None:
        return []
    problems = []
    for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        # A oneOf/anyOf failure says only "... is not valid under any of the given schemas"; the most
        # relevant sub-error (e.g. "'usage' is a required property") is what names the problem.
        if error.context:
            error = best_match(error.context)
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {_short(error)}")
    return problems


def _short(error: ValidationError) -> str:
    """The message without the echoed instance, which can be kilobytes long."""
    if error.validator == "required" or len(error.message) <= 200:
        return error.message[:200]
    return f"{error.validator} {error.validator_value!r:.80} failed".replace("\n", " ")
