"""Request-body schemas and the checks vLLM applies to sampling fields, in one place.

Shapes are JSON Schemas (a compiled verdict, jsonschema's errors: ``specs/openapi.SpecValidator``); a shape
error is answered like vLLM's pydantic errors:
400, type "Bad Request", message "N validation error(s): ...", param = location of the first error
("body.<path>"). Unknown keys are ignored, as in vLLM. Range rules that vLLM enforces in SamplingParams
come after, as 400 BadRequestError with vLLM's wording where it is known.
"""

from __future__ import annotations

import math
from typing import Any

from tokenspec.harness.frontend.errors import bad_request, validation_error
from tokenspec.specs.openapi import SpecValidator

_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_STR = {"type": "string"}
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}


def _opt(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_SAMPLING_FIELDS: dict[str, Any] = {
    "n": _opt(_INT), "presence_penalty": _opt(_NUM), "frequency_penalty": _opt(_NUM),
    "repetition_penalty": _opt(_NUM), "temperature": _opt(_NUM), "top_p": _opt(_NUM), "top_k": _opt(_INT),
    "min_p": _opt(_NUM), "seed": _opt(_INT), "max_tokens": _opt(_INT), "min_tokens": _opt(_INT),
    "ignore_eos": _opt(_BOOL), "skip_special_tokens": _opt(_BOOL),
    "spaces_between_special_tokens": _opt(_BOOL), "include_stop_str_in_output": _opt(_BOOL),
    "stop_token_ids": _opt({"type": "array", "items": _INT}),
    "bad_words": _opt({"type": "array", "items": _STR}),
    "allowed_token_ids": _opt({"type": "array", "items": _INT}),
    "logit_bias": _opt({"type": "object", "additionalProperties": _NUM}),
    "logprob_token_ids": _opt({"type": "array", "items": _INT}),
    "stream_interval": _opt({"type": "integer", "minimum": 1}),
    "thinking_token_budget": _opt(_INT), "prompt_logprobs": _opt(_INT),
    "truncate_prompt_tokens": _opt({"type": "integer", "minimum": -1}),
    "use_beam_search": _opt(_BOOL), "stream": _opt(_BOOL),
    "stream_options": _opt({"type": "object", "properties": {
        "include_usage": _opt(_BOOL), "continuous_usage_stats": _opt(_BOOL)}}),
    "model": _opt(_STR), "request_id": _opt(_STR), "priority": _opt(_INT),
    "cache_salt": _opt({"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^@/\\\\\\x00]*$"}),
    "vllm_xargs": _opt({"type": "object"}), "kv_transfer_params": _opt({"type": "object"}),
    "ec_transfer_params": _opt({"type": "object"}), "add_special_tokens": _opt(_BOOL),
}
_STOP = _opt({"anyOf": [_STR, {"type": "array", "items": _STR, "maxItems": 4}]})  # at most four strings (vLLM)
#: seed and priority of a chat or completions request are signed 64-bit (vLLM's request models; RENDER-042), where a
#: generate request's seed only has to fit msgpack.
_INT64 = {"type": "integer", "minimum": -(2 ** 63), "maximum": 2 ** 63 - 1}
_OPENAI_INT64 = {"seed": _opt(_INT64), "priority": _opt(_INT64)}

_CONTENT_PART = {"type": "object", "required": ["type"], "properties": {"type": _STR}}
_MESSAGE = {
    "type": "object", "required": ["role"],
    "properties": {
        "role": _STR, "name": _opt(_STR), "tool_call_id": _opt(_STR),
        "content": _opt({"anyOf": [_STR, {"type": "array", "items": _CONTENT_PART}]}),
        "tool_calls": _opt({"type": "array", "items": {"type": "object"}}),
    },
}
# token-native (specs/token-native.yaml): a chat message's content may also be one input_tokens block; the
# block's ids and pins are checked by token_native.check_request, with the spec's own statuses.
_CHAT_MESSAGE = {**_MESSAGE, "properties": {**_MESSAGE["properties"], "content": _opt({"anyOf": [
    _STR, {"type": "array", "items": _CONTENT_PART},
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "input_tokens"}}}]})}}
_TOOL = {"type": "object", "required": ["function"], "properties": {
    "type": {"const": "function"},
    "function": {"type": "object", "required": ["name"], "properties": {"name": _STR}}}}

