"""Per-implementation known failures: each one a requirement, a pattern of the failure, and its evidence.

The file is plain YAML (no condition language)::

    implementation: {name: vllm, version: 0.32.0}
    configuration: {model: tiny, reasoning_parser: qwen3, tool_parser: hermes, roles: render server + engine}
    expectations:
      - test: test_errors.py::test_oversized_body_refused_from_its_declared_length   # node id or prefix
        requirement: ERROR-014          # the requirement whose check fails
        pattern: "answered 400"         # a regex the failure message must match
        reason: reads the whole body before refusing it
        evidence: {request: "curl ...", answer: "400 ..."}   # optional, what was seen

A known failure is recognised only when the test fails on that requirement with a message matching the
pattern; a failure with another cause is reported as a new failure (and says which expectation it missed),
and a test named here that passes is ``xpassed``: the expectation is stale and should be removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tokenspec.errors import UsageError


@dataclass(frozen=True)
class Expectation:
    test: str
    requirement: str
    pattern: str
    reason: str
    link: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def matches(self, nodeid: str) -> bool:
        path, sep, rest = nodeid.partition("::")
        local = path.rsplit("/", 1)[-1] + sep + rest  # "suite/test_x.py::t[a/b]" -> "test_x.py::t[a/b]"
        if self.test.endswith(("::", "/")):
            return local.startswith(self.test) or nodeid.startswith(self.test)
        return local == self.test or nodeid == self.test or local.split("[")[0] == self.test

    def explains(self, failed_requirements: list[str], message: str) -> bool:
        return self.requirement in failed_requirements and re.search(self.pattern, message, re.S) is not None

    def describe(self) -> str:
        return f"{self.requirement} /{self.pattern}/: {self.reason}"


@dataclass(frozen=True)
class ExpectationsFile:
    path: str
    implementation: dict[str, str]
    configuration: dict[str, Any]
    entries: list[Expectation]

    def header(self) -> str:
        impl = " ".join(str(v) for v in self.implementation.values())
        config = ", ".join(f"{k}={v}" for k, v in self.configuration.items())
        return f"{impl} ({config})"


def load_expectations_file(path: str | Path) -> ExpectationsFile:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"expectations file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"expectations file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("expectations", []), list):
        raise UsageError(f"expectations file {path} needs a top-level `expectations:` list")
    impl = data.get("implementation")
    if not isinstance(impl, dict) or not impl.get("name") or not impl.get("version"):
        raise UsageError(f"expectations file {path} needs `implementation: {{name, version}}`")
    if not isinstance(data.get("configuration"), dict):
        raise UsageError(f"expectations file {path} needs a `configuration:` mapping (parsers, model, roles)")
    out = []
    for i, entry in enumerate(data.get("expectations") or []):
        missing = [k for k in ("test", "requirement", "pattern", "reason") if not isinstance(entry, dict)
                   or not entry.get(k)]
        if missing:
            raise UsageError(f"expectations file {path}: entry {i} needs {', '.join(missing)}")
        try:
            re.compile(str(entry["pattern"]))
        except re.error as exc:
            raise UsageError(f"expectations file {path}: entry {i}: bad pattern ({exc})") from None
        out.append(Expectation(str(entry["test"]), str(entry["requirement"]), str(entry["pattern"]),
                               str(entry["reason"]), entry.get("link"), dict(entry.get("evidence") or {})))
    return ExpectationsFile(str(path), dict(impl), dict(data["configuration"]), out)


def load_expectations(path: str | Path) -> list[Expectation]:
    return load_expectations_file(path).entries


def find(expectations: list[Expectation], nodeid: str, requirement_ids: list[str] | None = None
         ) -> Expectation | None:
    return next((e for e in expectations if e.matches(nodeid)
                 and (requirement_ids is None or e.requirement in requirement_ids)), None)
