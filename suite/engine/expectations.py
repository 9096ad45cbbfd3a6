"""Per-implementation known failures: each one a requirement, a pattern of the failure, and its evidence.

The file is plain YAML (no condition language)::

    implementation: {name: vllm, version: 0.32.0}
    configuration: {model: tiny, reasoning_parser: qwen3, tool_parser: hermes, roles: render server + engine}
    expectations:
      - test: test_errors.py::test_oversized_body_refused_from_its_declared_length   # node id, prefix or glob (*)
        requirement: ERROR-014          # the requirement whose check fails
        pattern: "answered 400"         # a regex the failure message must match
        reason: reads the whole body before refusing it
        evidence: {request: "curl ...", answer: "400 ..."}   # optional, what was seen
        seed_dependent: false   # optional: true for property/fuzz tests whose failing example depends on the seed
        families: [qwen3]       # optional: the model families (configurations) where the failure shows

An entry with ``families`` is a deviation of some configurations only (a parser or template of one model
family). When the run's family is known (a tokenspec-built ``--tokenizer`` folder declares it), the entry
applies strictly to runs of those families and is left out of the others, so a stale entry is noticed on
the family it names. When the family is unknown (anyone's own model folder, or none), it applies leniently:
it may explain a failure, and a pass is not reported as stale.

A known failure is recognised only when every cause of the test's failure (each ``[AREA-NNN]`` segment of its
message, or the whole message) is explained by one of the test's expectations: same requirement, pattern
found. A failure with any other cause is reported as a new failure and names the cause no expectation covers,
and a test named here that passes is ``xpassed``: the expectation is stale and should be removed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from tokenspec.core.errors import UsageError, read_user_yaml
from tokenspec.core.yaml_files import load_yaml


@dataclass(frozen=True)
class Expectation:
    test: str
    requirement: str
    pattern: str
    reason: str
    link: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: The failing example depends on the seed (a property or fuzz test): a pass is not a stale expectation.
    seed_dependent: bool = False
    #: The model families where the failure shows (empty: every configuration of the file).
    families: tuple[str, ...] = ()
    #: Applied to a run whose family is unknown: a pass of a family-scoped entry is not stale there.
    loosely: bool = False

    @property
    def may_pass(self) -> bool:
        return self.seed_dependent or self.loosely or "*" in self.test

    def matches(self, nodeid: str) -> bool:
        path, sep, rest = nodeid.partition("::")
        local = path.rsplit("/", 1)[-1] + sep + rest  # "suite/test_x.py::t[a/b]" -> "test_x.py::t[a/b]"
        if "*" in self.test:  # only * is special (brackets are part of parametrised ids)
            pattern = re.compile(".*".join(re.escape(part) for part in self.test.split("*")) + r"\Z")
            return bool(pattern.match(local) or pattern.match(nodeid))
        if self.test.endswith(("::", "/")):
            return local.startswith(self.test) or nodeid.startswith(self.test)
        return local == self.test or nodeid == self.test or local.split("[")[0] == self.test

    def describe(self) -> str:
        scope = f" [{', '.join(self.families)}]" if self.families else ""
        return f"{self.requirement} /{self.pattern}/{scope}: {self.reason}"


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
    data = read_user_yaml(path, "expectations file")
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
        families = entry.get("families") or []
        if not isinstance(families, list) or not all(isinstance(f, str) and f for f in families):
            raise UsageError(f"expectations file {path}: entry {i}: `families` must be a list of family names")
        out.append(Expectation(str(entry["test"]), str(entry["requirement"]), str(entry["pattern"]),
                               str(entry["reason"]), entry.get("link"), dict(entry.get("evidence") or {}),
                               bool(entry.get("seed_dependent", False)), tuple(families)))
    return ExpectationsFile(str(path), dict(impl), dict(data["configuration"]), out)


def load_expectations(path: str | Path) -> list[Expectation]:
    return load_expectations_file(path).entries


def for_family(entries: list[Expectation], family: str | None) -> list[Expectation]:
    """The entries that apply to a run of ``family`` (None: unknown): family-scoped entries of other families
    are left out; with an unknown family they all apply, loosely."""
    if family is None:
        return [replace(e, loosely=True) if e.families else e for e in entries]
    return [e for e in entries if not e.families or family in e.families]


def folder_family(tokenizer: str | Path | None) -> str | None:
    """The model family a tokenspec-built model folder declares (``tokenspec-model.json``; a folder of the
    embedded tiny model says none and is ``tiny``); None for any other folder or none."""
    marker = Path(tokenizer) / "tokenspec-model.json" if tokenizer else None
    if marker is None or not marker.is_file():
        return None
    try:
        doc = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return str(doc.get("family") or "tiny") if isinstance(doc, dict) else None


def find(expectations: list[Expectation], nodeid: str, requirement_ids: list[str] | None = None
         ) -> list[Expectation]:
    """Every expectation naming this test (and, when given, one of its requirements)."""
    return [e for e in expectations if e.matches(nodeid) and (requirement_ids is None or e.requirement in
                                                                requirement_ids)]


_TAG = re.compile(r"\[([A-Z]+-\d{3})\] ")


def causes(message: str, failed_requirements: list[str]) -> list[tuple[list[str], str]]:
    """The separate causes of a failure: each ``[AREA-NNN] ...`` segment, or the whole message when untagged."""
    message = re.split(r"\n\s*assert ", message, maxsplit=1)[0]  # the test's own words, not pytest's repr of them
    tags = list(_TAG.finditer(message))
    if not tags:
        return [(failed_requirements, message)]
    ends = [m.start() for m in tags[1:]] + [len(message)]
    return [([m.group(1)], message[m.start():end]) for m, end in zip(tags, ends, strict=True)]


def unexplained(expectations: list[Expectation], failed_requirements: list[str], message: str) -> list[str]:
    """Causes of a failure no expectation explains (a known failure has none; anything else is new)."""
    out = []
    for ids, text in causes(message, failed_requirements):
        if not any(e.requirement in ids and re.search(e.pattern, text, re.S) for e in expectations):
            out.append(text.strip().splitlines()[0][:300] if text.strip() else "(empty message)")
    return out


def _pattern(message: str) -> str:
    """A regex of a failure's stable part: its first line, without the exception name, up to the first value."""
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    line = re.sub(r"^[\w.]*(Error|Violation|Exception): ", "", line)
    line = re.sub(r"^\[[A-Z]+-\d{3}\] ", "", line)
    stable = re.split(r"[0-9'\"{\[(]", line, maxsplit=1)[0].strip()
    return re.escape(stable if len(stable) >= 12 else line[:60])


