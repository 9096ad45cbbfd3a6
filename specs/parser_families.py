"""The parser families the suite knows, and what each one makes of each shape of generated markup.

``parsers.yaml`` is normative text: for every configuration (reasoning family + tool family) and every shape of
generated text, the content, reasoning, tool calls and finish_reason a chat derender gives, with thinking on
(the template's default) and off (``chat_template_kwargs.enable_thinking: false``). The suite derives its
derender and golden expectations from the configuration the target runs (declared in the profile or found
by the probe), so a server configured with ``deepseek_r1`` is held to deepseek_r1's split, not qwen3's.
The table was recorded from vLLM 0.32's own parsers (see the file's header), never from tokenspec's frontend.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenspec.core.yaml_files import load_yaml
from tokenspec.specs.catalogue import SPEC_DIR, generation_key, read_generations

__all__ = [
    "ARGUMENTS_IN_SHAPES",
    "REASONING_FAMILIES",
    "TOOL_FAMILIES",
    "Split",
    "configuration",
    "configurations",
    "deletes_special_tokens",
    "distinguishing_shapes",
    "expected",
    "expected_in",
    "families_acting_on",
    "family_probes",
    "keeps_special_tokens",
    "reading_changed",
    "shapes",
    "special_tokens_deleted",
    "special_tokens_kept",
    "table_request",
]

REASONING_FAMILIES: tuple[str, ...] = ("qwen3", "deepseek_r1", "gemma4")
TOOL_FAMILIES: tuple[str, ...] = ("hermes", "llama3_json", "qwen3_coder", "gemma4")
#: Families vLLM runs as one parser engine for reasoning and tool calls (Gemma 4's): specified with each other or
#: with no parser on the other side, never with another family.
SELF_PAIRED: tuple[str, ...] = ("gemma4",)
VARIANTS = ("thinking", "thinking-off")
#: The arguments object every single-call shape of the table carries, verbatim (tests substitute their own).
ARGUMENTS_IN_SHAPES = '{"city": "Paris"}'


@functools.cache
def _table() -> dict[str, Any]:
    return load_yaml((SPEC_DIR / "parsers.yaml").read_text(encoding="utf-8"))


def shapes() -> dict[str, str]:
    """Shape id -> the generated text."""
    return dict(_table()["shapes"])


def table_request(model: str, tools: bool, variant: str) -> dict[str, Any]:
    """The chat request every row was recorded under: the table's messages, its tools iff a tool parser runs,
    thinking switched off for the ``thinking-off`` variant."""
    request: dict[str, Any] = {"model": model, "messages": copy.deepcopy(_table()["request"]["messages"])}
    if tools:
        request["tools"] = copy.deepcopy(_table()["request"]["tools"])
    if variant == "thinking-off":
        request["chat_template_kwargs"] = {"enable_thinking": False}
    return request


def configuration(reasoning: str | None, tool: str | None) -> str:
    return f"{reasoning or 'none'}+{tool or 'none'}"


def configurations() -> list[tuple[str | None, str | None]]:
    """Every (reasoning, tool) pair the table specifies: the known families crossed, "none" included on both
    sides, except a self-paired family beside another family."""
    return [(r, t) for r in (*REASONING_FAMILIES, None) for t in (*TOOL_FAMILIES, None)
            if r == t or None in (r, t) or not {r, t} & set(SELF_PAIRED)]


@dataclass(frozen=True)
class Split:
    """What a chat derender must answer for one shape: the message's parts and the finish_reason."""

    content: str | None
    reasoning: str | None
    tool_calls: tuple[tuple[str, str], ...]  # (name, arguments as canonical JSON)
    finish_reason: str

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Split:
        calls = tuple((c["name"], _canonical(c["arguments"])) for c in entry.get("tool_calls") or [])
        # An empty string and null are the same answer here (deepseek_r1 gives reasoning "" for "<think></think>").
        return cls(entry.get("content") or None, entry.get("reasoning") or None, calls,
                   entry.get("finish_reason", "stop"))

    def observed(self, message: dict[str, Any], finish_reason: str | None = None) -> Split:
        calls = tuple((c["function"]["name"], _canonical(c["function"].get("arguments")))
                      for c in message.get("tool_calls") or [])
        return Split(message.get("content") or None,
                     message.get("reasoning") or message.get("reasoning_content") or None,
                     calls, finish_reason if finish_reason is not None else self.finish_reason)

    def differences(self, message: dict[str, Any], finish_reason: str | None = None) -> list[str]:
        """Field-level differences between this expectation and a derendered message."""
        got = self.observed(message, finish_reason)
        out = []
        for name in ("content", "reasoning", "tool_calls", "finish_reason"):
            want, have = getattr(self, name), getattr(got, name)
            if want != have:
                out.append(f"{name}: expected {want!r}, got {have!r}")
        return out


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def expected(reasoning: str | None, tool: str | None, shape: str, variant: str,
             generation: str | None = None) -> Split | None:
    """The specified split of ``shape`` under a configuration and variant in ``generation`` (None: the rows as
    first recorded, before any ``changed`` generation), or None where the table specifies none."""
    name = configuration(reasoning, tool)
    entry = ((_table()["expect"].get(name) or {}).get(shape) or {}).get(variant)
    if generation is not None:
        for since, rows in sorted(_table().get("changed", {}).items(), key=lambda kv: generation_key(kv[0])):
            row = ((rows.get(name) or {}).get(shape) or {}).get(variant)
            if row is not None and generation_key(generation) >= generation_key(since):
                entry = row
    return None if entry is None else Split.from_entry(entry)


