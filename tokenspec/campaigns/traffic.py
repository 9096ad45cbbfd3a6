"""``tokenspec parity --requests FILE.jsonl``: an operator's own requests through the split pipeline and the
coupled reference, compared.

The question is "does my split deployment (render -> engine -> derender) answer my traffic as my coupled one
does?". Requests come in the OpenAI Batch input format (one JSON object per line: ``custom_id``, ``method``,
``url``, ``body``). Each is compared in the strongest way the reference allows, and the report says which:

- ``tokens`` (the reference echoes ``prompt_token_ids`` and ``token_ids``, as vLLM does with
  ``return_token_ids``): the target's render must give the reference's prompt ids; the reference's own
  generated ids, derendered by the target, must give the reference's message (sampling cannot make these
  differ); and when the request is deterministic (temperature 0, or a seed) the split pipeline's whole
  answer is compared too.
- ``greedy`` (the reference echoes no ids, as hosted APIs): both sides are asked at temperature 0 with
  seed 0, and the answers' fields are compared; the note on the request says so.

A line that is not a request is reported with its number and skipped, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tokenspec.core.compare import chat_view, completion_view
from tokenspec.core.errors import UsageError
from tokenspec.core.transport import Transport

ROUTES = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}
RENDER = {"chat": "/v1/chat/completions/render", "completions": "/v1/completions/render"}
DERENDER = {"chat": "/v1/chat/completions/derender", "completions": "/v1/completions/derender"}
GENERATE = "/inference/v1/generate"
FIELDS = ("prompt_token_ids", "token_ids", "content", "reasoning", "tool_calls", "text", "finish_reason", "usage")


@dataclass
class Request:
    line: int
    custom_id: str
    kind: str
    body: dict[str, Any]


@dataclass
class Outcome:
    request: Request
    mode: str = ""
    notes: list[str] = field(default_factory=list)
    #: field -> (agree, split pipeline's value, reference's value); agree None: not compared.
    fields: dict[str, tuple[bool | None, Any, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def load_requests(path: Path) -> tuple[list[Request], list[str]]:
    """The requests of a Batch input file, and one "line N: why" per line that is not one (skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--requests {path}: cannot read it ({exc})") from None
    requests, bad = [], []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError as exc:
            bad.append(f"line {number}: not JSON ({exc.msg})")
            continue
        problem = _problem(item, seen)
        if problem:
            bad.append(f"line {number}: {problem}")
            continue
        seen.add(item["custom_id"])
        requests.append(Request(number, item["custom_id"], ROUTES[item["url"]], item["body"]))
    return requests, bad


def _problem(item: Any, seen: set[str]) -> str:
    if not isinstance(item, dict):
        return "not a JSON object"
    if not isinstance(item.get("custom_id"), str) or not item["custom_id"]:
        return "custom_id must be a non-empty string"
    if item["custom_id"] in seen:
        return f"custom_id {item['custom_id']!r} appears twice"
    if item.get("method", "POST") != "POST":
        return f"method {item.get('method')!r}: only POST requests are compared"
    if item.get("url") not in ROUTES:
        return f"url {item.get('url')!r}: expected one of {', '.join(ROUTES)}"
    if not isinstance(item.get("body"), dict):
        return "body must be a JSON object"
    if item["body"].get("stream"):
        return "stream: true is not compared (send the request with stream false)"
    if (item["body"].get("n") or 1) != 1:
        return "n > 1 is not compared"
    return ""


class _Side:
    def __init__(self, transport: Transport, role: str, url: str) -> None:
        self.url = url
        self.client = transport.client(role, url)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.client.post(path, json=body)
        if resp.status_code != 200:
            raise RuntimeError(f"POST {self.url}{path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()


def _view(kind: str, answer: dict[str, Any]) -> dict[str, Any]:
    choice = (answer.get("choices") or [{}])[0]
    view = (chat_view if kind == "chat" else completion_view)(choice, answer.get("usage"))
    view["token_ids"] = choice.get("token_ids")
    return view


def _deterministic(body: dict[str, Any]) -> bool:
    return body.get("temperature") == 0 or body.get("seed") is not None


def compare_request(request: Request, target: _Side, engine: _Side, reference: _Side, model: str) -> Outcome:
    outcome = Outcome(request)
    body = {"model": model, **request.body}
    try:
        echoed = reference.post(f"/v1/{'chat/' if request.kind == 'chat' else ''}completions",
                                {**body, "return_token_ids": True})
    except (RuntimeError, httpx.HTTPError) as exc:
        if "return_token_ids" not in str(exc):
            outcome.errors["reference"] = str(exc)
            return outcome
        echoed = {}
    choice = (echoed.get("choices") or [{}])[0]
    prompt = echoed.get("prompt_token_ids") or choice.get("prompt_token_ids")  # chat: top level; completions: choice
    if prompt and choice.get("token_ids") is not None:
        echoed = {**echoed, "prompt_token_ids": prompt}
        outcome.mode = "tokens"
        _token_level(outcome, body, echoed, target, model)
        if _deterministic(body):
            _end_to_end(outcome, body, echoed, target, engine, model)
        else:
            outcome.notes.append("sampled (no temperature 0, no seed): the split pipeline's own generation is not"
                                 " compared; render and derender are, on the reference's own ids")
        return outcome
    outcome.mode = "greedy"
    outcome.notes.append("the reference echoes no token ids: both sides asked at temperature 0 with seed 0")
    greedy = {**body, "temperature": 0, "seed": 0}
    try:
        answer = reference.post(f"/v1/{'chat/' if request.kind == 'chat' else ''}completions", greedy)
    except (RuntimeError, httpx.HTTPError) as exc:
        outcome.errors["reference"] = str(exc)
        return outcome
    _end_to_end(outcome, greedy, answer, target, engine, model)
    return outcome


def _token_level(outcome: Outcome, body: dict[str, Any], echoed: dict[str, Any], target: _Side, model: str) -> None:
    kind = outcome.request.kind
    try:
        rendered = target.post(RENDER[kind], body)
    except (RuntimeError, httpx.HTTPError) as exc:
        outcome.errors["render"] = str(exc)
        return
    prompt = rendered["token_ids"] if kind == "chat" else rendered[0]["token_ids"]
    outcome.fields["prompt_token_ids"] = (prompt == echoed["prompt_token_ids"], prompt, echoed["prompt_token_ids"])
    choice = echoed["choices"][0]
    generated = {"request_id": "tokenspec-traffic", "choices": [{
        "index": 0, "token_ids": choice["token_ids"], "stop_reason": choice.get("stop_reason"),
        "finish_reason": "stop" if choice.get("finish_reason") == "tool_calls" else choice.get("finish_reason")}]}
    try:
        derendered = target.post(DERENDER[kind],
                                 _derender_body(kind, model, body, generated, echoed["prompt_token_ids"]))
    except (RuntimeError, httpx.HTTPError) as exc:
        outcome.errors["derender"] = str(exc)
        return
    ours, theirs = _view(kind, derendered), _view(kind, echoed)
    for name in theirs:
        if name != "token_ids":
            outcome.fields[name] = (ours.get(name) == theirs[name], ours.get(name), theirs[name])


def _derender_body(kind: str, model: str, body: dict[str, Any], generated: dict[str, Any], prompt: list[int]
                   ) -> dict[str, Any]:
    if kind == "chat":
        return {"model": model, "generate_response": generated, "prompt_tokens": len(prompt),
                "prompt_token_ids": prompt, "chat_request": body}
    return {"model": model, "generate_responses": [generated], "prompt_tokens": [len(prompt)],
            "prompt_token_ids": [prompt], "completion_request": body}


def _end_to_end(outcome: Outcome, body: dict[str, Any], answer: dict[str, Any], target: _Side, engine: _Side,
                model: str) -> None:
    """The split pipeline's whole answer to ``body`` against the reference's ``answer``."""
    kind = outcome.request.kind
    try:
        rendered = target.post(RENDER[kind], body)
        request = rendered if kind == "chat" else rendered[0]
        generated = engine.post(GENERATE, request)
        derendered = target.post(DERENDER[kind], _derender_body(kind, model, body, generated, request["token_ids"]))
    except (RuntimeError, httpx.HTTPError, KeyError, IndexError) as exc:
        outcome.errors["split pipeline"] = str(exc)
        return
    ours = _view(kind, derendered)
    ours["token_ids"] = ((generated.get("choices") or [{}])[0]).get("token_ids")
    theirs = _view(kind, answer)
    for name in theirs:
        key = name if outcome.mode == "greedy" else f"end-to-end {name}"
        if name == "token_ids" and theirs[name] is None:
            continue
        outcome.fields[key] = (ours.get(name) == theirs[name], ours.get(name), theirs[name])


def run_traffic(requests: list[Request], target_url: str, engine_url: str, reference_url: str, model: str,
                transport: Transport) -> list[Outcome]:
    target = _Side(transport, "target", target_url)
    engine = _Side(transport, "engine", engine_url)
    reference = _Side(transport, "reference", reference_url)
    return [compare_request(r, target, engine, reference, model) for r in requests]


def to_report(outcomes: list[Outcome], bad: list[str], urls: dict[str, str], model: str) -> dict[str, Any]:
    """parity.json: the agreement per field, then each request; in ``tokenspec.campaigns.parity``'s shape (a: the split
    pipeline, b: the reference) so one HTML page draws both."""
    names = sorted({n for o in outcomes for n in o.fields}, key=lambda n: (n.startswith("end-to-end"), n))
    agreement = {}
    for name in names:
        verdicts = [o.fields[name][0] for o in outcomes if name in o.fields]
        agree, disagree = verdicts.count(True), verdicts.count(False)
        agreement[name] = {"agree": agree, "disagree": disagree, "not_comparable": verdicts.count(None),
                           "rate": round(agree / (agree + disagree), 4) if agree + disagree else None}
    return {
        "a": f"split pipeline: render/derender {urls['target']}, generate {urls['engine']}",
        "b": f"coupled reference {urls['reference']}", "model": model, "seed": None, "cases": len(outcomes),
        "errors": sum(1 for o in outcomes if o.errors), "skipped_lines": bad,
        "modes": {m: sum(o.mode == m for o in outcomes) for m in ("tokens", "greedy")},
        "agreement": agreement,
        "results": [{"id": o.request.custom_id, "line": o.request.line, "kind": o.request.kind, "mode": o.mode,
                     "notes": o.notes, "request": o.request.body, "errors": o.errors,
                     "fields": {k: {"agree": v[0], "a": v[1], "b": v[2]} for k, v in o.fields.items()}}
                    for o in outcomes],
    }
