"""The requirement catalogue: every normative sentence of the spec, with a stable ID.

Requirements live in ``specs/requirements/<area>.yaml`` (one file per area), each entry
``{id, level, statement, anchor, feature?, since?, until?, withdrawn?}``: ``since``/``until`` name the first and
last API generation (``features.yaml``'s ``generations``) it applies to, absent for every generation. IDs
(``AREA-NNN``) are never renumbered or reused; a retired requirement stays with ``withdrawn: true`` so old results
still resolve. Tests, golden cases and reports cite these IDs, which is why this module is small and has no
dependencies beyond PyYAML.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenspec.core.yaml_files import load_yaml

__all__ = [
    "AREA_PREFIXES",
    "LEVELS",
    "SPEC_DIR",
    "Requirement",
    "area_of",
    "load_catalogue",
    "load_features",
    "generation_key",
    "read_catalogue",
    "read_generations",
]

SPEC_DIR = Path(__file__).resolve().parent
LEVELS: tuple[str, ...] = ("MUST", "SHOULD", "MAY")
#: Requirement file stem -> the ID prefix its entries must use (others: the stem upper-cased).
AREA_PREFIXES: dict[str, str] = {"errors": "ERROR", "utilities": "UTIL", "token-native": "TOKNAT"}


def area_of(stem: str) -> str:
    """The ID prefix required in ``requirements/<stem>.yaml``."""
    return AREA_PREFIXES.get(stem, stem.upper().replace("-", ""))


@dataclass(frozen=True)
class Requirement:
    """One normative statement, anchored to a JSON pointer in an OpenAPI document."""

    id: str
    level: str
    statement: str
    anchor: str
    feature: str | None
    withdrawn: bool
    area: str
    since: str | None = None
    until: str | None = None

    def applies_to(self, generation: str) -> bool:
        """Whether the requirement holds for a target speaking ``generation`` (e.g. "0.33")."""
        key = generation_key(generation)
        return (self.since is None or key >= generation_key(self.since)) and (
            self.until is None or key <= generation_key(self.until))

    @property
    def document(self) -> str:
        """The file part of the anchor (``render.yaml``)."""
        return self.anchor.split("#", 1)[0]

    @property
    def pointer(self) -> str:
        """The JSON-pointer part of the anchor (``/paths/...``), ``""`` for the whole document."""
        return self.anchor.split("#", 1)[1] if "#" in self.anchor else ""


def _requirement(entry: dict[str, Any], area: str) -> Requirement:
    return Requirement(
        id=str(entry.get("id", "")),
        level=str(entry.get("level", "")),
        statement=str(entry.get("statement", "")),
        anchor=str(entry.get("anchor", "")),
        feature=entry.get("feature"),
        withdrawn=bool(entry.get("withdrawn", False)),
        area=area,
        since=None if entry.get("since") is None else str(entry["since"]),
        until=None if entry.get("until") is None else str(entry["until"]),
    )


def generation_key(generation: str) -> tuple[int, ...]:
    """A generation name ("0.33") as a sortable tuple."""
    return tuple(int(part) for part in generation.split("."))


def read_catalogue(spec_dir: Path = SPEC_DIR) -> list[Requirement]:
    """Read every requirement file under ``spec_dir/requirements`` without de-duplicating.

    The lint needs the raw list (to see duplicate IDs); everyone else wants ``load_catalogue``.
    ``area`` is the ID prefix the file demands (``errors.yaml`` -> ``ERROR``), so the lint can
    compare it with the ID.
    """
    out: list[Requirement] = []
    for path in sorted((spec_dir / "requirements").glob("*.yaml")):
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
        entries = data.get("requirements", []) if isinstance(data, dict) else data
        for entry in entries or []:
            out.append(_requirement(entry if isinstance(entry, dict) else {}, area_of(path.stem)))
    return out


@functools.cache
def load_catalogue() -> dict[str, Requirement]:
    """All requirements of the installed spec by ID (cached; the suite asks on every test)."""
    return {req.id: req for req in read_catalogue(SPEC_DIR)}


def requirement_digests() -> dict[str, str]:
    """A short digest of each live requirement's normative content (level, statement, anchor, since, until): a
    run that records them can tell later which requirements were added or changed after it ran."""
    import hashlib

    return {req.id: hashlib.sha256("\0".join((req.level, req.statement, req.anchor, req.since or "",
                                              req.until or "")).encode()).hexdigest()[:12]
            for req in load_catalogue().values() if not req.withdrawn}


def read_generations(spec_dir: Path = SPEC_DIR) -> dict[str, str]:
    """The API generations the spec describes (oldest first), each with what tells it apart."""
    data = load_yaml((spec_dir / "features.yaml").read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in sorted((data.get("generations") or {}).items(),
                                              key=lambda kv: generation_key(str(kv[0])))}


def read_features(spec_dir: Path = SPEC_DIR) -> set[str]:
    """The closed feature vocabulary of ``spec_dir/features.yaml``."""
    data = load_yaml((spec_dir / "features.yaml").read_text(encoding="utf-8")) or {}
    return set((data.get("features") or {}).keys()) | set((data.get("roles") or {}).keys())


@functools.cache
def _features() -> frozenset[str]:
    return frozenset(read_features(SPEC_DIR))


def load_features() -> set[str]:
    """The closed list of optional feature names a requirement may carry (a copy of a cached set)."""
    return set(_features())
