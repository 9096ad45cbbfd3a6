"""Find out, before any test runs, which roles each URL hosts and which optional features the target offers.

Every decision carries its evidence (the request's route and the answer's status and message), and the report
lists them all. Two rules keep the verdict honest:

- A route counts as not hosted only on a 404 that is not the OpenAI error object (a framework's "Not Found",
  not "model not found") or a 405; its tests are *not tested*, never failed.
- A probe never concludes "unsupported" from an answer that exists but is wrong. A derender that returns
  the decoded text unchanged has no reasoning parser; one that changes the text (drops the markers, moves it
  around) but gives no ``reasoning`` field runs a broken parser, so reasoning counts as offered and the
  reasoning tests fail (DERENDER-001). Likewise a derender that splits every tool-call shape as the
  configuration without a tool parser does has no tool parser, whether or not render accepts tools.

A profile (``--profile``) replaces the probe's guesses with declarations; each declared feature is still
probed, and the difference is a failure of PROFILE-001 (``test_profile.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import httpx

from tokenspec.core.transport import DEFAULT_API_KEY_ENV
from tokenspec.specs.catalogue import generation_key, read_generations
from tokenspec.specs.parser_families import (
    REASONING_FAMILIES,
    TOOL_FAMILIES,
    Split,
    distinguishing_shapes,
    expected,
    families_acting_on,
    family_probes,
    shapes,
    table_request,
)
from tokenspec.specs.samples import WEATHER_TOOL
from tokenspec.suite.engine.gating import ENABLE, ENGINE_ROLES, GENERATE_FEATURES, Capabilities
from tokenspec.suite.engine.profile import Profile
from tokenspec.suite.engine.target import Codec, CodecUnavailable, Target, model_card

PROBE_TIMEOUT = 15.0
PROBE_RETRY_TIMEOUT = 60.0
CHAT_RENDER = "/v1/chat/completions/render"
COMPLETIONS_RENDER = "/v1/completions/render"
MESSAGES_RENDER = "/v1/messages/render"
RESPONSES_RENDER = "/v1/responses/render"
CHAT_DERENDER = "/v1/chat/completions/derender"
COMPLETIONS_DERENDER = "/v1/completions/derender"
GENERATE = "/inference/v1/generate"
PROBE_TOOL = WEATHER_TOOL


@dataclass
class Answer:
    """One probe request and what came back (``status`` 0 when nothing did)."""

    route: str
    status: int
    body: Any
    error: str = ""
    method: str = "POST"

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def hosted(self) -> bool:
        """False only for a framework 404 / 405 (the route does not exist) or no answer at all."""
        if self.status == 0 or self.status == 405:
            return False
        if self.status == 404:
            err = self.body.get("error") if isinstance(self.body, dict) else None
            return isinstance(err, dict) and err.get("param") == "model"
        return True

    def evidence(self) -> str:
        if self.status == 0:
            return f"{self.method} {self.route}: no answer ({self.error})"
        return f"{self.method} {self.route} answered {self.status}{_message(self.body)}"


def _message(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return f": {str(body['error'].get('message'))[:160]}"
    if isinstance(body, dict) and "detail" in body:
        return f": {str(body['detail'])[:160]}"
    return ""


def _post(c: RoleClients, base: str, route: str, body: Any) -> Answer:
    return _ask(c, "POST", base, route, body)


def _get(c: RoleClients, base: str, route: str) -> Answer:
    return _ask(c, "GET", base, route, None)


def _ask(c: RoleClients, method: str, base: str, route: str, body: Any) -> Answer:
    """One probe request. A timeout is asked again once with a longer one: a busy server (a loaded CI machine,
    a cold engine) is slow, not lacking the feature."""
    try:
        try:
            resp = c.request(method, f"{base}{route}", json=body)
        except httpx.TimeoutException:
            resp = c.request(method, f"{base}{route}", json=body, timeout=PROBE_RETRY_TIMEOUT)
    except httpx.HTTPError as exc:
        return Answer(route, 0, None, f"{type(exc).__name__}: {exc}", method)
    try:
        parsed = resp.json()
    except ValueError:
        parsed = resp.text[:200]
    return Answer(route, resp.status_code, parsed, method=method)


class RoleClients:
    """The probe's HTTP clients, one per role, each request sent with the credentials of the server it goes to."""

    def __init__(self, target: Target) -> None:
        self._urls = [(url, role) for role, url in (("engine", target.engine_url), ("reference", target.reference_url),
                                                    ("target", target.url)) if url]
        self._clients = {role: target.transport.client(role, timeout=PROBE_TIMEOUT) for _, role in self._urls}

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        role = next((role for base, role in self._urls if url.startswith(base + "/")), "target")
        return self._clients[role].request(method, url, **kw)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def __enter__(self) -> RoleClients:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self._clients.values():
            client.close()


