"""Builders for the request bodies the tests send, so each test states only what it varies."""

from __future__ import annotations

from typing import Any

from tokenspec.specs.samples import WEATHER_TOOL

TOOL = WEATHER_TOOL
USER_HELLO = [{"role": "user", "content": "Hello, who are you?"}]
# Switches thinking off for templates that support it, so derendered text lands in `content` on servers
# with a reasoning parser; templates and servers without the switch ignore it.
PLAIN = {"enable_thinking": False}


def chat_request(model: str, messages: list[dict] | None = None, **fields: Any) -> dict[str, Any]:
    return {"model": model, "messages": messages or USER_HELLO, **fields}


def plain_chat_request(model: str, **fields: Any) -> dict[str, Any]:
    """A chat request whose derendered output is plain content (no reasoning split)."""
    return chat_request(model, chat_template_kwargs=PLAIN, **fields)


def choice(token_ids: list[int], index: int = 0, finish_reason: str | None = "stop", **extra: Any) -> dict[str, Any]:
    return {"index": index, "token_ids": token_ids, "finish_reason": finish_reason, **extra}


def generate_response(*choices: dict[str, Any], request_id: str = "tokenspec-req", **extra: Any) -> dict[str, Any]:
    return {"request_id": request_id, "choices": list(choices), **extra}


def chat_derender(
    model: str,
    response: dict[str, Any],
    *,
    chat_request: dict[str, Any] | None = None,
    prompt_tokens: int | None = 7,
    **extra: Any,
) -> dict[str, Any]:
    body = {"model": model, "generate_response": response, "chat_request": chat_request or plain_chat_request(model)}
    if prompt_tokens is not None:
        body["prompt_tokens"] = prompt_tokens
    return {**body, **extra}


def completions_derender(
    model: str, responses: list[dict[str, Any]], *, prompt: str | list = "Hello", **extra: Any
) -> dict[str, Any]:
    return {
        "model": model,
        "generate_responses": responses,
        "prompt_tokens": [3] * len(responses),
        "completion_request": {"model": model, "prompt": prompt},
        **extra,
    }


CHAT_DERENDER = "/v1/chat/completions/derender"
STREAM_PROMPT = [1, 2, 3]


def stream_body(
    model: str, path: str, chunk: dict[str, Any], state: dict[str, Any] | None = None,
    prompt_token_ids: list[int] = STREAM_PROMPT, chat: dict[str, Any] | None = None, prompt: str = "Hello",
) -> dict[str, Any]:
    """One streamed derender body for ``path`` (chat or completions): a generate chunk, the stream_state so far,
    the prompt's ids, and the chat request (a plain one unless given) or a completions request for ``prompt``."""
    body: dict[str, Any] = {"model": model, "stream": True, "generate_chunk": chunk, "stream_state": state,
                            "prompt_tokens": len(prompt_token_ids), "prompt_token_ids": prompt_token_ids}
    if path == CHAT_DERENDER:
        body["chat_request"] = chat or plain_chat_request(model)
    else:
        body["completion_request"] = {"model": model, "prompt": prompt}
    return body


def visible_text(message: dict[str, Any]) -> str:
    """reasoning + content: where plain decoded text ends up whichever parser a server runs."""
    return (message.get("reasoning") or message.get("reasoning_content") or "") + (message.get("content") or "")


def generate_request(token_ids: list[int], *, top: dict[str, Any] | None = None, **sampling: Any) -> dict[str, Any]:
    """A GenerateRequest body: prompt ids, the sampling parameters given, and optional top-level fields."""
    return {"token_ids": token_ids, "sampling_params": sampling, **(top or {})}


#: Each endpoint the suite sends bodies to: the client fixture that reaches it, and its route.
ENDPOINT_ROUTES: dict[str, tuple[str, str]] = {
    "chat-render": ("api", "/v1/chat/completions/render"),
    "completions-render": ("api", "/v1/completions/render"),
    "messages-render": ("api", "/v1/messages/render"),
    "responses-render": ("api", "/v1/responses/render"),
    "chat-derender": ("api", "/v1/chat/completions/derender"),
    "completions-derender": ("api", "/v1/completions/derender"),
    "generate": ("engine", "/inference/v1/generate"),
    "tokenize": ("api", "/tokenize"),
    "detokenize": ("api", "/detokenize"),
}


def valid_body(name: str, model: str | None, codec) -> dict[str, Any]:
    """A small request each endpoint answers 200, with ``model`` at the top level (omitted when None)."""
    hello = codec.encode("Hello")
    served = model or "unused"
    body: dict[str, Any] = {
        "chat-render": lambda: {"messages": USER_HELLO, "max_tokens": 2},
        "completions-render": lambda: {"prompt": "Hello", "max_tokens": 2},
        "messages-render": lambda: {"model": served, "messages": USER_HELLO, "max_tokens": 2},
        "responses-render": lambda: {"input": "Hello", "max_output_tokens": 2},
        "chat-derender": lambda: chat_derender(served, generate_response(choice(hello))),
        "completions-derender": lambda: completions_derender(served, [generate_response(choice(hello))]),
        "generate": lambda: generate_request(hello, temperature=0, max_tokens=2),
        "tokenize": lambda: {"prompt": "Hello"},
        "detokenize": lambda: {"tokens": hello},
    }[name]()
    body.pop("model", None)
    if model is not None:
        body["model"] = model
    return body
