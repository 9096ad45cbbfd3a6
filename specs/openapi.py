"""Load tokenspec's OpenAPI documents and validate JSON against their schemas.

All documents live side by side in ``specs/`` and refer to each other with relative ``$ref``s
(``components.yaml#/components/schemas/X``). One ``referencing.Registry`` holds every document
under a ``file:`` URI, so a validator built for any pointer resolves refs across files. The suite
validates every response it receives and the frontend every request, so validators are built once, cached,
and compiled: :class:`SpecValidator` asks jsonschema-rs whether an instance is valid (microseconds) and
jsonschema only for the errors of one that is not (their messages, paths and ``best_match``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tokenspec.core.yaml_files import load_yaml

__all__ = [
    "DOCUMENTS",
    "SPEC_DIR",
    "bundle",
    "component_validator",
    "document_uri",
    "find_operation",
    "load_all",
    "load_document",
    "registry",
    "request_schema",
    "response_schema",
    "schema_validator",
    "SpecValidator",
]

SPEC_DIR = Path(__file__).resolve().parent
#: The OpenAPI documents, in the order paths are searched (the plain coupled endpoints are found
#: before the optional token-native description of the same path).
DOCUMENTS: tuple[str, ...] = (
    "components.yaml",
    "render.yaml",
    "generate.yaml",
    "derender.yaml",
    "utilities.yaml",
    "coupled.yaml",
    "token-native.yaml",
)


def document_uri(name: str, spec_dir: Path = SPEC_DIR) -> str:
    """The ``file:`` URI a document is registered under (its refs resolve relative to it)."""
    return (spec_dir / name).resolve().as_uri()


def read_document(path: Path) -> dict[str, Any]:
    """Parse one YAML document; YAML's int keys (``200:``) are normalised to strings."""
    data = load_yaml(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: not a YAML mapping")
    return _stringify_keys(data)


def _stringify_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _stringify_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_stringify_keys(v) for v in node]
    return node


@functools.cache
def load_document(name: str) -> dict[str, Any]:
    """One installed document by file name (``"render.yaml"``); cached, do not mutate."""
    return read_document(SPEC_DIR / name)


def load_all() -> dict[str, dict[str, Any]]:
    """Every installed OpenAPI document by file name."""
    return {name: load_document(name) for name in DOCUMENTS}


@functools.cache
def registry() -> Registry:
    """A registry holding every document, so ``$ref``s across files resolve."""
    resources = [
        (document_uri(name), Resource.from_contents(doc, default_specification=DRAFT202012))
        for name, doc in load_all().items()
    ]
    return Registry().with_resources(resources)


@functools.cache
def compiled_registry() -> jsonschema_rs.Registry:
    """The same documents under the same URIs, for the compiled validator."""
    return jsonschema_rs.Registry([(document_uri(name), doc) for name, doc in load_all().items()])


class SpecValidator:
    """A Draft 2020-12 validator whose verdict is compiled (jsonschema-rs) and whose errors are jsonschema's.

    ``is_valid`` and a valid instance's ``iter_errors`` never run Python per node; an invalid instance's errors
    come from jsonschema, so messages and paths are what they always were. Both validators read the same
    schema; ``tests/test_compiled_validation.py`` holds them to the same accept/reject on generated bodies.
    Anything else (``schema``, ``evolve``...) is the jsonschema validator's.
    """

    def __init__(self, schema: Any, registry: Registry | None = None) -> None:
        self.python = Draft202012Validator(schema, registry=registry) if registry is not None else \
            Draft202012Validator(schema)
        kwargs: dict[str, Any] = {"registry": compiled_registry()} if registry is not None else {}
        self.compiled = jsonschema_rs.Draft202012Validator(schema, **kwargs)

    def is_valid(self, instance: Any) -> bool:
        try:
            return self.compiled.is_valid(instance)
        except (ValueError, TypeError, OverflowError):  # what Rust cannot hold (an int past 64 bits): jsonschema's
            return self.python.is_valid(instance)

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        if self.is_valid(instance):
            return iter(())
        return self.python.iter_errors(instance)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.python, name)


