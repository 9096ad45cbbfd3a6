"""A client written from the token-native proposal's own examples gets token ids back from the reference server.

The examples below are the request and answer shapes of "Token-Native LLM APIs: Input and Output as Token IDs"
(Kumar Shivendu, 2026), copied as the post prints them. A client written from them changes nothing but what
only the server can know: the model name, the pin (the server's ``tokenizer_version`` from its /v1/models
card) and token ids from the server's vocabulary (the proposal's ids belong to another tokenizer). The server
is the bundled reference server: the frontend with its gateway in front of a real vLLM engine on the tiny model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from broken_server import frontend_config
from frontend_server import running_frontend
from tokenizers import Tokenizer

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

pytestmark = pytest.mark.vllm

# -- the proposal's examples, verbatim (the response example's "messages": [ ... ] is the input example's) ------

TEXT_REQUEST = """{
  "model": "gpt-5.1",
  "messages": [
    { "role": "user", "content": "Summarize the attached document." }
  ]
}"""
TOKEN_REQUEST = """{
  "model": "gpt-5.1",
  "tokenizer_version": "gpt-5.1-2026-07",
  "messages": [
    { "role": "user", "content": { "type": "input_tokens", "token_ids": [3838, 42891, 262, 5301, 6190, 13] } }
  ]
}"""
OUTPUT_REQUEST = """{
  "model": "gpt-5.1",
  "tokenizer_version": "gpt-5.1-2026-07",
  "response_format_tokens": true,
  "messages": [
    { "role": "user", "content": { "type": "input_tokens", "token_ids": [3838, 42891, 262, 5301, 6190, 13] } }
  ]
}"""
OUTPUT_ANSWER = """{
  "choices": [
    {
      "message": {
        "role": "assistant",
        "content": "The document proposes...",
        "token_ids": [464, 6190, 26057, 986]
      }
    }
  ]
}"""
STREAM_CHUNK = """{ "choices": [{ "delta": { "content": " model", "token_ids": [2746] } }] }"""

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def server(tiny_model, vllm_engine) -> Iterator[httpx.Client]:
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, engine_url=vllm_engine.url)
    with running_frontend(config) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield http


@pytest.fixture(scope="module")
def card(server: httpx.Client) -> dict[str, Any]:
    return server.get("/v1/models").json()["data"][0]


@pytest.fixture(scope="module")
def text_ids(model_dir: Path) -> list[int]:
    """The text example's message in the server's vocabulary: what a token-native store would hold."""
    return Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(
        "Summarize the attached document.", add_special_tokens=False).ids


def fitted(example: str, card: dict[str, Any], ids: list[int] | None, **generation: Any) -> dict[str, Any]:
    """The example with the server's model, pin and ids, greedy and short (CI must be deterministic), thinking off:
    the tiny model's template opens a think block its random weights never close, so with thinking on the
    whole answer would be reasoning and the example's ``content`` null."""
    body = json.loads(example)
    body["model"] = card["id"]
    if "tokenizer_version" in body:
        body["tokenizer_version"] = card["tokenizer_version"]
    content = body["messages"][0]["content"]
    if isinstance(content, dict) and ids is not None:
        content["token_ids"] = ids
    return {**body, "max_tokens": 8, "temperature": 0, "chat_template_kwargs": {"enable_thinking": False},
            **generation}


def same_shape(example: Any, answer: Any, where: str = "") -> list[str]:
    """Where ``answer`` lacks a key of ``example`` or holds another JSON type there (lists: first item)."""
    if isinstance(example, dict):
        if not isinstance(answer, dict):
            return [f"{where or '/'}: not an object"]
        return [p for k, v in example.items()
                for p in ([f"{where}/{k}: missing"] if k not in answer else same_shape(v, answer[k], f"{where}/{k}"))]
    if isinstance(example, list):
        if not isinstance(answer, list) or not answer:
            return [f"{where}: not a non-empty list"]
        return same_shape(example[0], answer[0], f"{where}/0")
    return [] if type(example) is type(answer) else [f"{where}: {type(answer).__name__}, not {type(example).__name__}"]


def test_the_output_example_answers_token_ids(server, card, text_ids) -> None:
    out = server.post(CHAT, json=fitted(OUTPUT_REQUEST, card, text_ids))
    assert out.status_code == 200, out.text
    answer = out.json()
    assert not same_shape(json.loads(OUTPUT_ANSWER), answer), same_shape(json.loads(OUTPUT_ANSWER), answer)
    message = answer["choices"][0]["message"]
    assert len(message["token_ids"]) == answer["usage"]["completion_tokens"] > 0
    assert answer["tokenizer_version"] == card["tokenizer_version"]


def test_the_token_input_example_prompts_with_the_stored_ids(server, card, text_ids) -> None:
    """The input example, with the text example's message as stored ids, runs the same prompt as the text."""
    as_tokens = server.post(CHAT, json=fitted(TOKEN_REQUEST, card, text_ids, return_token_ids=True)).json()
    as_text = server.post(CHAT, json=fitted(TEXT_REQUEST, card, None, return_token_ids=True)).json()
    assert as_tokens["prompt_token_ids"] == as_text["prompt_token_ids"], "equal ids in, equal prompt"
    assert as_tokens["choices"][0]["message"]["token_ids"] == as_text["choices"][0]["message"]["token_ids"]
    assert as_tokens["choices"][0]["message"]["content"] == as_text["choices"][0]["message"]["content"]


def test_the_streaming_example_carries_delta_token_ids(server, card, text_ids) -> None:
    body = fitted(OUTPUT_REQUEST, card, text_ids)
    whole = server.post(CHAT, json=body).json()["choices"][0]["message"]
    streamed: list[int] = []
    text = ""
    with server.stream("POST", CHAT, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    assert not same_shape(json.loads(STREAM_CHUNK)["choices"][0], choice), choice
                streamed += choice["delta"]["token_ids"]
                text += choice["delta"].get("content") or ""
    assert streamed == whole["token_ids"]
    assert text == (whole["content"] or "")


def test_the_tokens_only_answer_omits_text(server, card, text_ids) -> None:
    """The proposal's "ask for token_ids and omit content": tokenspec names it return_tokens_only."""
    answer = server.post(CHAT, json=fitted(OUTPUT_REQUEST, card, text_ids, return_tokens_only=True)).json()
    message = answer["choices"][0]["message"]
    assert message["content"] is None and message["reasoning"] is None and message["token_ids"], message


def test_the_examples_own_pin_is_refused_naming_the_servers(server, card) -> None:
    """Unfitted, the example's pin belongs to another tokenizer: a 409 that names the version to use,
    never an answer made from ids the server would read as other text."""
    body = {**json.loads(TOKEN_REQUEST), "model": card["id"]}
    resp = server.post(CHAT, json=body)
    assert resp.status_code == 409, resp.text
    assert card["tokenizer_version"] in resp.json()["error"]["message"]
