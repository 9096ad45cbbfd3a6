"""The render floor: the least a chat render server can do on the frontend's own stack, as a server to time.

It reads the body, parses it (orjson), renders the model's chat template with the frontend's renderer (jinja2's
sandbox, Hugging Face semantics), encodes the prompt with ``tokenizers`` and answers the ids, as a bare ASGI app on
uvicorn with the frontend's settings. It checks nothing and maps no sampling parameter: it is a measuring instrument
for ``bench frontend`` (what any render server built on these libraries pays before doing what the spec requires),
not a server to run. ``GET /health`` answers 200, for the launcher's readiness poll.

``python -m tokenspec.benchmarks.floor_server --model DIR --port N``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
import uvicorn

from tokenspec.harness.frontend.chat_template import render_chat
from tokenspec.harness.frontend.model_files import ModelFiles
from tokenspec.harness.processes import ServerProcess

Message = dict[str, Any]


def floor_app(model_dir: Path) -> Any:
    """The ASGI app: ``POST`` any path with a chat body (``messages``) -> ``{"token_ids": [...]}``."""
    model = ModelFiles.load(model_dir)
    template = model.chat_template or ""

    def prompt_ids(messages: list[Message]) -> list[int]:
        text = render_chat(template, messages, tools=None, add_generation_prompt=True, continue_final_message=False,
                           special_tokens=model.special_tokens, template_kwargs={})
        return model.encode(text, add_special_tokens=False)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        answer = b""
        if scope["method"] != "GET":
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            answer = orjson.dumps({"token_ids": prompt_ids(orjson.loads(b"".join(chunks))["messages"])})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]})
        await send({"type": "http.response.body", "body": answer})

    return app


def floor_process(model_dir: Path) -> ServerProcess:
    """The floor server as a child process on a free port (started and stopped like every benchmarked server)."""
    return ServerProcess("render floor server", [sys.executable, "-m", "tokenspec.benchmarks.floor_server",
                                                 "--model", str(model_dir), "--port", "{port}"], startup_timeout=60.0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tokenspec.benchmarks.floor_server")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # the frontend's uvicorn settings (harness/frontend/app.serve): httptools and uvloop where installed
    uvicorn.run(floor_app(args.model), host="127.0.0.1", port=args.port, log_level="warning", lifespan="off",
                timeout_keep_alive=75)


if __name__ == "__main__":
    main()