def _resolve_pointer(document: dict[str, Any], pointer: str) -> Any:
    node: Any = document
    for raw in [p for p in pointer.split("/") if p]:
        key = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


@functools.cache
def schema_validator(document: str, pointer: str) -> SpecValidator:
    """A Draft 2020-12 validator for the schema at ``document#pointer`` (cached).

    The schema is wrapped in a ``$ref`` from the document's URI so relative refs inside it resolve
    exactly as they would in the document.
    """
    _resolve_pointer(load_document(document), pointer)  # KeyError early for a bad pointer
    schema = {"$ref": f"{document_uri(document)}#{pointer}"}
    return SpecValidator(schema, registry=registry())


def component_validator(name: str) -> SpecValidator:
    """Validator for ``components.yaml#/components/schemas/<name>``."""
    return schema_validator("components.yaml", f"/components/schemas/{name}")


def _escape(path: str) -> str:
    return path.replace("~", "~0").replace("/", "~1")


def find_operation(path: str, method: str) -> tuple[str, str] | None:
    """``(document, pointer)`` of the operation ``method path`` in the first document that has it."""
    method = method.lower()
    for name in DOCUMENTS:
        op = load_document(name).get("paths", {}).get(path, {}).get(method)
        if isinstance(op, dict):
            return name, f"/paths/{_escape(path)}/{method}"
    return None


def _deref(document: str, node: Any) -> tuple[str, Any]:
    """Follow a Reference Object (``{"$ref": ...}`` on a response or body) to its target."""
    while isinstance(node, dict) and "$ref" in node:
        target = node["$ref"]
        file_part, _, pointer = target.partition("#")
        document = file_part or document
        node = _resolve_pointer(load_document(document), pointer)
    return document, node


def _media_validator(document: str, container_pointer: str, content_type: str) -> SpecValidator | None:
    doc, container = _deref(document, _resolve_pointer(load_document(document), container_pointer))
    content = container.get("content") if isinstance(container, dict) else None
    if not content or content_type not in content or "schema" not in content[content_type]:
        return None
    if doc == document:
        pointer = f"{container_pointer}/content/{_escape(content_type)}/schema"
    else:  # the container was a $ref into another document: validate against the referenced schema
        ref = _resolve_pointer(load_document(document), container_pointer)["$ref"]
        file_part, _, container_pointer = ref.partition("#")
        document, pointer = file_part or document, f"{container_pointer}/content/{_escape(content_type)}/schema"
    if content_type == "text/event-stream":
        return _chunk_validator(document, pointer)
    return schema_validator(document, pointer)


def _chunk_validator(document: str, event_pointer: str) -> SpecValidator:
    """The validator of one streamed chunk, the JSON in an event's ``data``.

    A document's event-stream schema is an event object whose data's ``contentSchema`` names the chunk, or an error
    event after a failure (how OpenAPI 3.1 tools such as schemathesis read a stream). The suite reads the data
    itself and judges an error event on its own (STREAM-006), so the chunk is judged by the chunk schemas alone,
    whose errors name the field that is wrong.
    """
    node: Any = {"$ref": f"#{event_pointer}"}
    while isinstance(node, dict) and "$ref" in node:
        file_part, _, event_pointer = node["$ref"].partition("#")
        document = file_part or document
        node = _resolve_pointer(load_document(document), event_pointer)
    pointer = f"{event_pointer}/properties/data/else/contentSchema"
    members = _resolve_pointer(load_document(document), pointer).get("anyOf")
    if members is None:
        return schema_validator(document, pointer)
    chunks = [f"{document_uri(document)}#{pointer}/anyOf/{i}" for i, member in enumerate(members)
              if not member.get("$ref", "").endswith("/StreamErrorEvent")]
    schema = {"$ref": chunks[0]} if len(chunks) == 1 else {"anyOf": [{"$ref": ref} for ref in chunks]}
    return SpecValidator(schema, registry=registry())


