"""Render: an OpenAI chat or completions request -> the GenerateRequest(s) an engine would run.

The sampling_params mapping follows vLLM 0.32 (facts doc section 5), with one deliberate difference that
the spec requires (RENDER-006..009, RENDER-013): a field the request set explicitly is always written, even
when it equals SamplingParams' default, and ``max_tokens`` is always written. vLLM omits ``n: 1``,
``top_k: 0`` or ``max_tokens: 16``; an engine of another version or vendor, whose defaults differ, then
runs a request the client did not send (an absent ``max_tokens`` even means "up to the context limit").
Fields the request did not set are omitted at their defaults, as vLLM does, to keep bodies small.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from typing import Any

from tokenspec.harness.frontend import conversation, dialects, safety, token_native
from tokenspec.harness.frontend.chat_template import ChatTemplateError, render_chat, wants_content_parts
from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.errors import ApiError, bad_request
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.frontend.parsers import REASONING_PARSERS
from tokenspec.harness.frontend.validation import check_sampling_ranges
from tokenspec.specs.parser_families import keeps_special_tokens

# OpenAI defaults for the fields a generation_config.json may override.
_FLOAT_DEFAULTS = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
                   "temperature": 1.0, "top_p": 1.0, "min_p": 0.0}
# SamplingParams defaults of the non-float fields: such a field is omitted when equal to its default.
_OMITTED_AT_DEFAULT: dict[str, Any] = {
    "n": 1, "top_k": 0, "seed": None, "ignore_eos": False, "max_tokens": 16, "min_tokens": 0,
    "logprobs": None, "prompt_logprobs": None, "logprob_token_ids": None, "skip_special_tokens": True,
    "spaces_between_special_tokens": True, "include_stop_str_in_output": False, "stream_interval": None,
    "logit_bias": None, "allowed_token_ids": None, "extra_args": None, "thinking_token_budget": None,
    "routed_experts_prompt_start": 0, "repetition_detection": None, "watermarking": None,
    "structured_outputs": None, "output_text_buffer_length": 0,
}
_COPIED = ("n", "seed", "ignore_eos", "min_tokens", "skip_special_tokens", "spaces_between_special_tokens",
           "include_stop_str_in_output", "stream_interval", "thinking_token_budget", "allowed_token_ids",
           "repetition_detection", "routed_experts_prompt_start", "watermarking")
_MAX_TEMP_FLOOR = 1e-2  # vLLM raises tiny positive temperatures to this


def request_id_suffix(header_id: str | None, body_id: Any) -> str:
    """X-Request-Id header, else body request_id, else random (vLLM's order, RENDER-037): a header or body id that is
    present is used verbatim, even empty, as vLLM's ``_base_request_id`` does."""
    if header_id is not None:
        return header_id
    if isinstance(body_id, str):
        return body_id
    return secrets.token_hex(8)


class Renderer:
    """Turns validated request bodies into GenerateRequest dicts for one model."""

    def __init__(self, config: FrontendConfig, model: ModelFiles, tokenizer_version: str | None = None) -> None:
        self.config = config
        self.model = model
        # the server's tokenizer_version (token-native pin); computed once by the caller at start-up
        self.tokenizer_version = tokenizer_version or token_native.server_tokenizer_version(config.model_dir)
        self.text_filter = safety.load_text_filter(config.text_filter)

    def check_text(self, ids: list[int], param: str) -> None:
        """The safety hook on the prompt the engine would run, decoded (text and token input alike)."""
        safety.check_prompt(self.text_filter, self.model.decode, ids, param)

    # -- prompt ---------------------------------------------------------------------------------------

    def chat_prompt_ids(self, body: dict[str, Any], *, check_tool_choice: bool = True) -> list[int]:
        return self._chat_prompt(body, check_tool_choice)[0]

    def _chat_prompt(self, body: dict[str, Any], check_tool_choice: bool) -> tuple[list[int], str | None]:
        """The prompt's ids, and the text they encode (None where token blocks were spliced in)."""
        if not body["messages"]:
            raise bad_request("Cannot apply chat template to an empty conversation. Provide at least one message.",
                              param="messages")
        template = self.model.chat_template
        if template is None:
            raise bad_request("As of transformers v4.44, default chat template is no longer allowed, so you "
                              "must provide a chat template if the tokenizer does not define one.")
        tools = body.get("tools")
        if check_tool_choice and tools and body.get("tool_choice") in (None, "auto") and not self.config.tool_parser:
            raise bad_request('"auto" tool choice requires --enable-auto-tool-choice and '
                              "--tool-call-parser to be set")
        continue_final = bool(body.get("continue_final_message"))
        add_generation = body.get("add_generation_prompt", True)
        if add_generation is None:
            add_generation = True
        if continue_final and body.get("add_generation_prompt"):  # vLLM's request validator
            raise bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        if continue_final and add_generation:  # the default generation prompt: the template's own refusal
            raise bad_request("continue_final_message and add_generation_prompt are not compatible. Use "
                              "continue_final_message when you want the model to continue the final message, and "
                              "add_generation_prompt when you want to add a header that will prompt it to start a new "
                              "assistant message instead.")
        add_special = bool(body.get("add_special_tokens", False))
        as_parts = wants_content_parts(template)
        kwargs = template_kwargs(body)

        def render(messages: list[dict[str, Any]]) -> str:
            return render_chat(template, conversation.normalise(messages, template, as_parts),
                               tools=conversation.normalise_tools(tools), add_generation_prompt=add_generation,
                               continue_final_message=continue_final, special_tokens=self.model.special_tokens,
                               template_kwargs=kwargs)

        if token_native.has_blocks(body["messages"]):
            return token_native.prompt_ids_with_blocks(body["messages"], render, self.model.encode, add_special), None
        text = render(body["messages"])
        return self.model.encode(text, add_special_tokens=add_special), text

    def completion_prompts(self, body: dict[str, Any]) -> list[list[int]]:
        prompt = body["prompt"]
        if body.get("suffix"):
            raise bad_request("suffix is not supported for this model", param="suffix")
        if isinstance(prompt, str):
            prompt = [prompt]
        if not prompt:
            raise bad_request("Prompt cannot be empty", param="prompt")
        if all(isinstance(p, int | float) and not isinstance(p, bool) for p in prompt):
            prompt = [prompt]
        prompt = [_token_list(p) if isinstance(p, list) else p for p in prompt]  # 5.0 is token 5, as vLLM's int
        add_special = body.get("add_special_tokens")
        add_special = True if add_special is None else add_special
        out = []
        for p in prompt:
            ids = self.model.encode(p, add_special_tokens=add_special) if isinstance(p, str) else list(p)
            if not ids:
                raise bad_request("Prompt cannot be empty", param="prompt")
            out.append(ids)
        return out

    def _offsets(self, body: dict[str, Any], text: str | None, add_special: bool,
                 ids: list[int]) -> list[list[int]] | None:
        """token_offsets for ``ids`` when the request asks for them and the prompt was text (RENDER-034): the
        character range of each kept token (a truncated prompt keeps its last tokens, and their ranges)."""
        if not body.get("return_token_offsets") or text is None:
            return None
        encoded, offsets = self.model.encode_with_offsets(text, add_special)
        return offsets[len(offsets) - len(ids):] if encoded[len(encoded) - len(ids):] == ids else None

    def _check_length(self, ids: list[int], truncate: int | None) -> list[int]:
        """The prompt after truncate_prompt_tokens (k keeps the last k ids, -1 the context's worth, 0 none), refused
        when it is empty or longer than the context; a truncation past the context is refused first (vLLM)."""
        if truncate is not None and truncate > self.config.max_model_len:
            raise bad_request(f"truncate_prompt_tokens={truncate} cannot be greater than max_model_len = "
                              f"{self.config.max_model_len}. Please request a smaller truncation size. "
                              f"(parameter=truncate_prompt_tokens, value={truncate})", param="truncate_prompt_tokens")
        if truncate is not None:
            keep = self.config.max_model_len if truncate == -1 else truncate
            ids = ids[len(ids) - keep:] if keep else []
        if not ids:
            raise bad_request("The rendered prompt is empty: there is nothing to generate from.")
        if len(ids) > self.config.max_model_len:
            raise bad_request(
                f"This model's maximum context length is {self.config.max_model_len} tokens. However, your "
                f"prompt contains at least {len(ids)} input tokens. Please reduce the length of the input "
                "prompt.", param="input_tokens")
        return ids

    # -- sampling params --------------------------------------------------------------------------------

    def sampling_params(self, body: dict[str, Any], prompt_len: int, *, chat: bool) -> dict[str, Any]:
        defaults = self.model.sampling_defaults
        params: dict[str, Any] = {}
        for name, openai_default in _FLOAT_DEFAULTS.items():
            value = body.get(name)
            params[name] = float(value if value is not None else defaults.get(name, openai_default))
        top_k = body.get("top_k")
        params["top_k"] = top_k if top_k is not None else defaults.get("top_k", 0)
        for name in _COPIED:
            if body.get(name) is not None:
                params[name] = body[name]
        stop = body.get("stop")
        params["stop"] = [stop] if isinstance(stop, str) else list(stop or [])
        params["stop_token_ids"] = list(dict.fromkeys(body.get("stop_token_ids") or []))  # deduplicated, as vLLM
        requested = body.get("max_completion_tokens") if chat else None
        field = "max_completion_tokens"
        if requested is None:
            requested, field = body.get("max_tokens"), "max_tokens"
        if isinstance(requested, int) and requested > self.config.max_model_len:  # vLLM rejects, never clips
            raise bad_request(f"{field}={requested} cannot be greater than max_model_len={self.config.max_model_len}."
                              f" Please request fewer output tokens. (parameter={field}, value={requested})",
                              param=field)
        if requested is None and not chat:  # absent or null: OpenAI's 16, as vLLM reads a null (RENDER-044)
            requested = 16
        room = self.config.max_model_len - prompt_len
        caps = [room] + [c for c in (requested, defaults.get("max_tokens")) if c is not None]
        params["max_tokens"] = min(caps)
        if chat:
            if body.get("logprobs") and not body.get("logprob_token_ids"):
                params["logprobs"] = body.get("top_logprobs") if body.get("top_logprobs") is not None else 0
            if body.get("logprob_token_ids"):
                params["logprob_token_ids"] = body["logprob_token_ids"]
            echo_logprobs = body.get("top_logprobs")
        else:
            if body.get("logprobs") is not None:
                params["logprobs"] = body["logprobs"]
            echo_logprobs = body.get("logprobs")
        prompt_logprobs = body.get("prompt_logprobs")
        if prompt_logprobs is None and body.get("echo"):
            prompt_logprobs = echo_logprobs
        if prompt_logprobs is not None:
            params["prompt_logprobs"] = prompt_logprobs
        if chat and keeps_special_tokens(self.config.reasoning_parser, self.config.tool_parser, body,
                                         self.config.api_generation):
            params["skip_special_tokens"] = False  # the parser's adjust_request, as vLLM's (specs/parsers.yaml)
        params["output_kind"] = 1 if body.get("stream") else 2
        params["skip_clone"] = True
        if body.get("logit_bias") is not None:  # an explicit {} is written as {}, as vLLM does
            params["logit_bias"] = {str(int(k)): min(100.0, max(-100.0, float(v)))
                                    for k, v in body["logit_bias"].items()}
        extra = dict(body.get("vllm_xargs") or {})
        for name in ("kv_transfer_params", "ec_transfer_params"):
            if body.get(name):
                extra[name] = body[name]
        if extra:
            params["extra_args"] = extra
        if params["stop"] and not params.get("include_stop_str_in_output"):
            # held back so a stop string can still be cut from streamed text (SamplingParams' rule)
            params["output_text_buffer_length"] = max(len(s) for s in params["stop"]) - 1
        params["bad_words"] = list(body.get("bad_words") or [])
        params["skip_reading_prefix_cache"] = params.get("prompt_logprobs") is not None
        if 0 < params["temperature"] < _MAX_TEMP_FLOOR:
            params["temperature"] = _MAX_TEMP_FLOOR
        if (constraint := _structured_outputs(body)) is not None:
            params["structured_outputs"] = constraint
        check_sampling_ranges(params, self.config.max_n)
        explicit = {k for k in params if body.get(k) is not None} | {"max_tokens"}
        return {k: v for k, v in params.items()
                if k in explicit or k not in _OMITTED_AT_DEFAULT or v != _OMITTED_AT_DEFAULT[k]
                or isinstance(v, float)}

    # -- requests ---------------------------------------------------------------------------------------

    def _generate_request(self, body: dict[str, Any], request_id: str, ids: list[int],
                          params: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        stream = bool(body.get("stream"))
        return {
            "request_id": request_id, "token_ids": ids, "token_offsets": None, "features": None,
            "content_parts": None, "sampling_params": params, "model": body.get("model"), **extra,
            "return_token_ids": None, "output_mode": "tokens", "stream": stream,
            "stream_options": _stream_options(body) if stream else None,
            "cache_salt": body.get("cache_salt"), "priority": body.get("priority") or 0,
            "kv_transfer_params": None, "ec_transfer_params": None,
        }

    @staticmethod
    def _hoist_transfer_params(request: dict[str, Any]) -> dict[str, Any]:
        """The KV/EC transfer parameters moved from sampling_params.extra_args to the generate request's own fields,
        where chat, completions and Responses render put them since vLLM 0.33 (RENDER-035); generate moves them
        back for the engine, as vLLM's (0.32 on) does."""
        params = request["sampling_params"]
        extra = dict(params.get("extra_args") or {})
        for name in ("kv_transfer_params", "ec_transfer_params"):
            request[name] = extra.pop(name, None)
        if extra:
            params["extra_args"] = extra
        else:
            params.pop("extra_args", None)
        return request

    def render_chat(self, body: dict[str, Any], id_suffix: str, *, check_tool_choice: bool = True,
                    hoist: bool = True) -> dict[str, Any]:
        _check_common(body)
        if check_tool_choice:
            body = self._tool_usage(body)
        token_native.output_format(body, chat=True)  # contradictory output flags: 400 before any work
        pinned = body.get("tokenizer_version") is not None or token_native.has_blocks(body["messages"])
        if pinned:
            token_native.check_request(body, self.tokenizer_version, self.model.vocab_size)
        ids, text = self._chat_prompt(body, check_tool_choice)
        ids = self._check_length(ids, body.get("truncate_prompt_tokens"))
        self.check_text(ids, "messages")
        params = self.sampling_params(body, len(ids), chat=True)
        extra: dict[str, Any] = {}
        if self.config.reasoning_parser:
            kwargs = template_kwargs(body)
            kwargs.pop("documents", None)
            parser = REASONING_PARSERS[self.config.reasoning_parser](kwargs)
            ended = body.get("include_reasoning") is False or parser.prompt_left_reasoning(ids, self.model.added_vocab)
            extra = {"reasoning_ended": ended,
                     "reasoning_parser_kwargs": {"chat_template_kwargs": kwargs}}
        else:  # reasoning off is ended whatever the parsers (vLLM's resolve_reasoning_ended, 0.32 on)
            extra = {"reasoning_ended": True if body.get("include_reasoning") is False else None,
                     "reasoning_parser_kwargs": None}
        out = self._generate_request(body, f"chatcmpl-{id_suffix}", ids, params, extra)
        out["token_offsets"] = self._offsets(body, text, bool(body.get("add_special_tokens", False)), ids)
        out["parse_context"] = parse_context(body)
        if pinned:
            out["tokenizer_version"] = self.tokenizer_version  # TOKNAT-008; engines ignore unknown keys
        return self._hoist_transfer_params(out) if hoist else out

    def _tool_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        """A chat request's tools and tool_choice checked as vLLM's request model checks them. An empty tools list is
        no tools since 0.34 ("auto" and "required" then become "none"; a named choice still needs its tool), and a
        400 before (RENDER-043); a tool_choice other than "none" needs tools."""
        tools, choice = body.get("tools"), body.get("tool_choice")
        if tools == []:
            if self.config.api_generation == "0.33":
                raise bad_request("`tools` must not be an empty array. Either provide at least one tool or omit the "
                                  "field entirely. (parameter=tools)", param="tools")
            if not isinstance(choice, dict):
                body = {**body, "tools": None}
                if choice in ("auto", "required"):
                    body["tool_choice"] = choice = "none"
                tools = None
        if choice is None or choice == "none":
            return body
        if tools is None:
            raise bad_request("When using `tool_choice`, `tools` must be set. (parameter=tool_choice)",
                              param="tool_choice")
        if isinstance(choice, dict):
            name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
            if not any(isinstance(t, dict) and (t.get("function") or {}).get("name") == name for t in tools):
                raise bad_request(f"The tool `{name}` specified in `tool_choice` does not match any of the specified "
                                  "`tools` (parameter=tool_choice)", param="tool_choice")
        return body

    # -- the other dialects (harness/frontend/dialects.py) -----------------------------------------------------

    def render_messages(self, body: dict[str, Any], header_id: str | None,
                        check_model: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """An Anthropic Messages request, converted (its errors first, as vLLM's), then the model checked, then
        rendered as chat; the parse context keeps the converter's tool_choice (null without tools)."""
        dialects.check_messages(body)
        thinking = (body.get("thinking") or {}).get("type")
        effort = self.disabled_thinking_effort if thinking in ("disabled", "between_tools") else "none"
        chat = dialects.messages_to_chat(body, merge_inline_system=self.merges_inline_system, disabled_effort=effort)
        check_model(body)
        choice = chat["tool_choice"]
        if not self.config.tool_parser and chat.get("tools") is not None:
            if choice == "auto":
                raise bad_request('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
                                  "be set")
            if choice == "required":
                raise bad_request('tool_choice="required" requires --tool-call-parser to be set')
            if isinstance(choice, dict):
                raise bad_request(f'tool_choice=function "{choice["function"]["name"]}" requires --tool-call-parser '
                                  "to be set")
        # vLLM's Messages render leaves the transfer parameters in extra_args (0.33 and 0.34 hoist them elsewhere)
        suffix = header_id if header_id is not None else secrets.token_hex(8)  # a present header verbatim, as chat
        out = self.render_chat(chat, suffix, check_tool_choice=False, hoist=False)
        if keeps_special_tokens(self.config.reasoning_parser, self.config.tool_parser, chat, self.config.api_generation,
                                dialect="messages"):
            out["sampling_params"]["skip_special_tokens"] = False  # the converter's null tool_choice, as vLLM's
        out["parse_context"] = {**out["parse_context"], "tool_choice": choice}
        return out

    def render_responses(self, body: dict[str, Any]) -> dict[str, Any]:
        """A stateless Responses request rendered as chat, with what vLLM's Responses render leaves out: no
        parse_context, reasoning_ended, stream_options or return_token_ids, and extra_args always written."""
        if body.get("previous_response_id") is not None:
            raise ApiError("previous_response_id is not supported by the stateless render endpoint.", status=400,
                           err_type="invalid_request_error", param="previous_response_id")
        out = self.render_chat(dialects.responses_to_chat(body), "", check_tool_choice=False)
        params = out["sampling_params"]
        params.setdefault("extra_args", {})
        if "message.output_text.logprobs" in (body.get("include") or []):
            params["logprobs"] = body.get("top_logprobs") or 0
        return {**out, "request_id": dialects.responses_request_id(body), "reasoning_ended": None,
                "parse_context": None, "stream_options": None, "return_token_ids": None}

    @functools.cached_property
    def merges_inline_system(self) -> bool:
        """Whether system messages inside an Anthropic conversation join the leading one: when the template refuses
        a second system turn (vLLM's probe: system, user, system, user, with tools absent and empty)."""
        turns = [{"role": r, "content": "t"} for r in ("system", "user", "system", "user")]
        try:
            for tools in (None, []):
                render_chat(self.model.chat_template or "", turns, tools=tools, add_generation_prompt=False,
                            continue_final_message=False, special_tokens=self.model.special_tokens, template_kwargs={})
        except ChatTemplateError:
            return True
        return False

    @functools.cached_property
    def disabled_thinking_effort(self) -> str:
        """The reasoning_effort Anthropic's disabled thinking becomes: "low" when the template refuses "none" or
        renders it as some effort would (then "none" switches nothing off), else "none" (vLLM's probe)."""
        def prompt(effort: str) -> list[int] | None:
            try:
                return self.chat_prompt_ids({"messages": [{"role": "user", "content": "Hi"}],
                                             "reasoning_effort": effort})
            except (ApiError, ChatTemplateError):
                return None

        none = prompt("none")
        return "low" if none is None or any(prompt(e) == none for e in dialects.EFFORTS) else "none"

    def render_completions(self, body: dict[str, Any], id_suffix: str) -> list[dict[str, Any]]:
        _check_common(body)
        token_native.output_format(body, chat=False)
        token_native.check_pin(body, self.tokenizer_version)  # token-id prompts need no pin; a pin is honoured
        prompts = self.completion_prompts(body)
        listed = [body["prompt"]] if isinstance(body["prompt"], str) else body["prompt"]
        texts = [p if isinstance(p, str) else None for p in listed] if len(listed) == len(prompts) else \
            [None] * len(prompts)
        base = f"cmpl-{id_suffix}"
        out = []
        for i, ids in enumerate(prompts):
            ids = self._check_length(ids, body.get("truncate_prompt_tokens"))
            self.check_text(ids, "prompt")
            params = self.sampling_params(body, len(ids), chat=False)
            rid = base if len(prompts) == 1 else f"{base}-{i}"
            request = self._generate_request(body, rid, ids, params,
                                             {"reasoning_ended": None, "reasoning_parser_kwargs": None})
            text = texts[i]
            request["token_offsets"] = self._offsets(body, text, body.get("add_special_tokens") is not False, ids)
            if body.get("tokenizer_version") is not None:
                request["tokenizer_version"] = self.tokenizer_version
            out.append(self._hoist_transfer_params(request))
        return out


# vLLM's StructuredOutputsParams fields, written in full as vLLM's render writes them.
_STRUCTURED_DEFAULTS: dict[str, Any] = {
    "json": None, "regex": None, "choice": None, "grammar": None, "json_object": None,
    "disable_any_whitespace": False, "disable_additional_properties": False, "whitespace_pattern": None,
    "structural_tag": None, "_backend": None, "_backend_was_auto": False,
}


#: The constraint kinds of StructuredOutputsParams, of which a request names exactly one.
_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def _structured_outputs(body: dict[str, Any]) -> dict[str, Any] | None:
    """The generation constraint of a request: ``structured_outputs`` as given, else ``response_format``
    (json_object, or json_schema's schema). ``tool_choice`` constraints are not derived here (a known gap)."""
    given = body.get("structured_outputs")
    if isinstance(given, dict):  # exactly one constraint, as vLLM's StructuredOutputsParams demands (RENDER-042)
        constraints = [k for k in _CONSTRAINTS if given.get(k) is not None]
        if len(constraints) != 1:
            raise bad_request("You must use one kind of structured outputs constraint but "
                              f"{'none are' if not constraints else 'multiple are'} specified: {given}",
                              param="structured_outputs")
        return {**_STRUCTURED_DEFAULTS, **given}
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_object":
            return {**_STRUCTURED_DEFAULTS, "json_object": True}
        if response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema")
            return {**_STRUCTURED_DEFAULTS, "json": schema if schema is not None else {}}
    return None


def parse_context(body: dict[str, Any]) -> dict[str, Any]:
    """What a generate server that derenders (output_mode derender) needs to parse the output as the coupled server
    would, from the chat request (RENDER-025; vLLM 0.33's ParseContext): tool_choice "auto" when tools come without
    one, "none" without tools; the tool calls already in the conversation, so new call ids continue the count."""
    tools = body.get("tools") or None
    choice = body.get("tool_choice")
    if choice is None:
        choice = "auto" if tools else "none"
    parallel = body.get("parallel_tool_calls")
    kwargs = template_kwargs(body)
    kwargs.pop("documents", None)
    history = sum(len(m["tool_calls"]) for m in body["messages"]
                  if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list))
    return {"tools": tools, "tool_choice": choice, "parallel_tool_calls": True if parallel is None else parallel,
            "include_reasoning": body.get("include_reasoning") is not False, "chat_template_kwargs": kwargs,
            "history_tool_call_cnt": history}


def template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The chat template's keyword arguments, merged as vLLM merges them.

    The request's ``chat_template_kwargs`` first, less the entries whose value is null or "auto" (vLLM merges them
    over its server defaults, which drops such values: RENDER-039), then its own fields on top (a field that is null
    or "auto" leaves the kwarg alone); ``reasoning_effort`` also sets ``enable_thinking`` (off for "none") unless the
    request's kwargs already say.
    """
    given = body.get("chat_template_kwargs") or {}
    user = {k: v for k, v in given.items() if v is not None and v != "auto"}
    add_generation = body.get("add_generation_prompt", True)
    own: dict[str, Any] = {"add_generation_prompt": True if add_generation is None else add_generation,
                           "continue_final_message": bool(body.get("continue_final_message")),
                           "documents": body.get("documents"), "reasoning_effort": body.get("reasoning_effort")}
    if body.get("reasoning_effort") is not None and "enable_thinking" not in given:
        own["enable_thinking"] = body["reasoning_effort"] != "none"
    return user | {k: v for k, v in own.items() if v is not None and v != "auto"}


def _token_list(ids: list[Any]) -> list[Any]:
    """A token-ID list as vLLM's pydantic reads it: an integral float (``5.0``) is the int ``5``."""
    return [int(i) if isinstance(i, float) and i.is_integer() else i for i in ids]


def _stream_options(body: dict[str, Any]) -> dict[str, Any] | None:
    opts = body.get("stream_options")
    if opts is None:
        return None
    return {"include_usage": bool(opts.get("include_usage") or False),
            "continuous_usage_stats": bool(opts.get("continuous_usage_stats") or False)}


#: Integer fields that vLLM's pydantic also accepts as integral floats (5.0 is 5); thinking_token_budget is not one.
_INT_FIELDS = ("n", "max_tokens", "max_completion_tokens", "top_k", "seed", "min_tokens", "logprobs", "top_logprobs",
               "prompt_logprobs", "truncate_prompt_tokens", "priority", "stream_interval")


def _check_common(body: dict[str, Any]) -> None:
    for name in _INT_FIELDS:  # read as vLLM's models read them, before any check or arithmetic
        value = body.get(name)
        if isinstance(value, float) and value.is_integer():
            body[name] = int(value)
    for name in ("stop_token_ids", "allowed_token_ids", "logprob_token_ids"):
        if isinstance(body.get(name), list):
            body[name] = _token_list(body[name])
    if body.get("use_beam_search"):
        raise bad_request("Beam search is not supported by the render endpoint")
    if body.get("stream_options") and not body.get("stream"):
        raise bad_request("Stream options can only be defined when `stream=True`.", param="stream_options")
    if body.get("prompt_logprobs") not in (None, 0) and body.get("stream"):  # 0 asks for none (vLLM)
        raise bad_request("`prompt_logprobs` are not available when `stream=True`.", param="prompt_logprobs")
    if body.get("top_logprobs") not in (None, 0) and body.get("logprobs") is not True:
        raise bad_request("when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs")
    if body.get("logprob_token_ids") and not body.get("logprobs"):
        raise bad_request("`logprob_token_ids` requires `logprobs` to be set.", param="logprob_token_ids")
