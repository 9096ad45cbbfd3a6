"""The other request dialects render serves, as vLLM 0.34's render server converts them: Anthropic Messages
(``/v1/messages/render``) and stateless Responses (``/v1/responses/render``), each into the chat request it stands
for, then rendered by chat render (RENDER-026..RENDER-033).

The conversions follow vLLM's converters rule by rule (the facts: ``anthropic/serving.py`` and
``openai/responses/utils.py`` of vLLM 0.34), including what a client might not expect: Messages tool results become
tool messages before the user's own text, a body request_id is ignored; Responses keeps only an assistant message's
first content part, never reads X-Request-Id, and answers without parse_context or reasoning_ended.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from tokenspec.harness.frontend.errors import ApiError, bad_request

#: Anthropic efforts, in the order vLLM's disabled-thinking probe tries them.
EFFORTS = ("low", "medium", "high", "xhigh", "max")
_PARTIAL = ("in_progress", "incomplete")
_CUSTOM_TOOL_PARAMETERS = {"type": "object", "properties": {"input": {
    "type": "string", "description": "The freeform text payload for this tool."}},
    "required": ["input"], "additionalProperties": False}
#: Responses fields that keep their chat name on the way to sampling_params (max_output_tokens is max_tokens).
_RESPONSES_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                       "frequency_penalty", "stop", "stop_token_ids", "seed", "ignore_eos", "logit_bias", "stream",
                       "include_stop_str_in_output", "skip_special_tokens", "priority", "thinking_token_budget",
                       "structured_outputs")
_PASSED = ("cache_salt", "kv_transfer_params", "ec_transfer_params", "vllm_xargs", "watermarking",
           "chat_template_kwargs")


# -- Anthropic Messages ---------------------------------------------------------------------------------------------


def _system_text(content: Any) -> str | None:
    if isinstance(content, str):
        return None if content.startswith("x-anthropic-billing-header") else content
    parts = [b["text"] for b in content if b.get("type") == "text" and b.get("text")
             and not b["text"].startswith("x-anthropic-billing-header")]
    return "".join(parts) if parts else None


def _image_url(source: Any) -> str:
    source = source if isinstance(source, dict) else {}
    if source.get("type") == "url":
        return str(source.get("url") or "")
    return f"data:{source.get('media_type') or 'image/jpeg'};base64,{source.get('data') or ''}"


def _tool_result(block: dict[str, Any], turns: list[dict[str, Any]]) -> None:
    """A user's tool_result: one tool message (text items joined by newlines, tool references first), then its
    images as a user message of their own."""
    content = block.get("content")
    text, images, references = "", [], []
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text":
                texts.append(item.get("text", ""))
            elif item.get("type") == "image":
                images.append(_image_url(item.get("source")))
            elif item.get("type") == "tool_reference" and (name := item.get("tool_name") or item.get("name")):
                references.append({"type": "tool_reference", "name": name})
        text = "\n".join(texts)
    tool_content: Any = text
    if references:
        tool_content = references + ([{"type": "text", "text": text}] if text else [])
    turns.append({"role": "tool", "tool_call_id": block.get("tool_use_id") or "", "content": tool_content})
    if images:
        turns.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}} for u in images]})


def _message(message: dict[str, Any], turns: list[dict[str, Any]]) -> None:
    role, content = message["role"], message["content"]
    turn: dict[str, Any] = {"role": role}
    if isinstance(content, str):
        turn["content"] = content
    else:
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for block in content:
            kind = block.get("type")
            if kind == "document":
                raise bad_request("document blocks cannot be rendered: this server serves text and images only")
            if kind == "text" and block.get("text"):
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "image" and block.get("source"):
                parts.append({"type": "image_url", "image_url": {"url": _image_url(block["source"])}})
            elif kind == "thinking" and block.get("thinking") is not None:
                reasoning.append(block["thinking"])
            elif kind == "tool_use":
                calls.append({"id": block.get("id") or f"call_{int(time.time())}", "type": "function",
                              "function": {"name": block.get("name") or "",
                                           "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                if role == "user":
                    _tool_result(block, turns)
                else:
                    shown = str(block.get("content")) if block.get("content") else ""
                    parts.append({"type": "text", "text": f"Tool result: {shown}"})
        if reasoning:
            turn["reasoning"] = "".join(reasoning)
        if calls:
            turn["tool_calls"] = calls
        if parts:
            turn["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    if not (role == "user" and "content" not in turn):
        turns.append(turn)


def _resolved_tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tools in effect at the conversation's end: tool_addition / tool_removal blocks applied in order."""
    changes = [b for m in body["messages"] if not isinstance(m["content"], str) for b in m["content"]
               if b.get("type") in ("tool_addition", "tool_removal")]
    if not changes:
        return body.get("tools")
    tools = {t["name"]: t for t in body.get("tools") or []}
    removed: set[str] = set()
    for block in changes:
        change = block.get("tool") or {}
        if "definition" in change:
            name = change["definition"]["name"]
            tools[name] = change["definition"]
        else:
            name = change.get("name")
            if name not in tools:
                raise bad_request(f"{block['type']} references tool {name!r}, which is not declared in tools")
            if block["type"] == "tool_addition":
                tools[name] = {**tools[name], "defer_loading": None}
        (removed.add if block["type"] == "tool_removal" else removed.discard)(name)
    return [tool for name, tool in tools.items() if name not in removed]


