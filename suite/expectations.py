"""Per-implementation known failures, applied as strict xfail.

The file is plain YAML (no condition language)::

    implementation: vllm-0.32.0-cpu
    expectations:
      - test: test_bad_input.py::test_oversized_body_rejected     # node id, or a prefix ending in "::" or "/"
        reason: answers 400 after parsing instead of 413 before it
        requirements: [ERROR-010]                                  # optional, informative
        link: https://...                                         # optional

A test named here that passes is reported as ``xpassed``: the expectation is stale and should be removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tokenspec.errors import UsageError


@dataclass(frozen=True)
class Expectation:
    test: str
    reason: str
    link: str | None = None

    def matches(self, nodeid: str) -> bool:
        path, sep, rest = nodeid.partition("::")
        local = path.rsplit("/", 1)[-1] + sep + rest  # "suite/test_x.py::t[a/b]" -> "test_x.py::t[a/b]"
        if self.test.endswith(("::", "/")):
            return local.startswith(self.test) or nodeid.startswith(self.test)
        return local == self.test or nodeid == self.test or local.split("[")[0] == self.test


def load_expectations(path: str | Path) -> list[Expectation]:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"expectations file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"expectations file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("expectations", []), list):
        raise UsageError(f"expectations file {path} needs a top-level `expectations:` list")
    out = []
    for i, entry in enumerate(data.get("expectations") or []):
        if not isinstance(entry, dict) or not entry.get("test") or not entry.get("reason"):
            raise UsageError(f"expectations file {path}: entry {i} needs `test` and `reason`")
        out.append(Expectation(str(entry["test"]), str(entry["reason"]), entry.get("link")))
    return out


def find(expectations: list[Expectation], nodeid: str) -> Expectation | None:
    return next((e for e in expectations if e.matches(nodeid)), None)
