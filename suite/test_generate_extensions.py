"""Generate beyond token ids: the engine's own derender (output_mode derender, GENERATE-022..024), abort
(GENERATE-025, 026) and weight versions (GENERATE-027, 028).

The derender mode is judged against the target's own chat derender of the same ids with the chat request the
parse_context came from: the requirement is that the two give one split, and chat derender itself is judged by
DERENDER-001 against the parser table. The ids come from a tokens-mode generate with the same seed (GENERATE-015),
so a mode that hides them (include_reasoning false) is still compared.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tokenspec.suite.engine.client import SuiteClient
from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.engine.probe import parse_context_of
from tokenspec.suite.oracles.builders import TOOL, chat_request
from tokenspec.suite.oracles.pipeline import engine_finish_reason

GENERATE = "/inference/v1/generate"
ABORT = "/inference/v1/abort_requests"
CHAT_RENDER = "/v1/chat/completions/render"
CHAT_DERENDER = "/v1/chat/completions/derender"
SAMPLING = {"temperature": 1.0, "seed": 11, "max_tokens": 16, "detokenize": True}
#: Chat requests whose parse_context a derender mode must follow: the template default, thinking off, reasoning
#: hidden, and tools offered (a tool parser's path).
VARIANTS = {
    "default": {},
    "thinking-off": {"chat_template_kwargs": {"enable_thinking": False}},
    "no-reasoning": {"include_reasoning": False},
    "tools": {"tools": [TOOL]},
}


def _rendered(api, target, capabilities, variant: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chat request of ``variant`` and its render, with the derender-mode sampling parameters."""
    fields = dict(VARIANTS[variant])
    if "tools" in fields and not capabilities.has("tools"):
        not_tested("the target's render takes no tools (no tool parser)")
    request = {k: v for k, v in chat_request(target.model, **fields).items() if v is not None}
    rendered = api.post_ok(CHAT_RENDER, request)
    rendered["sampling_params"] = {**rendered["sampling_params"], **SAMPLING}
    rendered["parse_context"] = parse_context_of(rendered)
    rendered.pop("stream", None)
    return request, rendered


def _split(message: dict[str, Any]) -> tuple[Any, Any, list[tuple[str, Any]]]:
    """Content, reasoning and tool calls (name, parsed arguments) of a message; empty text counts as none."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "null")
        except ValueError:
            arguments = function.get("arguments")
        calls.append((function.get("name"), arguments))
    return message.get("content") or None, message.get("reasoning") or None, calls


def _tokens_choice(engine, rendered: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in rendered.items() if k not in ("output_mode", "parse_context")}
    return engine.post_ok(GENERATE, body)["choices"][0]


@pytest.mark.req("GENERATE-022")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_derender_mode_gives_chat_derenders_split(api, engine, target, capabilities, variant) -> None:
    capabilities.require("derender-output-mode")
    request, rendered = _rendered(api, target, capabilities, variant)
    generated = _tokens_choice(engine, rendered)
    out = engine.post_ok(GENERATE, {**rendered, "output_mode": "derender"})
    assert out.get("output_mode") == "derender", f"output_mode {out.get('output_mode')!r} answered"
    (choice,) = out["choices"]
    hidden = request.get("include_reasoning") is False and bool(capabilities.parsers)
    if not hidden:
        assert choice.get("token_ids") == generated["token_ids"], \
            "the derender mode's token_ids are not the ids the same seeded request generates"
    derendered = api.post_ok(CHAT_DERENDER, {
        "model": target.model, "chat_request": request, "prompt_token_ids": rendered["token_ids"],
        "prompt_tokens": len(rendered["token_ids"]),
        "generate_response": {"request_id": "tokenspec-req", "choices": [
            {"index": 0, "token_ids": generated["token_ids"], "stop_reason": generated.get("stop_reason"),
             "finish_reason": engine_finish_reason(generated.get("finish_reason"))}]}})["choices"][0]
    assert _split(choice["message"]) == _split(derendered["message"]), \
        f"derender mode {choice['message']} != chat derender {derendered['message']}"
    assert choice.get("finish_reason") == derendered.get("finish_reason")


def _joined(events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[int], Any, list[dict[str, Any]]]:
    """The deltas of a one-choice derender stream joined into a message, its ids, its finish_reason and its
    events' choices."""
    choices = [c for e in events for c in e.get("choices") or []]
    content, reasoning, ids, calls = "", "", [], {}
    for c in choices:
        delta = c.get("delta") or {}
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning") or ""
        ids += c.get("token_ids") or []
        for call in delta.get("tool_calls") or []:
            slot = calls.setdefault(call.get("index", 0), {"function": {"name": None, "arguments": ""}})
            function = call.get("function") or {}
            slot["function"]["name"] = function.get("name") or slot["function"]["name"]
            slot["function"]["arguments"] += function.get("arguments") or ""
    message = {"content": content, "reasoning": reasoning, "tool_calls": [calls[k] for k in sorted(calls)]}
    finish = next((c["finish_reason"] for c in reversed(choices) if c.get("finish_reason") is not None), None)
    return message, ids, finish, choices