def expected_in(reasoning: str | None, tool: str | None, shape: str, variant: str,
                generations: Sequence[str]) -> set[Split | None]:
    """The splits ``expected`` gives in each of ``generations`` (none known: every generation of the spec): one
    where the releases agree, several where the row changed between the ones a target may speak."""
    return {expected(reasoning, tool, shape, variant, g) for g in (generations or read_generations())}


def reading_changed(reasoning: str | None, tool: str | None, after: str, generations: Sequence[str]) -> list[str]:
    """The generations after ``after``, up to the newest the target may speak (none known: every generation of the
    spec), in which the table changed this configuration's rows: a split recorded at ``after`` may not hold there."""
    newest = max(generation_key(g) for g in (generations or read_generations()))
    name = configuration(reasoning, tool)
    return [since for since, rows in _table().get("changed", {}).items()
            if name in rows and generation_key(after) < generation_key(since) <= newest]


def keeps_special_tokens(reasoning: str | None, tool: str | None, request: dict[str, Any] | None,
                         generation: str, *, dialect: str = "chat") -> bool:
    """Whether a configured parser turns ``request``'s skip_special_tokens off in ``generation``, as the coupled
    server's does (``keeps_special_tokens`` of the table), so special tokens show as text whatever the request
    asked. In a chat request a null tool_choice is the absent one (RENDER-044); the chat request vLLM's Anthropic
    converter builds (``dialect="messages"``) keeps it null without tools, which vLLM's renderer does not read as
    "none". A caller that does not know the generation asks ``special_tokens_kept``."""
    request = request or {}
    tools = bool(request.get("tools"))
    choice = request.get("tool_choice")
    if choice is None and dialect == "chat":
        choice = "auto" if tools else "none"
    adjusted = reasoning is not None or choice != "none"
    rules = [_rule_at(_table()["keeps_special_tokens"].get(family), generation) for family in (reasoning, tool)
             if family]
    if unknown := set(rules) - {None, "always", "with-tools", "adjusted"}:
        raise ValueError(f"specs/parsers.yaml keeps_special_tokens: unknown rule {sorted(unknown)}")
    return any(rule == "always" or (rule == "with-tools" and tools and choice != "none")
               or (rule == "adjusted" and adjusted) for rule in rules)


def special_tokens_kept(reasoning: str | None, tool: str | None, request: dict[str, Any] | None,
                        generations: Sequence[str]) -> bool | None:
    """``keeps_special_tokens`` for a target that may speak any of ``generations`` (none known: any generation of
    the spec): the answer they share, or None where they disagree, so nothing can be expected."""
    return _agreed({keeps_special_tokens(reasoning, tool, request, g) for g in (generations or read_generations())})


def _rule_at(entry: str | list[dict[str, str]] | None, generation: str) -> str | None:
    """A family's rule in ``generation``: the entry itself, or the newest versioned rule it has reached."""
    if not isinstance(entry, list):
        return entry
    reached = [e["rule"] for e in entry if generation_key(generation) >= generation_key(str(e["since"]))]
    return reached[-1] if reached else None


def deletes_special_tokens(reasoning: str | None, tool: str | None, generation: str) -> bool:
    """Whether a configured parser deletes the special tokens that are not its markup from the text it splits in
    ``generation`` (``deletes_special_tokens`` of the table), so none shows even where it turned skip_special_tokens
    off."""
    since = _table()["deletes_special_tokens"]
    return any(family in since and generation_key(generation) >= generation_key(str(since[family]))
               for family in (reasoning, tool) if family)


def special_tokens_deleted(reasoning: str | None, tool: str | None, generations: Sequence[str]) -> bool | None:
    """``deletes_special_tokens`` for a target that may speak any of ``generations`` (none known: any generation of
    the spec), or None where they disagree."""
    return _agreed({deletes_special_tokens(reasoning, tool, g) for g in (generations or read_generations())})


def _agreed(answers: set[bool]) -> bool | None:
    return answers.pop() if len(answers) == 1 else None


def family_probes(kind: str) -> list[str]:
    """The shape ids a probe derenders first: each family of ``kind`` parses one of them, and no parser leaves
    them alone."""
    return list(_table()["probes"][kind]["any"])


def families_acting_on(kind: str, shape: str) -> list[str]:
    """The families of ``kind`` whose parser changes ``shape``'s text (splits it, or drops markers): a target
    that changed it runs one of them, or a family the spec does not describe, never one that leaves it alone."""
    families = REASONING_FAMILIES if kind == "reasoning" else TOOL_FAMILIES
    untouched = (shapes()[shape], None, ())
    return [f for f in families
            if (want := expected(*((f, None) if kind == "reasoning" else (None, f)), shape, "thinking")) is not None
            and (want.content, want.reasoning, want.tool_calls) != untouched]


def distinguishing_shapes(kind: str) -> list[str]:
    """Shape ids whose splits tell the families of ``kind`` apart (a family must match all of them)."""
    return list(_table()["probes"][kind]["distinguish"])

