"""Every constraint of a request schema, violated once on a request the target accepts.

Random fuzzing meets an enum, a bound or a required key only when its seed happens to draw it, so whether a
derender refuses a ``finish_reason`` outside the enum inside the generate response it is given used to depend
on the run's seed. This module walks an operation's request schema (``$ref``, ``allOf``, ``oneOf``/``anyOf``,
nested objects and arrays, the embedded generate responses of derender bodies included) alongside a valid
body, and writes one mutation per constraint it finds: a wrong type, a value outside an enum, a value past each
bound (``minimum``, ``maximum``, lengths, item counts), a required key removed, and the same for optional
fields the valid body leaves out. The spec's own request validator is the oracle: a mutation it accepts is
dropped (it is not bad input), and each kept one carries the validator's own words for what it breaks.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from referencing._core import Resolver

from tokenspec.specs.openapi import registry, request_schema

_MISSING = object()
_WRONG_TYPE: dict[str, Any] = {"integer": "7", "number": "1.5", "string": 12345, "boolean": "true",
                               "array": {"not": "a list"}, "object": ["not", "an", "object"], "null": 0}
MAX_DEPTH = 40  # schema hops ($ref, allOf, oneOf, properties), a guard against recursive schemas


@dataclass(frozen=True)
class Violation:
    """One bad body: where it was changed, which constraint, and the spec validator's reason."""

    where: str
    constraint: str
    body: Any
    reason: str

    def describe(self) -> str:
        return f"{self.where}: {self.constraint} ({self.reason})"


def violations(path: str, method: str, valid_body: dict[str, Any]) -> list[Violation]:
    """One mutation of ``valid_body`` per constraint of the request schema of ``method path`` (deduplicated, each
    confirmed invalid by the spec's validator)."""
    validator = request_schema(path, method.lower())
    if validator is None:
        return []
    resolver = registry().resolver()
    out: list[Violation] = []
    seen: set[str] = set()
    for where, constraint, body in _walk(validator.schema, resolver, valid_body, (), valid_body, 0):
        key = json.dumps(body, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        errors = list(validator.iter_errors(body))
        if errors:
            error = _deepest(best_match(errors))
            out.append(Violation(where, constraint, body, f"at {error.json_path}: {error.message[:160]}"))
    return out


def _deepest(error: ValidationError) -> ValidationError:
    """The innermost cause under a oneOf/anyOf (the root "not valid under any of the given schemas" names
    nothing), else the error itself."""
    causes = [_deepest(e) for e in error.context or []]
    return max(causes, key=lambda e: len(e.absolute_path), default=error) if causes else error


def _at(root: Any, trail: tuple, value: Any) -> Any:
    """A deep copy of ``root`` with the node at ``trail`` set to ``value`` (``_MISSING`` deletes it)."""
    body = copy.deepcopy(root)
    node = body
    for step in trail[:-1]:
        node = node[step]
    if value is _MISSING:
        del node[trail[-1]]
    else:
        node[trail[-1]] = value
    return body


def _name(trail: tuple) -> str:
    text = ""
    for step in trail:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "(body)"


def _walk(schema: Any, resolver: Resolver, value: Any, trail: tuple, root: Any, depth: int
          ) -> Iterator[tuple[str, str, Any]]:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return
    if "$ref" in schema:
        resolved = resolver.lookup(schema["$ref"])
        yield from _walk(resolved.contents, resolved.resolver, value, trail, root, depth + 1)
    for sub in schema.get("allOf") or []:
        yield from _walk(sub, resolver, value, trail, root, depth + 1)
    for key in ("oneOf", "anyOf"):
        branches = [b for b in schema.get(key) or [] if not (isinstance(b, dict) and b.get("type") == "null")]
        for branch in _matching(branches, resolver, value):
            yield from _walk(branch, resolver, value, trail, root, depth + 1)
    if trail:  # the body itself is replaced by nothing here: its own shape is ERROR-005/007's business
        yield from _scalar_mutations(schema, value, trail, root)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name in value:
                yield _name((*trail, name)), "required", _at(root, (*trail, name), _MISSING)
        for name, sub in properties.items():
            if name in value:
                yield from _walk(sub, resolver, value[name], (*trail, name), root, depth + 1)
            else:
                yield from _walk(sub, resolver, _MISSING, (*trail, name), root, depth + 1)
    elif isinstance(value, list) and value and isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], resolver, value[0], (*trail, 0), root, depth + 1)


def _matching(branches: list[Any], resolver: Resolver, value: Any) -> list[Any]:
    """The branches of a oneOf/anyOf the value takes (all of them for an absent value)."""
    if value is _MISSING:
        return branches[:1]
    from jsonschema import Draft202012Validator

    taken = [b for b in branches if Draft202012Validator(b, registry=registry(), _resolver=resolver).is_valid(value)]
    return taken or branches[:1]


def _scalar_mutations(schema: dict[str, Any], value: Any, trail: tuple, root: Any) -> Iterator[tuple[str, str, Any]]:
    where = _name(trail)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    if types:
        wrong = next((v for t, v in _WRONG_TYPE.items() if t not in types and not _type_ok(v, types)), None)
        if wrong is not None:
            yield where, f"type {'/'.join(types)}", _at(root, trail, wrong)
    if "enum" in schema:
        yield where, "enum", _at(root, trail, "tokenspec-not-in-the-enum" if any(
            isinstance(e, str) for e in schema["enum"]) else 987654321)
    if "const" in schema:
        yield where, "const", _at(root, trail, "tokenspec-not-the-const")
    numeric = "integer" if "integer" in types else "number"
    for key, delta in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1), ("exclusiveMaximum", 0)):
        bound = schema.get(key)
        if isinstance(bound, int | float) and not isinstance(bound, bool):
            past = bound + delta
            yield where, f"{key} {bound}", _at(root, trail, int(past) if numeric == "integer" else past)
    if isinstance(schema.get("minLength"), int) and schema["minLength"] > 0:
        yield where, f"minLength {schema['minLength']}", _at(root, trail, "a" * (schema["minLength"] - 1))
    if isinstance(schema.get("maxLength"), int) and schema["maxLength"] < 10_000:
        yield where, f"maxLength {schema['maxLength']}", _at(root, trail, "a" * (schema["maxLength"] + 1))
    if isinstance(schema.get("minItems"), int) and schema["minItems"] > 0:
        items = value[: schema["minItems"] - 1] if isinstance(value, list) else []
        yield where, f"minItems {schema['minItems']}", _at(root, trail, items)
    if isinstance(schema.get("maxItems"), int) and schema["maxItems"] < 1000:
        item = value[0] if isinstance(value, list) and value else 1
        yield where, f"maxItems {schema['maxItems']}", _at(root, trail, [item] * (schema["maxItems"] + 1))


def _type_ok(value: Any, types: list[str]) -> bool:
    kinds = {"integer": int, "number": int | float, "string": str, "boolean": bool, "array": list, "object": dict}
    for t in types:
        if t == "null" and value is None:
            return True
        kind = kinds.get(t)
        numeric_bool = t in ("integer", "number") and isinstance(value, bool)
        if kind is not None and isinstance(value, kind) and not numeric_bool:
            return True
    return False
