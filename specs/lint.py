"""Lint the spec: OpenAPI validity, requirement catalogue hygiene, and path coverage.

The catalogue is what ties spec sentence -> test -> result -> report, so its invariants are checked
mechanically: unique, well-formed IDs whose prefix matches their file, a level from LEVELS stated in
one sentence, an anchor that resolves to an existing node, and a feature from the closed list.
Every path in the documents must be anchored by at least one requirement, so nothing in the spec
is untestable by construction. ``lint()`` returns messages instead of raising so a caller (CLI, test)
can show them all at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openapi_spec_validator import validate

from .catalogue import LEVELS, SPEC_DIR, read_catalogue, read_features, read_generations
from .openapi import DOCUMENTS, read_document
from .parser_families import REASONING_FAMILIES, TOOL_FAMILIES

__all__ = ["lint"]

_ID = re.compile(r"^[A-Z]+-\d{3}$")
# A sentence boundary: terminal punctuation followed by whitespace and an upper-case letter.
_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")


def _pointer_exists(document: Any, pointer: str) -> bool:
    node = document
    for raw in [p for p in pointer.split("/") if p]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return False
    return True


def _lint_documents(spec_dir: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    problems: list[str] = []
    docs: dict[str, dict[str, Any]] = {}
    for stray in sorted(p.name for p in spec_dir.glob("*.yaml")):
        if stray not in DOCUMENTS and stray not in ("features.yaml", "parsers.yaml", "drift.yaml"):
            problems.append(f"{stray}: not listed in tokenspec.specs.openapi.DOCUMENTS")
    for name in DOCUMENTS:
        path = spec_dir / name
        if not path.is_file():
            problems.append(f"{name}: missing")
            continue
        try:
            docs[name] = read_document(path)
            validate(docs[name], base_uri=path.resolve().as_uri())
        except Exception as exc:  # noqa: BLE001 - every failure becomes one lint line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problems.append(f"{name}: not a valid OpenAPI 3.1 document: {first}")
    return problems, docs


def lint(spec_dir: Path = SPEC_DIR) -> list[str]:
    """All problems found in the spec under ``spec_dir``; an empty list means clean."""
    problems, docs = _lint_documents(spec_dir)
    try:
        features = read_features(spec_dir)
        generations = read_generations(spec_dir)
    except (OSError, AttributeError) as exc:
        problems.append(f"features.yaml: unreadable ({exc})")
        features = set()
        generations = {}
    try:
        catalogue = read_catalogue(spec_dir)
    except Exception as exc:  # noqa: BLE001
        return [*problems, f"requirements: unreadable ({exc})"]

    seen: set[str] = set()
    anchored: set[tuple[str, str]] = set()
    for req in catalogue:
        where = f"{req.id or '<no id>'}"
        if not _ID.match(req.id):
            problems.append(f"{where}: ID does not match AREA-NNN")
        elif req.id.split("-")[0] != req.area:
            problems.append(f"{where}: ID prefix does not match its file's area {req.area}")
        if req.id in seen:
            problems.append(f"{where}: duplicate ID")
        seen.add(req.id)
        if req.level not in LEVELS:
            problems.append(f"{where}: level {req.level!r} not one of {', '.join(LEVELS)}")
        elif req.level not in req.statement:
            problems.append(f"{where}: statement does not contain its level keyword {req.level}")
        statement = req.statement.strip()
        if not statement.endswith("."):
            problems.append(f"{where}: statement does not end with a full stop")
        if _SENTENCE_BREAK.search(statement.rstrip(".")):
            problems.append(f"{where}: statement is more than one sentence")
        if req.feature is not None and req.feature not in features:
            problems.append(f"{where}: unknown feature {req.feature!r}")
        for bound in ("since", "until"):
            if getattr(req, bound) is not None and getattr(req, bound) not in generations:
                problems.append(f"{where}: {bound} {getattr(req, bound)!r} is not a generation of features.yaml")
        doc_name, _, pointer = req.anchor.partition("#")
        if doc_name not in docs:
            problems.append(f"{where}: anchor {req.anchor!r} names no spec document")
        elif not _pointer_exists(docs[doc_name], pointer):
            problems.append(f"{where}: anchor {req.anchor!r} does not resolve")
        else:
            parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/") if p]
            if len(parts) >= 2 and parts[0] == "paths":
                anchored.add((doc_name, parts[1]))

    profile = _profile_schema(spec_dir).get("properties") or {}
    declared = (profile.get("generation") or {}).get("enum")
    if declared is not None and declared != list(generations):
        problems.append(f"profile.schema.json: generation enum {declared} differs from features.yaml's"
                        f" generations {list(generations)}")
    parsers = (profile.get("parsers") or {}).get("properties") or {}
    for kind, families in (("reasoning", REASONING_FAMILIES), ("tool", TOOL_FAMILIES)):
        enum = (parsers.get(kind) or {}).get("enum")
        if enum is not None and enum != [*families, "none"]:
            problems.append(f"profile.schema.json: parsers.{kind} enum {enum} differs from the described families"
                            f" {[*families, 'none']} (specs/parser_families.py)")
    for name, doc in docs.items():
        for path in doc.get("paths") or {}:
            if (name, path) not in anchored:
                problems.append(f"{name}: path {path} is anchored by no requirement")
    return problems


def _profile_schema(spec_dir: Path) -> dict[str, Any]:
    """profile.schema.json (empty where the spec folder has none)."""
    import json

    path = spec_dir / "profile.schema.json"
    return json.loads(path.read_text()) if path.is_file() else {}
