"""Discover which endpoints and optional capabilities a target offers, before any test runs.

A test whose requirements name a feature the target does not offer is reported as ``unsupported`` (counted
apart), never as a pass and never as a failure. Probing is deliberately lenient: a capability counts as
offered when the probe request is answered with a 2xx; anything else (404, 400 "not configured", 501) means
not offered. Behaviour is judged later by the tests themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from tokenspec.suite.target import Codec, CodecUnavailable, Target

PROBE_TIMEOUT = 15.0


@dataclass
class Capabilities:
    offered: set[str] = field(default_factory=set)
    notes: dict[str, str] = field(default_factory=dict)

    def has(self, feature: str) -> bool:
        return feature in self.offered


def _ok(client: httpx.Client, url: str, body: dict) -> tuple[bool, httpx.Response | None]:
    try:
        resp = client.post(url, json=body)
    except httpx.HTTPError:
        return False, None
    return resp.status_code < 300, resp


def probe(target: Target, codec: Codec) -> Capabilities:
    caps = Capabilities()
    model = target.model
    user = [{"role": "user", "content": "Hello"}]
    with httpx.Client(timeout=PROBE_TIMEOUT) as c:
        ok, rendered = _ok(c, f"{target.url}/v1/chat/completions/render", {"model": model, "messages": user})
        if ok:
            caps.offered.add("chat-render")
        if _ok(c, f"{target.url}/v1/completions/render", {"model": model, "prompt": "Hello"})[0]:
            caps.offered.add("completions-render")
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
        if _ok(c, f"{target.url}/v1/chat/completions/render", {"model": model, "messages": user, "tools": [tool]})[0]:
            caps.offered.add("tools")
        # token-native needs the server's tokenizer_version (its /v1/models card) as the pin: an unpinned block
        # must be refused (TOKNAT-002), so probing without it would never find the capability.
        version = _tokenizer_version(c, target)
        if version is None:
            caps.notes["token-native"] = "the /v1/models card has no tokenizer_version"
        else:
            native = [{"role": "user", "content": [{"type": "input_tokens", "token_ids": [1, 2]}]}]
            body = {"model": model, "messages": native, "tokenizer_version": version}
            if _ok(c, f"{target.url}/v1/chat/completions/render", body)[0]:
                caps.offered.add("token-native")
        if _ok(c, f"{target.url}/tokenize", {"model": model, "prompt": "Hello"})[0]:
            caps.offered.add("tokenize")
        if _ok(c, f"{target.url}/detokenize", {"model": model, "tokens": [1]})[0]:
            caps.offered.add("detokenize")

        try:
            hello = codec.encode("Hello")
            caps.offered.add("codec")
        except CodecUnavailable as exc:
            caps.notes["codec"] = str(exc)
            hello = [1]
        response = {"request_id": "probe", "choices": [{"index": 0, "token_ids": hello, "finish_reason": "stop"}]}
        plain = {"model": model, "messages": user, "chat_template_kwargs": {"enable_thinking": False}}
        derender = {"model": model, "generate_response": response, "prompt_tokens": 1, "chat_request": plain}
        if _ok(c, f"{target.url}/v1/chat/completions/derender", derender)[0]:
            caps.offered.add("chat-derender")
        completions = {"model": model, "generate_responses": [response], "prompt_tokens": [1]}
        if _ok(c, f"{target.url}/v1/completions/derender", completions)[0]:
            caps.offered.add("completions-derender")
        chunk = {"request_id": "probe", "choices": [{"index": 0, "token_ids": hello, "finish_reason": None}]}
        stream = {
            "model": model,
            "stream": True,
            "generate_chunk": chunk,
            "stream_state": None,
            "prompt_tokens": 1,
            "prompt_token_ids": [1],
            "chat_request": plain,
        }
        ok, resp = _ok(c, f"{target.url}/v1/chat/completions/derender", stream)
        if ok and resp is not None and "stream_state" in resp.json():
            caps.offered.add("streaming-derender")
        if "codec" in caps.offered and "chat-derender" in caps.offered:
            think = codec.encode("<think>a</think>b")
            chat_request = {"model": model, "messages": user}
            body = {
                "model": model,
                "generate_response": {"choices": [{"index": 0, "token_ids": think, "finish_reason": "stop"}]},
                "prompt_tokens": 1,
                "chat_request": chat_request,
            }
            ok, resp = _ok(c, f"{target.url}/v1/chat/completions/derender", body)
            if ok and resp is not None and resp.json()["choices"][0]["message"].get("reasoning"):
                caps.offered.add("reasoning")

        if rendered is not None and rendered.status_code == 200:
            _probe_generate(c, target, rendered.json(), caps)
        if target.reference_url:
            try:
                if c.get(f"{target.reference_url}/v1/models").status_code == 200:
                    caps.offered.add("coupled")
            except httpx.HTTPError as exc:
                caps.notes["coupled"] = str(exc)
    return caps


def _tokenizer_version(c: httpx.Client, target: Target) -> str | None:
    """The target's ``tokenizer_version`` from the card of its model on ``/v1/models``, if it reports one."""
    try:
        cards = c.get(f"{target.url}/v1/models").json()["data"]
        card = next((card for card in cards if isinstance(card, dict) and card.get("id") == target.model), None)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    version = (card or {}).get("tokenizer_version")
    return version if isinstance(version, str) and version else None


def _probe_generate(c: httpx.Client, target: Target, rendered: dict, caps: Capabilities) -> None:
    """Engine features: each probe is a one-token generation with one option switched on."""
    url = f"{target.generate_url}/inference/v1/generate"
    base = {"token_ids": rendered["token_ids"], "model": rendered.get("model")}

    def gen(extra_params: dict, **top: object) -> dict | None:
        params = {"max_tokens": 1, "temperature": 0, **extra_params}
        ok, resp = _ok(c, url, {**base, "sampling_params": params, **top})
        return resp.json() if ok and resp is not None else None

    if gen({}) is None:
        return
    caps.offered.add("generate")
    if (out := gen({"logprobs": 1})) and out["choices"][0].get("logprobs"):
        caps.offered.add("logprobs")
    if (out := gen({"prompt_logprobs": 1})) and out.get("prompt_logprobs"):
        caps.offered.add("prompt-logprobs")
    if (out := gen({"detokenize": True}, output_mode="text")) and "text" in out["choices"][0]:
        caps.offered.add("text-output-mode")
    if (out := gen({"n": 2, "temperature": 1.0, "seed": 1})) and len(out["choices"]) == 2:
        caps.offered.add("multi-choice")
    if gen({"stop": ["zz"], "detokenize": True}) is not None:
        caps.offered.add("stop-strings")
