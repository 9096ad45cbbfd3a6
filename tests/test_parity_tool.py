"""`tokenspec parity` against two labelled TEST DOUBLE servers: one agrees with itself, one differs, one is a
hosted-style API that refuses `return_token_ids`. The comparison and the reports must say exactly that."""

from __future__ import annotations

import json
from pathlib import Path

from frontend_server import running_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tokenspec.cli import main


def canned_server(content: str, token_ids: bool = True) -> Starlette:
    """TEST DOUBLE of an OpenAI-compatible server: every chat answer is ``content``."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        if "return_token_ids" in body and not token_ids:
            return JSONResponse({"error": {"message": "Unrecognized request argument: return_token_ids",
                                           "type": "invalid_request_error", "param": None, "code": 400}}, 400)
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if token_ids:
            choice["token_ids"] = [1, 2, 3]
        return JSONResponse({"id": "x", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                                      "total_tokens": 6}})

    async def completions(request: Request) -> Response:
        choice = {"index": 0, "text": content, "finish_reason": "stop"}
        return JSONResponse({"id": "x", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                                      "total_tokens": 6}})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/completions", completions, methods=["POST"]),
                             Route("/v1/models", models), Route("/health", health)])


def test_identical_servers_agree_everywhere(tmp_path: Path) -> None:
    with running_app(canned_server("same")) as a, running_app(canned_server("same")) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "parity.json").read_text())
    assert report["agreement"]["content"]["rate"] == 1.0 and report["agreement"]["token_ids"]["agree"] == 8


def test_a_difference_is_counted_and_shown_side_by_side(tmp_path: Path) -> None:
    with running_app(canned_server("Paris")) as a, running_app(canned_server("paris")) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "parity.json").read_text())
    assert report["agreement"]["content"]["disagree"] == 8 and report["agreement"]["text"]["disagree"] == 2
    page = (tmp_path / "parity.html").read_text()
    assert "aris" in page and "diff_chg" in page and "case-" in page


def test_hosted_api_without_token_ids_compares_what_is_exposed(tmp_path: Path) -> None:
    with running_app(canned_server("same")) as a, running_app(canned_server("same", token_ids=False)) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 0
    agreement = json.loads((tmp_path / "parity.json").read_text())["agreement"]
    assert agreement["token_ids"]["not_comparable"] == 10 and agreement["content"]["agree"] == 8