def _function(name: Any, description: Any, parameters: Any, source: dict[str, Any]) -> dict[str, Any]:
    spec = {"name": name, "description": description, "parameters": parameters}
    for key in ("strict", "defer_loading"):
        if source.get(key) is not None:
            spec[key] = source[key]
    return {"type": "function", "function": spec}


def messages_to_chat(body: dict[str, Any], *, merge_inline_system: bool, disabled_effort: str) -> dict[str, Any]:
    """The chat request vLLM's Anthropic converter builds (tools and tool_choice set after, unchecked)."""
    turns: list[dict[str, Any]] = []
    system = body.get("system")
    parts = [system] if isinstance(system, str) and system else [
        b["text"] for b in system or [] if b.get("type") == "text" and b.get("text")
        and not b["text"].startswith("x-anthropic-billing-header")]
    if merge_inline_system:
        parts += [t for m in body["messages"] if m["role"] == "system" and (t := _system_text(m["content"]))]
    if parts:
        turns.append({"role": "system", "content": "".join(parts)})
    for message in body["messages"]:
        if message["role"] == "system":
            if not merge_inline_system and (text := _system_text(message["content"])):
                turns.append({"role": "system", "content": text})
            continue
        _message(message, turns)
    chat: dict[str, Any] = {"model": body["model"], "messages": turns, "max_tokens": body["max_tokens"],
                            "max_completion_tokens": body["max_tokens"]}
    for ours, theirs in (("stop", "stop_sequences"), ("temperature", "temperature"), ("top_p", "top_p"),
                         ("top_k", "top_k"), ("min_tokens", "min_tokens"), *((k, k) for k in _PASSED)):
        if body.get(theirs) is not None:
            chat[ours] = body[theirs]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    output = body.get("output_config") or {}
    form = output.get("format") or {}
    if form.get("schema") is not None or form.get("json_schema") is not None:
        chat["response_format"] = {"type": form.get("type"), "json_schema": {
            "schema": form.get("schema", form.get("json_schema")), "name": form.get("type")}}
    if output.get("effort") is not None:
        chat["reasoning_effort"] = output["effort"]
    thinking = body.get("thinking") or {}
    if thinking.get("type") in ("disabled", "between_tools"):
        chat["reasoning_effort"] = disabled_effort
    elif thinking.get("type") == "enabled":
        chat["thinking_token_budget"] = thinking.get("budget_tokens")
    choice = body.get("tool_choice")
    chat["tool_choice"] = None
    if choice is not None:
        chat["parallel_tool_calls"] = not choice.get("disable_parallel_tool_use")
        kind = choice["type"]
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(kind) or {
            "type": "function", "function": {"name": choice.get("name")}}
    tools = _resolved_tools(body)
    if tools is not None:
        chat["tools"] = [_function(t["name"], t.get("description"),
                                   {**t["input_schema"], "type": t["input_schema"].get("type", "object")}, t)
                         for t in tools]
        if chat["tool_choice"] is None:
            chat["tool_choice"] = "auto"
    return chat


def _model_error(message: str) -> ApiError:
    """A refusal by vLLM's Anthropic request model (pydantic): 400, type Bad Request, param body."""
    return ApiError(f"1 validation error:\n  {{'loc': 'body', 'msg': '{message}'}}", status=400, err_type="Bad Request",
                    param="body")


def check_messages(body: dict[str, Any]) -> None:
    """What vLLM's Anthropic model refuses beyond the schema's shapes."""
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled" and isinstance(thinking.get("budget_tokens"), int) \
            and thinking["budget_tokens"] >= body["max_tokens"] \
            and not (body.get("kv_transfer_params") or {}).get("do_remote_decode"):
        raise _model_error("thinking.budget_tokens must be less than max_tokens")
    for message in body["messages"]:
        blocks = [] if isinstance(message["content"], str) else message["content"]
        changes = [b for b in blocks if b.get("type") in ("tool_addition", "tool_removal")]
        if message["role"] != "system" and changes:
            raise _model_error('tool_addition and tool_removal blocks are only allowed in messages with role '
                               '"system"')
        for block in changes:
            if not isinstance(block.get("tool"), dict):
                raise _model_error(f"tool is required for {block['type']} blocks")
            if block["type"] == "tool_removal" and block["tool"].get("type") != "tool_reference":
                raise _model_error("tool_removal only accepts a tool_reference")
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool" and not choice.get("name"):
        raise bad_request("tool_choice.name is required when type is 'tool'", param="tool_choice")


# -- Responses ------------------------------------------------------------------------------------------------------