@functools.cache
def response_schema(
    path: str, method: str, status: int | str, content_type: str = "application/json"
) -> SpecValidator | None:
    """Validator for the response body of ``method path`` with ``status`` (cached).

    Lookup order for the status: exact code, ``4XX``/``5XX`` range, ``default``. ``None`` when the
    path/method is unknown or the response has no body schema for ``content_type``.
    """
    found = find_operation(path, method)
    if found is None:
        return None
    document, op_pointer = found
    responses = _resolve_pointer(load_document(document), op_pointer).get("responses", {})
    code = str(status)
    for key in (code, f"{code[:1]}XX", "default"):
        if key in responses:
            return _media_validator(document, f"{op_pointer}/responses/{key}", content_type)
    return None


@functools.cache
def request_schema(
    path: str, method: str, content_type: str = "application/json"
) -> SpecValidator | None:
    """Validator for the request body of ``method path`` (cached); ``None`` if it has no body."""
    found = find_operation(path, method)
    if found is None:
        return None
    document, op_pointer = found
    op = _resolve_pointer(load_document(document), op_pointer)
    if "requestBody" not in op:
        return None
    return _media_validator(document, f"{op_pointer}/requestBody", content_type)


def _localised(node: Any, document: str) -> Any:
    """``node`` with every ``$ref`` into a document made local (``components.yaml#/x`` -> ``#/x``)."""
    if isinstance(node, list):
        return [_localised(item, document) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _localised(value, document) for key, value in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and "#" in ref:
        file_part, _, pointer = ref.partition("#")
        if file_part and file_part not in DOCUMENTS:
            raise ValueError(f"{document}: $ref {ref!r} names no spec document")
        out["$ref"] = f"#{pointer}"
    return out


def _inlined(node: Any, components: dict[str, dict[str, Any]], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local ``$ref`` replaced by its target (the documents have no recursive schema)."""
    if isinstance(node, list):
        return [_inlined(item, components, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/"):
        if ref in seen:
            raise ValueError(f"recursive $ref {ref}")
        _, _, kind, name = ref.split("/", 3)
        target = _inlined(components[kind][name], components, (*seen, ref))
        rest = {key: _inlined(value, components, seen) for key, value in node.items() if key != "$ref"}
        if not rest:
            return target
        return {"allOf": [target], **rest} if isinstance(target, dict) and "type" not in rest else {**target, **rest}
    return {key: _inlined(value, components, seen) for key, value in node.items()}


def bundle(routes: dict[str, tuple[str, ...]], *, title: str = "tokenspec", version: str = "0.1.0",
           description: str | None = None, inline: bool = False) -> dict[str, Any]:
    """One self-contained OpenAPI 3.1 document of the operations ``routes`` names (path -> methods), as the
    spec documents state them, every ``$ref`` local: what a server serves at ``/openapi.json`` so that a generic
    OpenAPI tool judges it by the same documents the suite does. A route no document describes is left out; the
    components of every document are merged (a name two documents define differently is an error). ``inline``
    replaces each operation's ``$ref``s by their targets (the components stay, for readers)."""
    paths: dict[str, Any] = {}
    sources: list[str] = []
    for path, methods in routes.items():
        for method in methods:
            found = find_operation(path, method)
            if found is None:
                continue
            document = found[0]
            paths.setdefault(path, {})[method.lower()] = _localised(
                load_document(document)["paths"][path][method.lower()], document)
            if document not in sources:
                sources.append(document)
    components: dict[str, dict[str, Any]] = {}
    for document in ("components.yaml", *sources):
        for kind, entries in (load_document(document).get("components") or {}).items():
            merged = components.setdefault(kind, {})
            for name, value in entries.items():
                local = _localised(value, document)
                if name in merged and merged[name] != local:
                    raise ValueError(f"components.{kind}.{name} is defined differently in {document}")
                merged[name] = local
    if inline:  # every operation self-contained: generators that cannot follow a $ref inside not/if still can
        paths = _inlined(paths, components)
    info: dict[str, Any] = {"title": title, "version": version}
    info["description"] = description or (
        "The operations this server serves, as tokenspec's OpenAPI documents state them ("
        + ", ".join(sources) + ", components.yaml), bundled into one document.")
    return {"openapi": "3.1.0", "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema", "info": info,
            "paths": paths, "components": components}