CHAT_REQUEST = {
    "type": "object", "required": ["messages"],
    "properties": {
        **_SAMPLING_FIELDS, **_OPENAI_INT64,
        "messages": {"type": "array", "items": _CHAT_MESSAGE},
        "stop": {"anyOf": [_STR, {"type": "array", "items": _STR, "maxItems": 4}, {"type": "null"}]},
        "max_completion_tokens": _opt(_INT), "logprobs": _opt(_BOOL),
        "top_logprobs": _opt({"type": "integer", "minimum": -1}),
        "tools": _opt({"type": "array", "items": _TOOL}),
        "tool_choice": _opt({"anyOf": [{"enum": ["none", "auto", "required"]}, {"type": "object"}]}),
        "chat_template_kwargs": _opt({"type": "object"}), "add_generation_prompt": _opt(_BOOL),
        "continue_final_message": _opt(_BOOL), "echo": _opt(_BOOL), "return_token_ids": _opt(_BOOL),
        "include_reasoning": _opt(_BOOL), "return_tokens_only": _opt(_BOOL),
        "tokenizer_version": _opt({"type": "string", "minLength": 1}),
    },
}
COMPLETION_REQUEST = {
    "type": "object", "required": ["prompt"],
    "properties": {
        **_SAMPLING_FIELDS, **_OPENAI_INT64,
        "prompt": {"anyOf": [_STR, {"type": "array", "items": _STR},
                             {"type": "array", "items": {"type": "integer", "minimum": 0}},
                             {"type": "array", "items": _IDS}]},
        "stop": _STOP, "logprobs": _opt({"type": "integer"}), "echo": _opt(_BOOL), "suffix": _opt(_STR),
        "tokenizer_version": _opt({"type": "string", "minLength": 1}),
    },
}
_LOGPROB = {"type": "object", "properties": {"token_id": _INT}}
_LOGPROB_ENTRY = {"type": "object", "properties": {"token_id": _INT,
                                                   "top_logprobs": _opt({"type": "array", "items": _LOGPROB})}}
_GEN_CHOICE = {"type": "object", "required": ["index"], "properties": {
    "index": _INT, "token_ids": _opt(_IDS),
    "finish_reason": _opt(_STR), "stop_reason": _opt({"anyOf": [_INT, _STR]}),
    "logprobs": _opt({"type": "object", "properties": {"content": _opt({"type": "array", "items": _LOGPROB_ENTRY})}})}}
_GEN_RESPONSE = {"type": "object", "required": ["choices"], "properties": {
    "request_id": _STR, "choices": {"type": "array", "items": _GEN_CHOICE},
    "output_mode": _opt({"enum": ["tokens"]}), "prompt_token_ids": _opt(_IDS),
    "prompt_logprobs": _opt({"type": "array"}), "usage": _opt({"type": "object"})}}
_DERENDER_COMMON = {"model": _opt(_STR), "stream": _opt(_BOOL),
                    "chat_request": _opt({"type": "object"}), "completion_request": _opt({"type": "object"})}
DERENDER_CHAT = {"type": "object", "required": ["generate_response"], "properties": {
    **_DERENDER_COMMON, "generate_response": _GEN_RESPONSE, "prompt_tokens": _opt(_INT),
    "prompt_token_ids": _opt(_IDS)}}
DERENDER_COMPLETION = {"type": "object", "required": ["generate_responses"], "properties": {
    **_DERENDER_COMMON, "generate_responses": {"type": "array", "items": _GEN_RESPONSE},
    "prompt_tokens": _opt({"type": "array", "items": _INT}),
    "prompt_token_ids": _opt({"type": "array", "items": _opt(_IDS)})}}