def probe(target: Target, codec: Codec, profile: Profile | None = None) -> Capabilities:
    caps = Capabilities()
    with RoleClients(target) as c:
        _probe_inputs(caps, target, codec)
        rendered, states = _probe_roles(c, caps, target, codec)
        _probe_generation(caps, rendered, states)
        _probe_parsers(c, caps, target, codec)
        _probe_generate(c, caps, target, rendered)
        _probe_token_native(c, caps, target)
        _probe_fields(c, caps, target)
    if profile is not None:
        profile.apply(caps)
    return caps


def _probe_inputs(caps: Capabilities, target: Target, codec: Codec) -> None:
    if target.tokenizer_dir is not None:
        caps.decide("tokenizer-folder", "offered", "options", f"--tokenizer {target.tokenizer_dir}")
    else:
        caps.decide("tokenizer-folder", "not-tested", "options", "no model folder given")
    access = target.transport.access["target"]
    if access.api_key():
        caps.decide("api-key", "offered", "options", f"the key in ${access.api_key_env} is sent on every request")
    else:
        caps.decide("api-key", "not-tested", "options", "the run sends the target no API key (how a key-protected"
                    f" server refuses is judged with one); pass --api-key-env NAME (default {DEFAULT_API_KEY_ENV})")
    facts = codec.facts
    if facts["source"]:
        caps.decide("tokenizer-facts", "offered", "probe", f"EOS ids {facts['eos_ids']} and"
                    f" {len(facts['special'])} special ids from {facts['source']}")
    else:
        caps.decide("tokenizer-facts", "not-tested", "probe", "EOS and special-token ids: no model folder, and the"
                    " target's /v1/models card reports no tokenizer_version with a golden file")


def _role(caps: Capabilities, feature: str, answer: Answer) -> None:
    if answer.ok:
        caps.decide(feature, "offered", "probe", answer.evidence())
    elif not answer.hosted:
        caps.decide(feature, "not-tested", "probe", f"not hosted: {answer.evidence()}")
    elif answer.status == 501:
        caps.decide(feature, "unsupported", "probe", answer.evidence())
    else:
        # Hosted, but a valid minimal request failed: the role is there and its tests will say what is wrong.
        caps.decide(feature, "offered", "probe", f"hosted; {answer.evidence()}")


def _plain_ids(codec: Codec) -> list[int]:
    try:
        return codec.encode("Hello")
    except CodecUnavailable:
        return [1]


