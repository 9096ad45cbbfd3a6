"""schemathesis hooks that let a plain ``schemathesis run specs/<doc>.yaml`` judge by the whole spec.

A document's request schema states every refusal JSON Schema can; the rest it names under
``x-tokenspec-unstated`` (``specs/unstated.py``). Two kinds of schemathesis failure are then not the server's:

- "schema-valid request rejected" for a body that breaks one of those named rules (min_tokens above max_tokens):
  the refusal is the spec's, and vLLM makes it too. A rule about the deployment (its context, its vocabulary, its
  engine's batch size) is decided from what the server states: /v1/models' max_model_len, and the bounds its own
  /openapi.json states under ``info.x-tokenspec-limits`` (the reference frontend states them), and a text
  prompt's length as its own /tokenize counts it; a server that states none has every such refusal kept;
- a failure whose positive / negative label the document's own compiled validator contradicts (schemathesis's
  coverage phase can mark a body valid that the schema refuses, and a mutation can leave a body valid).

Everything else is kept, so the run stays as strict as the documents. ``schemathesis.toml`` at the repository root
loads this module; schemathesis prints each failure it drops.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
import schemathesis

from tokenspec.core.transport import Transport
from tokenspec.specs.unstated import Limits, broken_rules, declared_rules

_REJECTED_VALID = "ST202"
_ACCEPTED_INVALID = "ST201"


#: The bounds a server may state in its own /openapi.json (``info.x-tokenspec-limits``), with their types.
_STATED = {"vocab_size": int, "max_num_seqs": int, "max_logprobs": int, "prompt_logprob_token_ids": bool,
           "thinking_token_budget": bool, "use_beam_search": bool, "tool_parser": bool, "reasoning_parser": bool}


@functools.lru_cache(maxsize=16)
def _limits(origin: str, authorization: str | None) -> Limits:
    """The deployment's max_model_len from its /v1/models, and the bounds its own /openapi.json states (each None
    when it does not say: a rule that needs it is then never taken as the reason for a refusal)."""
    headers = {"authorization": authorization} if authorization else {}
    with Transport().client("target", origin, timeout=10.0) as client:
        models = _answer(client, "GET", "/v1/models", headers).get("data") or []
        info = _answer(client, "GET", "/openapi.json", headers).get("info")
    lengths = [m.get("max_model_len") for m in models if isinstance(m, dict)]
    stated = info.get("x-tokenspec-limits") if isinstance(info, dict) else None
    stated = stated if isinstance(stated, dict) else {}
    return Limits(max_model_len=next((n for n in lengths if isinstance(n, int)), None),
                  **{k: v for k, v in stated.items() if k in _STATED and type(v) is _STATED[k]})


def _answer(client: httpx.Client, method: str, path: str, headers: dict[str, str],
            body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The server's JSON object answer, or {} for anything else (it said nothing this hook can use)."""
    try:
        answer = client.request(method, path, headers=headers, json=body).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return answer if isinstance(answer, dict) else {}


def _body_schema(case: Any) -> Any:
    bodies = case.operation.body
    return bodies[0] if len(bodies) else None


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep a failure unless the document itself says the server was right (see the module docstring)."""
    code = getattr(failure, "code", None)
    body = _body_schema(case)
    if code not in (_REJECTED_VALID, _ACCEPTED_INVALID) or body is None or not isinstance(case.body, dict):
        return True
    valid = body.is_valid(case.body)
    if code == _ACCEPTED_INVALID:
        return not valid
    if not valid:
        return False
    url = httpx.URL(str(response.request.url))
    origin, authorization = f"{url.scheme}://{url.netloc.decode()}", response.request.headers.get("authorization")
    limits = _limits(origin, authorization)
    declared = declared_rules(body.resolved_schema)
    if next(broken_rules(case.body, declared, limits), None) is not None:
        return False
    return not ("prompt-above-context" in declared and _text_prompt_above_context(case.body, limits, origin,
                                                                                  authorization))


#: What /tokenize takes of a chat request to count its prompt as the chat template renders it.
_CHAT_PROMPT = ("model", "messages", "tools", "chat_template", "chat_template_kwargs", "add_generation_prompt",
                "continue_final_message", "add_special_tokens")


def _text_prompt_above_context(body: dict[str, Any], limits: Limits, origin: str, authorization: str | None) -> bool:
    """A text prompt's length is its tokenizer's to say, so the deployment's own /tokenize counts it (as its
    /v1/models states its context length); a prompt /tokenize will not count stays unproven."""
    if limits.max_model_len is None:
        return False
    if "messages" in body:
        asks = [{k: body[k] for k in _CHAT_PROMPT if k in body}]
    else:
        prompt = body.get("prompt")
        texts = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        asks = [{"model": body.get("model"), "prompt": t} for t in texts if isinstance(t, str)]
    headers = {"authorization": authorization} if authorization else {}
    with Transport().client("target", origin, timeout=30.0) as client:
        for ask in asks:
            count = _answer(client, "POST", "/tokenize", headers, ask).get("count")
            if isinstance(count, int) and count > limits.max_model_len:
                return True
    return False
