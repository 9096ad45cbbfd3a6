"""Compare a server's own ``openapi.json`` with tokenspec's spec ("drift").

For every endpoint (path + method) present in both, list the request-body and 200-response fields
that are missing (in ours, not theirs), extra (in theirs, not ours) or typed differently. Only the
top level and one nested level of properties are compared, after resolving ``$ref``s; pydantic's
``anyOf: [X, {type: null}]`` is read as a nullable X, and ``oneOf``/``anyOf`` unions are merged, so
that equivalent spellings do not show up as differences. Endpoints only in one side are listed too.
A difference is either fixed in the spec or documented in ``specs/drift.yaml`` with its reason (out of scope,
a runtime behaviour a schema cannot show, a generation's change); ``undocumented`` lists the rest, which
``tokenspec spec drift --strict`` refuses.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from tokenspec.core.errors import UsageError
from tokenspec.core.transport import Transport
from tokenspec.core.yaml_files import load_yaml

from .openapi import DOCUMENTS, load_document

__all__ = ["Documented", "DriftReport", "EndpointDrift", "drift", "drift_documents", "load_documented"]

_METHODS = ("get", "put", "post", "delete", "patch")
_NULL = "null"


@dataclass
class EndpointDrift:
    """Field-level differences of one endpoint present in both documents."""

    method: str
    path: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    type_mismatch: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when the endpoint shows no difference at all."""
        return not (self.missing or self.extra or self.type_mismatch)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "method": self.method.upper(),
            "path": self.path,
            "missing": self.missing,
            "extra": self.extra,
            "type_mismatch": self.type_mismatch,
        }


