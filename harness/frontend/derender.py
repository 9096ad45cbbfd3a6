"""Derender: token ids from generate -> OpenAI chat / completions responses, whole or chunk by chunk.

Streaming is stateless on the server: each call gets one generate chunk plus the ``stream_state`` the
client got back from the previous call (vLLM's DerenderStreamState fields, plus our own). The state is the
decode window, the text held back for a possible stop string and, with parsers, the parsers' progress (their
mode and the text they have not decided yet), so a chunk costs the same at token 32,000 as at token 10
(STREAM-019). vLLM carries the whole output history instead and replays it on every call; a state of that
shape is still accepted and replayed once.
"""

from __future__ import annotations

import time
from typing import Any

from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.detokenize import DecodeWindow, decode_all, decode_tokens, seed_window, window_of_ids
from tokenspec.harness.frontend.errors import bad_request
from tokenspec.harness.frontend.logprobs import CONTEXT_WINDOW, chat_logprobs, completion_logprobs
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.frontend.parsers import REASONING_PARSERS, OutputParser, tool_parser_class
from tokenspec.harness.frontend.parsers.progress import InvalidProgress
from tokenspec.harness.frontend.stopping import Stop, cut, hold_back, include_stop, settle, top_logprobs_wanted
from tokenspec.specs.parser_families import deletes_special_tokens, keeps_special_tokens


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
            "prompt_tokens_details": None, "completion_tokens_details": None}


#: The decode window's key in the state per API generation: pieces until 0.33, ids from 0.34.
WINDOW_KEYS = {"0.33": "prev_tokens", "0.34": "prev_token_ids"}


def new_stream_state(window_key: str = "prev_tokens") -> dict[str, Any]:
    return {window_key: [], "prefix_offset": 0, "read_offset": 0, "role_sent": False,
            "logprob_context_token_ids": [], "logprob_text_offset": 0, "output_token_ids": [],
            "output_chunk_lens": [], "tools_streamed": False, "last_tool_call_ids": [], "held_text": "",
            # No id history is kept (the parsers carry their progress instead); this count still bounds prompt +
            # output (STREAM-012).
            "output_token_count": 0, "parser_state": None}


def _chunk_usage(chunk: dict[str, Any], prompt_tokens: int | None) -> dict[str, Any] | None:
    usage = chunk.get("usage")
    if usage is None:
        return None
    prompt = prompt_tokens if prompt_tokens is not None else (usage.get("prompt_tokens") or 0)
    return _usage(prompt, usage.get("completion_tokens") or 0)