@pytest.mark.req("GENERATE-023")
@pytest.mark.parametrize("variant", ["default", "thinking-off", "tools"])
def test_derender_mode_stream_joins_to_the_whole_answer(api, engine, target, capabilities, variant) -> None:
    capabilities.require("derender-output-mode-stream")
    _, rendered = _rendered(api, target, capabilities, variant)
    whole = engine.post_ok(GENERATE, {**rendered, "output_mode": "derender"})["choices"][0]
    events = list(engine.stream_events(GENERATE, {**rendered, "output_mode": "derender", "stream": True}))
    assert all(e.get("output_mode") == "derender" for e in events), "an event of the stream is not derender mode"
    message, ids, finish, choices = _joined(events)
    assert choices, "the stream held no choice"
    assert (choices[0].get("delta") or {}).get("role") == "assistant", "the first event does not open the message"
    assert choices[-1].get("finish_reason") is not None, "the last event of the choice has no finish_reason"
    assert _split(message) == _split(whole["message"]), f"streamed {message} != whole {whole['message']}"
    assert ids == (whole.get("token_ids") or []), "the streamed token_ids do not join to the whole answer's"
    assert finish == whole.get("finish_reason")


@pytest.mark.req("GENERATE-024")
@pytest.mark.parametrize("case", ["detokenize-false", "no-parse-context", "unknown-parse-context-key"])
def test_derender_mode_refusals(api, engine, target, capabilities, case) -> None:
    capabilities.require("derender-output-mode")
    _, rendered = _rendered(api, target, capabilities, "default")
    body = {**rendered, "output_mode": "derender"}
    if case == "detokenize-false":
        body["sampling_params"] = {**body["sampling_params"], "detokenize": False}
    else:
        if not capabilities.parsers:
            not_tested("the target runs no tool or reasoning parser, so a derender needs no parse_context")
        if case == "no-parse-context":
            body.pop("parse_context")
        else:
            body["parse_context"] = {**body["parse_context"], "tokenspec_newer_field": True}
    resp = engine.post(GENERATE, body)
    assert resp.status_code == 400, f"{case}: answered {resp.status_code}: {resp.text[:300]}"


def _abort(engine, ids: Any):
    return engine.post(ABORT, {"request_ids": ids})


@pytest.mark.req("GENERATE-025")
@pytest.mark.parametrize("form", ["string", "list"])
def test_abort_of_unknown_ids_is_accepted(engine, form) -> None:
    ids = "tokenspec-never-sent" if form == "string" else ["tokenspec-never-sent", "tokenspec-nor-this"]
    resp = _abort(engine, ids)
    assert resp.status_code == 200, f"abort of unknown ids answered {resp.status_code}: {resp.text[:300]}"


TRIES = 5  # each try is one long generation; one that proves nothing either way is made again
#: An abort proves something only when it was answered before this share of the generation's time had passed (the
#: stream's own, or until its unaborted twin's answer if sooner): then the engine had not finished the stream when it
#: took the abort, however far the stream's events lagged behind it.
EARLY = 0.5
#: Abort senders, each on its own connection opened before the stream: a loaded gateway may take seconds over one
#: abort, and the next one must not wait for it.
SENDERS = 3
#: Seconds between the senders' starts; each waits SENDERS times this after each answer, so together they send
#: about one abort every STAGGER seconds.
STAGGER = 0.1
#: What a gateway answers when the server behind it did not answer in time: an overloaded hop, not an answer of
#: the abort route (a run with nothing but these is no evidence either way).
GATEWAY_TIMEOUTS = frozenset({502, 504})