def draft(report: dict[str, Any], implementation: dict[str, str], configuration: dict[str, Any]) -> str:
    """An expectations file for every unexpected failure of ``report`` (reasons left for a human to write)."""
    entries = []
    for test in report["tests"]:
        if test["outcome"] not in ("failed", "error"):
            continue
        nodeid = test["nodeid"].split("/")[-1] if "::" not in test["nodeid"].split("/")[-1] else test["nodeid"]
        entries.append({
            "test": nodeid.rsplit("/", 1)[-1] if nodeid.startswith("suite/") else nodeid,
            "requirement": (test.get("failed_requirements") or test["requirement_ids"])[0],
            "pattern": _pattern(test["message"]),
            "reason": "TODO: the sentence of the requirement this implementation breaks, and how",
            "evidence": {"request": test.get("reproduce", "")[:600], "answer": test["message"][:600]},
        })
    doc = {"implementation": implementation, "configuration": configuration, "expectations": entries}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


def _editable(path: Path) -> tuple[str, dict[str, Any], list[Expectation]]:
    """(the header comment block, the raw YAML, the parsed entries) of a file a tool rewrites."""
    source = path.read_text()
    lines = source.splitlines()
    header = "".join(line + "\n" for line in lines[: next((i for i, ln in enumerate(lines)
                                                          if not ln.startswith("#")), len(lines))])
    return header, load_yaml(source), load_expectations_file(path).entries


def with_evidence(path: str | Path, reports: list[dict[str, Any]]) -> str:
    """The expectations file rewritten with, for every entry, the request and the answer of one run where it
    explained a failure (``evidence``); entries no report exercised keep what they had. The header comment
    block is kept; entries come out in block style."""
    header, data, parsed = _editable(Path(path))
    for raw, entry in zip(data["expectations"], parsed, strict=True):
        found = next(((report, test, cause) for report in reports for test in report["tests"]
                      if test["outcome"] in ("xfailed", "failed") and entry.matches(test["nodeid"])
                      for cause in _explained_causes(entry, test)), None)
        if found is not None:
            report, test, cause = found
            raw["evidence"] = {"run": f"{report.get('target')} seed {report.get('seed')}", "test": test["nodeid"],
                               "request": test.get("reproduce", "")[:1500], "answer": cause[:1500]}
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=118)
    return header + body


_JUDGED = ("passed", "failed", "xfailed", "xpassed", "error")


def pruned(path: str | Path, runs: list[tuple[str, dict[str, Any]]], *, only_seen: bool = False
           ) -> tuple[str, list[str]]:
    """The file without the entries whose tests ``runs`` (family, report) judged and whose failure none of them
    showed, and the dropped entries' descriptions: how a file copied from an older release is cut down to what the
    new one still gets wrong. Seed-dependent entries, and entries no run judged a test of, are kept, unless
    ``only_seen``: then only entries a failure of the runs explained stay (every entry has evidence from them)."""
    header, data, parsed = _editable(Path(path))
    kept, dropped = [], []
    for raw, entry in zip(data["expectations"], parsed, strict=True):
        judged = [test for family, report in runs if not entry.families or family in entry.families
                  for test in report["tests"] if test["outcome"] in _JUDGED and entry.matches(test["nodeid"])]
        explained = any(test["outcome"] in ("xfailed", "failed") and _explained_causes(entry, test) for test in judged)
        if not explained and (only_seen or (judged and not entry.seed_dependent)):
            dropped.append(f"{entry.test}: {entry.describe()}")
        else:
            kept.append(raw)
    data["expectations"] = kept
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=118), dropped


def _explained_causes(entry: Expectation, test: dict[str, Any]) -> list[str]:
    """The causes of a recorded failure that ``entry`` explains."""
    failed = test.get("failed_requirements") or []
    if entry.requirement not in failed:
        return []
    message = _observed(test["message"]).split(":\n", 1)[-1] if test["message"].startswith("NEW CAUSE") else \
        _observed(test["message"])
    return [text for ids, text in causes(message, failed)
            if entry.requirement in ids and re.search(entry.pattern, text, re.S)]


def _observed(message: str) -> str:
    """The failure as the target produced it, without the known-failure preamble the report adds."""
    return message.split("; observed: ", 1)[-1]
