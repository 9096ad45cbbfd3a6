"""The defect catalogue: realistic ways two teams' implementations of the pipeline disagree.

Each defect is one named bug, planted by the mutant proxy between the suite and a correct server: it rewrites
a request before the server sees it, a JSON answer after, or the events of an SSE stream. Each says which
real-world bug it imitates and which requirement(s) it breaks; the campaign measures which tests catch it.

Defects work on the wire format only (paths, JSON fields), never on a server's internals, so one catalogue
judges the suite against any correct target: the reference server, vLLM, or anyone's.
"""

from __future__ import annotations

import json
import random
import secrets
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CHAT_RENDER = "/v1/chat/completions/render"
COMPLETIONS_RENDER = "/v1/completions/render"
CHAT_DERENDER = "/v1/chat/completions/derender"
COMPLETIONS_DERENDER = "/v1/completions/derender"
GENERATE = "/inference/v1/generate"
ABORT = "/inference/v1/abort_requests"
MESSAGES_RENDER = "/v1/messages/render"
RESPONSES_RENDER = "/v1/responses/render"
RENDERS = (CHAT_RENDER, COMPLETIONS_RENDER)
DERENDERS = (CHAT_DERENDER, COMPLETIONS_DERENDER)
ONE_MIB = 1 << 20


