"""The target profile (``--profile FILE``): what an implementation declares it offers and how it is configured.

A profile turns the probe's guesses into commitments. Declared-offered features are tested even where the
probe could not see them (and PROFILE-001 fails for each one the probe cannot confirm); declared-absent
features are unsupported; declared parser families drive the derender and golden expectations. The file is
YAML validated against ``specs/profile.schema.json``; ``reports/profiles/`` holds examples.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tokenspec.core.errors import UsageError, read_user_yaml
from tokenspec.suite.engine.gating import ENGINE_ROLES, GENERATE_FEATURES, Capabilities, Decision


def profile_schema() -> dict[str, Any]:
    from tokenspec.specs.catalogue import SPEC_DIR

    return cast(dict[str, Any], json.loads((SPEC_DIR / "profile.schema.json").read_text()))


@dataclass(frozen=True)
class Profile:
    path: str
    implementation: dict[str, str] = field(default_factory=dict)
    parsers: dict[str, str] = field(default_factory=dict)
    features: dict[str, bool] = field(default_factory=dict)
    optional_request_fields: tuple[str, ...] | None = None
    limits: dict[str, int] = field(default_factory=dict)
    generation: str | None = None

    def apply(self, caps: Capabilities) -> None:
        """Overlay the declarations on the probe's decisions, keeping the probe's view for PROFILE-001."""
        for feature, offered in self.features.items():
            observed = caps.decisions.get(feature)
            if observed is not None:
                caps.observed[feature] = observed
            seen = f" (probe: {observed.status}, {observed.evidence})" if observed is not None else ""
            if offered:
                caps.declared[feature] = "offered"
                caps.decide(feature, "offered", "profile", f"declared offered by {self.path}{seen}")
            else:
                caps.declared[feature] = "unsupported"
                caps.decide(feature, "unsupported", "profile", f"declared not offered by {self.path}{seen}")
        if self.features.get("generate") is False:
            # What needs generate is not offered where generate is declared absent: its tests are unsupported
            # (the target's declared shape), not "not tested" (a gap of the run).
            for feature in (*GENERATE_FEATURES, *ENGINE_ROLES):
                decision = caps.decisions.get(feature)
                if feature not in self.features and decision is not None and decision.status == "not-tested":
                    caps.decide(feature, "unsupported", "profile",
                                f"needs generate, which {self.path} declares not offered")
        for kind, family in self.parsers.items():
            caps.observed[f"{kind}-parser"] = _family_decision(caps, kind)
            caps.declared[f"{kind}-parser"] = family
            caps.parsers[kind] = None if family == "none" else family
        if self.optional_request_fields is not None:
            caps.fields = set(self.optional_request_fields)
        caps.limits.update(self.limits)
        if self.generation is not None:
            wire = " or ".join(caps.generations) or "none of the spec"
            caps.generation_evidence = (f"declared {self.generation} by {self.path}; the wire looks like {wire}"
                                        f" ({caps.generation_evidence})")
            caps.generations = [self.generation]


def _family_decision(caps: Capabilities, kind: str) -> Decision:
    found = caps.parsers.get(kind)
    return Decision(f"{kind}-parser", "offered" if found else "unsupported", "probe", f"probe found {found or 'none'}")


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile; any problem is a one-line usage error."""
    import jsonschema

    path = Path(path)
    data = read_user_yaml(path, "profile") or {}
    if not isinstance(data, dict):
        raise UsageError(f"profile {path} must be a mapping (see specs/profile.schema.json)")
    errors = sorted(jsonschema.Draft202012Validator(profile_schema()).iter_errors(data), key=lambda e: e.path)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise UsageError(f"profile {path}: {where}: {first.message}")
    fields = data.get("optional_request_fields")
    return Profile(
        path=str(path),
        implementation=dict(data.get("implementation") or {}),
        parsers=dict(data.get("parsers") or {}),
        features=dict(data.get("features") or {}),
        optional_request_fields=tuple(fields) if fields is not None else None,
        limits=dict(data.get("limits") or {}),
        generation=data.get("generation"),
    )
