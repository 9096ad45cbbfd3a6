"""The one place a conformance test learns whether it may run: capability decisions and their evidence.

Every decision names a feature from the closed list in ``specs/features.yaml`` (roles: endpoints a URL
hosts; features: optional behaviours), a status, where the decision came from and the evidence behind it:

- ``offered``: the probe saw it work, or the profile declared it (a declared feature the probe cannot confirm
  is a failure of PROFILE-001, not a silent pass);
- ``unsupported``: the target hosts the endpoint but does not offer the optional behaviour (a 501, a parser
  that is not configured); its tests are counted apart, never as passes or failures;
- ``not-tested``: nothing the run was given can exercise it (a route no URL hosts, no ``--engine``, no
  ``--tokenizer``), with the flag that would enable it.

Tests never write their own skip strings: they call :func:`require` (through a fixture, the route gate of
the HTTP client, or the plugin's requirement-feature gate) or :func:`not_tested` for a precondition the run
itself did not meet (the reference ignored a forcing constraint, the tokenizer has nothing to split).
The meaning of each outcome is written down in ``suite/CONTRACT.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import pytest

from tokenspec.suite.engine.results import NOT_TESTED_PREFIX, UNSUPPORTED_PREFIX

if TYPE_CHECKING:
    from tokenspec.specs.catalogue import Requirement

Status = Literal["offered", "unsupported", "not-tested"]
Source = Literal["probe", "profile", "options"]

#: The route each role is, on which URL of the run ("target", "engine" = the generate URL, "reference").
ROLE_ROUTES: dict[str, tuple[str, str]] = {
    "chat-render": ("target", "/v1/chat/completions/render"),
    "completions-render": ("target", "/v1/completions/render"),
    "messages-render": ("target", "/v1/messages/render"),
    "responses-render": ("target", "/v1/responses/render"),
    "chat-derender": ("target", "/v1/chat/completions/derender"),
    "completions-derender": ("target", "/v1/completions/derender"),
    "chat-stream-derender": ("target", "/v1/chat/completions/derender"),
    "completions-stream-derender": ("target", "/v1/completions/derender"),
    "generate": ("engine", "/inference/v1/generate"),
    "generate-streaming": ("engine", "/inference/v1/generate"),
    "abort": ("engine", "/inference/v1/abort_requests"),
    "tokenize": ("target", "/tokenize"),
    "detokenize": ("target", "/detokenize"),
    "coupled": ("reference", "/v1/chat/completions"),
    "chat-completions": ("target", "/v1/chat/completions"),
}
#: Optional GET routes of the target that are roles of their own for the fuzzer (a framework 404 there is "not
#: hosted"); their own requirement (UTIL-007) still judges a missing route, so the client's gate leaves them be.
GET_ROLES: dict[str, str] = {"/version": "version"}
#: The engine features the generate probe decides.
GENERATE_FEATURES = ("logprobs", "prompt-logprobs", "text-output-mode", "multi-choice", "stop-strings",
                     "derender-output-mode", "derender-output-mode-stream")
#: What an engine may leave out beside generate, each decided from its own answer (generate-only engines ship
#: without them): token-id streaming (a 501 to stream:true) and the abort route.
ENGINE_ROLES = ("generate-streaming", "abort")
#: What a user passes to let the suite test a role or input it lacks.
ENABLE: dict[str, str] = {
    "generate": "pass --engine URL (a server hosting /inference/v1/generate)",
    "coupled": "pass --reference URL (a standard serve endpoint with /v1/chat/completions)",
    "tokenizer-folder": "pass --tokenizer DIR (the model folder)",
}
#: A requirement feature that any one of several roles satisfies (the client gates the specific route).
ANY_OF: dict[str, tuple[str, ...]] = {
    "streaming-derender": ("chat-stream-derender", "completions-stream-derender"),
}
_COUPLED_PATHS = ("/v1/chat/completions", "/v1/completions")
_GENERATE = "/inference/v1/generate"
#: Requirement areas that each describe one endpoint's own behaviour (their anchor names the route).
_ENDPOINT_AREAS = frozenset({"RENDER", "DERENDER", "GENERATE", "UTIL"})
_STEP_SIBLINGS = {
    "chat-render": ("chat-render", "completions-render"),
    "completions-render": ("completions-render", "chat-render"),
    "chat-derender": ("chat-derender", "completions-derender"),
    "completions-derender": ("completions-derender", "chat-derender"),
}


@dataclass(frozen=True)
class Decision:
    feature: str
    status: Status
    source: Source
    evidence: str

    def to_dict(self) -> dict[str, str]:
        return {"feature": self.feature, "status": self.status, "source": self.source, "evidence": self.evidence}


@dataclass
class Capabilities:
    """The decisions of one run, plus what the probe learnt about the target's configuration."""

    decisions: dict[str, Decision] = field(default_factory=dict)
    #: Parser families in use: {"reasoning": "qwen3" | "deepseek_r1" | None, "tool": "hermes" | ... | None}.
    parsers: dict[str, str | None] = field(default_factory=lambda: {"reasoning": None, "tool": None})
    #: For a parser kind whose family is "unknown": the described families it may still be, the ones that act
    #: on the markup the target acted on (absent: any of them).
    candidates: dict[str, list[str]] = field(default_factory=dict)
    #: Features the profile declared; each must be confirmed by the probe (PROFILE-001).
    declared: dict[str, str] = field(default_factory=dict)
    #: The probe's own verdict on each feature, before a profile declaration overrode it.
    observed: dict[str, Decision] = field(default_factory=dict)
    #: Optional request fields the profile declares the target honours (None: not declared, all assumed).
    fields: set[str] | None = None
    #: Limits the profile declares (max_model_len, max_logprobs, vocab_size).
    limits: dict[str, int] = field(default_factory=dict)
    #: The API generations (features.yaml's ``generations``) the target's answers are consistent with: one when the
    #: probe could tell, several when what tells them apart was not seen; and what it saw.
    generations: list[str] = field(default_factory=list)
    generation_evidence: str = "not probed"

    def decide(self, feature: str, status: Status, source: Source, evidence: str) -> None:
        self.decisions[feature] = Decision(feature, status, source, evidence)

    def has(self, feature: str) -> bool:
        if feature in ANY_OF:
            return any(self.has(f) for f in ANY_OF[feature])
        decision = self.decisions.get(feature)
        return decision is not None and decision.status == "offered"

    def why_not(self, feature: str) -> tuple[str, str]:
        """(outcome prefix, reason) for a feature that is not offered."""
        if feature in ANY_OF:
            return self.why_not(ANY_OF[feature][0])
        decision = self.decisions.get(feature)
        if decision is None:
            return NOT_TESTED_PREFIX, f"{feature} was not probed"
        prefix = UNSUPPORTED_PREFIX if decision.status == "unsupported" else NOT_TESTED_PREFIX
        hint = f"; {ENABLE[feature]}" if decision.status == "not-tested" and feature in ENABLE else ""
        return prefix, f"{feature}: {decision.evidence}{hint}"

    def require(self, *features: str) -> None:
        """Skip the running test as unsupported / not tested unless every feature is offered."""
        for feature in features:
            if not self.has(feature):
                prefix, reason = self.why_not(feature)
                pytest.skip(prefix + reason)

    def require_generation(self, requirements: Iterable[Requirement]) -> None:
        """Gate a test whose requirements are all versioned: unsupported when none applies to any generation the
        target may speak, not tested when one applies to some of them only (the probe could not tell which)."""
        cited = list(requirements)
        versioned = [r for r in cited if r.since or r.until]
        if not versioned or len(versioned) < len(cited) or not self.generations:
            return
        spans = ", ".join(f"{r.id} applies {_span(r)}" for r in versioned)
        if any(all(r.applies_to(g) for g in self.generations) for r in versioned):
            return
        speaks = " or ".join(self.generations)
        if not any(r.applies_to(g) for r in versioned for g in self.generations):
            pytest.skip(f"{UNSUPPORTED_PREFIX}the target speaks the {speaks} wire ({self.generation_evidence});"
                        f" {spans}")
        pytest.skip(f"{NOT_TESTED_PREFIX}the target speaks the {speaks} wire ({self.generation_evidence}), which"
                    f" this test cannot tell apart; {spans}")

    def require_fields(self, *names: str) -> None:
        """Skip as unsupported a test that needs an optional request field the target does not honour (its
        profile's list, else its own /openapi.json request schemas)."""
        missing = [n for n in names if self.fields is not None and n not in self.fields]
        if missing:
            evidence = [self.decisions[f"request-field:{n}"].evidence if f"request-field:{n}" in self.decisions
                        else f"the profile does not list {n}" for n in missing]
            pytest.skip(f"{UNSUPPORTED_PREFIX}optional request field(s) not honoured: {'; '.join(evidence)}")

    def require_route(self, base: str, method: str, path: str, body: Any) -> None:
        """The route gate of the HTTP client: a request to a route the probe found missing never runs."""
        role = role_of(base, method, path, body)
        if role is not None:
            self.require(role)

    def to_dict(self) -> dict[str, Any]:
        return {
            "parsers": self.parsers,
            "candidates": self.candidates,
            "declared": self.declared,
            "observed": {k: d.to_dict() for k, d in self.observed.items()},
            "fields": sorted(self.fields) if self.fields is not None else None,
            "limits": self.limits,
            "generation": {"candidates": self.generations, "evidence": self.generation_evidence},
            "decisions": [d.to_dict() for d in sorted(self.decisions.values(), key=lambda d: d.feature)],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Capabilities:
        return cls(
            decisions={d["feature"]: Decision(**d) for d in data["decisions"]},
            parsers=dict(data["parsers"]),
            candidates={k: list(v) for k, v in (data.get("candidates") or {}).items()},
            declared=dict(data.get("declared") or {}),
            observed={k: Decision(**d) for k, d in (data.get("observed") or {}).items()},
            fields=set(data["fields"]) if data.get("fields") is not None else None,
            limits=dict(data.get("limits") or {}),
            generations=list((data.get("generation") or {}).get("candidates") or []),
            generation_evidence=(data.get("generation") or {}).get("evidence", "not probed"),
        )


def _span(requirement: Requirement) -> str:
    if requirement.since and requirement.until:
        return f"from {requirement.since} to {requirement.until}"
    return f"since {requirement.since}" if requirement.since else f"until {requirement.until}"


def anchored_roles(requirements: Iterable[Requirement]) -> list[str]:
    """The roles whose routes the requirements of one endpoint's own areas are anchored at (``/paths/<route>/...``),
    in citation order. Cross-cutting areas (ERROR, SCHEMA, ...) anchor at one example route and are left out, as
    are the coupled ``/v1/*`` routes, which the target and the reference both host."""
    roles: list[str] = []
    for requirement in requirements:
        parts = requirement.pointer.split("/")
        if requirement.area not in _ENDPOINT_AREAS or len(parts) < 3 or parts[1] != "paths":
            continue
        route = parts[2].replace("~1", "/").replace("~0", "~")
        role = next((r for r, (_, path) in ROLE_ROUTES.items() if path == route and "stream" not in r), None)
        if role is None or route in _COUPLED_PATHS:
            continue
        # A chat requirement is often also checked on the completions route of the same step (and back).
        for sibling in _STEP_SIBLINGS.get(role, (role,)):
            if sibling not in roles:
                roles.append(sibling)
    return roles


def role_of(base: str, method: str, path: str, body: Any) -> str | None:
    """The role a request exercises (None for routes every server has, such as /health and /v1/models)."""
    if method != "POST":
        return None
    if base == "reference" and path in _COUPLED_PATHS:
        return "coupled"
    if base == "target" and path in _COUPLED_PATHS:
        return "chat-completions"
    streaming = _is_stream(body)
    if base == "engine" and path == _GENERATE and streaming and not _is_derender_mode(body):
        # Token-id streaming is a probed option of generate (a 501 to stream:true is its declared absence); the
        # derender mode's stream is a feature of its own (derender-output-mode-stream), gated by its tests.
        return "generate-streaming"
    for role, (where, route) in ROLE_ROUTES.items():
        if route == path and where == base:
            if role.endswith("stream-derender") != streaming and path.endswith("/derender"):
                continue
            return role
    return None


def _is_stream(body: Any) -> bool:
    body = _parsed(body)
    return isinstance(body, dict) and body.get("stream") is True


def _is_derender_mode(body: Any) -> bool:
    body = _parsed(body)
    return isinstance(body, dict) and body.get("output_mode") == "derender"


def _parsed(body: Any) -> Any:
    """A request body as JSON (raw bytes or text parsed; anything unparsable is no object)."""
    if isinstance(body, bytes | str):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


def not_tested(reason: str) -> NoReturn:
    """End the running test as not tested: a precondition of its check did not hold in this run."""
    pytest.skip(NOT_TESTED_PREFIX + reason)


def unsupported(reason: str) -> NoReturn:
    """End the running test as unsupported: what it checks does not exist in the target's known configuration
    (a markup its parser does not read), so there is nothing to judge rather than something left unjudged."""
    pytest.skip(UNSUPPORTED_PREFIX + reason)
