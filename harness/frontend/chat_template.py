"""Chat templates rendered with Hugging Face semantics: the same Jinja environment, filters and variables.

The reference frontend renders prompts with it; the conformance suite never does (its render oracle is
transformers' own ``apply_chat_template``, see ``suite/oracles/render_oracle.py``), so a bug here cannot hide itself.

Like transformers: a sandboxed immutable environment with trim_blocks/lstrip_blocks and loop controls,
``raise_exception``, a ``tojson`` that keeps non-ASCII text, ``strftime_now``; variables are ``messages``,
``tools``, ``documents``, ``add_generation_prompt``, the special tokens (``bos_token``, ``eos_token``, ...)
and the template keyword arguments. ``continue_final_message`` appends a marker to the final message's
(last text part of its) content, renders, and cuts the prompt at the marker, so a template that rewrites
the message (strips it, splits off a think block) still ends exactly where the message text ends.
The messages are expected already normalised (``conversation.normalise``).
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template failed on these messages (``raise_exception`` or a Jinja error): a client error."""


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class _GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}`` (assistant-mask markers) renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationBlock, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_ENV = _environment()
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
#: apply_chat_template's own parameters: accepted as template keyword arguments whatever the template reads.
_TEMPLATE_PARAMETERS = frozenset({
    "conversation", "tools", "documents", "chat_template", "add_generation_prompt", "continue_final_message",
    "tokenize", "padding", "truncation", "max_length", "return_tensors", "return_dict",
    "return_assistant_tokens_mask", "tokenizer_kwargs"})


@lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


@lru_cache(maxsize=8)
def template_variables(source: str) -> frozenset[str]:
    """The variables a template reads (undeclared names): the keyword arguments it can use."""
    return frozenset(jinja2.meta.find_undeclared_variables(_ENV.parse(source)))


def accepted_kwargs(source: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments the template may see: those it reads and apply_chat_template's own (vLLM's filter)."""
    unexpected = {"chat_template", "tokenize"} & kwargs.keys()
    if unexpected:
        raise ChatTemplateError(f"Found unexpected chat template kwargs from request: {unexpected}")
    keep = template_variables(source) | _TEMPLATE_PARAMETERS
    return {k: v for k, v in kwargs.items() if k in keep}


def _key(node: nodes.Node) -> str | None:
    """The attribute or constant subscript a node reads (``m.content``, ``m['content']``), if it reads one."""
    if isinstance(node, nodes.Getattr):
        return node.attr
    return getattr(node.arg, "value", None) if isinstance(node, nodes.Getitem) else None


@lru_cache(maxsize=8)
def wants_content_parts(source: str) -> bool:
    """True when the template loops over a message's content (vLLM's "openai" content format)."""
    for loop in _ENV.parse(source).find_all(nodes.For):
        if isinstance(loop.iter, nodes.Name) and loop.iter.name == "content":
            return True  # e.g. a macro that takes the content and loops over its parts
        accesses = [loop.iter, *loop.iter.find_all((nodes.Getitem, nodes.Getattr))]  # the iterable itself too
        if any(_key(node) == "content" for node in accesses):
            return True
    return False


def _mark_final_message(messages: list[dict[str, Any]]) -> str:
    """Append the continue tag to the final message's text; return that text (before the tag)."""
    final = messages[-1]
    content = final.get("content")
    if content is None:
        raise ChatTemplateError('continue_final_message is set but the final message has no "content" to '
                                "continue!")
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, dict) and "text" in part:
                text = part["text"]
                part["text"] = text + _CONTINUE_TAG
                return str(text)
        raise ChatTemplateError("continue_final_message is set but we could not find any text to continue in "
                                "the final message!")
    final["content"] = content + _CONTINUE_TAG
    return str(content)


def render_chat(template: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                add_generation_prompt: bool, continue_final_message: bool,
                special_tokens: dict[str, str], template_kwargs: dict[str, Any]) -> str:
    """Render normalised ``messages`` to the prompt text; template errors become ChatTemplateError (400)."""
    accepted = accepted_kwargs(template, template_kwargs)
    variables: dict[str, Any] = {**special_tokens,
                                 **{k: v for k, v in accepted.items() if k not in _TEMPLATE_PARAMETERS}}
    documents = accepted.get("documents")
    final = None
    if continue_final_message:
        if "content" not in template:
            raise ChatTemplateError('continue_final_message is set to "content" but this is not an accepted '
                                    "field in the chat_template")
        messages = copy.deepcopy(messages)
        final = _mark_final_message(messages)
    variables.update(messages=messages, tools=tools, documents=documents,
                     add_generation_prompt=add_generation_prompt)
    try:
        text = _compile(template).render(**variables)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(str(exc)) from exc
    if final is not None:
        tag = _CONTINUE_TAG.strip()
        if final.strip() not in text or tag not in text:
            raise ChatTemplateError("continue_final_message is set but the final message does not appear in the "
                                    "chat after applying the chat template")
        cut = text.rindex(tag)
        text = text[:cut] if text[cut:cut + len(_CONTINUE_TAG)] == _CONTINUE_TAG else text[:cut].rstrip()
    return text