def _item_message(item: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """One input item as vLLM builds its chat message: None when it filled ``previous`` (an assistant turn)."""
    kind = item.get("type")
    if kind in ("function_call", "custom_tool_call"):
        name = item.get("name")
        if kind == "function_call" and item.get("namespace"):
            name = f"{item['namespace']}__{name}"
        arguments = item.get("arguments") if kind == "function_call" else \
            json.dumps({"input": item.get("input") or ""}, ensure_ascii=False)
        call = {"id": item.get("call_id"), "type": "function", "function": {"name": name, "arguments": arguments}}
        if previous is not None:
            previous.setdefault("tool_calls", []).append(call)
            return None
        return {"role": "assistant", "tool_calls": [call]}
    if kind == "reasoning":
        if item.get("encrypted_content"):
            raise ApiError("Encrypted content is not supported. (parameter=input)", param="input")
        source = item.get("content") or item.get("summary") or []
        first = source[0] if source else ""
        text = first.get("text", "") if isinstance(first, dict) else str(first)
        return _fill(previous, "reasoning", text)
    if kind in ("function_call_output", "custom_tool_call_output"):
        return {"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")}
    if item.get("role") == "assistant":
        content = item.get("content")
        if isinstance(content, list):
            first = content[0] if content else {}
            text = first.get("text", "") if isinstance(first, dict) else str(first)
        else:
            text = content if isinstance(content, str) else ""
        return _fill(previous, "content", text)
    if "role" in item:
        return {k: v for k, v in item.items() if k in ("role", "content", "name")}
    raise ApiError(f"Unsupported input item type: {kind} (parameter=input)", param="input")


def _fill(previous: dict[str, Any] | None, key: str, value: str) -> dict[str, Any] | None:
    if previous is not None and previous.get(key) is None:
        previous[key] = value
        return None
    return {"role": "assistant", key: value}


def _responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        if tool.get("type") == "function":
            out.append(_function(tool.get("name"), tool.get("description"), tool.get("parameters"), tool))
        elif tool.get("type") == "namespace":
            out += [_function(f"{tool.get('name')}__{t.get('name')}", t.get("description"), t.get("parameters"), t)
                    for t in tool.get("tools") or [] if t.get("type") == "function"]
        elif tool.get("type") == "custom":
            out.append(_function(tool.get("name"), tool.get("description"), _CUSTOM_TOOL_PARAMETERS, tool))
    return out


def _tool_choice(body: dict[str, Any], names: list[str]) -> Any:
    """Responses' tool_choice as vLLM's validators settle it (without tools: auto and none become none)."""
    choice = body.get("tool_choice", "auto")
    if not body.get("tools"):
        if choice in ("auto", "none"):
            return "none"
        if choice == "required":
            raise ApiError("Tool choice 'required' must be specified with 'tools' parameter. "
                           "(parameter=tool_choice)", param="tool_choice")
        raise ApiError("Tool choice 'function' not found in 'tools' parameter. (parameter=tool_choice)",
                       param="tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom") and choice.get("name") not in names:
        raise ApiError("Tool choice 'function' not found in 'tools' parameter. (parameter=tool_choice)",
                       param="tool_choice")
    return choice


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat request vLLM's Responses render builds: instructions first, items merged into assistant turns."""
    turns: list[dict[str, Any]] = []
    if body.get("instructions"):
        turns.append({"role": "system", "content": body["instructions"]})
    items = body["input"]
    if isinstance(items, str):
        turns.append({"role": "user", "content": items})
    else:
        for item in items:
            if not isinstance(item, dict):
                raise ApiError("Unsupported input item type: None (parameter=input)", param="input")
            previous = turns[-1] if turns and turns[-1].get("role") == "assistant" else None
            if (message := _item_message(item, previous)) is not None:
                turns.append(message)
    last = items[-1] if isinstance(items, list) and items else {}
    continues = isinstance(last, dict) and (last.get("type") == "reasoning" or last.get("role") == "assistant") \
        and last.get("status") in _PARTIAL
    tools = _responses_tools(body.get("tools") or [])
    choice = _tool_choice(body, [t["function"]["name"] for t in tools])
    chat: dict[str, Any] = {"model": body.get("model"), "messages": turns, "add_generation_prompt": not continues,
                            "continue_final_message": continues}
    if tools:
        chat["tools"] = tools
        chat["tool_choice"] = choice
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None:
        chat["reasoning_effort"] = effort
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for name in (*_RESPONSES_SAMPLING, *_PASSED):
        if body.get(name) is not None:
            chat[name] = body[name]
    form = (body.get("text") or {}).get("format") or {}
    if form.get("type") in ("json_object", "json_schema"):
        if body.get("structured_outputs") is not None:
            raise ApiError("Cannot specify both structured_outputs and text.format (parameter=structured_outputs)",
                           param="structured_outputs")
        chat["response_format"] = {"type": form["type"], "json_schema": {"schema": form.get("schema")}} \
            if form["type"] == "json_schema" else {"type": "json_object"}
    return chat


def responses_request_id(body: dict[str, Any]) -> str:
    """The body's request_id verbatim, else ``resp_`` and 16 hex digits (never X-Request-Id)."""
    given = body.get("request_id")
    return given if isinstance(given, str) and given else f"resp_{secrets.token_hex(8)}"