_STATE = {"type": "object", "properties": {
    "prev_tokens": {"type": "array", "items": _STR, "maxItems": 1024},
    "prev_token_ids": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 1024},
    "prefix_offset": {"type": "integer", "minimum": 0}, "read_offset": {"type": "integer", "minimum": 0},
    "role_sent": _BOOL, "logprob_context_token_ids": {"type": "array", "items": _INT, "maxItems": 4},
    "logprob_text_offset": {"type": "integer", "minimum": 0},
    "output_token_ids": {"type": "array", "items": _INT},
    "output_chunk_lens": {"type": "array", "items": {"type": "integer", "minimum": 1}},
    "tools_streamed": _BOOL, "last_tool_call_ids": {"type": "array", "items": _STR},
    # the frontend's own keys (the state is open): checked like the spec's, since it reads them back
    "held_text": _STR, "output_token_count": {"type": "integer", "minimum": 0},
    "parser_state": _opt({"type": "object"})}}
DERENDER_STREAM = {"type": "object", "required": ["stream", "generate_chunk"], "properties": {
    **_DERENDER_COMMON, "stream": {"const": True},
    "generate_chunk": {"type": "object", "required": ["choices"], "properties": {
        "request_id": _STR, "choices": {"type": "array", "items": _GEN_CHOICE},
        "usage": _opt({"type": "object"}), "prompt_token_ids": _opt(_IDS)}},
    "stream_state": _opt(_STATE), "prompt_tokens": _opt(_INT), "prompt_token_ids": _opt(_IDS)}}
TOKENIZE = {"type": "object", "properties": {
    "model": _opt(_STR), "prompt": _STR, "messages": {"type": "array", "items": _MESSAGE},
    "add_special_tokens": _opt(_BOOL), "add_generation_prompt": _opt(_BOOL),
    "return_token_strs": _opt(_BOOL), "chat_template_kwargs": _opt({"type": "object"}),
    "tools": _opt({"type": "array", "items": _TOOL})},
    "anyOf": [{"required": ["prompt"]}, {"required": ["messages"]}]}
GENERATE_REQUEST = {"type": "object", "required": ["token_ids", "sampling_params"], "properties": {
    "token_ids": {**_IDS, "minItems": 1}, "sampling_params": {"type": "object", "properties": {
        k: v for k, v in _SAMPLING_FIELDS.items() if k not in ("model", "request_id", "stream", "stream_options")}},
    "model": _opt(_STR), "request_id": _opt(_STR), "stream": _opt(_BOOL),
    "output_mode": _opt({"enum": ["tokens", "text", "derender"]}), "parse_context": _opt({"type": "object"})}}
DETOKENIZE = {"type": "object", "required": ["tokens"], "properties": {"model": _opt(_STR), "tokens": _IDS}}

_VALIDATORS: dict[int, Any] = {}


