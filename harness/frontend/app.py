"""The ASGI app: routes, body reading with a size limit, JSON and content-type checks, error mapping.

Order for every POST: body size (413, before parsing; Content-Length is checked first and the bytes are
counted while reading), content type (400 "Unsupported Media Type", as vLLM answers, not 415), JSON (400),
shape (400 "Bad Request", vLLM's pydantic shapes), model (404), then the endpoint's own checks, and last the
spec's own request schema (so the frontend refuses everything the spec it is judged by refuses). Any unexpected
exception while handling a request becomes a 400 error object: every failure here is caused by the input,
and a client must never see a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tokenspec.harness.frontend import validation as schemas
from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.handlers import VERSION, Frontend
from tokenspec.harness.frontend.responses import JSONResponse

PATHS = ["/v1/chat/completions/render", "/v1/completions/render", "/v1/messages/render", "/v1/responses/render",
         "/v1/chat/completions/derender",
         "/v1/completions/derender", "/tokenize", "/detokenize", "/v1/models", "/health", "/version",
         "/openapi.json"]


def create_app(config: FrontendConfig) -> Starlette:
    """Build the app for one model folder (loaded now, so a bad folder fails at start-up)."""
    fe = Frontend(config)
    fe.model.piece_table  # noqa: B018 - built now, not on the first derender

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": VERSION})

    async def openapi(request: Request) -> Response:
        if "document" not in served:
            takes = await gateway.engine_takes() if gateway is not None else {}
            served["document"] = served_spec(config, routes, fe.model.vocab_size, takes)
        return JSONResponse(served["document"])

    served: dict[str, Any] = {}

    routes = [
        Route("/v1/chat/completions/render", fe.endpoint(schemas.CHAT_REQUEST, fe.chat_render), methods=["POST"]),
        Route("/v1/completions/render", fe.endpoint(schemas.COMPLETION_REQUEST, fe.completions_render),
              methods=["POST"]),
        Route("/v1/messages/render", fe.endpoint(None, fe.messages_render), methods=["POST"]),
        Route("/v1/responses/render", fe.endpoint(None, fe.responses_render), methods=["POST"]),
        Route("/v1/chat/completions/derender", fe.endpoint(None, fe.chat_derender), methods=["POST"]),
        Route("/v1/completions/derender", fe.endpoint(None, fe.completions_derender), methods=["POST"]),
        Route("/tokenize", fe.endpoint(schemas.TOKENIZE, fe.tokenize), methods=["POST"]),
        Route("/detokenize", fe.endpoint(schemas.DETOKENIZE, fe.detokenize, integers=True), methods=["POST"]),
        Route("/v1/models", fe.models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    gateway = None
    if config.engine_url:
        from tokenspec.harness.frontend.gateway import Gateway

        gateway = Gateway(fe, config.engine_url, config.engine_timeout, config.max_concurrency)
        routes += [
            Route("/v1/chat/completions", gateway.route("chat"), methods=["POST"]),
            Route("/v1/completions", gateway.route("completions"), methods=["POST"]),
            Route("/inference/v1/generate", gateway.generate, methods=["POST"]),
            Route("/inference/v1/abort_requests", gateway.abort, methods=["POST"]),
        ]
    app = Starlette(routes=routes)
    app.state.frontend = fe
    if config.api_key_digests:
        from tokenspec.harness.frontend.auth import ApiKeyGate

        app.add_middleware(ApiKeyGate, digests=config.api_key_digests)
    return app


def served_spec(config: FrontendConfig, routes: list[Route], vocab_size: int,
                engine_takes: dict[str, bool] | None = None) -> dict[str, Any]:
    """The spec this frontend is judged by, for its own routes, bundled into one document (``/openapi.json``).

    The documents' operations, plus what this deployment fixes and the documents leave to the server: the output
    token caps are at most max_model_len (vLLM refuses more); with a tool or reasoning parser chat derender needs
    chat_request (and, streamed, prompt_token_ids), as vLLM's does; token ids stop at its vocabulary; with an
    engine, n stops at the engine's max_num_seqs (where known), a sampling parameter the engine does not take
    (Gateway.engine_takes) must be null, and the gateway has no beam search. The same bounds are stated under
    ``info.x-tokenspec-limits``, so a run with the spec's own documents (``specs/schemathesis_hooks.py``) decides
    those rules as a run with this document does.
    """
    from tokenspec.specs.openapi import bundle

    document = bundle({r.path: tuple(sorted(m.lower() for m in (r.methods or ()) if m != "HEAD")) for r in routes},
                      title="tokenspec reference frontend", version=VERSION)
    schemas = document["components"]["schemas"]
    for schema, field in (("ChatCompletionRequest", "max_tokens"), ("ChatCompletionRequest", "max_completion_tokens"),
                          ("CompletionRequest", "max_tokens"), ("ResponsesRequest", "max_output_tokens"),
                          ("AnthropicMessagesRequest", "max_tokens")):
        prop = schemas.get(schema, {}).get("properties", {}).get(field)
        if prop is not None:
            prop["maximum"] = config.max_model_len
    if config.tool_parser or config.reasoning_parser:
        for schema, needed in (("DerenderChatRequest", ["chat_request"]),
                               ("DerenderChatStreamRequest", ["chat_request", "prompt_token_ids"])):
            target = schemas[schema]
            target["required"] = [*target.get("required", []), *needed]
            for name in needed:
                target["properties"][name] = {"not": {"type": "null"}, **target["properties"][name]}
    ids = {"type": "array", "items": {"maximum": vocab_size - 1}}
    limits: dict[str, Any] = {"vocab_size": vocab_size, "max_logprobs": config.max_logprobs,
                              "tool_parser": config.tool_parser is not None,
                              "reasoning_parser": config.reasoning_parser is not None}
    _bound(document, "/detokenize", {"properties": {"tokens": ids}})
    if config.engine_url:
        engine: dict[str, Any] = {name: {"type": "null"} for name, taken in (engine_takes or {}).items() if not taken}
        limits.update(engine_takes or {})
        if config.max_num_seqs is not None:
            limits["max_num_seqs"] = config.max_num_seqs
            engine["n"] = {"maximum": config.max_num_seqs}
        _bound(document, "/inference/v1/generate",
               {"properties": {"token_ids": ids, "sampling_params": {"properties": engine}}})
        coupled = {k: v for k, v in engine.items() if k != "prompt_logprob_token_ids"}  # not a coupled field
        coupled["use_beam_search"] = {"const": False}  # the gateway generates through render, which has none
        limits["use_beam_search"] = False
        for path in ("/v1/chat/completions", "/v1/completions"):
            _bound(document, path, {"properties": coupled})
    document["info"]["x-tokenspec-limits"] = limits
    return document


def _bound(document: dict[str, Any], path: str, bounds: dict[str, Any]) -> None:
    """The operation's request body as the documents state it, and ``bounds`` too (the shared components stay as
    they are: render's answers are GenerateRequests, and a render may ask for more than this engine serves)."""
    operation = document["paths"].get(path, {}).get("post")
    if operation is None:
        return
    media = operation["requestBody"]["content"]["application/json"]
    media["schema"] = {"allOf": [media["schema"], bounds]}


class _AnnouncingServer(uvicorn.Server):
    """uvicorn that says, once it is listening, where and what it serves (the real port when 0 was asked)."""

    announce: Callable[[str], None] = print

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.servers:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.announce(f"http://{host}:{port}")


def serve(config: FrontendConfig, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run the frontend with uvicorn until interrupted; ``port`` 0 picks a free port (printed when up)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    app = create_app(config)
    parsers = f"reasoning parser {config.reasoning_parser or 'none'}, tool parser {config.tool_parser or 'none'}"
    gateway = f"; gateway to engine {config.engine_url}" if config.engine_url else ""
    server = _AnnouncingServer(uvicorn.Config(
        app, host=host, port=port, log_level="warning",
        # Keep idle connections well past typical client pool lifetimes: a server closing an idle keep-alive
        # connection while a pooled client sends on it is a dropped request the client sees as a read error.
        timeout_keep_alive=75,
    ))
    server.announce = lambda url: print(
        f"tokenspec frontend ready at {url}: model {config.model_name} from {config.model_dir}; {parsers}{gateway}"
        "; Ctrl-C stops it", flush=True)
    server.run()
