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
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tokenspec.harness.frontend import validation as schemas
from tokenspec.harness.frontend.chat_template import ChatTemplateError
from tokenspec.harness.frontend.config import FrontendConfig
from tokenspec.harness.frontend.derender import Derenderer
from tokenspec.harness.frontend.errors import ApiError, bad_request, not_found_model, refused, unexpected
from tokenspec.harness.frontend.limits import check_chat_stream, check_generate_responses, check_prompt_ids
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.frontend.render import Renderer, request_id_suffix
from tokenspec.harness.frontend.request_body import read_json
from tokenspec.harness.frontend.responses import JSONResponse
from tokenspec.harness.frontend.token_native import server_tokenizer_version

VERSION = "0.32.0"  # the vLLM version whose behaviour this frontend reproduces

Handler = Callable[[dict[str, Any], Request], Any]


class Frontend:
    """Holds the loaded model and the endpoint handlers."""

    def __init__(self, config: FrontendConfig) -> None:
        self.config = config
        self.model = ModelFiles.load(config.model_dir)
        self.tokenizer_version = server_tokenizer_version(config.model_dir)  # once, at start-up (TOKNAT-008)
        self.renderer = Renderer(config, self.model, self.tokenizer_version)
        self.derenderer = Derenderer(config, self.model)

    def check_model(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        if model is not None and model != self.config.model_name:
            raise not_found_model(model, self.config.model_name)
        return self.config.model_name

    def endpoint(self, schema: dict[str, Any] | None, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            try:
                body = await read_json(request, self.config.max_body_bytes)
                if schema is not None:
                    schemas.check_shape(body, schema)
                answer = handler(body, request)
                # The endpoint's own checks answered first (with vLLM's messages); what they let through must
                # still fit the spec's request schema, or it is refused, never answered 200.
                schemas.check_spec(request.scope["path"], body)
                return JSONResponse(answer)
            except ApiError as err:
                return refused(request, err)
            except ChatTemplateError as exc:
                return refused(request, bad_request(str(exc)))
            except Exception as exc:  # noqa: BLE001 - the catch-all that keeps tracebacks from clients
                return unexpected(request, exc)
        return route

    # -- handlers -----------------------------------------------------------------------------------------

    def chat_render(self, body: dict[str, Any], request: Request) -> Any:
        self.check_model(body)
        return self.renderer.render_chat(body, request_id_suffix(request.headers.get("x-request-id"),
                                                                 body.get("request_id")))

    def completions_render(self, body: dict[str, Any], request: Request) -> Any:
        self.check_model(body)
        return self.renderer.render_completions(body, request_id_suffix(request.headers.get("x-request-id"),
                                                                        body.get("request_id")))

    def messages_render(self, body: dict[str, Any], request: Request) -> Any:
        schemas.check_spec(request.scope["path"], body)  # the converter reads the shapes the spec fixes
        return self.renderer.render_messages(body, request.headers.get("x-request-id"), self.check_model)

    def responses_render(self, body: dict[str, Any], request: Request) -> Any:
        schemas.check_spec(request.scope["path"], body)
        self.check_model(body)
        return self.renderer.render_responses(body)

    def chat_derender(self, body: dict[str, Any], request: Request) -> Any:
        if body.get("stream") is True:
            schemas.check_shape(body, schemas.DERENDER_STREAM)
            name = self.check_model(body)
            check_chat_stream(self.config, body)
            return self.derenderer.chat_stream(body, body.get("model") or name)
        schemas.check_shape(body, schemas.DERENDER_CHAT)
        name = self.check_model(body)
        check_generate_responses(self.config, [body["generate_response"]])
        check_prompt_ids(self.config, [body.get("prompt_token_ids")])
        return self.derenderer.chat(body, body.get("model") or name)

    def completions_derender(self, body: dict[str, Any], request: Request) -> Any:
        if body.get("stream") is True:
            schemas.check_shape(body, schemas.DERENDER_STREAM)
            name = self.check_model(body)
            check_prompt_ids(self.config, [body.get("prompt_token_ids")])
            return self.derenderer.completions_stream(body, body.get("model") or name)
        schemas.check_shape(body, schemas.DERENDER_COMPLETION)
        name = self.check_model(body)
        if not body["generate_responses"]:
            raise bad_request("generate_responses must not be empty")
        check_generate_responses(self.config, body["generate_responses"])
        check_prompt_ids(self.config, body.get("prompt_token_ids") or [])
        return self.derenderer.completions(body, body.get("model") or name)

    def tokenize(self, body: dict[str, Any], request: Request) -> Any:
        self.check_model(body)
        if "messages" in body:  # exactly chat render's prompt (UTIL-002)
            ids = self.renderer.chat_prompt_ids(body)
        else:
            add_special = body.get("add_special_tokens", True) is not False
            ids = self.model.encode(body["prompt"], add_special_tokens=add_special)
        strs = [self.model.id_to_piece(i) for i in ids] if body.get("return_token_strs") else None
        return {"count": len(ids), "max_model_len": self.config.max_model_len, "tokens": ids, "token_strs": strs}

    def detokenize(self, body: dict[str, Any], request: Request) -> Any:
        self.check_model(body)
        for token_id in body["tokens"]:
            if self.model.id_to_piece(token_id) is None:
                raise bad_request(f"Token id {token_id} is out of vocabulary")
        return {"prompt": self.model.decode(body["tokens"])}

    async def models(self, request: Request) -> Response:
        name = self.config.model_name
        return JSONResponse({"object": "list", "data": [{
            "id": name, "object": "model", "created": 0, "owned_by": "tokenspec",
            "root": str(self.config.model_dir), "parent": None, "max_model_len": self.config.max_model_len,
            "tokenizer_version": self.tokenizer_version}]})


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
        methods = {"/v1/models": "get", "/health": "get", "/version": "get", "/openapi.json": "get"}
        paths = {p: {methods.get(p, "post"): {"responses": {"200": {"description": "OK"}}}} for p in PATHS}
        return JSONResponse({"openapi": "3.1.0", "info": {"title": "tokenspec reference frontend",
                                                          "version": VERSION}, "paths": paths})

    routes = [
        Route("/v1/chat/completions/render", fe.endpoint(schemas.CHAT_REQUEST, fe.chat_render), methods=["POST"]),
        Route("/v1/completions/render", fe.endpoint(schemas.COMPLETION_REQUEST, fe.completions_render),
              methods=["POST"]),
        Route("/v1/messages/render", fe.endpoint(None, fe.messages_render), methods=["POST"]),
        Route("/v1/responses/render", fe.endpoint(None, fe.responses_render), methods=["POST"]),
        Route("/v1/chat/completions/derender", fe.endpoint(None, fe.chat_derender), methods=["POST"]),
        Route("/v1/completions/derender", fe.endpoint(None, fe.completions_derender), methods=["POST"]),
        Route("/tokenize", fe.endpoint(schemas.TOKENIZE, fe.tokenize), methods=["POST"]),
        Route("/detokenize", fe.endpoint(schemas.DETOKENIZE, fe.detokenize), methods=["POST"]),
        Route("/v1/models", fe.models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
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
