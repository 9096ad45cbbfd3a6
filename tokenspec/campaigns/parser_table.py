"""Recording ``specs/parsers.yaml`` from vLLM's own parsers: ``tokenspec spec parsers``.

The table is the suite's oracle for every derender split, so its rows come from vLLM's GPU-less render server
started with each parser configuration, never from tokenspec's frontend. For each configuration this starts
that server on a model whose tokens the parsers know (``recording_folder``), derenders every shape of the
table with thinking on and off under the table's request, and compares each answer with the row the table
holds: a missing row is added (``--write``), a differing row is reported and kept (a row is changed by hand,
with the reason in the file's header; vLLM's own bugs are listed in its expectations, not copied here).

finish_reason is the spec's, not vLLM 0.32's: a parsed tool call turns "stop" into "tool_calls" (DERENDER-006).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tokenspec.core.transport import Transport
from tokenspec.core.yaml_files import load_yaml
from tokenspec.specs.catalogue import SPEC_DIR
from tokenspec.specs.parser_families import (
    VARIANTS,
    configuration,
    shapes,
    table_request,
)

__all__ = ["TableDiff", "record", "recording_folder", "write_rows"]

TABLE = SPEC_DIR / "parsers.yaml"
_DERENDER = "/v1/chat/completions/derender"


def recording_folder(reasoning: str | None, tool: str | None, work: Path) -> Path:
    """The model folder a configuration is recorded on: the tiny model (``<think>`` and ``<tool_call>`` are
    added tokens in it), with the Llama 3 tokens added for llama3_json, which refuses a vocabulary without
    ``<|python_tag|>``; the gemma-4 family for gemma4, whose parser finds its markers by token id."""
    from tokenspec.harness.models import build as build_family
    from tokenspec.harness.models.tiny import build, with_llama3_tokens

    if "gemma4" in (reasoning, tool):
        gemma = work / "gemma-4"
        if not (gemma / "tokenizer.json").is_file():
            build_family(gemma, "gemma-4")
        return gemma
    tiny = work / "tiny"
    if not (tiny / "tokenizer.json").is_file():
        build(tiny)
    if tool != "llama3_json":
        return tiny
    llama = work / "tiny-llama3-tokens"
    return llama if (llama / "tokenizer.json").is_file() else with_llama3_tokens(tiny, llama)


@dataclass
class TableDiff:
    """What one recording found: rows added (or to add) and rows whose recorded answer differs."""

    added: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    rows: dict[str, Any] = field(default_factory=dict)


def _entry(choice: dict[str, Any]) -> dict[str, Any]:
    message = choice["message"]
    entry: dict[str, Any] = {"content": message.get("content") or None,
                             "reasoning": message.get("reasoning") or message.get("reasoning_content") or None}
    calls = []
    for call in message.get("tool_calls") or []:
        arguments = call["function"]["arguments"]
        try:
            arguments = json.loads(arguments)
        except (TypeError, ValueError):
            pass
        calls.append({"name": call["function"]["name"], "arguments": arguments})
    if calls:
        entry["tool_calls"] = calls
    finish = choice["finish_reason"]
    entry["finish_reason"] = "tool_calls" if calls and finish == "stop" else finish  # DERENDER-006
    return entry


def derender_row(url: str, model: str, encode: Any, text: str, tool: str | None, variant: str) -> dict[str, Any]:
    """vLLM's split of ``text`` under the table's request, as a table entry."""
    ids = encode(text)
    body = {"model": model, "prompt_tokens": 3, "chat_request": table_request(model, tool is not None, variant),
            "generate_response": {"request_id": "table", "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "stop"}]}}
    with Transport().client(timeout=60) as client:
        response = client.post(f"{url}{_DERENDER}", json=body)
    if response.status_code != 200:
        raise RuntimeError(f"vLLM refused the derender of {text!r}: {response.status_code} {response.text[:300]}")
    return _entry(response.json()["choices"][0])


def record(configs: Iterable[tuple[str | None, str | None]], wanted: Iterable[str] | None = None) -> TableDiff:
    """Start one vLLM render server per configuration and record every shape (or the ``wanted`` ones)."""
    import tempfile

    from tokenizers import Tokenizer

    from tokenspec.harness.implementations import vllm

    table = load_yaml(TABLE.read_text(encoding="utf-8"))
    expect: dict[str, Any] = table["expect"]
    texts = {k: v for k, v in shapes().items() if wanted is None or k in set(wanted)}
    diff = TableDiff(rows=expect)
    install = vllm.find_vllm("auto")
    work = Path(tempfile.mkdtemp(prefix="tokenspec-parser-table-"))
    for reasoning, tool in configs:
        folder = recording_folder(reasoning, tool, work)
        model = json.loads((folder / "tokenspec-model.json").read_text())["name"]
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))

        def encode(text: str, tokenizer: Tokenizer = tokenizer) -> list[int]:
            return tokenizer.encode(text, add_special_tokens=False).ids
        name = configuration(reasoning, tool)
        rows = expect.setdefault(name, {})
        with vllm.VllmServer(install, "render", folder, model, extra_args=vllm.parser_args(tool, reasoning)) as srv:
            for shape, text in texts.items():
                for variant in VARIANTS:
                    got = derender_row(srv.url, model, encode, text, tool, variant)
                    have = (rows.get(shape) or {}).get(variant)
                    if have is None:
                        rows.setdefault(shape, {})[variant] = got
                        diff.added.append(f"{name} {shape} {variant}")
                    elif _normal(have) != _normal(got):
                        diff.differing.append(f"{name} {shape} {variant}: table {json.dumps(have)}, vLLM "
                                              f"{json.dumps(got)}")
    return diff


def _normal(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry with null and empty parts made equal (the table writes a "" reasoning as null)."""
    return {"content": entry.get("content") or None, "reasoning": entry.get("reasoning") or None,
            "tool_calls": entry.get("tool_calls") or [], "finish_reason": entry.get("finish_reason", "stop")}


def write_rows(rows: dict[str, Any], path: Path = TABLE) -> None:
    """Rewrite the ``expect:`` section (the file's last key) with ``rows``; the header and shapes stay as written,
    and each configuration's shapes follow the order of ``shapes:``."""
    text = path.read_text(encoding="utf-8")
    head, marker, _ = text.partition("\nexpect:\n")
    if not marker:
        raise RuntimeError(f"{path} has no top-level 'expect:' section")
    order = list(shapes())
    ordered = {config: {s: rows[config][s] for s in sorted(rows[config], key=lambda s: (
        order.index(s) if s in order else len(order), s))} for config in rows}
    body = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, width=120)
    path.write_text(head + marker + re.sub(r"^(?=.)", "  ", body, flags=re.MULTILINE), encoding="utf-8")