def _abort_until(aborter: SuiteClient, request_id: str, done: threading.Event, answered: list[Any],
                 delay: float) -> None:
    """Abort ``request_id`` from before its stream starts until it ends, noting when each abort was sent and answered:
    an abort of an id not yet running is a no-op and aborting is idempotent, so no well-timed single abort is needed."""
    if done.wait(delay):
        return
    while True:
        sent = time.monotonic()
        try:
            answer = _abort(aborter, [request_id])
        except Exception as exc:  # noqa: BLE001 - a dropped keep-alive connection; the next abort retries it
            answer = exc
        answered.append((sent, time.monotonic(), answer))  # answered when the call returned, not when it began
        if done.wait(STAGGER * SENDERS):
            return


def _generation_body(prompt: list[int], max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"token_ids": prompt, **extra,
            "sampling_params": {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}}


@dataclass
class _Twin:
    """The stream's unaborted twin: the same generation under another id, sent on its own connection once the stream's
    first event is in. The engine runs both side by side, so the twin ends about when the stream's generation does,
    under the very load the stream met (a loaded machine slows both alike), and its one answer has no stream of
    events to lag behind."""

    request_id: str
    started: float = 0.0
    ended: float | None = None
    problem: str = ""
    thread: threading.Thread | None = None

    def start(self, client: SuiteClient, body: dict[str, Any]) -> None:
        self.thread = threading.Thread(target=self._send, args=(client, body), daemon=True)
        self.thread.start()

    def wait(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout=timeout)

    def _send(self, client: SuiteClient, body: dict[str, Any]) -> None:
        self.started = time.monotonic()
        try:
            resp = client.post(GENERATE, body)
        except Exception as exc:  # noqa: BLE001 - a twin that broke is a clock missing, the test says so
            self.problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            return
        if resp.status_code != 200:
            self.problem = f"answered {resp.status_code}: {resp.text[:200]}"
            return
        self.ended = time.monotonic()


@dataclass
class _AbortedStream:
    """One aborted stream: its id count and finish_reason, when it started, sent its first event and ended, and each
    abort as (sent, answered, answer or exception); ``refused``: the stream's own gateway timeout, if it got one."""

    count: int
    finish: Any
    started: float
    running: float | None
    ended: float
    answered: list[Any]
    refused: str = ""

    def answers(self) -> list[Any]:
        """The answers of the abort route itself (a gateway's timeout is none)."""
        return [a for _, _, a in self.answered
                if not isinstance(a, Exception) and a.status_code not in GATEWAY_TIMEOUTS]

    def early_abort(self, deadline: float) -> float | None:
        """When (seconds after the stream's start) the first abort was answered 200 that was sent once the stream was
        running and answered within ``deadline`` seconds of its start, so while the engine was still generating."""
        return next((t - self.started for sent, t, a in sorted(self.answered, key=lambda x: x[1])
                     if not isinstance(a, Exception) and self.running is not None and sent >= self.running
                     and t - self.started <= deadline and a.status_code == 200), None)

    def timeline(self) -> str:
        first = "no event" if self.running is None else f"first event at {self.running - self.started:.1f} s"
        late = sorted(t - self.started for sent, t, a in self.answered if not isinstance(a, Exception)
                      and self.running is not None and sent >= self.running)
        timeouts = sum(1 for _, _, a in self.answered if not isinstance(a, Exception)
                       and a.status_code in GATEWAY_TIMEOUTS)
        return (f"{first}, {len(late)} aborts sent after it, the first answered at "
                + (f"{late[0]:.1f} s" if late else "never") + (f", {timeouts} gateway timeouts" if timeouts else ""))