@dataclass
class Reply:
    """A whole HTTP answer (JSON answers are buffered; SSE streams go event by event through ``on_event``)."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        if not self.content_type.startswith("application/json"):
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @classmethod
    def of_json(cls, status: int, value: Any) -> Reply:
        return cls(status, "application/json", json.dumps(value, ensure_ascii=False).encode())


#: on_request(path, raw body) -> the body the server gets, or a Reply that answers without the server
RequestHook = Callable[[str, bytes], "bytes | Reply"]
#: on_response(path, parsed request body or None, the server's reply) -> the reply the client gets
ResponseHook = Callable[[str, Any, Reply], Reply]
#: on_event(path, parsed request body, one SSE data value: parsed JSON or "[DONE]") -> the events to send
EventHook = Callable[[str, Any, Any], list[Any]]


@dataclass(frozen=True)
class Defect:
    """One planted bug: its name, the area it lives in, the requirement(s) it breaks, and the real bug it
    imitates (one sentence)."""

    name: str
    area: str
    requirements: tuple[str, ...]
    imitates: str
    on_request: RequestHook | None = None
    on_response: ResponseHook | None = None
    on_event: EventHook | None = None
    needs: tuple[str, ...] = field(default=())  # roles the defect needs to show: "engine", "reference"
    #: model families whose tokenizer or template can show the defect (empty: every model)
    families: tuple[str, ...] = field(default=())

    def shows_on(self, family: str | None) -> bool:
        """Whether a target serving ``family`` can show this defect (an unknown family: assume it can)."""
        return not self.families or family is None or family in self.families


# -- helpers ----------------------------------------------------------------------------------------------


def parse(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def is_stream(request: Any) -> bool:
    return isinstance(request, dict) and request.get("stream") is True


def edit_answer(paths: tuple[str, ...], edit: Callable[[Any, Any], None], *, stream: bool | None = None,
                ) -> ResponseHook:
    """A response hook that applies ``edit(answer, request)`` in place to 2xx JSON answers of ``paths``
    (only streaming or only non-streaming requests when ``stream`` says so)."""

    def hook(path: str, request: Any, reply: Reply) -> Reply:
        if path not in paths or reply.status >= 300 or (stream is not None and is_stream(request) != stream):
            return reply
        value = reply.json()
        if value is None:
            return reply
        edit(value, request)
        return Reply.of_json(reply.status, value)

    return hook


def edit_request(paths: tuple[str, ...], edit: Callable[[dict[str, Any]], None]) -> RequestHook:
    """A request hook that applies ``edit(body)`` in place to JSON object bodies sent to ``paths``."""

    def hook(path: str, body: bytes) -> bytes | Reply:
        request = parse(body)
        if path not in paths or not isinstance(request, dict):
            return body
        edit(request)
        return json.dumps(request, ensure_ascii=False).encode()

    return hook


def generate_requests(answer: Any) -> Iterator[dict[str, Any]]:
    """The generate request(s) a render answered (one for chat, a list for completions)."""
    for item in answer if isinstance(answer, list) else [answer]:
        if isinstance(item, dict):
            yield item


def sampling(answer: Any) -> Iterator[dict[str, Any]]:
    for request in generate_requests(answer):
        if isinstance(request.get("sampling_params"), dict):
            yield request["sampling_params"]


def choices(answer: Any) -> list[dict[str, Any]]:
    found = answer.get("choices") if isinstance(answer, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def messages(answer: Any) -> Iterator[dict[str, Any]]:
    for choice in choices(answer):
        if isinstance(choice.get("message"), dict):
            yield choice["message"]


def deltas(answer: Any) -> Iterator[dict[str, Any]]:
    """The chat deltas of a streaming derender answer ``{chunk, stream_state}``."""
    chunk = answer.get("chunk") if isinstance(answer, dict) else None
    for choice in choices(chunk):
        if isinstance(choice.get("delta"), dict):
            yield choice["delta"]


def stream_choices(answer: Any) -> list[dict[str, Any]]:
    return choices(answer.get("chunk") if isinstance(answer, dict) else None)


def each_event(edit: Callable[[dict[str, Any], int], list[Any]], paths: tuple[str, ...] = (GENERATE,)) -> EventHook:
    """An SSE hook calling ``edit(event, index)`` on each JSON event of ``paths`` (index counts the stream's
    JSON events); ``[DONE]`` and other paths pass untouched."""
    counters: dict[int, int] = {}

    def hook(path: str, request: Any, event: Any) -> list[Any]:
        if path not in paths or not isinstance(event, dict):
            return [event]
        key = id(request)
        index = counters.get(key, 0)
        counters[key] = index + 1
        return edit(event, index)

    return hook


def _all_messages_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Any, Any], None]:
    return lambda answer, request: [edit(m) for m in messages(answer)]


# -- render -----------------------------------------------------------------------------------------------

_NOISE = random.Random()  # unseeded on purpose: the defect is that two equal requests render differently


def _append_noise(answer: Any, request: Any) -> None:
    for generate_request in generate_requests(answer):
        if isinstance(generate_request.get("token_ids"), list):
            generate_request["token_ids"].append(_NOISE.randrange(1, 1000))  # inside any real vocabulary


def _ids_as_strings(answer: Any, request: Any) -> None:
    for generate_request in generate_requests(answer):
        if isinstance(generate_request.get("token_ids"), list):
            generate_request["token_ids"] = [str(i) for i in generate_request["token_ids"]]


def _first_prompt_only(answer: Any, request: Any) -> None:
    if isinstance(answer, list) and len(answer) > 1:
        del answer[1:]


def _set_param(name: str, value: Any) -> Callable[[Any, Any], None]:
    def edit(answer: Any, request: Any) -> None:
        for params in sampling(answer):
            params[name] = value
    return edit


def _drop_param(name: str) -> Callable[[Any, Any], None]:
    def edit(answer: Any, request: Any) -> None:
        for params in sampling(answer):
            params.pop(name, None)
    return edit


def _drop_default_params(answer: Any, request: Any) -> None:
    for params in sampling(answer):
        if params.get("n") == 1:
            del params["n"]
        if params.get("top_k") == 0:
            del params["top_k"]


def _random_request_ids(answer: Any, request: Any) -> None:
    requests = list(generate_requests(answer))
    base = secrets.token_hex(8)
    for i, generate_request in enumerate(requests):
        prefix = str(generate_request.get("request_id") or "").split("-", 1)[0]
        generate_request["request_id"] = f"{prefix}-{base}" + (f"-{i}" if len(requests) > 1 else "")


def _merge_inline_system(request: dict[str, Any]) -> None:
    inline = [m for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system"]
    if not inline:
        return
    texts = [m["content"] if isinstance(m.get("content"), str) else "".join(
        b.get("text", "") for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "text")
        for m in inline]
    system = request.get("system")
    lead = system if isinstance(system, str) else "".join(
        b.get("text", "") for b in system or [] if isinstance(b, dict) and b.get("type") == "text")
    request["system"] = lead + "".join(texts)
    request["messages"] = [m for m in request["messages"] if m not in inline]


def _reasoning_kwargs_from_defaults(answer: Any, request: Any) -> None:
    kwargs = answer.get("reasoning_parser_kwargs") if isinstance(answer, dict) else None
    if isinstance(kwargs, dict):
        kwargs["chat_template_kwargs"] = {"add_generation_prompt": True, "continue_final_message": False}


def _reasoning_ended_from_the_request(answer: Any, request: Any) -> None:
    if isinstance(answer, dict) and isinstance(answer.get("reasoning_ended"), bool):
        answer["reasoning_ended"] = isinstance(request, dict) and request.get("include_reasoning") is False


def _drop_empty_collections(answer: Any, request: Any) -> None:
    for params in sampling(answer):
        for name in [k for k, v in params.items() if v == [] or v == {}]:
            del params[name]


def _max_tokens_as_asked(answer: Any, request: Any) -> None:
    asked = request.get("max_completion_tokens") or request.get("max_tokens") if isinstance(request, dict) else None
    if isinstance(asked, int) and not isinstance(asked, bool):
        for params in sampling(answer):
            if isinstance(params.get("max_tokens"), int) and params["max_tokens"] < asked:
                params["max_tokens"] = asked


def _optional_think_before(constraint: dict[str, Any]) -> dict[str, Any] | None:
    """vllm-rs 0.34's structural tag: an optional <think>...</think> block, then the request's constraint."""
    if isinstance(constraint.get("regex"), str):
        inner: dict[str, Any] = {"type": "regex", "pattern": constraint["regex"]}
    elif isinstance(constraint.get("choice"), list):
        inner = {"type": "or", "elements": [{"type": "const_string", "value": c} for c in constraint["choice"]]}
    elif constraint.get("json") is not None or constraint.get("json_object"):
        schema = constraint.get("json")
        schema = json.loads(schema) if isinstance(schema, str) else schema if schema is not None else {"type": "object"}
        inner = {"type": "json_schema", "json_schema": schema, "style": "json"}
    else:
        return None
    think = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
    optional = {"type": "optional", "content": {"type": "sequence", "elements": [
        think, {"type": "const_string", "value": "\n\n"}]}}
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [optional, inner]}}


def _structured_outputs_allow_think(answer: Any, request: Any) -> None:
    for params in sampling(answer):
        constraint = params.get("structured_outputs")
        tag = _optional_think_before(constraint) if isinstance(constraint, dict) else None
        if tag is not None:
            params["structured_outputs"] = {"structural_tag": json.dumps(tag)}


#: (field, lowest, highest) a lenient frontend clamps a sampling value into instead of refusing it
_CLAMPED = (("temperature", 0.0, 2.0), ("top_p", 1e-6, 1.0), ("top_k", -1, None), ("min_p", 0.0, 1.0),
            ("presence_penalty", -2.0, 2.0), ("frequency_penalty", -2.0, 2.0), ("repetition_penalty", 1e-6, None),
            ("n", 1, None), ("max_tokens", 1, None), ("min_tokens", 0, None), ("seed", -(2 ** 63), 2 ** 63 - 1),
            ("priority", -(2 ** 63), 2 ** 63 - 1), ("stream_interval", 1, None), ("prompt_logprobs", -1, None),
            ("thinking_token_budget", -1, None), ("top_logprobs", -1, None))


def _clamp_into_range(request: dict[str, Any]) -> None:
    for name, low, high in _CLAMPED:
        value = request.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = max(low, value) if low is not None else value
            request[name] = min(high, value) if high is not None else value


def _refuse_empty_tools(path: str, body: bytes) -> bytes | Reply:
    request = parse(body)
    if path == CHAT_RENDER and isinstance(request, dict) and request.get("tools") == []:
        return Reply.of_json(400, {"error": {"message": "`tools` must not be an empty array.", "type":
                                             "BadRequestError", "param": "tools", "code": 400}})
    return body


def _null_as_zero(request: dict[str, Any]) -> None:
    for name in ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "seed",
                 "max_tokens", "max_completion_tokens", "n", "thinking_token_budget", "truncate_prompt_tokens"):
        if name in request and request[name] is None:
            request[name] = 0


def _drop_system(request: dict[str, Any]) -> None:
    if isinstance(request.get("messages"), list):
        request["messages"] = [m for m in request["messages"]
                               if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))] or \
            request["messages"]


def _drop_function_outputs(request: dict[str, Any]) -> None:
    if isinstance(request.get("input"), list):
        request["input"] = [i for i in request["input"]
                            if not (isinstance(i, dict) and i.get("type") == "function_call_output")]


def _assistant_turns(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for message in request.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "assistant":
            yield message


def _drop_reasoning_history(request: dict[str, Any]) -> None:
    for message in _assistant_turns(request):
        message.pop("reasoning", None)
        message.pop("reasoning_content", None)


def _drop_developer(request: dict[str, Any]) -> None:
    if isinstance(request.get("messages"), list):
        kept = [m for m in request["messages"] if not (isinstance(m, dict) and m.get("role") == "developer")]
        request["messages"] = kept or request["messages"]


def _empty_tool_arguments(request: dict[str, Any]) -> None:
    for message in _assistant_turns(request):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                call["function"]["arguments"] = "{}"


def _glue_text_parts(request: dict[str, Any]) -> None:
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and len(content) > 1 and all(
                isinstance(p, dict) and p.get("type") == "text" for p in content):
            message["content"] = "".join(str(p.get("text", "")) for p in content)


def _drop_tools(request: dict[str, Any]) -> None:
    request.pop("tools", None)
    request.pop("tool_choice", None)


def _nfkc(request: dict[str, Any]) -> None:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return unicodedata.normalize("NFKC", value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) if k in ("content", "text", "prompt") else v for k, v in value.items()}
        return value

    for key in ("messages", "prompt"):
        if key in request:
            request[key] = norm(request[key])


# -- generate ---------------------------------------------------------------------------------------------


def _double_max_tokens(request: dict[str, Any]) -> None:
    params = request.get("sampling_params")
    if isinstance(params, dict) and isinstance(params.get("max_tokens"), int) and params["max_tokens"] > 0:
        params["max_tokens"] = params["max_tokens"] * 2 + 1


def _drop_sampling_field(name: str) -> Callable[[dict[str, Any]], None]:
    def edit(request: dict[str, Any]) -> None:
        if isinstance(request.get("sampling_params"), dict):
            request["sampling_params"].pop(name, None)
    return edit


def _length_as_stop(answer: Any, request: Any) -> None:
    for choice in choices(answer):
        if choice.get("finish_reason") == "length":
            choice["finish_reason"] = "stop"


def _drop_choice_field(name: str) -> Callable[[Any, Any], None]:
    def edit(answer: Any, request: Any) -> None:
        for choice in choices(answer):
            if choice.get(name) is not None:
                choice[name] = None
    return edit


def _prompt_tokens_plus_one(answer: Any, request: Any) -> None:
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        usage["prompt_tokens"] += 1
        if isinstance(usage.get("total_tokens"), int):
            usage["total_tokens"] += 1


def _drop_last_token(answer: Any, request: Any) -> None:
    for choice in choices(answer):
        if isinstance(choice.get("token_ids"), list) and len(choice["token_ids"]) > 1:
            choice["token_ids"].pop()


def _swallow_generate_errors(path: str, request: Any, reply: Reply) -> Reply:
    if path != GENERATE or not 400 <= reply.status < 500 or reply.status == 404 or is_stream(request):
        return reply
    return Reply.of_json(200, {"request_id": "generate-swallowed", "choices": [
        {"index": 0, "token_ids": [], "finish_reason": "stop", "logprobs": None}], "usage": None})


def _drop_done(path: str, request: Any, event: Any) -> list[Any]:
    return [] if path == GENERATE and event == "[DONE]" else [event]


def _error_as_text_then_cut(path: str, request: Any, event: Any) -> list[Any]:
    if path != GENERATE:
        return [event]
    if event == "[DONE]":
        return []
    return [event, {"error": "engine step failed"}] if choices(event) else [event]


def _repeat_first(event: dict[str, Any], index: int) -> list[Any]:
    return [event, event] if index == 0 else [event]


def _final_without_finish_reason(event: dict[str, Any], index: int) -> list[Any]:
    for choice in choices(event):
        choice["finish_reason"] = None
    return [event]


def _omitted_max_tokens_16(request: dict[str, Any]) -> None:
    params = request.get("sampling_params")
    if isinstance(params, dict) and params.get("max_tokens") is None:
        params["max_tokens"] = 16


def _huge_max_tokens_crash(path: str, body: bytes) -> bytes | Reply:
    request = parse(body)
    params = request.get("sampling_params") if path == GENERATE and isinstance(request, dict) else None
    max_tokens = params.get("max_tokens") if isinstance(params, dict) else None
    if isinstance(max_tokens, (int, float)) and not isinstance(max_tokens, bool) and max_tokens >= 2**31:
        return Reply.of_json(500, {"error": {"message": "EngineCore encountered an issue: OverflowError: Python int"
                                             " too large to convert to C int", "type": "InternalServerError",
                                             "param": None, "code": 500}})
    return body


def _stop_dropped_without_detokenize(request: dict[str, Any]) -> None:
    params = request.get("sampling_params")
    if isinstance(params, dict) and params.get("detokenize") is False:
        params.pop("stop", None)


def _transfer_params_refused(path: str, body: bytes) -> bytes | Reply:
    request = parse(body)
    if path == GENERATE and isinstance(request, dict) and {"kv_transfer_params", "ec_transfer_params"} & set(request):
        return Reply.of_json(400, {"error": {"message": "1 validation error: kv_transfer_params: Extra inputs are not"
                                             " permitted", "type": "BadRequestError", "param": "kv_transfer_params",
                                             "code": 400}})
    return body


def _prompt_logprobs_shifted(answer: Any, request: Any) -> None:
    entries = answer.get("prompt_logprobs") if isinstance(answer, dict) else None
    if isinstance(entries, list) and entries:
        answer["prompt_logprobs"] = [*entries[1:], None]


def _usage_per_delta(event: dict[str, Any], index: int) -> list[Any]:
    usage = event.get("usage")
    for choice in choices(event):
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            usage["completion_tokens"] = len(choice.get("token_ids") or [])
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return [event]


def _prompt_logprobs_clamped(request: dict[str, Any]) -> None:
    params = request.get("sampling_params")
    if isinstance(params, dict) and isinstance(params.get("prompt_logprobs"), int) and params["prompt_logprobs"] > 20:
        params["prompt_logprobs"] = 20


def _usage_unasked(path: str, request: Any, event: Any) -> list[Any]:
    if path == GENERATE and isinstance(event, dict) and choices(event) and event.get("usage") is None \
            and isinstance(request, dict) and isinstance(request.get("token_ids"), list):
        prompt = len(request["token_ids"])
        done = sum(len(c.get("token_ids") or []) for c in choices(event))
        event["usage"] = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
    return [event]


def _stream_drops_prompt_logprobs(request: dict[str, Any]) -> None:
    if request.get("stream") is True and isinstance(request.get("sampling_params"), dict):
        request["sampling_params"].pop("prompt_logprobs", None)


# -- derender ---------------------------------------------------------------------------------------------


def _drop_usage(answer: Any, request: Any) -> None:
    answer.pop("usage", None)


def _usage_off_by_one(answer: Any, request: Any) -> None:
    usage = answer.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        usage["completion_tokens"] += 1
        if isinstance(usage.get("total_tokens"), int):
            usage["total_tokens"] += 1


def _replacement_char(message: dict[str, Any]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        at = next((i for i, ch in enumerate(content) if len(ch.encode()) > 1), None)
        if at is not None:
            message["content"] = content[:at] + "\ufffd" + content[at + 1:]


def _reasoning_into_content(message: dict[str, Any]) -> None:
    if message.get("reasoning"):
        message["content"] = message.pop("reasoning") + (message.get("content") or "")
        message["reasoning"] = None


def _drop_reasoning(message: dict[str, Any]) -> None:
    if message.get("reasoning"):
        message["reasoning"] = None


def _upper(message: dict[str, Any]) -> None:
    if isinstance(message.get("content"), str):
        message["content"] = message["content"].upper()


def _strip(message: dict[str, Any]) -> None:
    if isinstance(message.get("content"), str):
        message["content"] = message["content"].strip()


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _arguments_as_object(message: dict[str, Any]) -> None:
    for call in _tool_calls(message):
        function = call.get("function") or {}
        try:
            function["arguments"] = json.loads(function.get("arguments") or "")
        except (TypeError, ValueError):
            pass


def _edit_arguments(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A message edit that applies ``edit`` to each call's decoded arguments object and writes it back."""
    def message_edit(message: dict[str, Any]) -> None:
        for call in _tool_calls(message):
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "")
            except (TypeError, ValueError):
                continue
            if isinstance(arguments, dict):
                edit(arguments)
                function["arguments"] = json.dumps(arguments, ensure_ascii=False)
    return message_edit