def _whole_numbers(value: Any, schema: Any) -> Any:
    """``value`` with every integral float the shape wants as an integer read as that integer (in place where it
    can be): JSON Schema counts 5.0 as the integer 5, and so does vLLM's pydantic (lax mode)."""
    if not isinstance(schema, dict):
        return value
    if schema.get("type") == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    for alternative in schema.get("anyOf", ()):
        value = _whole_numbers(value, alternative)
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                value[key] = _whole_numbers(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value[:] = [_whole_numbers(item, schema["items"]) for item in value]
    return value


def check_shape(body: Any, schema: dict[str, Any], *, integers: bool = False) -> dict[str, Any]:
    """Return ``body`` if it fits ``schema``; else raise the 400 vLLM's pydantic layer would give. With
    ``integers`` its integral floats are made integers in place, where the shape wants one (derender: vLLM's
    generate-response models read 5.0 as 5; render reads its own fields field by field, render._check_common)."""
    validator = _VALIDATORS.get(id(schema))
    if validator is None:
        validator = _VALIDATORS.setdefault(id(schema), SpecValidator(schema))  # compiled yes/no, jsonschema's errors
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    if not errors:
        return _whole_numbers(body, schema) if integers else body
    lines = [f"  {{'loc': 'body{''.join('.' + str(p) for p in e.absolute_path)}', 'msg': {e.message!r}}}"
             for e in errors]
    first = errors[0]
    param = "body" + "".join("." + str(p) for p in first.absolute_path)
    noun = "error" if len(errors) == 1 else "errors"
    raise validation_error(f"{len(errors)} validation {noun}:\n" + "\n".join(lines), param)


def check_sampling_ranges(params: dict[str, Any], max_n: int) -> None:
    """vLLM's SamplingParams range rules (400 BadRequestError)."""
    def fail(message: str, name: str) -> None:
        raise bad_request(f"{message} (parameter={name}, value={params.get(name)})", param=name)

    n = params.get("n", 1)
    if n < 1:
        fail(f"n must be at least 1, got {n}.", "n")
    if n > max_n:
        fail(f"n must be at most {max_n}, got {n}. To increase this limit, set the "
             "VLLM_MAX_N_SEQUENCES environment variable.", "n")
    for name in ("presence_penalty", "frequency_penalty"):
        if not -2.0 <= params.get(name, 0.0) <= 2.0:
            fail(f"{name} must be in [-2, 2], got {params[name]}.", name)
    rep = params.get("repetition_penalty", 1.0)
    if not (math.isfinite(rep) and rep > 0):
        fail(f"repetition_penalty must be a positive finite number, got {rep}.", "repetition_penalty")
    temp = params.get("temperature", 1.0)
    if not (math.isfinite(temp) and 0 <= temp <= 2):
        fail(f"temperature must be in [0, 2], got {temp}.", "temperature")
    top_p = params.get("top_p", 1.0)
    if not 0 < top_p <= 1:
        fail(f"top_p must be in (0, 1], got {top_p}.", "top_p")
    if params.get("top_k", 0) < -1:
        fail(f"top_k must be -1 (disable), or at least 1, got {params['top_k']}.", "top_k")
    if not 0 <= params.get("min_p", 0.0) <= 1:
        fail(f"min_p must be in [0, 1], got {params['min_p']}.", "min_p")
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and max_tokens < 1:
        fail(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    min_tokens = params.get("min_tokens", 0)
    if min_tokens < 0 or (max_tokens is not None and min_tokens > max_tokens):
        fail(f"min_tokens must be in [0, max_tokens], got {min_tokens}.", "min_tokens")
    for name in ("logprobs", "prompt_logprobs"):
        value = params.get(name)
        if value is not None and value < -1:
            fail(f"{name} must be non-negative or -1, got {value}.", name)
    if any(s == "" for s in params.get("stop", [])):
        fail("stop cannot contain an empty string.", "stop")
    if temp == 0 and n > 1:
        raise bad_request(f"n must be 1 when using greedy sampling, got {n}.")


def _token_native(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if "tokenizer_version" in body or body.get("return_tokens_only") or "response_format_tokens" in body:
        return True
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else [content]
        if any(isinstance(p, dict) and p.get("type") == "input_tokens" for p in parts):
            return True
    return False


def check_spec(path: str, body: Any) -> None:
    """Refuse (400) a body the spec's request schema for ``POST path`` refuses (ERROR-015)."""
    from tokenspec.specs.openapi import request_schema

    validator = request_schema(path, "post")
    if validator is None or ("/chat/" in path and _token_native(body)):
        return  # the token-native extension has its own schema (token-native.yaml) and checks (token_native.py)
    error = next(iter(validator.iter_errors(body)), None)
    if error is None:
        return
    param = "body" + "".join("." + str(p) for p in error.absolute_path)
    raise validation_error(f"1 validation error:\n  {{'loc': '{param}', 'msg': {error.message[:300]!r}}}", param)