def _aborted_stream(engine: SuiteClient, aborters: list[SuiteClient], prompt: list[int], ids: tuple[str, str],
                    max_tokens: int, twin: tuple[_Twin, SuiteClient] | None) -> _AbortedStream:
    """Stream a generation under ``ids`` (the id to abort by, the id sent) while the ``aborters`` abort it, each
    from its own thread and connection, staggered; the ``twin`` (and its client), if any, is sent once the first
    event is in (so the stream never waits behind it for a connection of a gateway's)."""
    abort_id, request_id = ids
    answered: list[Any] = []
    done = threading.Event()
    count, finish, running, refused = 0, None, None, ""
    senders = [threading.Thread(target=_abort_until, args=(aborter, abort_id, done, answered, i * STAGGER))
               for i, aborter in enumerate(aborters)]
    started = time.monotonic()
    for sender in senders:
        sender.start()
    # The events' shape is STREAM-*'s business: checking each of thousands here would take the CPU (and the GIL)
    # the abort threads need on a loaded machine, and an abort whose answer is read late proves nothing.
    engine.validate = False
    try:
        for event in engine.stream_events(GENERATE, _generation_body(prompt, max_tokens, stream=True,
                                                                     request_id=request_id)):
            if running is None:
                running = time.monotonic()
                if twin is not None:
                    twin[0].start(twin[1], _generation_body(prompt, max_tokens, request_id=twin[0].request_id))
            for choice in event.get("choices") or []:
                count += len(choice.get("token_ids") or [])
                finish = choice.get("finish_reason") or finish
    except AssertionError as exc:
        if not any(f"answered {status}:" in str(exc) for status in GATEWAY_TIMEOUTS):
            raise
        refused = str(exc)[:200]  # the gateway timed out on the engine: this try is no evidence either way
    finally:
        engine.validate = True
        done.set()
        for sender in senders:
            sender.join(timeout=60)
    stream = _AbortedStream(count, finish, started, running, time.monotonic(), answered, refused)
    if answered and all(isinstance(a, Exception) for _, _, a in answered):
        raise answered[0][2]  # no abort got an answer at all
    return stream


@pytest.mark.req("GENERATE-025")
def test_abort_ends_a_streamed_generation(engine, target, capabilities, codec, max_model_len) -> None:
    """A long greedy stream is aborted by the id its events report, known before it starts from how a one-token
    answer reports the request_id it was sent. Aborts go from the start, from several threads each on a connection
    of its own opened before the stream (neither the stream nor a slow abort can hold the next one back). A stream
    that ends "abort" passes. One that runs on is made again beside its twin, the same generation under another id,
    sent once the stream's first event is in and never aborted. The generation's time is the shorter of the stream's
    own and the time from the stream's start to the twin's answer (which has no events to lag behind): an abort sent
    after the stream's first event and answered before half of it came while the engine was still generating, even
    where the stream reached the client seconds late and the machine was loaded (both generations slow alike), so a
    stream that runs on then fails. An abort answered only later proves nothing (vLLM 0.32's engine, streaming to a
    gateway that reads at full speed, answered aborts 4.4 s late, after the whole generation), nor does a gateway's
    timeout on the engine (502/504), and the try is made again. The first try has no twin, so a server that honours
    aborts meets no extra load."""
    capabilities.require("generate-streaming")
    limit = target.transport.max_concurrency
    senders = SENDERS if limit is None else min(SENDERS, limit - 2)
    if senders < 1:
        not_tested(f"the abort test keeps a stream, its unaborted twin and an abort in flight at once;"
                   f" --max-concurrency allows this process {limit} requests")
    prompt = codec.encode("Hello")
    probe_id = "tokenspec-abort-probe"
    reported = engine.post_ok(GENERATE, {"token_ids": prompt, "request_id": probe_id,
                                         "sampling_params": {"max_tokens": 1}}).get("request_id") or ""
    if probe_id not in reported:
        not_tested(f"the engine reports request_id {reported!r} for {probe_id!r}, so the id to abort by is unknown")
    max_tokens = min(4000, max_model_len - len(prompt) - 1)
    clients = [SuiteClient(engine.base_url, engine.timeout, gate=engine.gate, role=engine.role,
                           transport=engine.transport) for _ in range(senders + 1)]
    twin_client, aborters = clients[0], clients[1:]
    tries = []
    try:
        for aborter in aborters:  # each abort connection is open before any stream starts
            warm = _abort(aborter, ["tokenspec-never-sent"])
            assert warm.status_code in (200, *GATEWAY_TIMEOUTS), \
                f"abort of an unknown id answered {warm.status_code}: {warm.text[:300]}"
        for attempt in range(TRIES):
            # A one-id generate first: a gateway's connection to its engine is fresh when the stream starts (one that
            # sat idle through the last try may be closed, and a new one can take seconds on a loaded machine).
            engine.post_ok(GENERATE, _generation_body(prompt, 1))
            tag = secrets.token_hex(4)
            request_id, twin = f"tokenspec-abort-{tag}", _Twin(f"tokenspec-twin-{tag}")
            stream = _aborted_stream(engine, aborters, prompt, (reported.replace(probe_id, request_id), request_id),
                                     max_tokens, (twin, twin_client) if attempt else None)
            refused = [a for a in stream.answers() if a.status_code != 200]
            assert not refused, (f"{len(refused)} of {len(stream.answers())} aborts answered {refused[0].status_code}"
                                 f": {refused[0].text[:300]}" if refused else "")
            if stream.finish == "abort":
                if attempt:  # the twin is not needed: end it (this server honours aborts)
                    _abort(aborters[0], [reported.replace(probe_id, twin.request_id)])
                    twin.wait(engine.timeout)
                assert stream.count < max_tokens, \
                    f"the stream ended 'abort' after all {stream.count} ids it was asked for"
                return
            twin.wait(engine.timeout + 5)
            if stream.refused:
                tries.append(f"the stream: {stream.refused}")
                continue
            if twin.ended is None:
                tries.append(f"{stream.finish} after {stream.count} ids, " + (
                    f"twin {twin.problem or 'never answered'}" if attempt else "no twin on the first try"))
                continue
            own, twins = stream.ended - stream.started, twin.ended - stream.started
            early = stream.early_abort(EARLY * min(own, twins))
            assert early is None, (
                f"an abort answered {early:.1f} s after the stream's start, before half the generation's time (the"
                f" stream took {own:.1f} s, its unaborted twin ended {twins:.1f} s after the stream's start), so while"
                f" the engine was still generating, left the stream running to {stream.finish!r} ({stream.count} ids;"
                f" {stream.timeline()})")
            tries.append(f"{stream.finish} after {stream.count} ids in {own:.1f} s, twin's end at {twins:.1f} s,"
                         f" {stream.timeline()}")
    finally:
        for client in clients:
            client.close()
    not_tested(f"in {TRIES} tries no abort sent after the stream's first event was answered before half the"
               f" generation's time: {'; '.join(tries)}")


