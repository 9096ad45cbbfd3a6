"""OpenAI-style error objects and the exception that carries one out of a handler.

Every client mistake becomes ``{"error": {"message", "type", "param", "code"}}`` with HTTP status = code,
the shape vLLM uses; handlers raise ``ApiError`` and the app turns it into a response in one place.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tokenspec.harness.frontend.responses import JSONResponse

log = logging.getLogger("tokenspec.frontend")


class ApiError(Exception):
    """A request the frontend refuses; ``status`` is both the HTTP status and the body's ``code``."""

    def __init__(
        self, message: str, *, status: int = 400, err_type: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.err_type, "param": self.param,
                          "code": self.status}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def bad_request(message: str, param: str | None = None) -> ApiError:
    """A handler-level 400, as vLLM's ``create_error_response`` gives."""
    return ApiError(message, status=400, err_type="BadRequestError", param=param)


def validation_error(message: str, param: str | None) -> ApiError:
    """A body that does not fit the request schema: vLLM answers 400 "Bad Request" (not 422)."""
    return ApiError(message, status=400, err_type="Bad Request", param=param)


def not_found_model(model: str, valid: str) -> ApiError:
    return ApiError(f"The model `{model}` does not exist. Valid aliases: {valid}.", status=404,
                    err_type="NotFoundError", param="model")


def payload_too_large(limit: int) -> ApiError:
    return ApiError(f"Request body exceeds the limit of {limit} bytes.", status=413,
                    err_type="PayloadTooLargeError")


def internal_error(message: str = "Internal server error") -> ApiError:
    return ApiError(message, status=500, err_type="InternalServerError")


def refused(request: Request, err: ApiError, cause: BaseException | None = None) -> Response:
    """Answer a refusal and log it as one line (status, route, message): a refused request is the client's
    mistake, not the server's, so it never fills the log with a traceback."""
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    text = " ".join(f"{err.message}{detail}".split())
    log.info("%s %s %s -> %d: %s", request.client.host if request.client else "-", request.method,
             request.url.path, err.status, text[:300])
    return err.response()


def unexpected(request: Request, exc: Exception) -> Response:
    """An exception no check named: every failure here is caused by the input, so it is a 400 (one log line,
    no traceback to the client or the log). A missing key is a field the body lacks, and the answer names it."""
    if isinstance(exc, KeyError) and exc.args:
        message = f"the request could not be processed: a required field is missing: {exc.args[0]!r}"
    else:
        message = f"the request could not be processed: {type(exc).__name__}"
    return refused(request, bad_request(message), cause=exc)