def _stringify_argument_values(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        if not isinstance(value, str):
            arguments[key] = str(value)


def _last_parameter_lost(arguments: dict[str, Any]) -> None:
    if len(arguments) > 1:
        arguments.pop(list(arguments)[-1])


def _values_as_text(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        if not isinstance(value, str):
            arguments[key] = json.dumps(value, ensure_ascii=False)


def _values_stripped(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        if isinstance(value, str):
            arguments[key] = value.strip()


def _nested_markup_cut(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        if isinstance(value, str) and "<" in value:
            arguments[key] = value[: value.index("<")]


def _thought_label_kept(message: dict[str, Any]) -> None:
    if message.get("reasoning"):
        message["reasoning"] = "thought\n" + message["reasoning"]


def _channel_left_in_content(message: dict[str, Any]) -> None:
    if message.get("reasoning"):
        message["content"] = f"<|channel>thought\n{message.pop('reasoning')}<channel|>" + (message.get("content") or "")
        message["reasoning"] = None


def _string_delimiters_kept(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        if isinstance(value, str):
            arguments[key] = f'<|"|>{value}<|"|>'


def _keep_stop_strings(request: dict[str, Any]) -> None:
    responses = [request.get("generate_response"), *(request.get("generate_responses") or [])]
    if any(isinstance(c.get("stop_reason"), str) for r in responses for c in choices(r)):
        for key in ("chat_request", "completion_request"):
            if isinstance(request.get(key), dict):
                request[key]["include_stop_str_in_output"] = True


def _request_of(body: dict[str, Any]) -> dict[str, Any]:
    """The original chat or completions request a derender body carries ({} when none)."""
    for key in ("chat_request", "completion_request"):
        if isinstance(body.get(key), dict):
            return body[key]
    return {}


def _unreported_stop_ignored(body: dict[str, Any]) -> None:
    responses = [body.get("generate_response"), body.get("generate_chunk"), *(body.get("generate_responses") or [])]
    if any(c.get("stop_reason") is None and c.get("finish_reason", "stop") == "stop"
           for r in responses for c in choices(r)):
        for key in ("stop", "stop_token_ids"):
            _request_of(body).pop(key, None)


def _stream_stop_strings_not_held(body: dict[str, Any]) -> None:
    if body.get("stream"):
        _request_of(body).pop("stop", None)


def _metrics_as_sent(answer: Any, request: Any) -> None:
    for holder in (answer, answer.get("chunk") if isinstance(answer, dict) else None):
        if isinstance(holder, dict) and isinstance(holder.get("metrics"), dict):
            holder["metrics"] = {k: v for k, v in holder["metrics"].items() if v is not None}


def _metrics_unchecked(body: dict[str, Any]) -> None:
    for holder in (body.get("generate_response"), body.get("generate_chunk"), *(body.get("generate_responses") or [])):
        metrics = holder.get("metrics") if isinstance(holder, dict) else None
        if isinstance(metrics, dict) and any(isinstance(v, str) for v in metrics.values()):
            holder["metrics"] = None


def _bare_hex_tool_call_ids(answer: Any, request: Any) -> None:
    chunk = answer.get("chunk") if isinstance(answer, dict) else None
    for choice in choices(answer) + choices(chunk):
        for call in _tool_calls(choice.get("message") or choice.get("delta") or {}):
            if isinstance(call.get("id"), str):
                call["id"] = call["id"].removeprefix("chatcmpl-tool-")


def _far_ids_refused(path: str, body: bytes) -> bytes | Reply:
    request = parse(body)
    if path in DERENDERS and isinstance(request, dict):
        holders = [request.get("generate_response"), request.get("generate_chunk"),
                   *(request.get("generate_responses") or [])]
        if any(i >= 1 << 20 for h in holders for c in choices(h) for i in c.get("token_ids") or []
               if isinstance(i, int)):
            return Reply.of_json(400, {"error": {"message": "token id out of vocabulary", "type": "BadRequestError",
                                                 "param": None, "code": 400}})
    return body


def _no_usage_without_choices(answer: Any, request: Any) -> None:
    if isinstance(answer, dict) and answer.get("choices") == []:
        answer["usage"] = None


def _leading_space_dropped(answer: Any, request: Any) -> None:
    chunk = answer.get("chunk") if isinstance(answer, dict) else None
    first = not (isinstance(request, dict) and request.get("stream_state"))
    for choice in choices(answer) + (choices(chunk) if first else []):
        holder = choice.get("message") or choice.get("delta") or choice
        for key in ("content", "text"):
            if isinstance(holder.get(key), str):
                holder[key] = holder[key].removeprefix(" ")


def _missing_chat_request_guessed(body: dict[str, Any]) -> None:
    if "generate_response" in body or "generate_chunk" in body and "completion_request" not in body:
        body.setdefault("chat_request", {"model": body.get("model"), "messages": [{"role": "user", "content": ""}]})
        if body.get("stream") and body.get("prompt_token_ids") is None:
            body["prompt_token_ids"] = [0]


def _empty_tool_call_ids(message: dict[str, Any]) -> None:
    for call in _tool_calls(message):
        call["id"] = ""


def _tool_calls_left_as_markup(answer: Any, request: Any) -> None:
    for choice in choices(answer):
        message = choice.get("message") or {}
        calls = _tool_calls(message)
        if not calls:
            continue
        markup = "".join(
            "<tool_call>\n" + json.dumps({"name": (c.get("function") or {}).get("name"),
                                          "arguments": (c.get("function") or {}).get("arguments")}) + "\n</tool_call>"
            for c in calls)
        message["content"] = (message.get("content") or "") + markup
        message["tool_calls"] = []
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"


def _tool_calls_finish_as_stop(answer: Any, request: Any) -> None:
    for choice in choices(answer):
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"


def _first_choice_only(answer: Any, request: Any) -> None:
    if len(choices(answer)) > 1:
        answer["choices"] = choices(answer)[:1]


def _finish_reason_null(answer: Any, request: Any) -> None:
    for choice in choices(answer):
        choice["finish_reason"] = None


def _non_negative(ids: Any) -> Any:
    if isinstance(ids, list):
        return [_non_negative(i) for i in ids]
    return 0 if isinstance(ids, int) and not isinstance(ids, bool) and ids < 0 else ids


def _clamp_negative_ids(request: dict[str, Any]) -> None:
    responses = [request.get("generate_response"), request.get("generate_chunk"),
                 *(request.get("generate_responses") or [])]
    for response in responses:
        for choice in choices(response):
            if "token_ids" in choice:
                choice["token_ids"] = _non_negative(choice["token_ids"])
    if "prompt_token_ids" in request:
        request["prompt_token_ids"] = _non_negative(request["prompt_token_ids"])


# -- generate: derender mode, abort --------------------------------------------------------------------------


def _parse_context_include_reasoning(request: dict[str, Any]) -> None:
    context = request.get("parse_context")
    if request.get("output_mode") == "derender" and isinstance(context, dict):
        context["include_reasoning"] = True


def _abort_not_forwarded(path: str, body: bytes) -> bytes | Reply:
    if path != ABORT:
        return body
    return Reply(200, "application/json", b"")


def _derender_mode_stream_no_role(path: str, request: Any, event: Any) -> list[Any]:
    if path == GENERATE and isinstance(request, dict) and request.get("output_mode") == "derender" \
            and isinstance(event, dict):
        for choice in choices(event):
            if isinstance(choice.get("delta"), dict):
                choice["delta"].pop("role", None)
    return [event]


# -- streaming derender -----------------------------------------------------------------------------------


def _drop_last_char(answer: Any, request: Any) -> None:
    for choice in stream_choices(answer):
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str) and delta["content"]:
            delta["content"] = delta["content"][:-1]
        if isinstance(choice.get("text"), str) and choice["text"]:
            choice["text"] = choice["text"][:-1]


def _forget_state(request: dict[str, Any]) -> None:
    if request.get("stream") is True:
        request.pop("stream_state", None)


#: A decode window under a name of the implementation's own (as vLLM 0.34 renamed prev_tokens, unannounced).
_WINDOW_RENAMED = {"prev_tokens": "prev_pieces", "prev_token_ids": "prev_ids"}


def _window_renamed_out(answer: Any, request: Any) -> None:
    state = answer.get("stream_state") if isinstance(answer, dict) else None
    if isinstance(state, dict):
        for old, new in _WINDOW_RENAMED.items():
            if old in state:
                state[new] = state.pop(old)


def _window_renamed_in(request: dict[str, Any]) -> None:
    state = request.get("stream_state")
    if request.get("stream") is True and isinstance(state, dict):
        for old, new in _WINDOW_RENAMED.items():
            if new in state:
                state[old] = state.pop(new)


def _state_key_renamed(answer: Any, request: Any) -> None:
    if isinstance(answer, dict) and "stream_state" in answer:
        answer["state"] = answer.pop("stream_state")


def _stream_reasoning_into_content(answer: Any, request: Any) -> None:
    for delta in deltas(answer):
        if delta.get("reasoning"):
            delta["content"] = delta.pop("reasoning") + (delta.get("content") or "")


def _stream_finish_reason_dropped(answer: Any, request: Any) -> None:
    for choice in stream_choices(answer):
        choice["finish_reason"] = None


# -- errors -----------------------------------------------------------------------------------------------


def _error_without_error_object(path: str, request: Any, reply: Reply) -> Reply:
    return Reply.of_json(reply.status, {"detail": "bad"}) if 400 <= reply.status < 500 else reply


def _500_on_bad_input(path: str, request: Any, reply: Reply) -> Reply:
    return Reply(500, "text/plain; charset=utf-8", b"Internal Server Error") if 400 <= reply.status < 500 else reply


def _oversized_500(path: str, body: bytes) -> bytes | Reply:
    if len(body) <= ONE_MIB:
        return body
    return Reply.of_json(500, {"error": {"message": "body too large", "type": "InternalServerError", "param": None,
                                         "code": 500}})


def _ignore_model(request: dict[str, Any]) -> None:
    request.pop("model", None)


def _error_code_500(path: str, request: Any, reply: Reply) -> Reply:
    value = reply.json() if 400 <= reply.status < 500 else None
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        value["error"]["code"] = 500
        return Reply.of_json(reply.status, value)
    return reply


def _404_as_400(path: str, request: Any, reply: Reply) -> Reply:
    if reply.status != 404 or reply.json() is None:
        return reply
    value = reply.json()
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        value["error"]["code"] = 400
    return Reply.of_json(400, value)


# -- utilities and models ---------------------------------------------------------------------------------


def _count_plus_one(answer: Any, request: Any) -> None:
    if isinstance(answer.get("count"), int):
        answer["count"] += 1


def _lstrip_prompt(answer: Any, request: Any) -> None:
    if isinstance(answer.get("prompt"), str):
        answer["prompt"] = answer["prompt"].lstrip()


def _models_edit(edit: Callable[[dict[str, Any]], None]) -> ResponseHook:
    def hook(path: str, request: Any, reply: Reply) -> Reply:
        value = reply.json() if path == "/v1/models" and reply.status == 200 else None
        if not isinstance(value, dict) or not isinstance(value.get("data"), list):
            return reply
        for card in value["data"]:
            if isinstance(card, dict):
                edit(card)
        return Reply.of_json(reply.status, value)
    return hook


CATALOGUE: tuple[Defect, ...] = (
    # render
    Defect("messages-render-drops-system", "render", ("RENDER-026",),
           "an Anthropic converter that reads only messages, so the top-level system prompt never reaches the template",
           on_request=edit_request((MESSAGES_RENDER,), lambda r: r.pop("system", None))),
    Defect("messages-render-ignores-stop-sequences", "render", ("RENDER-028",),
           "stop_sequences not mapped to stop (the OpenAI name is looked up), so generation runs past them",
           on_request=edit_request((MESSAGES_RENDER,), lambda r: r.pop("stop_sequences", None))),
    Defect("responses-render-ignores-instructions", "render", ("RENDER-030",),
           "a Responses converter that renders input only, so instructions never become the system message",
           on_request=edit_request((RESPONSES_RENDER,), lambda r: r.pop("instructions", None))),
    Defect("responses-render-drops-function-outputs", "render", ("RENDER-030",),
           "function_call_output items skipped as unknown, so the model never sees its tools' results",
           on_request=edit_request((RESPONSES_RENDER,), _drop_function_outputs)),
    Defect("responses-render-continues-previous-response", "render", ("RENDER-032",),
           "a render server that ignores previous_response_id and renders the input alone, as if it held no history",
           on_request=edit_request((RESPONSES_RENDER,), lambda r: r.pop("previous_response_id", None))),
    Defect("render-nondeterministic", "render", ("RENDER-003",),
           "a frontend that samples a cache-salt token into the prompt, so equal requests render differently",
           on_response=edit_answer(RENDERS, _append_noise)),
    Defect("render-no-generation-prompt", "render", ("RENDER-005", "PARITY-005"),
           "add_generation_prompt is not passed to the chat template, so the assistant header is missing",
           on_request=edit_request((CHAT_RENDER,), lambda r: r.__setitem__("add_generation_prompt", False))),
    Defect("render-drops-system", "render", ("RENDER-005", "PARITY-005"),
           "a message converter that keeps only user/assistant/tool roles and silently drops the system prompt",
           on_request=edit_request((CHAT_RENDER,), _drop_system)),
    Defect("render-ignores-tools", "render", ("RENDER-005", "PARITY-005"),
           "the tools list never reaches the chat template (a Go frontend that forgot to forward it)",
           on_request=edit_request((CHAT_RENDER,), _drop_tools)),
    Defect("render-ignores-continue-final", "render", ("RENDER-005",),
           "continue_final_message is dropped, so the final assistant turn is closed instead of continued",
           on_request=edit_request((CHAT_RENDER,), lambda r: r.pop("continue_final_message", None))),
    Defect("render-drops-reasoning-history", "render", ("RENDER-023",),
           "assistant reasoning in the history is not handed to the template (Qwen3's reads reasoning_content), so "
           "interleaved thinking disappears from the prompt (Llama 3.1's and DeepSeek-R1's templates never show it)",
           on_request=edit_request((CHAT_RENDER,), _drop_reasoning_history), families=("tiny", "qwen3")),
    Defect("render-drops-developer", "render", ("RENDER-023",),
           "a converter that knows only the system/user/assistant/tool roles and silently drops developer messages",
           on_request=edit_request((CHAT_RENDER,), _drop_developer)),
    Defect("render-tool-arguments-lost", "render", ("RENDER-023",),
           "tool-call arguments in the history that fail a strict decode are replaced by {} instead of decoded",
           on_request=edit_request((CHAT_RENDER,), _empty_tool_arguments)),
    Defect("render-parts-glued", "render", ("RENDER-023",),
           "text parts concatenated with nothing between them, where vLLM joins them with a newline for templates "
           "that take string content (the tiny template loops over parts, so only a real family shows it)",
           on_request=edit_request((CHAT_RENDER,), _glue_text_parts), families=("qwen3", "llama3", "deepseek-r1")),
    Defect("render-special-tokens-added", "render", ("RENDER-005", "PARITY-005"),
           "the chat prompt encoded with add_special_tokens=true, so Llama 3 and DeepSeek prompts start with a second "
           "BOS (a BOS-less tokenizer such as Qwen3's or the tiny one does not show it)",
           on_request=edit_request((CHAT_RENDER,), lambda r: r.__setitem__("add_special_tokens", True)),
           families=("llama3", "deepseek-r1")),
    Defect("render-nfkc", "render", ("RENDER-005", "PARITY-005"),
           "the frontend NFKC-normalises text before tokenising (ligatures and full-width forms change ids)",
           on_request=edit_request(RENDERS, _nfkc)),
    Defect("render-max-tokens-fixed", "render", ("RENDER-011", "RENDER-012"),
           "max_tokens hard-coded to 16 instead of the request's value or the context left",
           on_response=edit_answer(RENDERS, _set_param("max_tokens", 16))),
    Defect("render-drops-stop", "render", ("RENDER-008",),
           "stop strings from the request are lost on the way into sampling_params",
           on_response=edit_answer(RENDERS, _set_param("stop", []))),
    Defect("render-temperature-default", "render", ("RENDER-006",),
           "temperature from the request replaced by the model's default",
           on_response=edit_answer(RENDERS, _set_param("temperature", 0.7))),
    Defect("render-drops-default-params", "render", ("RENDER-006",),
           "a frontend that omits parameters whose value equals its own default (n=1, top_k=0), though the "
           "engine's defaults may differ",
           on_response=edit_answer(RENDERS, _drop_default_params)),
    Defect("render-drops-seed", "render", ("RENDER-008",),
           "seed is not forwarded, so seeded requests are not reproducible",
           on_response=edit_answer(RENDERS, _drop_param("seed"))),
    Defect("render-ids-as-strings", "render", ("SCHEMA-001", "SCHEMA-004"),
           "a frontend that serialises token ids as JSON strings",
           on_response=edit_answer(RENDERS, _ids_as_strings)),
    Defect("render-first-prompt-only", "render", ("RENDER-002",),
           "a batched completions prompt answered for its first element only",
           on_response=edit_answer((COMPLETIONS_RENDER,), _first_prompt_only)),
    Defect("render-request-id-random", "render", ("RENDER-037",),
           "a render server that always draws a fresh random request id (Aphrodite 0.24.1), so the client's "
           "X-Request-Id or request_id never reaches the engine's logs or abort",
           on_response=edit_answer(RENDERS, _random_request_ids)),
    Defect("messages-render-merges-inline-system", "render", ("RENDER-038",),
           "an Anthropic converter that always merges inline system messages into the leading system prompt, even "
           "for a template that renders them in place (a probe that reads only a --chat-template override)",
           on_request=edit_request((MESSAGES_RENDER,), _merge_inline_system)),
    Defect("render-reasoning-kwargs-from-defaults", "render", ("RENDER-039",),
           "reasoning_parser_kwargs built from the server's default template arguments, not the request's, so the "
           "engine's reasoning parser thinks a thinking-off request still reasons",
           on_response=edit_answer((CHAT_RENDER,), _reasoning_kwargs_from_defaults)),
    Defect("render-reasoning-ended-ignores-prompt", "render", ("RENDER-040",),
           "reasoning_ended set from include_reasoning alone, never from the parser's look at the prompt, so a "
           "thinking-off request has its structured outputs held back for a reasoning block that never comes",
           on_response=edit_answer((CHAT_RENDER,), _reasoning_ended_from_the_request)),
    Defect("render-drops-empty-collections", "render", ("RENDER-041",),
           "a serializer that omits empty lists and maps (omitempty), so allowed_token_ids [] (nothing allowed) "
           "reaches the engine as unset (everything allowed)",
           on_response=edit_answer(RENDERS, _drop_empty_collections)),
    Defect("render-max-tokens-not-lowered", "render", ("RENDER-011", "RENDER-041"),
           "an explicit max_tokens (or max_completion_tokens) passed on as asked, not lowered to the room the prompt"
           " leaves (vllm-rs render of vLLM 0.34: 2040 with room 2038), so the engine refuses or cuts the request",
           on_response=edit_answer(RENDERS, _max_tokens_as_asked)),
    Defect("render-structured-outputs-allow-think", "render", ("RENDER-046",),
           "structured_outputs / response_format rewritten into a structural tag that first allows an optional"
           " <think>...</think> block (vllm-rs render of vLLM 0.34), so the engine generates other text than the"
           " coupled endpoint for the same request",
           on_response=edit_answer((CHAT_RENDER,), _structured_outputs_allow_think), needs=("engine", "reference")),
    Defect("render-clamps-out-of-range", "render", ("RENDER-042",),
           "a lenient frontend that clamps out-of-range sampling values into range instead of refusing them",
           on_request=edit_request(RENDERS, _clamp_into_range)),
    Defect("render-refuses-empty-tools", "render", ("RENDER-043",),
           "a chat render that refuses an empty tools list as vLLM 0.33 and earlier did, where 0.34 reads it as no "
           "tools",
           on_request=_refuse_empty_tools),
    Defect("render-null-as-zero", "render", ("RENDER-044",),
           "a frontend that decodes a null number into its zero value (Go's), so temperature null is greedy and "
           "max_tokens null is refused",
           on_request=edit_request(RENDERS, _null_as_zero)),
    # generate
    Defect("generate-overshoots-max-tokens", "generate", ("GENERATE-005",),
           "an engine that uses its own max_tokens default instead of the request's",
           on_request=edit_request((GENERATE,), _double_max_tokens), needs=("engine",)),
    Defect("generate-length-as-stop", "generate", ("GENERATE-005",),
           "finish_reason reports stop when generation hit max_tokens",
           on_response=edit_answer((GENERATE,), _length_as_stop), needs=("engine",)),
    Defect("generate-drops-logprobs", "generate", ("GENERATE-012", "GENERATE-013"),
           "logprobs requested but not returned (the engine's logprobs processor is not wired up)",
           on_response=edit_answer((GENERATE,), _drop_choice_field("logprobs")), needs=("engine",)),
    Defect("generate-prompt-tokens-off", "generate", ("GENERATE-006",),
           "usage.prompt_tokens counts the BOS token twice",
           on_response=edit_answer((GENERATE,), _prompt_tokens_plus_one), needs=("engine",)),
    Defect("generate-drops-last-token", "generate", ("GENERATE-005", "GENERATE-007"),
           "an off-by-one slice of the output drops the last generated token",
           on_response=edit_answer((GENERATE,), _drop_last_token), needs=("engine",)),
    Defect("generate-swallows-errors", "generate", ("ERROR-015",),
           "an engine that turns validation errors into an empty 200 completion",
           on_response=_swallow_generate_errors, needs=("engine",)),
    Defect("generate-ignores-seed", "generate", ("GENERATE-015",),
           "seed is not passed to the sampler",
           on_request=edit_request((GENERATE,), _drop_sampling_field("seed")), needs=("engine",)),
    Defect("generate-ignores-stop-token-ids", "generate", ("GENERATE-016",),
           "stop_token_ids are ignored by the engine",
           on_request=edit_request((GENERATE,), _drop_sampling_field("stop_token_ids")), needs=("engine",)),
    Defect("generate-stream-no-done", "generate", ("STREAM-001",),
           "the SSE stream ends without the [DONE] sentinel",
           on_event=_drop_done, needs=("engine",)),
    Defect("generate-stream-error-not-an-error-object", "generate", ("STREAM-006",),
           "an engine step that fails mid-stream is reported as a bare message and the connection closes without"
           " [DONE], so a client cannot tell a failure from a cut",
           on_event=_error_as_text_then_cut, needs=("engine",)),
    Defect("generate-stream-repeats-chunk", "generate", ("STREAM-003",),
           "a retry in the streaming loop sends the first chunk twice",
           on_event=each_event(_repeat_first), needs=("engine",)),
    Defect("generate-stream-no-finish-reason", "generate", ("STREAM-004",),
           "the last SSE chunk carries no finish_reason",
           on_event=each_event(_final_without_finish_reason), needs=("engine",)),
    Defect("generate-derender-mode-ignores-include-reasoning", "generate", ("GENERATE-022",),
           "a derender-mode engine that reads the parser flags from its own defaults, not the request's parse_context",
           on_request=edit_request((GENERATE,), _parse_context_include_reasoning), needs=("engine",)),
    Defect("generate-abort-not-forwarded", "generate", ("GENERATE-025",),
           "a gateway that answers abort itself and never tells the engine, so the generation runs on",
           on_request=_abort_not_forwarded, needs=("engine",)),
    Defect("generate-derender-stream-no-role", "generate", ("GENERATE-023",),
           "a streamed derender mode that never opens the message with role assistant",
           on_event=_derender_mode_stream_no_role, needs=("engine",)),
    Defect("generate-omitted-max-tokens-16", "generate", ("GENERATE-029",),
           "an engine that reads an omitted or null max_tokens as SamplingParams' dataclass default of 16 (vLLM's "
           "generate before its server-side default)",
           on_request=edit_request((GENERATE,), _omitted_max_tokens_16), needs=("engine",)),
    Defect("generate-huge-max-tokens-crash", "generate", ("GENERATE-030",),
           "an engine that writes prompt_len + max_tokens into an int32 array, so a max_tokens past 2^31 overflows "
           "and kills the EngineCore",
           on_request=_huge_max_tokens_crash, needs=("engine",)),
    Defect("generate-drops-stop-without-detokenize", "generate", ("GENERATE-031",),
           "a server that forces detokenize off after validating the request, so stop strings are silently never "
           "applied",
           on_request=edit_request((GENERATE,), _stop_dropped_without_detokenize), needs=("engine",)),
    Defect("generate-refuses-transfer-params", "generate", ("GENERATE-032",),
           "a generate schema with extra fields forbidden that predates disaggregated serving, so every request "
           "render writes with kv_transfer_params is refused",
           on_request=_transfer_params_refused, needs=("engine",)),
    Defect("generate-prompt-logprobs-shifted", "generate", ("GENERATE-033",),
           "prompt logprobs listed by the position whose logits produced them, so entry i scores token i + 1 and "
           "the leading null is lost",
           on_response=edit_answer((GENERATE,), _prompt_logprobs_shifted, stream=False), needs=("engine",)),
    Defect("generate-stream-usage-per-delta", "generate", ("STREAM-030",),
           "continuous usage stats that count each event's delta instead of the choice's ids so far",
           on_event=each_event(_usage_per_delta), needs=("engine",)),
    Defect("generate-prompt-logprobs-clamped", "generate", ("GENERATE-033",),
           "an engine that clamps prompt_logprobs to its max_logprobs of 20 instead of refusing more",
           on_request=edit_request((GENERATE,), _prompt_logprobs_clamped), needs=("engine",)),
    Defect("generate-stream-usage-unasked", "generate", ("STREAM-030",),
           "a server that sends usage on every streamed event whether or not continuous_usage_stats asked for it",
           on_event=_usage_unasked, needs=("engine",)),
    Defect("generate-stream-drops-prompt-logprobs", "generate", ("STREAM-031",),
           "a streamed generate whose chunk has no field for prompt logprobs and drops them unsaid, as vLLM "
           "0.32-0.34 do",
           on_request=edit_request((GENERATE,), _stream_drops_prompt_logprobs), needs=("engine",)),
    # derender
    Defect("derender-drops-usage", "derender", ("SCHEMA-006",),
           "chat derender answers without usage",
           on_response=edit_answer((CHAT_DERENDER,), _drop_usage, stream=False)),
    Defect("derender-usage-off-by-one", "derender", ("DERENDER-003",),
           "completion_tokens counts the EOS token that was stripped from the text",
           on_response=edit_answer(DERENDERS, _usage_off_by_one, stream=False)),
    Defect("derender-replacement-char", "derender", ("DERENDER-007",),
           "token-by-token decoding that emits U+FFFD for a multi-byte character split across tokens",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_replacement_char), stream=False)),
    Defect("derender-reasoning-into-content", "derender", ("DERENDER-001",),
           "the parser splits, then the server serialises the reasoning into content",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_reasoning_into_content), stream=False)),
    Defect("derender-drops-reasoning", "derender", ("DERENDER-001",),
           "reasoning is parsed but the field is not serialised (looks like no reasoning parser)",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_drop_reasoning), stream=False)),
    Defect("derender-content-upper", "derender", ("PARITY-002",),
           "a post-processing hook that rewrites content (here: upper-cases it)",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_upper))),
    Defect("derender-strips-whitespace", "derender", ("PARITY-001", "STREAM-008"),
           "content is .strip()-ed after parsing, losing leading and trailing whitespace",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_strip), stream=False)),
    Defect("derender-arguments-as-object", "derender", ("SCHEMA-006", "PARITY-004"),
           "tool-call arguments returned as a JSON object instead of a JSON string",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_arguments_as_object), stream=False)),
    Defect("derender-tool-calls-as-markup", "derender", ("DERENDER-001", "PARITY-004"),
           "no tool parser configured: the raw <tool_call> markup is returned as content",
           on_response=edit_answer((CHAT_DERENDER,), _tool_calls_left_as_markup, stream=False)),
    Defect("derender-tool-finish-as-stop", "derender", ("DERENDER-006",),
           "finish_reason stays stop when tool calls were parsed",
           on_response=edit_answer((CHAT_DERENDER,), _tool_calls_finish_as_stop, stream=False)),
    Defect("derender-stringifies-arguments", "derender", ("DERENDER-027",),
           "a parser that reads the markup with a regex and writes every argument value back as a string"
           " ({\"n\": 3, \"ok\": true} becomes {\"n\": \"3\", \"ok\": \"True\"})",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_stringify_argument_values)),
                                   stream=False)),
    # parameter-element markup (qwen3_coder): bugs only a text-per-parameter parser can have
    Defect("derender-xml-last-parameter-lost", "derender", ("DERENDER-028",),
           "a parameter regex that needs the next tag to end a value drops each call's last parameter",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_last_parameter_lost)),
                                   stream=False), families=("qwen3-coder",)),
    Defect("derender-xml-schema-ignored", "derender", ("DERENDER-028",),
           "a parser that never reads the request's tool schema, so every parameter stays its text (3 as \"3\")",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_values_as_text)),
                                   stream=False), families=("qwen3-coder",)),
    Defect("derender-xml-values-stripped", "derender", ("DERENDER-028",),
           "values stripped of all surrounding whitespace instead of the one newline the template wraps them in",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_values_stripped)),
                                   stream=False), families=("qwen3-coder",)),
    Defect("derender-xml-nested-markup-cut", "derender", ("DERENDER-028", "DERENDER-001"),
           "an XML parser that ends a value at the first tag inside it (<b>Paris</b> becomes empty)",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_nested_markup_cut)),
                                   stream=False), families=("qwen3-coder",)),
    # Gemma 4's markup (gemma4): bugs only a channel-and-key:value parser can have
    Defect("derender-g4-thought-label-kept", "derender", ("DERENDER-001",),
           "the reasoning channel's \"thought\\n\" label is left at the start of the reasoning",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_thought_label_kept), stream=False),
           families=("gemma-4",)),
    Defect("derender-g4-channel-left-in-content", "derender", ("DERENDER-001",),
           "the reasoning channel is not split off: <|channel>thought ... <channel|> stays in the content, markers and"
           " all",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_channel_left_in_content), stream=False),
           families=("gemma-4",)),
    Defect("derender-g4-string-delimiters-kept", "derender", ("DERENDER-029", "DERENDER-001"),
           'string values keep the <|"|> delimiters Gemma 4 quotes them with',
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_string_delimiters_kept)),
                                   stream=False), families=("gemma-4",)),
    Defect("derender-g4-schema-ignored", "derender", ("DERENDER-029",),
           "a key:value parser that never reads the request's tool schema, so every bare value stays its text"
           " (days:3 as \"3\", metric:true as \"true\")",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_edit_arguments(_values_as_text)),
                                   stream=False), families=("gemma-4",)),
    Defect("derender-keeps-stop-string", "derender", ("DERENDER-022",),
           "the stop string the engine matched stays in the text (vLLM 0.32's derender shipped this)",
           on_request=edit_request(DERENDERS, _keep_stop_strings)),
    Defect("derender-ignores-unreported-stop", "derender", ("DERENDER-030",),
           "a choice that finished with stop but carries no stop_reason is decoded whole: the request's stop strings"
           " and stop_token_ids are never consulted (vLLM 0.32's derender)",
           on_request=edit_request(DERENDERS, _unreported_stop_ignored)),
    Defect("stream-derender-stop-string-not-held", "derender", ("STREAM-020",),
           "a streamed derender sends each chunk's text at once, so the start of a stop string goes out before the"
           " chunk that completes it",
           on_request=edit_request(DERENDERS, _stream_stop_strings_not_held)),
    Defect("derender-metrics-as-sent", "derender", ("DERENDER-031",),
           "the generate answer's metrics are echoed as an untyped object, so a client reading a field the engine did"
           " not measure finds no key rather than null",
           on_response=edit_answer(DERENDERS, _metrics_as_sent)),
    Defect("derender-metrics-unchecked", "derender", ("DERENDER-031",),
           "metrics are never validated: a timing that is not a number is dropped instead of refused",
           on_request=edit_request(DERENDERS, _metrics_unchecked)),
    Defect("derender-bare-hex-tool-call-ids", "derender", ("DERENDER-032",),
           "tool call ids are bare hex, not the coupled server's chatcmpl-tool-<hex> (vLLM 0.32's whole derender)",
           on_response=edit_answer((CHAT_DERENDER,), _bare_hex_tool_call_ids)),
    Defect("derender-refuses-padded-ids", "derender", ("DERENDER-033",),
           "an id the tokenizer lacks is refused, so a split deployment fails where the coupled one answered",
           on_request=_far_ids_refused),
    Defect("derender-no-usage-without-choices", "derender", ("DERENDER-034",),
           "a generate answer without choices derenders without usage",
           on_response=edit_answer(DERENDERS, _no_usage_without_choices, stream=False)),
    Defect("derender-first-token-out-of-context", "derender", ("DERENDER-035",),
           "the first output token is decoded without the prompt before it, so a leading space is lost (a Metaspace"
           " tokenizer's decode strips it)",
           on_response=edit_answer(DERENDERS, _leading_space_dropped)),
    Defect("derender-guesses-missing-chat-request", "derender", ("DERENDER-036",),
           "a chat derender without chat_request (or, streamed, without prompt_token_ids) is decoded as if the"
           " request had been empty, so the parsers run without the tools and template they read",
           on_request=edit_request((CHAT_DERENDER,), _missing_chat_request_guessed)),
    Defect("derender-empty-tool-call-id", "derender", ("DERENDER-026",),
           "tool calls get an empty id, so the client cannot answer them",
           on_response=edit_answer((CHAT_DERENDER,), _all_messages_edit(_empty_tool_call_ids), stream=False)),
    Defect("derender-first-choice-only", "derender", ("DERENDER-017",),
           "completions derender answers only the first of several generate responses",
           on_response=edit_answer((COMPLETIONS_DERENDER,), _first_choice_only, stream=False)),
    Defect("derender-drops-logprobs", "derender", ("DERENDER-018", "PARITY-008"),
           "logprobs present in the generate response are not carried into the OpenAI answer",
           on_response=edit_answer(DERENDERS, _drop_choice_field("logprobs"), stream=False)),
    Defect("derender-finish-reason-null", "derender", ("DERENDER-006",),
           "finish_reason is not mapped and comes out null",
           on_response=edit_answer(DERENDERS, _finish_reason_null, stream=False)),
    Defect("derender-accepts-negative-ids", "derender", ("DERENDER-013",),
           "negative token ids are clamped to 0 instead of refused",
           on_request=edit_request(DERENDERS, _clamp_negative_ids)),
    # streaming derender
    Defect("stream-derender-drops-last-char", "stream-derender", ("STREAM-008",),
           "the incremental detokenizer holds back the last character of every delta and never flushes it",
           on_response=edit_answer(DERENDERS, _drop_last_char, stream=True)),
    Defect("stream-derender-forgets-state", "stream-derender", ("STREAM-008", "STREAM-010"),
           "a stateless server that ignores the stream_state the client carries",
           on_request=edit_request(DERENDERS, _forget_state)),
    Defect("stream-derender-reasoning-into-content", "stream-derender", ("STREAM-008",),
           "the streaming reasoning parser is not wired up: reasoning deltas arrive as content",
           on_response=edit_answer((CHAT_DERENDER,), _stream_reasoning_into_content, stream=True)),
    Defect("stream-state-window-renamed", "stream-derender", ("STREAM-015",),
           "the decode window of stream_state is renamed (and read back under the new name) without the spec",
           on_request=edit_request(DERENDERS, _window_renamed_in),
           on_response=edit_answer(DERENDERS, _window_renamed_out, stream=True)),
    Defect("stream-derender-state-key-renamed", "stream-derender", ("STREAM-007",),
           'the streaming derender answer carries its state as "state", not "stream_state"',
           on_response=edit_answer(DERENDERS, _state_key_renamed, stream=True)),
    Defect("stream-derender-no-finish-reason", "stream-derender", ("STREAM-014",),
           "the last streamed chunk carries no finish_reason",
           on_response=edit_answer(DERENDERS, _stream_finish_reason_dropped, stream=True)),
    # errors
    Defect("error-without-error-object", "errors", ("ERROR-001",),
           'a framework default error body ({"detail": ...}) instead of the OpenAI error object',
           on_response=_error_without_error_object),
    Defect("500-on-bad-input", "errors", ("ERROR-003",),
           "validation errors escape as 500 Internal Server Error",
           on_response=_500_on_bad_input),
    Defect("oversized-500", "errors", ("ERROR-008",),
           "a body over the size limit crashes the handler instead of a 413",
           on_request=_oversized_500),
    Defect("unknown-model-served", "errors", ("ERROR-004",),
           "the model field is ignored, so a typo'd model name is served by whatever is loaded",
           on_request=edit_request((*RENDERS, *DERENDERS, GENERATE, "/tokenize", "/detokenize"), _ignore_model)),
    Defect("error-code-mismatch", "errors", ("ERROR-002",),
           "error.code hard-coded to 500 whatever the HTTP status",
           on_response=_error_code_500),
    Defect("model-not-found-as-400", "errors", ("ERROR-004",),
           "an unknown model answered 400 instead of 404",
           on_response=_404_as_400),
    # utilities and models
    Defect("tokenize-count-off", "utilities", ("UTIL-001",),
           "count computed before the special tokens were added",
           on_response=edit_answer(("/tokenize",), _count_plus_one)),
    Defect("detokenize-lstrip", "utilities", ("UTIL-003",),
           "detokenize strips the leading space SentencePiece-style",
           on_response=edit_answer(("/detokenize",), _lstrip_prompt)),
    Defect("models-drop-max-model-len", "utilities", ("UTIL-008",),
           "the /v1/models card lacks max_model_len, so clients cannot size prompts",
           on_response=_models_edit(lambda card: card.pop("max_model_len", None))),
    Defect("token-native-version-dropped", "token-native", ("TOKNAT-008",),
           "tokenizer_version is not published, so token-native looks unsupported",
           on_response=_models_edit(lambda card: card.pop("tokenizer_version", None))),
)

DEFECTS: dict[str, Defect] = {d.name: d for d in CATALOGUE}
