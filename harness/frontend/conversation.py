"""What a chat template sees: OpenAI request messages and tools normalised the way vLLM 0.32 does.

Real templates read the messages in ways the OpenAI format does not fix: Qwen3 reads an assistant turn's
``reasoning_content``, Llama 3.1 ``tojson``s tool-call ``arguments`` (a mapping, not the request's string),
most templates expect string content. vLLM rebuilds every message before rendering, and a frontend that
renders the raw request gives other token ids for the same conversation. The rules (RENDER-023):

- content: a string becomes one text part; null becomes no parts; text-like parts (``text``,
  ``input_text``, ``output_text``, ``refusal``, ``thinking``) keep their text (null text: the part is
  skipped); a part this text-only frontend cannot serve (``image_url``, ``input_audio``, ...) is refused;
  then the template's content format decides: a template that loops over content gets the parts as
  ``{"type": "text", "text": ...}`` (with the part's other keys), any other gets the texts joined with "\\n".
  Tool results are always joined into one string.
- a message is rebuilt from its known keys only: ``role``, ``content``, ``name`` (a string),
  ``tool_calls`` (assistant), ``reasoning`` (assistant, also copied to ``reasoning_content``; a request's
  ``reasoning_content`` alone is not carried), ``tool_call_id`` (tool), ``tools`` (developer).
- assistant ``tool_calls``: an empty list is dropped; each call must be a function call; its ``arguments``
  become a mapping (a JSON object string is decoded; malformed JSON, a non-object, null or "" become ``{}``).
- ``developer`` messages become ``system`` messages (without ``tools``) when the template never names the
  developer role; system messages are then merged into one first message (texts joined by a blank line)
  when one is not first or there are several.
- tools are rebuilt as ``{"type": "function", "function": {"name", "description", "parameters"[, "strict"]}}``
  in that key order, absent fields as null (``strict`` only when set): ``tojson`` in a template prints them.
"""

from __future__ import annotations

import json
from typing import Any

from tokenspec.harness.frontend.chat_template import ChatTemplateError

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal", "thinking"})
_TEXT_KEY = {"refusal": "refusal", "thinking": "thinking"}


def _part_text(part: Any) -> tuple[bool, str | None]:
    """(is a text part, its text) for one content part; other parts are refused."""
    if isinstance(part, str):
        return True, part
    if not isinstance(part, dict):
        raise ChatTemplateError(f"Unsupported chat content part: {part!r}")
    kind = part.get("type", "text")
    if kind in TEXT_PART_TYPES:
        text = part.get(_TEXT_KEY.get(kind, "text"))
        if text is None and kind == "thinking":
            text = part.get("text")
        return True, text if isinstance(text, str) else None
    raise ChatTemplateError(f"This model serves text only: a {kind!r} content part cannot be rendered")


def _content(content: Any, as_parts: bool, joined: bool) -> Any:
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    else:
        parts = list(content)
    kept: list[tuple[Any, str]] = []
    for part in parts:
        is_text, text = _part_text(part)
        if is_text and text is not None:
            kept.append((part, text))
    if as_parts and not joined:
        out = []
        for part, text in kept:
            extra = {k: v for k, v in part.items() if k not in ("type", "text")} if isinstance(part, dict) else {}
            out.append({"type": "text", "text": text, **extra})
        return out
    return "\n".join(text for _, text in kept)


def _arguments(value: Any) -> dict[str, Any]:
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_calls(calls: list[Any]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        if not isinstance(call, dict):
            raise ChatTemplateError("assistant tool_calls entries must be objects.")
        function = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(function, dict):
            raise ChatTemplateError("chat completions only support assistant tool_calls of type 'function'.")
        out.append({**call, "function": {**function, "arguments": _arguments(function.get("arguments"))}})
    return out


def _message(message: dict[str, Any], as_parts: bool) -> dict[str, Any]:
    role = message["role"]
    out: dict[str, Any] = {"role": role, "content": _content(message.get("content"), as_parts, role == "tool")}
    if role == "assistant":
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            out["tool_calls"] = _tool_calls(calls)
        if message.get("reasoning") is not None:
            out["reasoning"] = out["reasoning_content"] = message["reasoning"]
    elif role == "tool" and "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    if role == "developer":
        out["tools"] = message.get("tools")
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p["text"] if isinstance(p, dict) else str(p) for p in content
                         if isinstance(p, str) or (isinstance(p, dict) and "text" in p))
    return content or ""


def _developer_as_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for message in messages:
        if message["role"] == "developer":
            message = {k: v for k, v in message.items() if k != "tools"}
            message["role"] = "system"
        converted.append(message)
    systems = [i for i, m in enumerate(converted) if m["role"] == "system"]
    if not systems or systems == [0]:
        return converted
    texts = [t for i in systems if (t := _text_of(converted[i].get("content")))]
    rest = [m for m in converted if m["role"] != "system"]
    return [{"role": "system", "content": "\n\n".join(texts)}, *rest]


def normalise(messages: list[dict[str, Any]], template: str, as_parts: bool) -> list[dict[str, Any]]:
    """The conversation the template renders (see the module docstring for each rule)."""
    out = [_message(m, as_parts) for m in messages]
    if any(m["role"] == "developer" for m in out) and '"developer"' not in template \
            and "'developer'" not in template:
        out = _developer_as_system(out)
    return out


def normalise_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tools as vLLM hands them to the template: fixed keys in a fixed order, absent ones null."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        function = tool.get("function") or {}
        spec: dict[str, Any] = {"name": function.get("name"), "description": function.get("description"),
                                "parameters": function.get("parameters")}
        if function.get("strict") is not None:
            spec["strict"] = function["strict"]
        if function.get("defer_loading") is not None:
            spec["defer_loading"] = function["defer_loading"]
        entry: dict[str, Any] = {"type": "function", "function": spec}
        if tool.get("defer_loading") is not None:
            entry["defer_loading"] = tool["defer_loading"]
            spec.setdefault("defer_loading", tool["defer_loading"])
        out.append(entry)
    return out