@pytest.mark.req("GENERATE-026")
@pytest.mark.parametrize("body", [{}, "x", {"request_ids": 7}, [1]], ids=["no-ids", "string-body", "int-ids", "list"])
def test_abort_of_a_malformed_body_is_refused(engine, body) -> None:
    resp = engine.post(ABORT, body)
    assert resp.status_code == 400, f"abort body {json.dumps(body)} answered {resp.status_code}: {resp.text[:300]}"


def _assert_spans(spans: Any, n: int, what: str) -> None:
    assert isinstance(spans, list) and spans, f"{what}: weight_versions {spans!r}"
    assert spans[0]["start"] == 0 and spans[-1]["end"] == n, f"{what}: spans {spans} do not cover [0, {n})"
    gaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if a["end"] != b["start"]]
    assert not gaps, f"{what}: spans {spans} leave a gap"


@pytest.mark.req("GENERATE-027")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_weight_versions_cover_the_output(engine, capabilities, codec, stream) -> None:
    body = {"token_ids": codec.encode("Hello"), "sampling_params": {"max_tokens": 6, "temperature": 0}}
    if stream:
        capabilities.require("generate-streaming")
        choices = [c for e in engine.stream_events(GENERATE, {**body, "stream": True}) for c in e.get("choices") or []]
        final = choices[-1]
        n = sum(len(c.get("token_ids") or []) for c in choices)
    else:
        final = engine.post_ok(GENERATE, body)["choices"][0]
        n = len(final["token_ids"])
    if final.get("weight_versions") is None:
        not_tested("the engine reported no weight versions (null is allowed: no version was labelled)")
    _assert_spans(final["weight_versions"], n, "generate")


@pytest.mark.req("GENERATE-028")
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/completions"])
def test_coupled_answer_carries_the_engines_weight_versions(api, engine, target, capabilities, codec, route) -> None:
    capabilities.require("chat-completions")
    labels = engine.post_ok(GENERATE, {"token_ids": codec.encode("Hello"),
                                       "sampling_params": {"max_tokens": 2}})["choices"][0].get("weight_versions")
    if labels is None:
        not_tested("the engine reports no weight versions to carry")
    base = {"model": target.model, "max_tokens": 5, "temperature": 0}
    base.update({"messages": [{"role": "user", "content": "Hello"}]} if "chat" in route else {"prompt": "Hello"})
    asked = api.post_ok(route, {**base, "return_weight_versions": True})
    choice = asked["choices"][0]
    _assert_spans(choice.get("weight_versions"), asked["usage"]["completion_tokens"], route)
    versions = {s["version"] for s in choice["weight_versions"]}
    assert versions <= {s["version"] for s in labels}, f"{route}: versions {versions} the engine never reported"
    plain = api.post_ok(route, base)["choices"][0]
    assert plain.get("weight_versions") is None, f"weight_versions sent without return_weight_versions: {plain}"
