"""The chat request an Anthropic Messages or a Responses request stands for: the mapping RENDER-026, RENDER-027 and
RENDER-030 write down, as the render oracle's input.

Written from the spec's sentences (which were read off vLLM's converters), apart from the bundled frontend's own
converter, so the two can disagree: the oracle then renders this chat request with transformers
(``suite/oracles/render_oracle.py``) and a dialect render must give the same token_ids.
"""

from __future__ import annotations

import json
from typing import Any

#: Responses item statuses that leave an assistant turn open for the prompt to continue (RENDER-030).
PARTIAL = ("in_progress", "incomplete")


def _joined_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(item["text"] for item in content or [] if isinstance(item, dict) and item.get("type") == "text")


#: Text that Claude Code prefixes to a per-request attribution block; RENDER-038 leaves it out of system text.
BILLING_HEADER = "x-anthropic-billing-header"


def refuses_inline_system(template: str) -> bool:
    """Whether a chat template refuses a system turn after the first (RENDER-038): it fails to render system, user,
    system, user given nothing else, in a sandboxed jinja environment with trimmed blocks."""
    import jinja2
    import jinja2.ext
    import jinja2.sandbox

    turns = [{"role": role, "content": "t"} for role in ("system", "user", "system", "user")]
    environment = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                                extensions=[jinja2.ext.loopcontrols])
    try:
        environment.from_string(template).render(messages=turns, add_generation_prompt=False)
    except Exception:  # noqa: BLE001 - any failure to render is the refusal
        return True
    return False


def _inline_system_text(content: Any) -> str | None:
    """An inline system message's text (RENDER-038): its string, or its text blocks joined with no separator, less
    billing-header text; None when nothing is left."""
    if isinstance(content, str):
        return None if content.startswith(BILLING_HEADER) else content or None
    texts = [b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and b.get("text")
             and not b["text"].startswith(BILLING_HEADER)]
    return "".join(texts) or None


def messages_as_chat(body: dict[str, Any], *, merge_inline_system: bool = False) -> dict[str, Any]:
    """The chat request of an Anthropic Messages request: its conversation and tools (RENDER-026, RENDER-027), and its
    inline system messages in place or, for a template that refuses them, merged into the leading one (RENDER-038)."""
    turns: list[dict[str, Any]] = []
    system = body.get("system")
    parts = [system] if isinstance(system, str) and system else [
        block["text"] for block in system or [] if block.get("type") == "text" and block.get("text")]
    inline = [(m, _inline_system_text(m["content"])) for m in body["messages"] if m["role"] == "system"]
    if merge_inline_system:
        parts += [text for _, text in inline if text is not None]
    if parts:
        turns.append({"role": "system", "content": "".join(parts)})
    for message in body["messages"]:
        role, content = message["role"], message["content"]
        if role == "system":
            text = _inline_system_text(content)
            if text is not None and not merge_inline_system:
                turns.append({"role": "system", "content": text})
            continue
        if isinstance(content, str):
            turns.append({"role": role, "content": content})
            continue
        texts, calls, reasoning = [], [], []
        for block in content:
            kind = block["type"]
            if kind == "text" and block.get("text"):
                texts.append(block["text"])
            elif kind == "thinking" and block.get("thinking") is not None:
                reasoning.append(block["thinking"])
            elif kind == "tool_use":
                calls.append({"id": block["id"], "type": "function",
                              "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result" and role == "user":
                turns.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                              "content": _joined_text(block.get("content"))})
        turn: dict[str, Any] = {"role": role}
        if texts:
            turn["content"] = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
        if role == "assistant" and reasoning:
            turn["reasoning"] = "".join(reasoning)
        if role == "assistant" and calls:
            turn["tool_calls"] = calls
        if role == "assistant" or "content" in turn:
            turns.append(turn)
    chat: dict[str, Any] = {"messages": turns}
    if body.get("tools") is not None:
        chat["tools"] = [{"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description"),
            "parameters": {**tool["input_schema"], "type": tool["input_schema"].get("type", "object")}}}
            for tool in body["tools"]]
    if body.get("chat_template_kwargs"):
        chat["chat_template_kwargs"] = body["chat_template_kwargs"]
    return chat


def responses_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat request of a Responses request: instructions, input items, function tools (RENDER-030, RENDER-031)."""
    turns: list[dict[str, Any]] = []
    if body.get("instructions"):
        turns.append({"role": "system", "content": body["instructions"]})
    items = body["input"]
    if isinstance(items, str):
        turns.append({"role": "user", "content": items})
        items = []
    for item in items:
        previous = turns[-1] if turns and turns[-1]["role"] == "assistant" else None
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if previous is not None:
                previous.setdefault("tool_calls", []).append(call)
            else:
                turns.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "function_call_output":
            turns.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif kind == "reasoning":
            source = item.get("content") or item.get("summary") or [{"text": ""}]
            _merge(turns, previous, "reasoning", source[0]["text"])
        elif item["role"] == "assistant":
            content = item["content"]
            _merge(turns, previous, "content", content if isinstance(content, str) else
                   (content[0]["text"] if content else ""))
        else:
            turns.append({"role": item["role"], "content": item["content"]})
    last = body["input"][-1] if isinstance(body["input"], list) and body["input"] else {}
    continues = (last.get("type") == "reasoning" or last.get("role") == "assistant") and last.get("status") in PARTIAL
    chat: dict[str, Any] = {"messages": turns, "add_generation_prompt": not continues,
                            "continue_final_message": continues}
    functions = [tool for tool in body.get("tools") or [] if tool.get("type") == "function"]
    if functions:
        chat["tools"] = [{"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description"), "parameters": tool.get("parameters")}}
            for tool in functions]
    if body.get("chat_template_kwargs"):
        chat["chat_template_kwargs"] = body["chat_template_kwargs"]
    return chat


def _merge(turns: list[dict[str, Any]], previous: dict[str, Any] | None, key: str, value: str) -> None:
    """An assistant item fills ``key`` of the assistant turn before it when that is still empty, else opens a turn."""
    if previous is not None and previous.get(key) is None:
        previous[key] = value
    else:
        turns.append({"role": "assistant", key: value})
