"""The frontend's endpoint handlers over one loaded model folder: what each route of the render server answers.

``Frontend.endpoint`` wraps a handler in the order every POST follows (body size, content type, JSON, shape,
model, the endpoint's own checks, then the spec's request schema); ``tokenspec.harness.frontend.app`` routes to
them, and the gateway (``gateway.py``) uses the same renderer and derenderer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

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

    def endpoint(self, schema: dict[str, Any] | None, handler: Handler, *, integers: bool = False
                 ) -> Callable[[Request], Awaitable[Response]]:
        """``integers``: the shape's integral floats are read as integers (5.0 is the id 5, as vLLM's pydantic reads
        a token id), see validation.check_shape."""
        async def route(request: Request) -> Response:
            try:
                body = await read_json(request, self.config.max_body_bytes)
                if schema is not None:
                    schemas.check_shape(body, schema, integers=integers)
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
            schemas.check_shape(body, schemas.DERENDER_STREAM, integers=True)
            name = self.check_model(body)
            check_chat_stream(self.config, body)
            return self.derenderer.chat_stream(body, body.get("model") or name)
        schemas.check_shape(body, schemas.DERENDER_CHAT, integers=True)
        name = self.check_model(body)
        check_generate_responses(self.config, [body["generate_response"]])
        check_prompt_ids(self.config, [body.get("prompt_token_ids")])
        return self.derenderer.chat(body, body.get("model") or name)

    def completions_derender(self, body: dict[str, Any], request: Request) -> Any:
        if body.get("stream") is True:
            schemas.check_shape(body, schemas.DERENDER_STREAM, integers=True)
            name = self.check_model(body)
            check_prompt_ids(self.config, [body.get("prompt_token_ids")])
            return self.derenderer.completions_stream(body, body.get("model") or name)
        schemas.check_shape(body, schemas.DERENDER_COMPLETION, integers=True)
        name = self.check_model(body)
        if not body["generate_responses"]:
            raise bad_request("generate_responses must not be empty")
        check_generate_responses(self.config, body["generate_responses"])
        check_prompt_ids(self.config, body.get("prompt_token_ids") or [])
        return self.derenderer.completions(body, body.get("model") or name)

    def tokenize(self, body: dict[str, Any], request: Request) -> Any:
        self.check_model(body)
        if "messages" in body:  # exactly chat render's prompt (UTIL-002); vLLM's tokenize checks no tool_choice
            ids = self.renderer.chat_prompt_ids(body, check_tool_choice=False)
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