@dataclass
class DriftReport:
    """The result of one drift run against ``target``."""

    target: str
    endpoints: list[EndpointDrift] = field(default_factory=list)
    only_ours: list[str] = field(default_factory=list)
    only_theirs: list[str] = field(default_factory=list)
    generation: str | None = None  # the target's API generation, which decides the versioned entries
    #: every difference ("METHOD /path: item", or "route METHOD /path") -> the reason that documents it, or None
    reasons: dict[str, str | None] = field(default_factory=dict)

    def differences(self) -> list[str]:
        out = [f"{e.method.upper()} {e.path}: {item}" for e in self.endpoints
               for item in (*e.missing, *e.extra, *e.type_mismatch)]
        return out + [f"route {label}" for label in (*self.only_ours, *self.only_theirs)]

    def classify(self, documented: list[Documented]) -> None:
        """Give every difference the reason of the first entry that covers it (at this generation)."""
        self.reasons = {}
        for difference in self.differences():
            entry = next((d for d in documented if d.covers(difference, self.generation)), None)
            self.reasons[difference] = entry.reason if entry else None

    @property
    def undocumented(self) -> list[str]:
        return [d for d, reason in self.reasons.items() if reason is None]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (written to ``reports/drift/*.json``)."""
        return {
            "target": self.target,
            "generation": self.generation,
            "endpoints": [e.to_dict() for e in self.endpoints],
            "only_ours": self.only_ours,
            "only_theirs": self.only_theirs,
            "undocumented": self.undocumented,
            "documented": {d: r for d, r in self.reasons.items() if r is not None},
        }

    def to_markdown(self) -> str:
        """A human summary: one section per endpoint with differences."""
        source = self.target if self.target.endswith(".json") else f"{self.target}/openapi.json"
        lines = [f"# Drift: tokenspec spec vs {source}", ""]
        lines.append("`missing` = in tokenspec's spec, not in the server's; `extra` = in the server's only."
                     f" Generation: {self.generation or 'unknown'}. Documented differences (specs/drift.yaml) are"
                     " marked with the number of their reason below.")
        lines.append("")
        lines.append(f"**Undocumented: {len(self.undocumented)}** of {len(self.reasons)} differences.")
        lines += ["", *(f"- `{d}`" for d in self.undocumented), ""] if self.undocumented else [""]
        numbers = {r: i for i, r in enumerate(dict.fromkeys(r for r in self.reasons.values() if r), 1)}

        def mark(key: str) -> str:
            reason = self.reasons.get(key)
            return f" [{numbers[reason]}]" if reason else " **undocumented**" if key in self.reasons else ""

        common = len(self.endpoints)
        clean = sum(1 for e in self.endpoints if e.empty)
        lines.append(f"Endpoints in both: {common} ({clean} without differences).")
        lines.append("")
        for e in self.endpoints:
            lines.append(f"## {e.method.upper()} {e.path}")
            if e.empty:
                lines.append("")
                lines.append("No differences.")
                lines.append("")
                continue
            for label, items in (
                ("missing", e.missing),
                ("extra", e.extra),
                ("typed differently", e.type_mismatch),
            ):
                if items:
                    lines.append("")
                    lines.append(f"**{label}** ({len(items)}):")
                    lines.append("")
                    lines.extend(f"- `{item}`{mark(f'{e.method.upper()} {e.path}: {item}')}" for item in items)
            lines.append("")
        for label, items in (
            ("Only in tokenspec's spec", self.only_ours),
            ("Only in the server", self.only_theirs),
        ):
            lines.append(f"## {label} ({len(items)})")
            lines.append("")
            lines.extend(f"- `{item}`{mark(f'route {item}')}" for item in items) if items else lines.append("None.")
            lines.append("")
        if numbers:
            lines += ["## Reasons (specs/drift.yaml)", "", *(f"{i}. {r}" for r, i in numbers.items()), ""]
        return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class Documented:
    """One entry of ``specs/drift.yaml``: the differences it covers and why they stay."""

    reason: str
    items: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ("*",)
    routes: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None

    def covers(self, difference: str, generation: str | None) -> bool:
        from tokenspec.specs.catalogue import generation_key

        if self.since or self.until:
            if generation is None:
                return False
            key = generation_key(generation)
            if (self.since and key < generation_key(self.since)) or (self.until and key > generation_key(self.until)):
                return False
        if difference.startswith("route "):
            return any(fnmatch.fnmatchcase(difference[6:], p) for p in self.routes)
        endpoint, _, item = difference.partition(": ")
        return any(fnmatch.fnmatchcase(endpoint, e) for e in self.endpoints) and any(
            fnmatch.fnmatchcase(item, p) for p in self.items)


def load_documented() -> list[Documented]:
    """The entries of the installed ``specs/drift.yaml``."""
    from tokenspec.specs.catalogue import SPEC_DIR

    data = load_yaml((SPEC_DIR / "drift.yaml").read_text(encoding="utf-8")) or {}
    return [Documented(reason=" ".join(str(e["reason"]).split()), items=tuple(e.get("items") or ()),
                       endpoints=tuple(e.get("endpoints") or ("*",)), routes=tuple(e.get("routes") or ()),
                       since=None if e.get("since") is None else str(e["since"]),
                       until=None if e.get("until") is None else str(e["until"]))
            for e in data.get("documented") or []]


# --- schema normalisation -------------------------------------------------------------------


class _Resolver:
    """Resolves ``$ref``s inside one document family (ours: several files; theirs: one dict)."""

    def __init__(self, docs: dict[str, dict[str, Any]], default: str) -> None:
        self.docs = docs
        self.default = default

    def resolve(self, schema: Any, doc: str) -> tuple[Any, str]:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 50:
            file_part, _, pointer = schema["$ref"].partition("#")
            doc = file_part or doc
            node: Any = self.docs.get(doc, {})
            for raw in [p for p in pointer.split("/") if p]:
                node = (
                    node.get(raw.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
                )
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**node, **extra} if extra and isinstance(node, dict) else node
            seen += 1
        return schema, doc


def _variants(schema: Any, doc: str, res: _Resolver) -> list[tuple[dict[str, Any], str]]:
    """Flatten allOf/anyOf/oneOf into the concrete alternatives (allOf merged)."""
    schema, doc = res.resolve(schema, doc)
    if not isinstance(schema, dict):
        return []
    out: list[tuple[dict[str, Any], str]] = []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            # The keys beside the union (properties, type) hold for every alternative: merge them into each.
            base = {k: v for k, v in schema.items() if k != key}
            for sub in schema[key]:
                for variant, vdoc in _variants(sub, doc, res):
                    if base:
                        variant = {**base, **variant, "properties": {**(base.get("properties") or {}),
                                                                      **(variant.get("properties") or {})}}
                        if not variant["properties"]:
                            del variant["properties"]
                    out.append((variant, vdoc))
            return out
    if "allOf" in schema:
        # Merge: own properties first, then those of each allOf member (each keeps its document).
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k not in ("allOf", "properties")}
        props = {n: {"_schema": p, "_doc": doc} for n, p in (schema.get("properties") or {}).items()}
        for sub in schema["allOf"]:
            for variant, vdoc in _variants(sub, doc, res):
                for name, p in (variant.get("properties") or {}).items():
                    props.setdefault(
                        name, p if isinstance(p, dict) and "_schema" in p else {"_schema": p, "_doc": vdoc}
                    )
                for k in ("type", "items"):
                    if k in variant:
                        merged.setdefault(k, variant[k])
        merged["properties"] = props
        return [(merged, doc)]
    return [(schema, doc)]


def _types(schema: Any, doc: str, res: _Resolver) -> set[str]:
    """The JSON types a schema allows ("integer" counts as "number"; unconstrained -> "any")."""
    kinds: set[str] = set()
    for variant, _ in _variants(schema, doc, res):
        t = variant.get("type")
        if t is None and "const" in variant:
            t = {bool: "boolean", int: "integer", str: "string", type(None): "null"}.get(
                type(variant["const"]), "any"
            )
        if t is None and "enum" in variant:
            t = sorted({type(v).__name__ for v in variant["enum"]})
            t = ["string" if x == "str" else "integer" if x == "int" else x for x in t]
        if t is None and "properties" in variant:
            t = "object"
        if t is None:
            kinds.add("any")
            continue
        for one in t if isinstance(t, list) else [t]:
            kinds.add("number" if one == "integer" else str(one))
    return kinds


def _properties(schema: Any, doc: str, res: _Resolver) -> dict[str, tuple[Any, str]]:
    """Union of properties over all variants, each with the document its schema lives in."""
    props: dict[str, tuple[Any, str]] = {}
    for variant, vdoc in _variants(schema, doc, res):
        for name, sub in (variant.get("properties") or {}).items():
            if isinstance(sub, dict) and "_schema" in sub:
                props.setdefault(name, (sub["_schema"], sub["_doc"]))
            else:
                props.setdefault(name, (sub, vdoc))
        if variant.get("type") == "array" and "items" in variant:
            for name, value in _properties(variant["items"], vdoc, res).items():
                props.setdefault(name, value)
    return props


def _compare(
    ours: tuple[Any, str],
    theirs: tuple[Any, str],
    res_o: _Resolver,
    res_t: _Resolver,
    prefix: str,
    depth: int,
    out: EndpointDrift,
) -> None:
    po = _properties(ours[0], ours[1], res_o)
    pt = _properties(theirs[0], theirs[1], res_t)
    for name in sorted(set(po) - set(pt)):
        out.missing.append(f"{prefix}{name}")
    for name in sorted(set(pt) - set(po)):
        out.extra.append(f"{prefix}{name}")
    for name in sorted(set(po) & set(pt)):
        to = _types(*po[name], res_o)
        tt = _types(*pt[name], res_t)
        if "any" not in to and "any" not in tt and to - {_NULL} != tt - {_NULL}:
            out.type_mismatch.append(f"{prefix}{name}: ours {sorted(to)} vs theirs {sorted(tt)}")
        elif "any" not in to and "any" not in tt and (_NULL in to) != (_NULL in tt):
            who = "ours" if _NULL in to else "theirs"
            out.type_mismatch.append(f"{prefix}{name}: nullable only in {who}")
        if depth < 1:
            _compare(po[name], pt[name], res_o, res_t, f"{prefix}{name}.", depth + 1, out)


def _body_schema(op: dict[str, Any], doc: str, res: _Resolver, kind: str) -> tuple[Any, str] | None:
    if kind == "request":
        container, cdoc = res.resolve(op.get("requestBody"), doc)
    else:
        responses = op.get("responses") or {}
        container, cdoc = res.resolve(responses.get("200", responses.get(200)), doc)
    if not isinstance(container, dict):
        return None
    media = (container.get("content") or {}).get("application/json") or {}
    if "schema" not in media or not media["schema"]:
        return None
    return media["schema"], cdoc


def _operations(docs: dict[str, dict[str, Any]]) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    ops: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for name, doc in docs.items():
        for path, item in (doc.get("paths") or {}).items():
            for method in _METHODS:
                if isinstance(item, dict) and isinstance(item.get(method), dict):
                    ops.setdefault((method, path), (item[method], name))
    return ops


def drift_documents(
    target: str, theirs: dict[str, Any], ours: dict[str, dict[str, Any]] | None = None,
    generation: str | None = None,
) -> DriftReport:
    """Compare ``theirs`` (a parsed openapi.json) with our documents (default: the installed spec), each difference
    classified by ``specs/drift.yaml`` at ``generation``."""
    ours = ours if ours is not None else {name: load_document(name) for name in DOCUMENTS}
    res_o = _Resolver(ours, "components.yaml")
    res_t = _Resolver({"": theirs}, "")
    ops_o = _operations(ours)
    ops_t = _operations({"": theirs})
    report = DriftReport(target=target, generation=generation)
    for key in sorted(set(ops_o) | set(ops_t), key=lambda k: (k[1], k[0])):
        label = f"{key[0].upper()} {key[1]}"
        if key not in ops_t:
            report.only_ours.append(label)
            continue
        if key not in ops_o:
            report.only_theirs.append(label)
            continue
        (op_o, doc_o), (op_t, doc_t) = ops_o[key], ops_t[key]
        entry = EndpointDrift(method=key[0], path=key[1])
        for kind in ("request", "response"):
            so = _body_schema(op_o, doc_o, res_o, kind)
            st = _body_schema(op_t, doc_t, res_t, kind)
            if so is None and st is None:
                continue
            if so is None or st is None:
                side = entry.extra if so is None else entry.missing
                side.append(f"{kind}: <body schema> ({'server only' if so is None else 'spec only'})")
                continue
            _compare(so, st, res_o, res_t, f"{kind}.", 0, entry)
        report.endpoints.append(entry)
    report.classify(load_documented())
    return report


def drift(target: str, timeout: float = 10.0, transport: Transport | None = None,
          generation: str | None = None) -> DriftReport:
    """Fetch ``<target>/openapi.json`` and compare it with the installed spec; the generation (for the versioned
    entries of ``specs/drift.yaml``) is ``generation``, else read from the target's ``GET /version``.

    Raises ``UsageError`` (one line) when the target is unreachable or does not answer JSON.
    """
    url = target.rstrip("/") + "/openapi.json"
    try:
        with (transport or Transport()).client(timeout=timeout) as client:
            response = client.get(url)
            if generation is None:
                generation = _declared_generation(client, target.rstrip("/") + "/version")
        response.raise_for_status()
        theirs = response.json()
    except httpx.HTTPError as exc:
        raise UsageError(f"cannot fetch {url}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{url} did not answer JSON: {exc.msg}") from exc
    if not isinstance(theirs, dict) or "paths" not in theirs:
        raise UsageError(f"{url} is not an OpenAPI document (no 'paths')")
    return drift_documents(target.rstrip("/"), theirs, generation=generation)


def _declared_generation(client: httpx.Client, url: str) -> str | None:
    """The generation a vLLM-style ``GET /version`` ({"version": "0.34.0"}) names, None when it names none."""
    try:
        version = client.get(url).json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return ".".join(str(version).split(".")[:2]) if isinstance(version, str) and version.count(".") >= 1 else None
