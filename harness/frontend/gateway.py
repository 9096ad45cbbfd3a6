"""The pipeline gateway: ``/v1/chat/completions`` and ``/v1/completions`` served as
render -> engine ``/inference/v1/generate`` -> derender.

Render and derender are the very functions behind the frontend's own endpoints, so the gateway cannot
drift from them; only the engine hop is new. The engine hop is where a split deployment fails in new ways,
so each failure has its own answer, always the OpenAI error object and never a hang:

- the engine refuses the request (4xx): its status and error object are passed through;
- the engine is unreachable or answers 5xx: 502; it does not answer within ``engine_timeout``: 504;
- more requests in flight than ``max_concurrency``: 503 at once, rather than an unbounded queue.

``/inference/v1/generate`` is also served here, as a checked pass-through: the frontend is the public face
of the bundled reference server, so it applies the spec's input checks (body size, JSON, shape, token IDs
inside the vocabulary) before any work reaches the engine, and every refusal is the OpenAI error object.

A failure after a stream has started keeps HTTP 200 and sends the error object as an SSE event before
``[DONE]``, as vLLM's own streams do.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tokenspec.harness.frontend import token_native
from tokenspec.harness.frontend import validation as schemas
from tokenspec.harness.frontend.errors import ApiError, refused, unexpected
from tokenspec.harness.frontend.render import request_id_suffix
from tokenspec.harness.frontend.request_body import read_json
from tokenspec.harness.frontend.responses import JSONResponse
from tokenspec.specs.openapi import load_document

if TYPE_CHECKING:
    from tokenspec.harness.frontend.handlers import Frontend

GENERATE = "/inference/v1/generate"
ABORT = "/inference/v1/abort_requests"
#: Seconds /openapi.json waits for the engine's answer to each of its settings probes (Gateway.engine_takes).
PROBE_TIMEOUT = 15.0
#: Keys of the spec's ParseContext: any other key means a newer renderer, refused in derender mode (GENERATE-024).
PARSE_CONTEXT_KEYS = frozenset(load_document("components.yaml")["components"]["schemas"]["ParseContext"]["properties"])


def _sse(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def _engine_error(resp_status: int, body: bytes) -> ApiError:
    if resp_status >= 500:
        return ApiError(f"the engine failed ({resp_status})", status=502, err_type="BadGatewayError")
    try:
        error = json.loads(body)["error"]
        return ApiError(str(error["message"]), status=resp_status, err_type=str(error.get("type", "BadRequestError")),
                        param=error.get("param"))
    except (ValueError, KeyError, TypeError):
        return ApiError(f"the engine refused the request ({resp_status})", status=resp_status)


class Gateway:
    def __init__(self, frontend: Frontend, engine_url: str, timeout: float, max_concurrency: int | None) -> None:
        self.fe = frontend
        # vLLM's API server (uvicorn) closes a connection idle for 5 s, httpx's default expiry: a pooled connection
        # reused at that moment is closed under the request, which _post then sends once more on a new one.
        # A connection to the engine may take as long as an answer: on a loaded machine vLLM's API server accepted
        # one only after more than 5 s (a 504 that judged the gateway, not the engine, in a run beside busy loops).
        self.client = httpx.AsyncClient(base_url=engine_url, timeout=httpx.Timeout(timeout))
        self.max_concurrency = max_concurrency
        self.in_flight = 0

    # -- the engine hop ---------------------------------------------------------------------------------

    async def _post(self, path: str, request: dict[str, Any], *, stream: bool = False) -> httpx.Response:
        """One call to the engine; an engine that is slow or unreachable becomes a 504 or 502 for the client. A
        connection the engine closed or reset before answering (a pooled one it dropped: RemoteProtocolError, or
        ReadError when the reset reaches the read first, seen in a matrix run) is tried once more, on a new one."""
        try:
            try:
                return await self.client.send(self.client.build_request("POST", path, json=request), stream=stream)
            except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError):
                return await self.client.send(self.client.build_request("POST", path, json=request), stream=stream)
        except httpx.TimeoutException as exc:
            raise ApiError(f"the engine did not answer in time: {type(exc).__name__}", status=504,
                           err_type="GatewayTimeoutError") from None
        except httpx.HTTPError as exc:
            raise ApiError(f"the engine is unreachable: {type(exc).__name__}", status=502,
                           err_type="BadGatewayError") from None

    async def _generate(self, request: dict[str, Any]) -> dict[str, Any]:
        resp = await self._post(GENERATE, request)
        if resp.status_code != 200:
            raise _engine_error(resp.status_code, resp.content)
        return resp.json()

    async def _open_stream(self, request: dict[str, Any], *, refuse_early: bool = True
                           ) -> AsyncIterator[dict[str, Any]]:
        """The engine's stream of events. With ``refuse_early`` an engine that refuses in its first event (vLLM's
        generate checks some fields, such as stop_token_ids inside the vocabulary, only once its stream is open)
        is answered with that refusal's status, as vLLM's coupled server refuses before it streams."""
        resp = await self._post(GENERATE, request, stream=True)
        if resp.status_code != 200:
            body = await resp.aread()
            await resp.aclose()
            raise _engine_error(resp.status_code, body)
        events = self._events(resp)
        if not refuse_early:
            return events
        try:
            first = [await anext(events)]
        except StopAsyncIteration:
            first = []
        return _after(first, events)

    async def _events(self, resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
        """The engine's SSE events, parsed; an error event or a broken stream ends in ApiError."""
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                event = json.loads(data)
                if "error" in event:
                    raise _engine_error(400, json.dumps(event).encode())
                yield event
        except httpx.TimeoutException:
            raise ApiError("the engine stalled mid-stream", status=504, err_type="GatewayTimeoutError") from None
        except httpx.HTTPError as exc:
            raise ApiError(f"the engine stream broke: {type(exc).__name__}", status=502,
                           err_type="BadGatewayError") from None
        finally:
            await resp.aclose()

    async def engine_takes(self) -> dict[str, bool]:
        """Which of the sampling parameters that depend on the engine's settings (no route reports them) it takes:
        ``prompt_logprob_token_ids`` (vLLM's V2 model runner) and ``thinking_token_budget`` (a reasoning config).
        Each is asked with the smallest request that uses it, so /openapi.json states what this deployment serves;
        one the engine gave no verdict on (unreachable, slower than ``PROBE_TIMEOUT``, an answer other than 200 or
        400) is left out, so /openapi.json never waits on a stalled engine for long."""
        probes = {"prompt_logprob_token_ids": [[0]], "thinking_token_budget": 1}
        takes: dict[str, bool] = {}
        for name, value in probes.items():
            request = {"model": self.fe.config.model_name, "token_ids": [0, 0],
                       "sampling_params": {"max_tokens": 1, name: value}}
            try:
                answer = await asyncio.wait_for(self._post(GENERATE, request), PROBE_TIMEOUT)
                verdict = {200: True, 400: False}.get(answer.status_code)
            except (ApiError, TimeoutError):
                verdict = None
            if verdict is not None:
                takes[name] = verdict
        return takes

    # -- routes -----------------------------------------------------------------------------------------

    async def generate(self, request: Request) -> Response:
        """Checked pass-through of ``/inference/v1/generate`` to the engine (JSON or SSE)."""
        try:
            body = await read_json(request, self.fe.config.max_body_bytes)
            schemas.check_shape(body, schemas.GENERATE_REQUEST)
            self.fe.check_model(body)
            vocab = self.fe.model.vocab_size
            if (bad := next((t for t in body["token_ids"] if t >= vocab), None)) is not None:
                raise ApiError(f"Token id {bad} is out of vocabulary", param="token_ids")
            self.fe.renderer.check_text(body["token_ids"], "token_ids")  # the safety hook sees token input too
            schemas.check_spec(request.url.path, body)  # nothing the spec refuses reaches the engine
            params = body["sampling_params"]
            if body.get("stream") and params.get("prompt_logprobs") is not None:
                # The engine's stream has no field for them and would drop them unsaid (STREAM-031): refused, as the
                # engine refuses prompt_logprob_token_ids with stream.
                raise ApiError("prompt_logprobs are not available when stream=true.",
                               param="sampling_params.prompt_logprobs")
            if params.get("trace_decode_token_ids") == []:
                # Nothing to trace, the same as null; vLLM 0.32's engine answers an empty list with a bare 500.
                params["trace_decode_token_ids"] = None
            if body.get("output_mode") == "derender":
                return await self._generate_derendered(body)
            if not body.get("stream"):
                return JSONResponse(await self._generate(body))
            events = await self._open_stream(body, refuse_early=False)  # the engine's own stream, as it is
        except ApiError as err:
            return refused(request, err)
        except Exception as exc:  # noqa: BLE001 - no traceback ever reaches a client
            return unexpected(request, exc)

        return StreamingResponse(self._relay(events, lambda event: event, counted=False),
                                 media_type="text/event-stream")

    async def abort(self, request: Request) -> Response:
        """``/inference/v1/abort_requests``, checked (GENERATE-026), then forwarded to the engine, which ends the
        named requests with finish_reason abort (GENERATE-025)."""
        try:
            body = await read_json(request, self.fe.config.max_body_bytes)
            ids = body.get("request_ids") if isinstance(body, dict) else None
            if not (isinstance(ids, str) or (isinstance(ids, list) and all(isinstance(i, str) for i in ids))):
                raise ApiError("request_ids is required: one request id or a list of them", param="request_ids")
            resp = await self._post(ABORT, {"request_ids": [ids] if isinstance(ids, str) else ids})
            if resp.status_code != 200:
                raise _engine_error(resp.status_code, resp.content)
            return Response(status_code=200)
        except ApiError as err:
            return refused(request, err)
        except Exception as exc:  # noqa: BLE001 - no traceback ever reaches a client
            return unexpected(request, exc)

    # -- output_mode derender: the engine's ids, then this frontend's own derender ----------------------------

    def _parse_context_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The message-less chat request a derender-mode generate parses with, built from parse_context as vLLM
        builds it (GENERATE-022), after the refusals of GENERATE-024."""
        params = body["sampling_params"]
        if params.get("detokenize") is False:
            raise ApiError("output_mode='derender' requires sampling_params.detokenize to be true",
                           param="output_mode")
        context = body.get("parse_context")
        if context is None:
            if self.fe.derenderer.parsers_on:
                raise ApiError("output_mode='derender' requires parse_context on a server with a tool or reasoning "
                               "parser. Use the one returned by /render.", param="parse_context")
            context = {}
        if unknown := sorted(set(context) - PARSE_CONTEXT_KEYS):
            raise ApiError(f"Unknown parse_context fields {unknown}; the render server is newer than this generate "
                           "server", param="parse_context")
        chat = {"messages": [], "tools": context.get("tools"), "tool_choice": context.get("tool_choice") or "none",
                "parallel_tool_calls": context.get("parallel_tool_calls"),
                "include_reasoning": context.get("include_reasoning", True),
                "chat_template_kwargs": context.get("chat_template_kwargs") or {}}
        for key in ("skip_special_tokens", "include_stop_str_in_output"):
            if params.get(key) is not None:
                chat[key] = params[key]
        if params.get("logprobs") is not None:  # the chat cut of top_logprobs: the k sampling asked for
            chat.update(logprobs=True, top_logprobs=max(int(params["logprobs"]), 0))
        tool_choice = chat["tool_choice"]
        if isinstance(tool_choice, dict):
            name = (tool_choice.get("function") or {}).get("name")
            if not any((t.get("function") or {}).get("name") == name for t in chat["tools"] or ()):
                raise ApiError("The tool specified in `tool_choice` does not match any of the specified `tools`",
                               param="tool_choice")
        return chat

    async def _generate_derendered(self, body: dict[str, Any]) -> Response:
        chat = self._parse_context_request(body)
        engine_body = {k: v for k, v in body.items() if k not in ("output_mode", "parse_context")}
        prompt_ids = body["token_ids"]
        hide = self.fe.derenderer.parsers_on and chat["include_reasoning"] is False
        if not body.get("stream"):
            generated = await self._generate(engine_body)
            parsed = self.fe.derenderer.chat({"generate_response": generated, "prompt_tokens": len(prompt_ids),
                                              "prompt_token_ids": prompt_ids, "chat_request": chat},
                                             self.fe.config.model_name)
            choices = []
            for source, out in zip(generated["choices"], parsed["choices"], strict=True):
                choices.append({**source, "message": _message(out["message"]), "finish_reason": out["finish_reason"],
                                "logprobs": None if hide else out["logprobs"],
                                "token_ids": None if hide else source.get("token_ids"),
                                **({"sampling_mask": None} if hide else {})})
            return JSONResponse({**generated, "output_mode": "derender", "choices": choices})
        if self.fe.config.api_generation == "0.33":
            raise ApiError("output_mode='derender' does not support stream=true.", param="stream")
        events = await self._open_stream(engine_body, refuse_early=False)
        return StreamingResponse(self._relay(events, self._derendered_chunks(body, chat, hide), counted=False),
                                 media_type="text/event-stream")

    def _derendered_chunks(self, body: dict[str, Any], chat: dict[str, Any], hide: bool
                           ) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
        """The engine's stream as GenerateDerenderStreamChunks: one stream_state per choice, the parsed delta of
        each event (role assistant on a choice's first event), the ids behind it (GENERATE-023)."""
        prompt_ids = body["token_ids"]
        states: dict[int, dict[str, Any]] = {}

        def convert(event: dict[str, Any]) -> dict[str, Any] | None:
            if not event.get("choices"):
                return {**event, "output_mode": "derender"}
            source = event["choices"][0]
            index = source["index"]
            out = self.fe.derenderer.chat_stream(
                {"generate_chunk": event, "stream_state": states.get(index), "prompt_tokens": len(prompt_ids),
                 "prompt_token_ids": prompt_ids, "chat_request": chat}, self.fe.config.model_name)
            states[index] = out["stream_state"]
            parsed = out["chunk"]["choices"][0] if out["chunk"]["choices"] else {}
            delta = {k: v for k, v in (parsed.get("delta") or {}).items() if v is not None}
            finish = parsed.get("finish_reason", source.get("finish_reason"))
            if not delta and finish is None and not source.get("token_ids"):
                return None
            choice = {**source, "delta": delta, "finish_reason": finish,
                      "logprobs": None if hide else parsed.get("logprobs"),
                      "token_ids": None if hide else source.get("token_ids")}
            return {**event, "output_mode": "derender", "choices": [choice]}

        return convert

    def route(self, kind: str):
        async def handle(request: Request) -> Response:
            if self.max_concurrency is not None and self.in_flight >= self.max_concurrency:
                return ApiError(f"the server is at its concurrency limit ({self.max_concurrency})", status=503,
                                err_type="ServiceUnavailableError").response()
            self.in_flight += 1
            streaming = False
            try:
                body = await read_json(request, self.fe.config.max_body_bytes)
                schemas.check_shape(body, schemas.CHAT_REQUEST if kind == "chat" else schemas.COMPLETION_REQUEST)
                self.fe.check_model(body)
                schemas.check_spec(request.url.path, body)
                suffix = request_id_suffix(request.headers.get("x-request-id"), body.get("request_id"))
                if kind == "chat":
                    response = await self._chat(body, suffix)
                else:
                    response = await self._completions(body, suffix)
                streaming = isinstance(response, StreamingResponse)
                return response
            except ApiError as err:
                return refused(request, err)
            except Exception as exc:  # noqa: BLE001 - no traceback ever reaches a client
                return unexpected(request, exc)
            finally:
                if not streaming:
                    self.in_flight -= 1

        return handle

    async def _chat(self, body: dict[str, Any], suffix: str) -> Response:
        gen_request = self.fe.renderer.render_chat(body, suffix)
        prompt_ids = gen_request["token_ids"]
        name = body.get("model") or self.fe.config.model_name
        if body.get("stream"):
            events = await self._open_stream(gen_request)
            return StreamingResponse(self._relay(events, self._chat_chunks(body, gen_request)),
                                     media_type="text/event-stream")
        generated = await self._generate(gen_request)
        ids_wanted, tokens_only = token_native.output_format(body, chat=True)
        echo = _vllm_echo(body)
        if tokens_only:  # TOKNAT-007: no decoding, no parsers
            out = token_native.tokens_only_chat(self.fe.model, generated, body, len(prompt_ids), name, echo)
        else:
            out = self.fe.derenderer.chat(
                {"generate_response": generated, "prompt_tokens": len(prompt_ids), "prompt_token_ids": prompt_ids,
                 "chat_request": body}, name)
        out["id"] = gen_request["request_id"]
        if echo:
            out["prompt_token_ids"] = prompt_ids
        if ids_wanted:  # response_format_tokens, its alias return_token_ids, or implied by return_tokens_only
            for choice, source in zip(out["choices"], generated["choices"], strict=True):
                choice["message"]["token_ids"] = list(source.get("token_ids") or [])  # TOKNAT-005
        _pass_weight_versions(body, out["choices"], generated["choices"])
        if token_native.is_token_native(body):
            out["tokenizer_version"] = self.fe.tokenizer_version  # TOKNAT-008
        return JSONResponse(out)

    async def _relay(self, events: AsyncIterator[dict[str, Any]],
                     convert: Callable[[dict[str, Any]], dict[str, Any] | None],
                     counted: bool = True) -> AsyncIterator[bytes]:
        """Turn the engine's events into SSE chunks with ``convert`` (None: nothing to send), ending in
        ``[DONE]``; an engine failure mid-stream becomes an error event. Releases the concurrency slot."""
        try:
            async for event in events:
                chunk = convert(event)
                if chunk is not None:
                    yield _sse(chunk)
        except ApiError as err:
            yield _sse(err.body())
        finally:
            if counted:
                self.in_flight -= 1
        yield b"data: [DONE]\n\n"

    def _chat_chunks(self, body: dict[str, Any], gen_request: dict[str, Any]
                     ) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
        """The per-event conversion of a chat stream; keeps one stream_state per choice index."""
        prompt_ids = gen_request["token_ids"]
        name = body.get("model") or self.fe.config.model_name
        states: dict[int, dict[str, Any]] = {}
        delta_ids, tokens_only = token_native.output_format(body, chat=True)
        echo = _vllm_echo(body)
        version = self.fe.tokenizer_version if token_native.is_token_native(body) else None

        def convert(event: dict[str, Any]) -> dict[str, Any] | None:
            if not event.get("choices"):
                chunk = self._usage_chunk(event, gen_request, name, "chat.completion.chunk")
            elif tokens_only:  # TOKNAT-007: ids only, no decoding, no parsers
                chunk = token_native.tokens_only_chunk(self.fe.model, event, body, len(prompt_ids), name, states,
                                                       echo)
            else:
                index = event["choices"][0]["index"]
                out = self.fe.derenderer.chat_stream(
                    {"generate_chunk": event, "stream_state": states.get(index), "prompt_tokens": len(prompt_ids),
                     "prompt_token_ids": prompt_ids, "chat_request": body}, name)
                states[index] = out["stream_state"]
                chunk = out["chunk"]
            chunk["id"] = gen_request["request_id"]
            if delta_ids and chunk["choices"]:  # TOKNAT-006: the ids behind each delta
                sources = {c["index"]: c for c in event["choices"]}
                for choice in chunk["choices"]:
                    choice["delta"]["token_ids"] = list(sources[choice["index"]].get("token_ids") or [])
            _pass_weight_versions(body, chunk["choices"], event.get("choices") or [], stream=True)
            if version is not None:
                chunk["tokenizer_version"] = version  # TOKNAT-008
            return chunk if chunk["choices"] or chunk.get("usage") else None

        return convert

    def _usage_chunk(self, event: dict[str, Any], gen_request: dict[str, Any], name: str, obj: str
                     ) -> dict[str, Any]:
        usage = dict(event.get("usage") or {})
        prompt = usage.get("prompt_tokens", len(gen_request["token_ids"]))
        completion = usage.get("completion_tokens", 0)
        return {"id": gen_request["request_id"], "object": obj, "created": int(time.time()), "model": name,
                "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                         "total_tokens": prompt + completion}}

    async def _completions(self, body: dict[str, Any], suffix: str) -> Response:
        gen_requests = self.fe.renderer.render_completions(body, suffix)
        version = self.fe.tokenizer_version if _pins_or_asks_tokens(body) else None
        name = body.get("model") or self.fe.config.model_name
        if body.get("stream"):
            if len(gen_requests) == 1:
                events = await self._open_stream(gen_requests[0])
                chunks = self._relay(events, self._completion_chunks(body, gen_requests[0], version))
            else:
                first = await self._open_stream(gen_requests[0])  # a refusal of the first prompt is a 4xx
                chunks = self._prompts_in_turn(body, gen_requests, first, f"cmpl-{suffix}", version)
            return StreamingResponse(chunks, media_type="text/event-stream")
        responses = [await self._generate(r) for r in gen_requests]
        out = self.fe.derenderer.completions(
            {"generate_responses": responses, "prompt_tokens": [len(r["token_ids"]) for r in gen_requests],
             "prompt_token_ids": [r["token_ids"] for r in gen_requests], "completion_request": body}, name)
        out["id"] = f"cmpl-{suffix}"
        ids_wanted, _ = token_native.output_format(body, chat=False)
        _pass_weight_versions(body, out["choices"], [ch for g in responses for ch in g["choices"]])
        if ids_wanted:
            flat = [(r, ch) for r, g in zip(gen_requests, responses, strict=True) for ch in g["choices"]]
            for choice, (request, generated) in zip(out["choices"], flat, strict=True):
                if _vllm_echo(body):
                    choice["prompt_token_ids"] = request["token_ids"]
                choice["token_ids"] = generated["token_ids"]
        if version is not None:
            out["tokenizer_version"] = version
        return JSONResponse(out)

    async def _prompts_in_turn(self, body: dict[str, Any], gen_requests: list[dict[str, Any]],
                               first: AsyncIterator[dict[str, Any]], request_id: str, version: str | None
                               ) -> AsyncIterator[bytes]:
        """One completions stream for several prompts, as vLLM's coupled server gives it: every chunk carries the
        request's id, prompt i's choice j is index i * n + j, and one usage chunk at the end counts all prompts.
        The prompts are generated one after another (vLLM interleaves them; the order of chunks across prompts is
        not part of the contract). A prompt the engine refuses after the stream started ends it with an error."""
        per_prompt = int(body.get("n") or 1)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        usage_seen = False

        async def chunks() -> AsyncIterator[dict[str, Any]]:
            nonlocal usage_seen
            for i, gen_request in enumerate(gen_requests):
                events = first if i == 0 else await self._open_stream(gen_request)
                convert = self._completion_chunks(body, gen_request, version)
                async for event in events:
                    chunk = convert(event)
                    if chunk is None:
                        continue
                    if not chunk["choices"]:  # this prompt's usage: counted into the one at the end
                        usage_seen = True
                        for key in usage:
                            usage[key] += chunk["usage"][key]
                        continue
                    chunk["id"] = request_id
                    for choice in chunk["choices"]:
                        choice["index"] += i * per_prompt
                    yield chunk
            if usage_seen:
                yield {"id": request_id, "object": "text_completion", "created": int(time.time()),
                       "model": body.get("model") or self.fe.config.model_name, "choices": [],
                       "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}

        async for data in self._relay(chunks(), lambda chunk: chunk):
            yield data

    def _completion_chunks(self, body: dict[str, Any], gen_request: dict[str, Any], version: str | None
                           ) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
        """The per-event conversion of a completions stream; one stream_state per choice index."""
        prompt_ids = gen_request["token_ids"]
        name = body.get("model") or self.fe.config.model_name
        states: dict[int, dict[str, Any]] = {}
        ids_wanted, _ = token_native.output_format(body, chat=False)

        def convert(event: dict[str, Any]) -> dict[str, Any] | None:
            if not event.get("choices"):
                return self._usage_chunk(event, gen_request, name, "text_completion")
            index = event["choices"][0]["index"]
            out = self.fe.derenderer.completions_stream(
                {"generate_chunk": event, "stream_state": states.get(index), "prompt_tokens": len(prompt_ids),
                 "prompt_token_ids": prompt_ids, "completion_request": body}, name)
            states[index] = out["stream_state"]
            chunk = out["chunk"]
            chunk["id"] = gen_request["request_id"]
            _pass_weight_versions(body, chunk["choices"], event["choices"], stream=True)
            if ids_wanted:
                for choice, source in zip(chunk["choices"], event["choices"], strict=True):
                    choice["token_ids"] = source.get("token_ids")
            if version is not None:
                chunk["tokenizer_version"] = version
            return chunk

        return convert


async def _after(first: list[dict[str, Any]], rest: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for event in first:
        yield event
    async for event in rest:
        yield event


def _pass_weight_versions(body: dict[str, Any], choices: list[dict[str, Any]], sources: list[dict[str, Any]],
                          stream: bool = False) -> None:
    """With return_weight_versions, each choice carries the spans its engine choice reported (GENERATE-028); on a
    stream only the choice's last chunk, as the engine sends them there."""
    if body.get("return_weight_versions") is not True:
        return
    by_index = {s["index"]: s for s in sources}
    for position, choice in enumerate(choices):
        source = by_index.get(choice["index"]) if stream else sources[position]
        if source is not None and (not stream or choice.get("finish_reason") is not None):
            choice["weight_versions"] = source.get("weight_versions")


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a derender-mode choice: role, content, reasoning, and tool_calls when parsed."""
    out = {k: message.get(k) for k in ("role", "content", "reasoning")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def _vllm_echo(body: dict[str, Any]) -> bool:
    """vLLM's own name, ``return_token_ids``, also brings vLLM's echo: ``prompt_token_ids`` and
    ``choices[].token_ids``. The proposal's ``response_format_tokens`` (and ``return_tokens_only``) answer with
    the generated ids only, where the proposal puts them: the client already holds its prompt's ids, and echoing
    them would more than double the bytes a token-native answer sends."""
    return body.get("return_token_ids") is True


def _pins_or_asks_tokens(body: dict[str, Any]) -> bool:
    """A completions request that uses the extension's names (its answers then report ``tokenizer_version``);
    vLLM's own ``return_token_ids`` alone keeps vLLM's answer shape."""
    return body.get("tokenizer_version") is not None or bool(body.get(token_native.RESPONSE_FORMAT_TOKENS))
