"""Chat templates with Hugging Face semantics: the same Jinja environment, filters and variables.

Shared by the reference frontend (which renders prompts with it) and the conformance suite (which uses it
as an independent oracle for what a model folder's template defines), so it lives in the core package.

Like transformers: a sandboxed immutable environment with trim_blocks/lstrip_blocks and loop controls,
``raise_exception``, a ``tojson`` that keeps non-ASCII text, ``strftime_now``; variables are ``messages``,
``tools``, ``add_generation_prompt``, the special tokens (``bos_token``, ``eos_token``, ...) and any
``chat_template_kwargs``. Messages are normalised the way vLLM does before rendering (content-part lists
joined or kept depending on what the template expects; tool-call arguments decoded from JSON strings).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template failed on these messages (``raise_exception`` or a Jinja error): a client error."""


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_ENV = _environment()


@lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


@lru_cache(maxsize=8)
def wants_content_parts(source: str) -> bool:
    """True when the template loops over ``message['content']`` (vLLM's "openai" content format)."""
    for loop in _ENV.parse(source).find_all(nodes.For):
        if isinstance(loop.iter, nodes.Name) and loop.iter.name == "content":
            return True  # e.g. a macro that takes the content and loops over its parts
        for node in loop.iter.find_all((nodes.Getitem, nodes.Getattr)):
            key = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
            if key == "content":
                return True
        if isinstance(loop.iter, nodes.Getattr) and loop.iter.attr == "content":
            return True
    return False


def _normalise_content(content: Any, as_parts: bool) -> Any:
    if content is None:
        return [] if as_parts else ""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if as_parts else content
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    if as_parts:
        return [{"type": "text", "text": t} for t in texts]
    return "\n".join(texts)


def _normalise_message(message: dict[str, Any], as_parts: bool) -> dict[str, Any]:
    out = dict(message)
    out["content"] = _normalise_content(message.get("content"), as_parts)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        fixed = []
        for call in calls:
            call = dict(call)
            function = dict(call.get("function") or {})
            args = function.get("arguments")
            if isinstance(args, str):
                try:
                    function["arguments"] = json.loads(args)
                except ValueError:
                    pass
            call["function"] = function
            fixed.append(call)
        out["tool_calls"] = fixed
    return out


def render_chat(template: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                add_generation_prompt: bool, continue_final_message: bool,
                special_tokens: dict[str, str], template_kwargs: dict[str, Any]) -> str:
    """Render ``messages`` to the prompt text; template errors become 400s."""
    as_parts = wants_content_parts(template)
    variables: dict[str, Any] = {**special_tokens, **template_kwargs}
    variables.update(messages=[_normalise_message(m, as_parts) for m in messages], tools=tools,
                     add_generation_prompt=add_generation_prompt)
    try:
        text = _compile(template).render(**variables)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(str(exc)) from exc
    if continue_final_message and messages:
        final = _normalise_content(messages[-1].get("content"), False)
        cut = text.rfind(final) if final else -1
        if cut != -1:
            text = text[: cut + len(final)]
    return text


def token_text(value: Any) -> str | None:
    """A special token in tokenizer_config.json is a string or an AddedToken-like dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


@dataclass(frozen=True)
class ChatTemplate:
    """A model folder's chat template and the special tokens it may refer to."""

    source: str
    special_tokens: dict[str, str]

    @classmethod
    def from_model_dir(cls, model_dir: Path) -> ChatTemplate:
        config_path = model_dir / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
        source = config.get("chat_template")
        jinja_file = model_dir / "chat_template.jinja"
        if jinja_file.is_file():
            source = jinja_file.read_text(encoding="utf-8")
        if not isinstance(source, str):
            raise ChatTemplateError(f"{model_dir} defines no chat template")
        special = {name: text for name in SPECIAL_TOKEN_NAMES if (text := token_text(config.get(name)))}
        return cls(source, special)

    def render(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
               add_generation_prompt: bool = True, continue_final_message: bool = False,
               **template_kwargs: Any) -> str:
        return render_chat(self.source, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                           continue_final_message=continue_final_message, special_tokens=self.special_tokens,
                           template_kwargs=template_kwargs)