def _probe_roles(c: RoleClients, caps: Capabilities, target: Target, codec: Codec) -> tuple[Answer, list[Any]]:
    """Decide every role; returns the chat render answer (its prompt ids are the generate probe's prompt) and the
    stream states the streaming derenders answered."""
    model, url = target.model, target.url
    user = [{"role": "user", "content": "Hello"}]
    rendered = _post(c, url, CHAT_RENDER, {"model": model, "messages": user})
    _role(caps, "chat-render", rendered)
    _role(caps, "completions-render", _post(c, url, COMPLETIONS_RENDER, {"model": model, "prompt": "Hello"}))
    _role(caps, "messages-render", _post(c, url, MESSAGES_RENDER, {"model": model, "max_tokens": 8,
                                                                   "messages": [{"role": "user", "content": "Hello"}]}))
    _role(caps, "responses-render", _post(c, url, RESPONSES_RENDER, {"model": model, "input": "Hello"}))
    _role(caps, "tokenize", _post(c, url, "/tokenize", {"model": model, "prompt": "Hello"}))
    _role(caps, "detokenize", _post(c, url, "/detokenize", {"model": model, "tokens": _plain_ids(codec)}))
    if caps.has("tokenize") or caps.has("tokenizer-folder"):
        try:
            codec.encode("Hello")
            caps.decide("codec", "offered", "probe", "token ids from " + (
                "the model folder" if caps.has("tokenizer-folder") else "the target's /tokenize"))
        except CodecUnavailable as exc:
            caps.decide("codec", "not-tested", "probe", str(exc))
    else:
        caps.decide("codec", "not-tested", "probe", "no /tokenize on the target and no --tokenizer")
    ids = _plain_ids(codec)
    plain = {"model": model, "messages": user, "chat_template_kwargs": {"enable_thinking": False}}
    response = {"request_id": "probe", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
    derender = {"model": model, "generate_response": response, "prompt_tokens": 1, "chat_request": plain}
    _role(caps, "chat-derender", _post(c, url, CHAT_DERENDER, derender))
    completions = {"model": model, "generate_responses": [response], "prompt_tokens": [1],
                   "completion_request": {"model": model, "prompt": "Hello"}}
    _role(caps, "completions-derender", _post(c, url, COMPLETIONS_DERENDER, completions))
    chunk = {"request_id": "probe", "choices": [{"index": 0, "token_ids": ids, "finish_reason": None}]}
    states: list[Any] = []
    for feature, route, extra in (
        ("chat-stream-derender", CHAT_DERENDER, {"chat_request": plain, "prompt_tokens": 1}),
        ("completions-stream-derender", COMPLETIONS_DERENDER,
         {"completion_request": {"model": model, "prompt": "Hello"}, "prompt_tokens": 1}),
    ):
        base = feature.replace("stream-", "")
        if not caps.has(base):
            caps.decide(feature, "not-tested", "probe", f"no {base}: {caps.decisions[base].evidence}")
            continue
        body = {"model": model, "stream": True, "generate_chunk": chunk, "stream_state": None,
                "prompt_token_ids": [1], **extra}
        answer = _post(c, url, route, body)
        if answer.ok:
            # An accepted stream body is the option offered, whatever the answer's shape: one without a
            # stream_state (a renamed key, a whole answer) fails its tests, it is never an absent option.
            shape = "with a stream_state" if isinstance(answer.body, dict) and "stream_state" in answer.body \
                else "without a stream_state (its tests judge the shape)"
            if isinstance(answer.body, dict):
                states.append(answer.body.get("stream_state"))
            caps.decide(feature, "offered", "probe", f"{answer.evidence()} {shape}")
        else:
            # The route is hosted (its non-stream form answered); a refused stream body is an absent option.
            caps.decide(feature, "unsupported", "probe", f"stream:true refused: {answer.evidence()}")
    _probe_derender_logprobs(c, caps, target, plain, ids)
    tools = _post(c, url, CHAT_RENDER, {"model": model, "messages": user, "tools": [PROBE_TOOL]})
    if not caps.has("chat-render"):
        caps.decide("tools", "not-tested", "probe", "no chat render to probe tools with")
    elif tools.ok:
        caps.decide("tools", "offered", "probe", f"render with tools: {tools.evidence()}")
    else:
        caps.decide("tools", "unsupported", "probe", f"render with tools: {tools.evidence()}")
    _role(caps, "version", _get(c, url, "/version"))
    _role(caps, "chat-completions", _post(c, url, "/v1/chat/completions", {"model": model, "messages": user,
                                                                         "max_tokens": 1}))
    if target.reference_url:
        body = {"model": model, "messages": user, "max_tokens": 1}
        answer = _post(c, target.reference_url, "/v1/chat/completions", body)
        _role(caps, "coupled", answer)
    else:
        caps.decide("coupled", "not-tested", "options", "no --reference")
    return rendered, states


#: The first generations whose wire shows each marker (specs/features.yaml's ``generations`` says the same).
PARSE_CONTEXT_SINCE = "0.33"
ID_WINDOW_SINCE = "0.34"
#: DerenderStreamState's two decode windows: pieces until 0.33, ids from ID_WINDOW_SINCE.
WINDOWS = ("prev_tokens", "prev_token_ids")


def _probe_generation(caps: Capabilities, rendered: Answer, states: list[Any]) -> None:
    """Which API generations (features.yaml) the target's own answers fit: chat render's parse_context (0.33 on)
    and the streaming state's decode window (prev_tokens until 0.33, prev_token_ids from 0.34). What was not seen
    leaves several candidates, and the gate judges only requirements that hold for all of them."""
    candidates = list(read_generations())
    seen = []
    if rendered.ok and isinstance(rendered.body, dict):
        has = "parse_context" in rendered.body
        candidates = [g for g in candidates if (generation_key(g) >= generation_key(PARSE_CONTEXT_SINCE)) == has]
        seen.append(f"chat render {'emits' if has else 'has no'} parse_context")
    windows = [k for s in states if isinstance(s, dict) for k in WINDOWS if k in s]
    if windows:
        ids = windows[0] == "prev_token_ids"
        candidates = [g for g in candidates if (generation_key(g) >= generation_key(ID_WINDOW_SINCE)) == ids]
        seen.append(f"the streaming derender state keeps {windows[0]}")
    if not seen:
        seen.append("no chat render and no streaming derender state to tell the generations apart")
    caps.generations = candidates
    caps.generation_evidence = "; ".join(seen) + ("" if candidates else ": no generation of the spec fits, so"
                                                  " every versioned requirement is judged")


def _probe_derender_logprobs(c: RoleClients, caps: Capabilities, target: Target, request: dict[str, Any],
                             ids: list[int]) -> None:
    """Whether derender turns tokens-mode logprobs into OpenAI logprobs, asked of derender itself: the suite
    writes the generate response, so no engine is needed. An answer that drops the logprobs is a broken
    conversion (its tests fail), never an absent feature; only a 501 or a profile makes it unsupported."""
    if not caps.has("chat-derender"):
        why = caps.decisions["chat-derender"].evidence
        caps.decide("derender-logprobs", "not-tested", "probe", f"no chat derender: {why}")
        return
    top = [{"token_id": ids[0], "logprob": -0.5, "rank": 1}]
    entries = [{"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": top} for t in ids]
    response = {"request_id": "probe", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop",
                                                    "logprobs": {"content": entries}}]}
    body = {"model": target.model, "generate_response": response, "prompt_tokens": 1,
            "chat_request": {**request, "logprobs": True, "top_logprobs": 1}}
    answer = _post(c, target.url, CHAT_DERENDER, body)
    if answer.status == 501:
        caps.decide("derender-logprobs", "unsupported", "probe", answer.evidence())
    else:
        caps.decide("derender-logprobs", "offered", "probe", f"{answer.evidence()} to a generate response with"
                    " tokens-mode logprobs (its tests judge the conversion)")


