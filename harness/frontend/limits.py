"""Resource bounds on derender payloads, checked before any decoding (facts doc section 4, same order)."""

from __future__ import annotations

from typing import Any

from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.errors import bad_request


def check_generate_responses(config: FrontendConfig, responses: list[dict[str, Any]]) -> None:
    max_n, max_len, max_lp = config.max_n, config.max_model_len, config.max_logprobs
    if len(responses) > max_n:
        raise bad_request(f"generate_responses count ({len(responses)}) exceeds server maximum ({max_n}). "
                          "Set VLLM_MAX_N_SEQUENCES to increase this limit.")
    for gen in responses:
        rid = gen.get("request_id")
        choices = gen["choices"]
        if len(choices) > max_n:
            raise bad_request(f"choices count ({len(choices)}) in response '{rid}' exceeds server "
                              f"maximum ({max_n}).")
        indexes = [choice["index"] for choice in choices]
        if len(set(indexes)) != len(indexes):
            # vLLM accepts these and returns two choices with one index; the spec forbids it (DERENDER-014).
            duplicate = next(i for i in indexes if indexes.count(i) > 1)
            raise bad_request(f"choice index {duplicate} appears more than once in response '{rid}'.",
                              param="generate_response.choices")
        for choice in choices:
            index = choice["index"]
            ids = choice.get("token_ids") or []
            if len(ids) > max_len:
                raise bad_request(f"token_ids length ({len(ids)}) in choice {index} exceeds "
                                  f"max_model_len ({max_len}).")
            content = (choice.get("logprobs") or {}).get("content") or []
            if len(content) > max_len:
                raise bad_request(f"logprobs.content length ({len(content)}) in choice {index} exceeds "
                                  f"max_model_len ({max_len}).")
            for entry in content:
                top = entry.get("top_logprobs") or []
                if max_lp >= 0 and len(top) > max_lp:
                    raise bad_request(f"top_logprobs count ({len(top)}) in choice {index} exceeds "
                                      f"max_logprobs ({max_lp}).")
        prompt_lps = gen.get("prompt_logprobs") or []
        if len(prompt_lps) > max_len:
            raise bad_request(f"prompt_logprobs length ({len(prompt_lps)}) in response '{rid}' exceeds "
                              f"max_model_len ({max_len}).")


def check_prompt_ids(config: FrontendConfig, prompt_ids: list[list[int] | None]) -> None:
    for ids in prompt_ids:
        if ids is not None and len(ids) > config.max_model_len:
            raise bad_request(f"prompt_token_ids length ({len(ids)}) exceeds max_model_len "
                              f"({config.max_model_len}).")


def check_chat_stream(config: FrontendConfig, body: dict[str, Any]) -> None:
    choices = body["generate_chunk"]["choices"]
    if len(choices) > 1:
        raise bad_request(f"derender_chat_stream expects at most one choice per chunk (got {len(choices)}).")
    prompt_len = len(body.get("prompt_token_ids") or [])
    state = body.get("stream_state") or {}
    prior = len(state.get("output_token_ids") or []) or int(state.get("output_token_count") or 0)
    delta = sum(len(c.get("token_ids") or []) for c in choices)
    if prompt_len + prior + delta > config.max_model_len:
        raise bad_request(f"prompt_token_ids length ({prompt_len}) plus output_token_ids length ({prior}) "
                          f"plus delta ({delta}) exceeds max_model_len ({config.max_model_len}).")
