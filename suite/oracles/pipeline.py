"""The split pipeline, driven by the suite: render on the target, generate on the engine, derender on the
target, in both the non-streaming and the streaming form. Parity tests compare its answer with a standard
serve endpoint's answer to the same request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenspec.suite.engine.client import SuiteClient
from tokenspec.suite.engine.gating import Capabilities
from tokenspec.suite.engine.target import Codec
from tokenspec.suite.oracles.builders import USER_HELLO, chat_request

CHAT_RENDER = "/v1/chat/completions/render"
CHAT_DERENDER = "/v1/chat/completions/derender"
GENERATE = "/inference/v1/generate"


def engine_finish_reason(reason: str | None) -> str | None:
    """A coupled answer's finish_reason as the engine reported it (parsers turn stop into tool_calls)."""
    return "stop" if reason == "tool_calls" else reason


#: Prompt ids for a run with no chat render and no codec: low ids, inside every real vocabulary.
PLAIN_PROMPT_IDS = (1, 2, 3, 4, 5, 6, 7, 8)


def generate_prompt(api: SuiteClient, model: str, capabilities: Capabilities, codec: Codec | None) -> list[int]:
    """The prompt ids a generate test sends: the target's chat render of a one-turn chat where it renders (a
    realistic prompt), else the same words encoded by ``codec`` (the --tokenizer folder or the target's
    /tokenize), else plain ids. Generate is judged on its own requirements, so a generate-only engine is never
    left "not tested" for lacking a render it does not claim to host."""
    if capabilities.has("chat-render"):
        return list(api.post_ok(CHAT_RENDER, chat_request(model))["token_ids"])
    if codec is not None and capabilities.has("codec"):
        return codec.encode(" ".join(str(m["content"]) for m in USER_HELLO))
    return list(PLAIN_PROMPT_IDS)


@dataclass(frozen=True)
class PipelineRun:
    """The derendered answer and the engine's own answer it came from (the generated ids live there: whether a
    derender echoes them is DERENDER-020's business, not the pipeline's)."""

    answer: dict[str, Any]
    generated: dict[str, Any]

    @property
    def generated_ids(self) -> dict[int, list[int]]:
        return {c["index"]: c.get("token_ids") or [] for c in self.generated.get("choices") or []}


def chat_pipeline(api: SuiteClient, engine: SuiteClient, model: str, request: dict[str, Any]) -> PipelineRun:
    rendered = api.post_ok(CHAT_RENDER, request)
    generated = engine.post_ok(GENERATE, rendered)
    body = {
        "model": model,
        "generate_response": generated,
        "prompt_tokens": len(rendered["token_ids"]),
        "prompt_token_ids": rendered["token_ids"],
        "chat_request": request,
    }
    return PipelineRun(api.post_ok(CHAT_DERENDER, body), generated)


def derender_coupled_ids(api: SuiteClient, model: str, request: dict[str, Any], coupled: dict[str, Any]
                         ) -> dict[str, Any]:
    """Feed a coupled answer's generated token IDs through the target's derender (same-token parity)."""
    prompt_ids = coupled.get("prompt_token_ids") or []
    choices = [
        {
            "index": c["index"],
            "token_ids": c["token_ids"],
            "finish_reason": engine_finish_reason(c.get("finish_reason")),
            "stop_reason": c.get("stop_reason"),
        }
        for c in coupled["choices"]
    ]
    body = {
        "model": model,
        "generate_response": {"request_id": coupled.get("id", "parity"), "choices": choices},
        "prompt_tokens": len(prompt_ids),
        "prompt_token_ids": prompt_ids,
        "chat_request": request,
    }
    return api.post_ok(CHAT_DERENDER, body)


def replay_chat_stream(api: SuiteClient, model: str, request: dict[str, Any], chunks: list[dict[str, Any]],
                       prompt_ids: list[int]) -> list[dict[str, Any]]:
    """Replay a coupled stream's chunk boundaries (its delta token_ids) through streaming derender.

    One stream_state is kept per choice index, as the spec requires; the usage-only chunk is forwarded too.
    """
    states: dict[int, Any] = {}
    out = []
    for chunk in chunks:
        choices = chunk.get("choices") or []
        if not choices:
            if chunk.get("usage"):
                generate_chunk = {"request_id": "parity", "choices": [], "usage": chunk["usage"]}
                body = _stream_body(model, request, generate_chunk, None, prompt_ids)
                out.append(api.post_ok(CHAT_DERENDER, body)["chunk"])
            continue
        for ch in choices:
            generate_chunk = {
                "request_id": "parity",
                "choices": [{
                    "index": ch["index"],
                    "token_ids": ch.get("token_ids") or [],
                    "finish_reason": engine_finish_reason(ch.get("finish_reason")),
                    "stop_reason": ch.get("stop_reason"),
                }],
            }
            body = _stream_body(model, request, generate_chunk, states.get(ch["index"]), prompt_ids)
            answer = api.post_ok(CHAT_DERENDER, body)
            states[ch["index"]] = answer["stream_state"]
            out.append(answer["chunk"])
    return out


def _stream_body(model: str, request: dict[str, Any], chunk: dict[str, Any], state: Any, prompt_ids: list[int]
                 ) -> dict[str, Any]:
    return {
        "model": model,
        "stream": True,
        "generate_chunk": chunk,
        "stream_state": state,
        "prompt_tokens": len(prompt_ids),
        "prompt_token_ids": prompt_ids,
        "chat_request": request,
    }
