"""The render oracle: transformers' own ``apply_chat_template`` on the model folder, after RENDER-023.

Why transformers: it defines what a Hugging Face chat template means (the environment, the variables,
``continue_final_message``), and it is not the code under test, for the bundled frontend (its own Jinja
rendering) or for any other implementation. The message normalisation RENDER-023 specifies (what the
template is given for an OpenAI request) is written here from the spec's sentences, apart from the
frontend's, so a slip in either shows up as a disagreement.

transformers is imported lazily; without it (or without ``--tokenizer``) the tests that need the oracle
are not tested, never failed.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

_TEXT_TYPES = {"text", "input_text", "output_text", "refusal", "thinking"}


class OracleUnavailable(RuntimeError):
    """transformers is not installed, or the folder has no usable tokenizer/template."""


def _texts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    out = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
            continue
        kind = part.get("type", "text")
        if kind not in _TEXT_TYPES:
            raise ValueError(f"content part {kind!r} is not text")  # RENDER-023: refused, nothing to render
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        if isinstance(text, str):
            out.append(text)
    return out


def _object_args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def conversation(messages: list[dict[str, Any]], parts_format: bool,
                 developer_known: bool) -> list[dict[str, Any]]:
    """RENDER-023's conversation for these request messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        texts = _texts(m.get("content"))
        if parts_format and role != "tool":
            content: Any = [{"type": "text", "text": t} for t in texts]
        else:
            content = "\n".join(texts)
        turn: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant" and m.get("tool_calls"):
            turn["tool_calls"] = [{**c, "function": {**c["function"],
                                                      "arguments": _object_args(c["function"].get("arguments"))}}
                                  for c in m["tool_calls"]]
        if role == "assistant" and m.get("reasoning") is not None:
            turn["reasoning"] = turn["reasoning_content"] = m["reasoning"]
        if role == "tool" and "tool_call_id" in m:
            turn["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            turn["name"] = m["name"]
        out.append(turn)
    if developer_known or not any(t["role"] == "developer" for t in out):
        return out
    for turn in out:
        if turn["role"] == "developer":
            turn["role"] = "system"
    systems = [t for t in out if t["role"] == "system"]
    if len(systems) == 1 and out[0]["role"] == "system":
        return out
    joined = "\n\n".join(t for t in ("\n".join(_texts(s["content"])) if isinstance(s["content"], list)
                                     else s["content"] for s in systems) if t)
    return [{"role": "system", "content": joined}, *[t for t in out if t["role"] != "system"]]


def tools_for_template(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """RENDER-023's tools: type, then function with name, description, parameters (null when absent)."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        f = tool["function"]
        spec = {"name": f["name"], "description": f.get("description"), "parameters": f.get("parameters")}
        if f.get("strict") is not None:
            spec["strict"] = f["strict"]
        out.append({"type": "function", "function": spec})
    return out


@dataclass
class RenderOracle:
    """transformers' tokenizer for one model folder."""

    tokenizer: Any
    template: str
    multimodal: bool = False  # the folder has an image/video processor configuration

    @classmethod
    def load(cls, model_dir: Path) -> RenderOracle:
        return _load(str(Path(model_dir).resolve()))

    def _parts_format(self) -> bool:
        return _loops_over_content(self.template)

    def prompt_text(self, body: dict[str, Any]) -> str:
        """The chat prompt text a chat request renders to (the request's own fields, vLLM's defaults)."""
        kwargs = dict(body.get("chat_template_kwargs") or {})
        effort = body.get("reasoning_effort")
        if effort is not None and "enable_thinking" not in kwargs:
            kwargs["enable_thinking"] = effort != "none"
        if effort not in (None, "auto"):
            kwargs["reasoning_effort"] = effort
        for name in ("add_generation_prompt", "continue_final_message", "tokenize", "chat_template", "tools"):
            kwargs.pop(name, None)
        add_generation = body.get("add_generation_prompt")
        developer_known = '"developer"' in self.template or "'developer'" in self.template
        return self.tokenizer.apply_chat_template(
            conversation(body["messages"], self._parts_format(), developer_known),
            tools=tools_for_template(body.get("tools")), documents=body.get("documents"),
            add_generation_prompt=True if add_generation is None else add_generation,
            continue_final_message=bool(body.get("continue_final_message")), tokenize=False, **kwargs)

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        return self.encode(self.prompt_text(body), bool(body.get("add_special_tokens", False)))

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))


def _loops_over_content(template: str) -> bool:
    """Whether a template iterates over a message's content: then it is given content parts (RENDER-023)."""
    import jinja2
    from jinja2 import nodes

    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    env.add_extension(_generation_tag())
    def names_content(node: nodes.Node) -> bool:
        if isinstance(node, nodes.Name):
            return node.name == "content"
        if isinstance(node, nodes.Getattr):
            return node.attr == "content"
        return isinstance(node, nodes.Getitem) and getattr(node.arg, "value", None) == "content"

    # ``for x in message['content']``, ``for x in m.content | list``, ``for x in content``: the iterated expression
    # or any part of it is a content access.
    return any(names_content(loop.iter) or any(names_content(n) for n in loop.iter.find_all(nodes.Node))
               for loop in env.parse(template).find_all(nodes.For))


def _generation_tag() -> type:
    from jinja2 import nodes
    from jinja2.ext import Extension

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body).set_lineno(lineno)

    return Generation


@lru_cache(maxsize=8)
def _load(model_dir: str) -> RenderOracle:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        logging.getLogger("transformers").setLevel(logging.ERROR)
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:
        raise OracleUnavailable("transformers is not installed (pip install transformers)") from exc
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    except Exception as exc:  # noqa: BLE001 - any loading failure means no oracle for this folder
        raise OracleUnavailable(f"transformers cannot load {model_dir}: {exc}") from exc
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = template.get("default")
    if not isinstance(template, str):
        raise OracleUnavailable(f"{model_dir} defines no chat template")
    folder = Path(model_dir)
    multimodal = any((folder / name).is_file() for name in ("preprocessor_config.json", "processor_config.json",
                                                            "video_preprocessor_config.json"))
    return RenderOracle(tokenizer, template, multimodal)