def _derender_message(c: RoleClients, target: Target, ids: list[int],
                      request: dict[str, Any]) -> tuple[Answer, dict[str, Any]]:
    response = {"request_id": "probe", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop"}]}
    body = {"model": target.model, "generate_response": response, "prompt_tokens": 1, "chat_request": request}
    answer = _post(c, target.url, CHAT_DERENDER, body)
    try:
        return answer, answer.body["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        return answer, {}


def _decodings(codec: Codec, text: str) -> set[str]:
    """``text`` as the target may show it unparsed: decoded with and without its special tokens."""
    ids = codec.encode(text)
    return {codec.decode(ids), codec.decode(ids, skip_special_tokens=True)}


def _unchanged(message: dict[str, Any], decoded: set[str]) -> bool:
    return not message.get("reasoning") and not message.get("tool_calls") and (message.get("content") or "") in decoded


def _probe_parsers(c: RoleClients, caps: Capabilities, target: Target, codec: Codec) -> None:
    """Which reasoning and tool-call parser families the target's derender runs, from what it answers."""
    if not (caps.has("chat-derender") and caps.has("codec")):
        why = "no chat derender" if not caps.has("chat-derender") else caps.decisions["codec"].evidence
        for feature in ("reasoning", "tool-parsing"):
            caps.decide(feature, "not-tested", "probe", f"cannot probe the parsers: {why}")
        return
    user = [{"role": "user", "content": "Weather in Paris?"}]
    tools = caps.has("tools")  # the table's rows were recorded with its tools where a tool parser runs
    # Reasoning: a shape some family splits, then the shapes that tell the families apart.
    for shape in family_probes("reasoning"):  # until one gives reasoning: each family parses one of them
        text = shapes()[shape]
        ids = codec.encode(text)
        decoded = _decodings(codec, text)
        answer, message = _derender_message(c, target, ids, {"model": target.model, "messages": user})
        if answer.ok and not _unchanged(message, decoded):  # reasoning given, or the text changed without it
            break
    if message.get("reasoning") or message.get("reasoning_content"):
        family = _which(c, target, codec, "reasoning", REASONING_FAMILIES, tools, caps.generations)
        caps.decide("reasoning", "offered", "probe", f"derender of {text!r} gave reasoning; family: "
                    + (family or "none of " + ", ".join(REASONING_FAMILIES) + " (declare it in --profile)"))
        caps.parsers["reasoning"] = family or "unknown"
        if family is None:
            caps.candidates["reasoning"] = families_acting_on("reasoning", shape)
    elif not answer.ok or _unchanged(message, decoded):
        caps.decide("reasoning", "unsupported", "probe",
                    f"derender of {text!r} returned the decoded text unparsed ({answer.evidence()})")
    else:
        caps.decide("reasoning", "offered", "probe",
                    f"derender of {text!r} changed the text but gave no reasoning: {json.dumps(message)[:200]}"
                    " (a broken parser, not an absent one)")
        caps.parsers["reasoning"] = "unknown"
        caps.candidates["reasoning"] = families_acting_on("reasoning", shape)
    # Tool calls: only where render accepts tools (a server without any parser refuses them).
    if not caps.has("tools"):
        caps.decide("tool-parsing", "unsupported", "probe", caps.decisions["tools"].evidence)
        return
    reasoning = caps.parsers.get("reasoning")
    answers = _distinguishing_answers(c, target, codec, "tool", tools)
    family = next((f for f in TOOL_FAMILIES if _agrees(answers, (_known(reasoning), f), caps.generations)), None)
    if family is None and _agrees(answers, (_known(reasoning), None), caps.generations):
        # Render accepting tools says nothing about a tool parser (vLLM renders tools for the template with a
        # reasoning parser alone): a derender that splits every tool-call shape exactly as the configuration
        # without a tool parser does (the markup stays in content) has none.
        caps.decide("tool-parsing", "unsupported", "probe", "render accepts tools, but the derender left every"
                    f" tool-call shape ({', '.join(distinguishing_shapes('tool'))}) as"
                    f" {_known(reasoning) or 'none'}+none in specs/parsers.yaml splits it: no tool parser")
    elif family is None:
        caps.decide("tool-parsing", "offered", "probe", "render accepts tools but the derender parsed none of the"
                    f" known families' markup ({', '.join(TOOL_FAMILIES)}); declare tool_parser in --profile")
        caps.parsers["tool"] = "unknown"
        changed = [shape for shape, message in answers.items()
                   if message and not _unchanged(message, _decodings(codec, shapes()[shape]))]
        caps.candidates["tool"] = sorted({f for shape in changed for f in families_acting_on("tool", shape)},
                                         key=TOOL_FAMILIES.index)
    else:
        caps.decide("tool-parsing", "offered", "probe", f"derender parsed {family} markup into tool_calls")
        caps.parsers["tool"] = family


def _which(c: RoleClients, target: Target, codec: Codec, kind: str, families: tuple[str, ...],
           tools: bool, generations: list[str], reasoning: str | None = None) -> str | None:
    """The family whose specified splits of every distinguishing shape the derender reproduces exactly.

    Content, reasoning and tool calls are compared; finish_reason is not (it is DERENDER-006's business)."""
    answers = _distinguishing_answers(c, target, codec, kind, tools)
    for family in families:
        if _agrees(answers, (family, None) if kind == "reasoning" else (_known(reasoning), family), generations):
            return family
    return None


def _known(reasoning: str | None) -> str | None:
    """The reasoning family to look tool-call rows up under (an unknown one: the rows without reasoning)."""
    return None if reasoning == "unknown" else reasoning


def _distinguishing_answers(c: RoleClients, target: Target, codec: Codec, kind: str,
                            tools: bool) -> dict[str, dict[str, Any]]:
    request = table_request(target.model, tools, "thinking")  # the rows' own request
    return {shape: _derender_message(c, target, codec.encode(shapes()[shape]), request)[1]
            for shape in distinguishing_shapes(kind)}


def _agrees(answers: dict[str, dict[str, Any]], config: tuple[str | None, str | None],
            generations: list[str]) -> bool:
    """Content, reasoning and tool calls of every answer as ``config`` specifies in one of the generations the
    target may speak (finish_reason aside)."""
    return any(all(_agrees_in(message, expected(*config, shape, "thinking", g)) for shape, message in answers.items())
               for g in (generations or read_generations()))


def _agrees_in(message: dict[str, Any], want: Split | None) -> bool:
    return want is not None and bool(message) and not [d for d in want.differences(message)
                                                       if not d.startswith("finish")]


def _probe_generate(c: RoleClients, caps: Capabilities, target: Target, rendered: Answer) -> None:
    """Engine features: each probe is a one-token generation with one option switched on."""
    prompt = rendered.body["token_ids"] if rendered.ok and isinstance(rendered.body, dict) else [1, 2, 3]
    url = target.generate_url

    def gen(extra_params: dict[str, Any], **top: object) -> Answer:
        params = {"max_tokens": 1, "temperature": 0, **extra_params}
        return _post(c, url, GENERATE, {"token_ids": prompt, "sampling_params": params, "model": target.model,
                                        **top})

    first = gen({})
    _role(caps, "generate", first)
    if not caps.has("generate"):
        for feature in (*GENERATE_FEATURES, *ENGINE_ROLES):
            caps.decide(feature, "not-tested", "probe", f"no generate endpoint to probe it with; {ENABLE['generate']}")
        return
    _probe_engine_roles(c, caps, target, prompt)

    def optional(feature: str, answer: Answer, seen: bool) -> None:
        if answer.ok and seen:
            caps.decide(feature, "offered", "probe", answer.evidence())
        elif answer.status == 0:
            # No answer at all is no evidence that the feature is missing (a server without it refuses the
            # request): its tests run and say what is wrong, a hang included.
            caps.decide(feature, "offered", "probe", f"{answer.evidence()}; its tests will judge it")
        else:
            caps.decide(feature, "unsupported", "probe", answer.evidence())

    out = gen({"logprobs": 1})
    optional("logprobs", out, out.ok and bool(_choice(out).get("logprobs")))
    out = gen({"prompt_logprobs": 1})
    optional("prompt-logprobs", out, out.ok and bool(out.body.get("prompt_logprobs")))
    out = gen({"detokenize": True}, output_mode="text")
    optional("text-output-mode", out, out.ok and "text" in _choice(out))
    out = gen({"n": 2, "temperature": 1.0, "seed": 1})
    optional("multi-choice", out, out.ok and len(out.body.get("choices") or []) == 2)
    context = parse_context_of(rendered.body if rendered.ok else None)
    out = gen({"detokenize": True}, output_mode="derender", parse_context=context)
    optional("derender-output-mode", out, out.ok and "message" in _choice(out))
    out = gen({"detokenize": True}, output_mode="derender", parse_context=context, stream=True)
    # An accepted stream is the option offered, whatever its events hold: their shape is what its tests judge.
    optional("derender-output-mode-stream", out, out.ok)
    out = gen({"stop": ["zz"], "detokenize": True})
    optional("stop-strings", out, out.ok)


ABORT = "/inference/v1/abort_requests"


def _probe_engine_roles(c: RoleClients, caps: Capabilities, target: Target, prompt: list[int]) -> None:
    """Token-id streaming and abort, each decided by its own answer and by nothing else: a generate-only engine
    that answers stream:true with 501 has no streaming (unsupported), one whose abort route is a framework 404
    or 405 hosts no abort (not tested); any other answer means there, and its tests judge it. So no other
    requirement is charged for their absence: tests that need them are gated on these decisions."""
    body = {"token_ids": prompt, "model": target.model, "stream": True,
            "sampling_params": {"max_tokens": 1, "temperature": 0}}
    streamed = _post(c, target.generate_url, GENERATE, body)
    streamed.route = f"{GENERATE} (stream:true)"  # the evidence names the option, not only the route
    _role(caps, "generate-streaming", streamed)
    never_sent = {"request_ids": ["tokenspec-probe-never-sent"]}
    _role(caps, "abort", _post(c, target.generate_url, ABORT, never_sent))


#: What chat render writes for a one-turn chat without tools (RENDER-025), for a renderer that predates parse_context.
PLAIN_PARSE_CONTEXT: dict[str, Any] = {
    "tools": None, "tool_choice": "none", "parallel_tool_calls": True, "include_reasoning": True,
    "chat_template_kwargs": {}, "history_tool_call_cnt": 0}


def parse_context_of(rendered: Any) -> dict[str, Any]:
    """The parse_context a derender-mode generate sends: render's own, else that of a plain one-turn chat, so an
    engine behind an older renderer is judged too."""
    context = rendered.get("parse_context") if isinstance(rendered, dict) else None
    return context if isinstance(context, dict) else dict(PLAIN_PARSE_CONTEXT)


def _choice(answer: Answer) -> dict[str, Any]:
    try:
        return cast(dict[str, Any], answer.body["choices"][0])
    except (TypeError, KeyError, IndexError):
        return {}


#: Optional request fields tests send, and the route whose request schema declares them.
OPTIONAL_FIELDS: dict[str, str] = {
    "prompt_token_ids": CHAT_DERENDER,
    "return_token_ids": CHAT_RENDER,
    "structured_outputs": CHAT_RENDER,
    "chat_template_kwargs": CHAT_RENDER,
    "skip_special_tokens": CHAT_RENDER,
    "include_stop_str_in_output": CHAT_RENDER,
    "top_k": CHAT_RENDER,
    "min_p": CHAT_RENDER,
    "repetition_penalty": CHAT_RENDER,
    "thinking_token_budget": CHAT_RENDER,
}


def _probe_fields(c: RoleClients, caps: Capabilities, target: Target) -> None:
    """Which optional request fields the target honours, from the request schemas of its own /openapi.json.

    A server that publishes no OpenAPI document is assumed to honour them all (the tests then say)."""
    try:
        document = c.get(f"{target.url}/openapi.json").json()
        paths = document["paths"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return
    honoured: set[str] = set()
    for name, route in OPTIONAL_FIELDS.items():
        properties = _request_properties(document, paths.get(route, {}).get("post", {}))
        if properties is None or name in properties:
            honoured.add(name)
        else:
            caps.decide(f"request-field:{name}", "unsupported", "probe",
                        f"the target's /openapi.json request schema of POST {route} has no {name}")
    caps.fields = honoured


def _request_properties(document: dict[str, Any], operation: dict[str, Any]) -> set[str] | None:
    """Property names of an operation's JSON request body, over anyOf/oneOf/allOf variants (None: unknown)."""
    try:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
    except (KeyError, TypeError):
        return None
    names: set[str] = set()
    stack, seen = [schema], 0
    while stack and seen < 50:
        node, seen = stack.pop(), seen + 1
        if not isinstance(node, dict):
            continue
        if "$ref" in node:
            node = _resolve(document, node["$ref"])
        names |= set((node or {}).get("properties") or {})
        for key in ("anyOf", "oneOf", "allOf"):
            stack += list((node or {}).get(key) or [])
    return names or None


def _resolve(document: dict[str, Any], ref: str) -> dict[str, Any] | None:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _probe_token_native(c: RoleClients, caps: Capabilities, target: Target) -> None:
    # The server's tokenizer_version (its /v1/models card) is the pin: an unpinned block must be refused
    # (TOKNAT-002), so probing without it would never find the capability.
    version = tokenizer_version(target)
    if version is None:
        caps.decide("token-native", "unsupported", "probe", "the /v1/models card has no tokenizer_version")
        return
    native = [{"role": "user", "content": [{"type": "input_tokens", "token_ids": [1, 2]}]}]
    answer = _post(c, target.url, CHAT_RENDER, {"model": target.model, "messages": native,
                                               "tokenizer_version": version})
    caps.decide("token-native", "offered" if answer.ok else "unsupported", "probe", answer.evidence())


def tokenizer_version(target: Target) -> str | None:
    """The target's ``tokenizer_version`` from the card of its model on ``/v1/models``, if it reports one."""
    version = model_card(target.url, target.transport, model=target.model).get("tokenizer_version")
    return version if isinstance(version, str) and version else None