class Derenderer:
    def __init__(self, config: FrontendConfig, model: ModelFiles) -> None:
        self.config = config
        self.model = model
        self.reasoning_cls = REASONING_PARSERS[config.reasoning_parser] if config.reasoning_parser else None
        self.tool_cls = tool_parser_class(config.tool_parser, config.api_generation) if config.tool_parser else None
        self.parsers_on = self.reasoning_cls is not None or self.tool_cls is not None
        markers = [m for cls in (self.reasoning_cls, self.tool_cls) if cls is not None for m in cls.MARKERS]
        marker_ids = {i for m in markers if (i := model.tokenizer.token_to_id(m)) is not None}
        self.parser_skip_ids = model.all_special_ids - marker_ids
        self.window_key = WINDOW_KEYS[config.api_generation]

    def _decode_flags(self, request: dict[str, Any] | None, keep_special: bool) -> frozenset[int]:
        """The ids decoding drops: the special tokens when the request skips them (its default), except,
        on the parser path (``keep_special``), the marker tokens the parsers must see."""
        value = (request or {}).get("skip_special_tokens")
        if value is not None and not value:
            return frozenset()
        parsers = (self.config.reasoning_parser, self.config.tool_parser)
        if keep_special and keeps_special_tokens(*parsers, request, self.config.api_generation):
            if deletes_special_tokens(*parsers, self.config.api_generation):
                return self.parser_skip_ids  # kept, then all but the parsers' markup deleted (DERENDER-025)
            return frozenset()  # the parser turns skipping off, as the coupled server's does (DERENDER-025)
        return self.parser_skip_ids if keep_special else self.model.all_special_ids

    def _parser(self, chat_request: dict[str, Any]) -> OutputParser:
        return OutputParser(self.reasoning_cls, self.tool_cls, chat_request)

    def _settle(self, ids: list[int], choice: dict[str, Any], request: dict[str, Any] | None) -> Stop:
        return settle(ids, choice, request, self.model.all_special_ids, self.model.eos_ids, self.model.primary_eos)

    def _whole_text(self, seed_ids: list[int] | None, ids: list[int], choice: dict[str, Any],
                    request: dict[str, Any] | None, skip: frozenset[int]) -> tuple[str, int | str | None]:
        """A whole output's text and stop_reason: cut at a stop string only where it ends past the first
        ``min_tokens`` tokens, as the engine's stop check only looks there."""
        stop = self._settle(ids, choice, request)
        window = seed_window(self.model, seed_ids, skip)
        head_n = int((request or {}).get("min_tokens") or 0) if stop.strings else 0
        head = decode_tokens(self.model, window, stop.ids[:head_n], skip) if head_n else ""
        tail = decode_all(self.model, window, stop.ids[head_n:], skip)
        return cut(head + tail, len(tail), stop, include_stop(request))

    # -- chat, whole response ------------------------------------------------------------------------

    def chat(self, body: dict[str, Any], model_name: str) -> dict[str, Any]:
        chat_request = body.get("chat_request")
        if self.parsers_on and chat_request is None:
            raise bad_request("chat_request is required when a tool or reasoning parser is configured "
                              "because plain detokenization would leak raw parser markup into content.")
        gen = body["generate_response"]
        use_parser = self.parsers_on and chat_request is not None
        skip = self._decode_flags(chat_request, keep_special=use_parser)
        seed_ids = body.get("prompt_token_ids")
        if seed_ids is None:
            seed_ids = gen.get("prompt_token_ids")
        include_reasoning = (chat_request or {}).get("include_reasoning", True) is not False
        echo_ids = bool((chat_request or {}).get("return_token_ids")) and (not use_parser or include_reasoning)
        choices = []
        for choice in gen["choices"]:
            ids = choice.get("token_ids")
            if not ids:
                raise bad_request(f"choice {choice['index']} has empty or null token_ids")
            text, stop_reason = self._whole_text(seed_ids, ids, choice, chat_request, skip)
            finish = choice.get("finish_reason", "stop")
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None,
                                       "annotations": None, "audio": None, "function_call": None}
            if use_parser:
                parsed = self._parser(chat_request).parse(text)
                message["content"] = parsed.content
                if parsed.tool_calls:
                    message["tool_calls"] = parsed.tool_calls
                    if finish == "stop" and not isinstance(chat_request.get("tool_choice"), dict):
                        finish = "tool_calls"  # DERENDER-006: only stop turns into tool_calls
                if _forces_tool(chat_request):
                    message["content"] = message["content"] or ""
                message["reasoning"] = parsed.reasoning if include_reasoning else None
            else:
                message["reasoning"] = None
            lps = choice.get("logprobs")
            choices.append({
                "index": choice["index"], "message": message,
                "logprobs": _trim(chat_logprobs(self.model, lps), top_logprobs_wanted(chat_request, True))
                if lps is not None else None,
                "finish_reason": finish, "stop_reason": stop_reason,
                "token_ids": ids if echo_ids else None, "routed_experts": None})
        prompt_tokens = body.get("prompt_tokens") or 0
        completion = sum(len(c.get("token_ids") or []) for c in gen["choices"])
        return {"id": gen.get("request_id") or _random_id(), "object": "chat.completion",
                "created": int(time.time()), "model": model_name, "choices": choices,
                "service_tier": None, "system_fingerprint": None, "usage": _usage(prompt_tokens, completion),
                "prompt_logprobs": gen.get("prompt_logprobs"), "prompt_token_ids": None, "prompt_text": None,
                "kv_transfer_params": gen.get("kv_transfer_params"), "ec_transfer_params": None,
                "metrics": _metrics(gen.get("metrics"))}

    # -- completions, whole response --------------------------------------------------------------------

    def completions(self, body: dict[str, Any], model_name: str) -> dict[str, Any]:
        responses = body["generate_responses"]
        n = len(responses)
        prompt_tokens = body.get("prompt_tokens")
        prompt_ids = body.get("prompt_token_ids")
        if prompt_tokens is not None and len(prompt_tokens) != n:
            raise bad_request("prompt_tokens must have the same length as generate_responses")
        if prompt_ids is not None and len(prompt_ids) != n:
            raise bad_request("prompt_token_ids must have the same length as generate_responses")
        skip = self._decode_flags(body.get("completion_request"), keep_special=False)
        choices, total_prompt, total_completion = [], 0, 0
        for i, gen in enumerate(responses):
            seed_ids = prompt_ids[i] if prompt_ids is not None and prompt_ids[i] is not None \
                else gen.get("prompt_token_ids")
            for choice in gen["choices"]:
                ids = choice.get("token_ids")
                if not ids:
                    raise bad_request(f"choice {choice['index']} in response {gen.get('request_id')} has "
                                      "empty or null token_ids")
                text, stop_reason = self._whole_text(seed_ids, ids, choice, body.get("completion_request"), skip)
                lps = choice.get("logprobs")
                wanted = top_logprobs_wanted(body.get("completion_request"), False)
                choices.append({
                    "index": len(choices), "text": text,
                    "logprobs": completion_logprobs(_trim(chat_logprobs(self.model, lps), wanted))
                    if lps is not None else None,
                    "finish_reason": choice.get("finish_reason", "stop"),
                    "stop_reason": stop_reason, "token_ids": None, "prompt_logprobs": None,
                    "prompt_token_ids": None, "routed_experts": None})
                total_completion += len(ids)
            total_prompt += prompt_tokens[i] if prompt_tokens is not None else 0
        first = responses[0]
        kv = first.get("kv_transfer_params")
        if any(r.get("kv_transfer_params") != kv for r in responses[1:]):
            kv = None
        return {"id": first.get("request_id") or _random_id(), "object": "text_completion",
                "created": int(time.time()), "model": model_name, "choices": choices, "service_tier": None,
                "system_fingerprint": None, "usage": _usage(total_prompt, total_completion),
                "kv_transfer_params": kv, "ec_transfer_params": None,
                "metrics": _metrics(first.get("metrics")) if n == 1 else None}

    # -- streaming ----------------------------------------------------------------------------------------

    def _window_from(self, state: dict[str, Any]) -> DecodeWindow:
        if self.window_key == "prev_token_ids":
            return window_of_ids(self.model, state["prev_token_ids"], state["prefix_offset"], state["read_offset"])
        return DecodeWindow(list(state["prev_tokens"]), state["prefix_offset"], state["read_offset"])

    def _store_window(self, state: dict[str, Any], window: DecodeWindow) -> None:
        ids_key = self.window_key == "prev_token_ids"
        state.update({self.window_key: window.ids if ids_key else window.prev_tokens,
                      "prefix_offset": window.prefix_offset, "read_offset": window.read_offset})

    def _new_state(self, carried: dict[str, Any] | None) -> dict[str, Any]:
        """The carried state over the defaults, checked: a state of another generation's window is refused rather
        than misread (vLLM 0.34 ignores a stale prev_tokens and decodes from an empty window)."""
        if carried and self.window_key not in carried:
            other = next((k for k in WINDOW_KEYS.values() if k in carried), None)
            if other is not None:
                raise bad_request(f"invalid stream_state: this server keeps the decode window as "
                                  f"{self.window_key}, not {other}")
        state = {**new_stream_state(self.window_key), **(carried or {})}
        self._check_state(state)
        return state

    def _check_state(self, state: dict[str, Any]) -> None:
        """A carried state must be internally consistent, whichever path will read it (STREAM-013):
        a client that tampers with it gets a 400, never text silently lost or a 5xx."""
        if not 0 <= state["prefix_offset"] <= state["read_offset"] <= len(state[self.window_key]):
            raise bad_request("invalid stream_state: decode window offsets out of range")
        lens = state["output_chunk_lens"]
        if any(n <= 0 for n in lens) or sum(lens) != len(state["output_token_ids"]):
            raise bad_request("invalid stream_state: output_chunk_lens do not add up to output_token_ids")

    def _held_text(self, state: dict[str, Any], window: DecodeWindow, ids: list[int], choice: dict[str, Any],
                   request: dict[str, Any] | None, skip: frozenset[int]) -> tuple[str, int | str | None]:
        """Decode a chunk, holding back what could still turn out to be a stop string; on the last chunk, cut
        at the stop string and settle the stop_reason as the whole derender does (DERENDER-030, STREAM-020)."""
        if choice.get("finish_reason") is None:
            text = str(state.get("held_text") or "") + decode_tokens(self.model, window, ids, skip)
            past = int(state.get("output_token_count") or 0) + len(ids) > int((request or {}).get("min_tokens") or 0)
            sent, state["held_text"] = hold_back(text, request, past)
            return sent, choice.get("stop_reason")
        stop = self._settle(ids, choice, request)
        held = str(state.get("held_text") or "")
        text = held + decode_tokens(self.model, window, stop.ids, skip)
        state["held_text"] = ""
        return cut(text, len(text), stop, include_stop(request))

    def chat_stream(self, body: dict[str, Any], model_name: str) -> dict[str, Any]:
        chat_request = body.get("chat_request")
        if self.parsers_on:
            if chat_request is None:
                raise bad_request("chat_request is required when a tool or reasoning parser is configured "
                                  "because plain detokenization would leak raw parser markup into content.")
            if body.get("prompt_token_ids") is None:
                raise bad_request("prompt_token_ids is required when a tool or reasoning parser is "
                                  "configured.")
        chunk = body["generate_chunk"]
        prompt_ids = body.get("prompt_token_ids")
        if prompt_ids is None:
            prompt_ids = chunk.get("prompt_token_ids")
        carried = body.get("stream_state")
        state = self._new_state(carried)
        choices = []
        if self.parsers_on:
            choice_out, state = self._chat_stream_parsed(chunk, state, chat_request, prompt_ids)
            choices = [choice_out] if choice_out is not None else []
        else:
            skip = self._decode_flags(chat_request, keep_special=False)
            window = self._window_from(state) if carried is not None else seed_window(self.model, prompt_ids, skip)
            echo_ids = bool((chat_request or {}).get("return_token_ids"))
            for choice in chunk["choices"]:
                ids = choice.get("token_ids") or []
                text, stop_reason = self._held_text(state, window, ids, choice, chat_request, skip)
                lps = choice.get("logprobs")
                resolved = _trim(chat_logprobs(self.model, lps, state["logprob_context_token_ids"]),
                                 top_logprobs_wanted(chat_request, True)) if lps is not None else None
                delta = {"role": None if state["role_sent"] else "assistant", "content": text or None,
                         "reasoning": None}
                state["role_sent"] = True
                state["output_token_count"] = int(state.get("output_token_count") or 0) + len(ids)
                state["logprob_context_token_ids"] = (state["logprob_context_token_ids"] + ids)[-CONTEXT_WINDOW:]
                choices.append({"index": choice["index"], "delta": delta, "logprobs": resolved,
                                "finish_reason": choice.get("finish_reason"), "stop_reason": stop_reason,
                                "token_ids": choice.get("token_ids") if echo_ids else None})
            self._store_window(state, window)
        out_chunk = {"id": chunk.get("request_id") or _random_id(), "object": "chat.completion.chunk",
                     "created": int(time.time()), "model": model_name, "choices": choices,
                     "usage": _chunk_usage(chunk, body.get("prompt_tokens")), "system_fingerprint": None,
                     "prompt_token_ids": None, "prompt_text": None, "metrics": _metrics(chunk.get("metrics"))}
        return {"chunk": out_chunk, "stream_state": state}

    def _chat_stream_parsed(self, chunk: dict[str, Any], state: dict[str, Any], chat_request: dict[str, Any],
                            prompt_ids: list[int]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """One chunk through the parsers, resumed from the progress the state carries: the cost of a chunk and the
        size of the state do not grow with the stream (STREAM-019)."""
        parser = self._parser(chat_request)
        skip = self._decode_flags(chat_request, keep_special=True)
        if state.get("parser_state") is not None:
            try:
                parser.resume(state["parser_state"])
            except InvalidProgress as error:
                raise bad_request(f"invalid stream_state: {error}") from None
            window = self._window_from(state)
        else:
            window = seed_window(self.model, prompt_ids, skip)
            if state["output_token_ids"]:
                self._replay(state, parser, window, skip, chat_request)
        if not chunk["choices"]:
            state["parser_state"] = parser.progress()
            self._store_window(state, window)
            return None, state
        choice = chunk["choices"][0]
        ids = choice.get("token_ids") or []
        finished = choice.get("finish_reason") is not None
        visible, stop_reason = self._held_text(state, window, ids, choice, chat_request, skip)
        parsed = parser.feed(visible, finished=finished)
        state["parser_state"] = parser.progress()
        self._store_window(state, window)
        state["output_token_count"] = int(state.get("output_token_count") or 0) + len(ids)
        tool_calls = []
        known_ids = list(state["last_tool_call_ids"])
        for call in parsed.tool_calls:
            if call.id is not None:
                if call.index < len(known_ids):
                    call.id = known_ids[call.index]  # keep the id the client already saw
                else:
                    known_ids.append(call.id)
            tool_calls.append(call.to_json())
        if tool_calls:
            state["tools_streamed"] = True
        state["last_tool_call_ids"] = known_ids
        include_reasoning = chat_request.get("include_reasoning", True) is not False
        delta: dict[str, Any] = {"role": None if state["role_sent"] else "assistant",
                                 "content": parsed.content or None,
                                 "reasoning": (parsed.reasoning or None) if include_reasoning else None}
        if tool_calls:  # vLLM leaves the key out when there are none
            delta["tool_calls"] = tool_calls
        state["role_sent"] = True
        finish = choice.get("finish_reason")
        if finish == "stop" and state["tools_streamed"] and not isinstance(chat_request.get("tool_choice"), dict):
            finish = "tool_calls"
        echo_ids = bool(chat_request.get("return_token_ids")) and include_reasoning
        return {"index": choice["index"], "delta": delta, "logprobs": None, "finish_reason": finish,
                "stop_reason": stop_reason,
                "token_ids": choice.get("token_ids") if echo_ids else None}, state

    def _replay(self, state: dict[str, Any], parser: OutputParser, window: DecodeWindow, skip: frozenset[int],
                chat_request: dict[str, Any]) -> None:
        """Bring a fresh parser up to a state that carries the output history instead of a parser progress (vLLM's
        states do): replay the earlier chunks with their boundaries, once; the state then carries the progress."""
        raw, fed, start = "", 0, 0
        history = state["output_token_ids"]
        for n in state["output_chunk_lens"]:
            raw += decode_tokens(self.model, window, history[start:start + n], skip)
            start += n
            visible = hold_back(raw, chat_request)[0]
            parser.feed(visible[fed:])
            fed = len(visible)
        state.update({"held_text": raw[fed:], "output_token_count": len(history), "output_token_ids": [],
                      "output_chunk_lens": []})

    def completions_stream(self, body: dict[str, Any], model_name: str) -> dict[str, Any]:
        chunk = body["generate_chunk"]
        if len(chunk["choices"]) > 1:
            raise bad_request("derender_completion_stream expects at most one choice per chunk")
        skip = self._decode_flags(body.get("completion_request"), keep_special=False)
        carried = body.get("stream_state")
        state = self._new_state(carried)
        prompt_ids = body.get("prompt_token_ids")
        if prompt_ids is None:
            prompt_ids = chunk.get("prompt_token_ids")
        window = self._window_from(state) if carried is not None else seed_window(self.model, prompt_ids, skip)
        choices = []
        for choice in chunk["choices"]:
            ids = choice.get("token_ids") or []
            text, stop_reason = self._held_text(state, window, ids, choice, body.get("completion_request"), skip)
            lps = choice.get("logprobs")
            resolved = None
            if lps is not None:
                resolved = completion_logprobs(
                    _trim(chat_logprobs(self.model, lps, state["logprob_context_token_ids"]),
                          top_logprobs_wanted(body.get("completion_request"), False)),
                    state["logprob_text_offset"])
            state["logprob_context_token_ids"] = (state["logprob_context_token_ids"] + ids)[-CONTEXT_WINDOW:]
            state["logprob_text_offset"] += len(text)
            state["output_token_count"] = int(state.get("output_token_count") or 0) + len(ids)
            choices.append({"index": choice["index"], "text": text, "logprobs": resolved,
                            "finish_reason": choice.get("finish_reason"), "stop_reason": stop_reason,
                            "prompt_token_ids": None, "token_ids": None})
        self._store_window(state, window)
        out_chunk = {"id": chunk.get("request_id") or _random_id(), "object": "text_completion",
                     "created": int(time.time()), "model": model_name, "choices": choices,
                     "usage": _chunk_usage(chunk, body.get("prompt_tokens")), "system_fingerprint": None,
                     "metrics": _metrics(chunk.get("metrics"))}
        return {"chunk": out_chunk, "stream_state": state}


#: vLLM's PerRequestMetrics fields, 0.32 to 0.34.
METRICS_FIELDS = ("time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second",
                  "speculative_decoding")


def _metrics(sent: dict[str, Any] | None) -> dict[str, Any] | None:
    """The generate answer's metrics in their typed shape: every field, null where the engine sent none
    (DERENDER-031); keys of newer engines ride along."""
    return None if sent is None else {**dict.fromkeys(METRICS_FIELDS), **sent}


def _trim(logprobs: dict[str, Any], wanted: int | None) -> dict[str, Any]:
    """Keep the number of alternatives the client asked for (the engine sends at least one)."""
    if wanted is not None:
        for entry in logprobs.get("content") or []:
            entry["top_logprobs"] = entry["top_logprobs"][:wanted]
    return logprobs


def _forces_tool(chat_request: dict[str, Any]) -> bool:
    choice = chat_request.get("tool_choice")
    return isinstance(choice, dict) or choice == "required"


def _random_id() -> str:
    import secrets

    return secrets.token_hex(8)
