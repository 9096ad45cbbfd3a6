"""The generated part of a golden file: many render and derender cases for one model family.

Every expectation comes from an oracle that is not the code under test, and each case records which:

- chat render: transformers' ``apply_chat_template`` after RENDER-023's conversation (``suite/render_oracle``),
  cross-checked against vLLM's render server when one is given ("transformers+vllm" when they agree);
- completions render: transformers' ``encode`` (special tokens added, as for a completions prompt);
- Messages and Responses render: the chat render oracle on the conversation the request maps to
  (``suite/dialects``, RENDER-026/RENDER-030), cross-checked against vLLM's render server like chat render;
- chat derender: vLLM's own derender with the family's parsers, then the spec's rules where vLLM 0.32 is known
  to deviate (DERENDER-006: a parsed tool call ends with finish_reason "tool_calls"). Every correction and every
  render disagreement is listed in the case (``disagreements``), never silently accepted.

Conversations come from the suite's ``rich_conversations``, ``anthropic_requests`` and ``responses_requests``
strategies, derandomised, so a rebuild with the same hypothesis version gives the same cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenspec.core.transport import Transport
from tokenspec.harness.models.families import FAMILY_PARSERS
from tokenspec.specs.parser_families import table_request
from tokenspec.suite.oracles.render_oracle import RenderOracle

#: Generated render cases per dialect (Messages, Responses) per family.
DIALECT_CASES = 40
_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_CALL2 = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
_XML_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
_G4_CALL = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
#: Generated texts per tool-call markup family; reasoning shapes are shared (Gemma 4's own reasoning markup comes
#: with its tool family: vLLM runs both as one parser).
_TOOL_OUTPUTS: dict[str, list[tuple[str, str]]] = {
    "hermes": [
        ("tool", f"<tool_call>\n{_CALL}\n</tool_call>"),
        ("two-tools", f"<tool_call>\n{_CALL}\n</tool_call>\n<tool_call>\n{_CALL2}\n</tool_call>"),
        ("content-then-tool", f"Sure.<tool_call>\n{_CALL}\n</tool_call>"),
        ("malformed-tool-json", '<tool_call>\n{"name": "get_weather", "arguments": {"city": </tool_call>'),
        ("tool-unicode-args", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京 😀"}}\n</tool_call>'),
    ],
    "qwen3_coder": [
        ("tool", _XML_CALL),
        ("two-tools", f"{_XML_CALL}\n<tool_call>\n<function=get_forecast>\n<parameter=city>\nOslo\n</parameter>\n"
                      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"),
        ("content-then-tool", f"Sure.\n\n{_XML_CALL}"),
        ("typed-args", "<tool_call>\n<function=get_forecast>\n<parameter=city>\nOslo\n</parameter>\n"
                       "<parameter=days>\n3\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n<parameter=metric>\n"
                       "false\n</parameter>\n<parameter=hours>\n[6, 12]\n</parameter>\n<parameter=options>\n"
                       '{"unit": "C"}\n</parameter>\n<parameter=note>\nnull\n</parameter>\n</function>\n</tool_call>'),
        ("unclosed-parameter", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis"),
        ("tool-unicode-args", _XML_CALL.replace("Paris", "東京 😀")),
    ],
    "gemma4": [
        ("g4-think", "<|channel>thought\nLet me think.<channel|>The answer is 4."),
        ("g4-unclosed", "<|channel>thought\nLet me think."),
        ("tool", _G4_CALL),
        ("two-tools", _G4_CALL + _G4_CALL.replace("Paris", "Oslo")),
        ("content-then-tool", f"Sure.{_G4_CALL}"),
        ("think-then-tool", f"<|channel>thought\nI need the weather.<channel|>{_G4_CALL}"),
        ("typed-args", '<|tool_call>call:get_forecast{city:<|"|>Oslo<|"|>,days:3,ratio:0.5,metric:false,'
                       'hours:[6,12],options:{unit:<|"|>C<|"|>},note:null}<tool_call|>'),
        ("malformed-call", "<|tool_call>call:get_weather{city:Paris<tool_call|>"),
        ("tool-unicode-args", _G4_CALL.replace("Paris", "東京 😀")),
    ],
    "llama3_json": [
        ("tool-parameters", '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
        ("tool-arguments", _CALL),
        ("two-tools", '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
                      '{"name": "get_weather", "parameters": {"city": "Oslo"}}'),
        ("text-then-json", 'Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}'),
        ("malformed-tool-json", '{"name": "get_weather", "parameters": {"city": '),
        ("tool-unicode-args", '{"name": "get_weather", "parameters": {"city": "東京 😀"}}'),
        ("tool-nested-args", '{"name": "get_weather", "parameters": {"where": {"city": "Paris", "days": [1, 2]}}}'),
    ],
}
_TEXT_OUTPUTS = [
    ("plain", "The answer is 4."),
    ("plain-unicode", "Héllo wörld 東京 😀👍🏽"),
    ("think", "<think>Let me think.</think>The answer is 4."),
    ("end-only", "Let me think.</think>The answer is 4."),
    ("unclosed", "<think>Let me think."),
    ("two-ends", "<think>a</think>b</think>c"),
    ("whitespace", "  \n spaced out \n\n"),
    ("json-text", '{"not": "a call"}'),
]


def _drawn(strategy: Any, n: int) -> list[dict[str, Any]]:
    """``n`` distinct bodies of a strategy, derandomised: the same ones on every rebuild (twice as many draws as
    needed, since a draw can repeat an earlier one)."""
    from hypothesis import HealthCheck, given, settings

    drawn: list[dict[str, Any]] = []

    @settings(max_examples=2 * n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(body: dict[str, Any]) -> None:
        if len(drawn) < n and body not in drawn:
            drawn.append(body)

    collect()
    return drawn


def _chat_bodies(n: int) -> list[dict[str, Any]]:
    from tokenspec.suite.oracles.strategies import rich_conversations

    return _drawn(rich_conversations(), n)


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST to the vLLM oracle; ``url`` may end with ``#NAME``, the model name that server serves."""
    url, _, served = url.partition("#")
    if served:
        body = {**body, "model": served}
        if "chat_request" in body:
            body["chat_request"] = {**body["chat_request"], "model": served}
    with Transport().client(timeout=60) as client:
        response = client.post(f"{url}{path}", json=body)
    return response.status_code, response.json()


def render_cases(oracle: RenderOracle, model: str, vllm_url: str | None, n: int,
                 disagreements: list[str], tools: bool = True) -> list[dict[str, Any]]:
    """Chat render cases; ``tools``: the vLLM server runs a tool parser (one without refuses every tools case, which
    the suite then does not apply to it either, so those are not cross-checked)."""
    cases = []
    for i, body in enumerate(_chat_bodies(n)):
        case: dict[str, Any] = {"id": f"chat-{i:03d}", "kind": "render", "requirements": ["RENDER-005", "RENDER-023"],
                                "feature": "tools" if body.get("tools") else None, "request": body}
        try:
            case["expect"] = {"token_ids": oracle.prompt_ids(body)}
        except Exception as exc:  # noqa: BLE001 - the template refused the conversation: the server must too
            case["expect"] = {"status": 400, "reason": str(exc)[:200]}
        case["oracles"] = ["transformers"]
        if vllm_url and (tools or not case["feature"]):
            _cross_check(case, vllm_url, "/v1/chat/completions/render", {"model": model, **body}, disagreements)
        cases.append(case)
    return cases


#: Per dialect: its render route, the requirements a case judges, and the mapping to the chat request it stands for.
_DIALECTS = {
    "messages-render": ("/v1/messages/render", ["RENDER-026", "RENDER-027"], "anthropic_requests", "messages_as_chat"),
    "responses-render": ("/v1/responses/render", ["RENDER-030", "RENDER-031"], "responses_requests",
                         "responses_as_chat"),
}


def dialect_cases(oracle: RenderOracle, model: str, vllm_url: str | None, n: int,
                  disagreements: list[str], tools: bool = True) -> list[dict[str, Any]]:
    """Messages and Responses render cases: the template oracle on the mapped conversation (never the frontend's
    converter), cross-checked against vLLM's render server as chat render's are; a disagreement is listed, the
    oracle's ids kept."""
    from tokenspec.suite.oracles import dialects, strategies

    cases = []
    for kind, (path, requirements, strategy, mapping) in _DIALECTS.items():
        for i, body in enumerate(_drawn(getattr(strategies, strategy)(), n)):
            request = {"model": model, **body}
            case: dict[str, Any] = {"id": f"{kind.split('-')[0]}-{i:03d}", "kind": kind, "requirements": requirements,
                                    "feature": "tools" if body.get("tools") else None, "request": body}
            try:
                case["expect"] = {"token_ids": oracle.prompt_ids(getattr(dialects, mapping)(request))}
            except Exception as exc:  # noqa: BLE001 - the template refused the conversation: the server must too
                case["expect"] = {"status": 400, "reason": str(exc)[:200]}
            case["oracles"] = ["transformers"]
            if vllm_url and (tools or not case["feature"]):
                _cross_check(case, vllm_url, path, request, disagreements)
            cases.append(case)
    return cases


def _cross_check(case: dict[str, Any], vllm_url: str, path: str, request: dict[str, Any],
                 disagreements: list[str]) -> None:
    status, answer = _post(vllm_url, path, request)
    theirs = {"token_ids": answer["token_ids"]} if status == 200 else {"status": 400}
    mine = {k: v for k, v in case["expect"].items() if k != "reason"}
    if theirs == mine or (status >= 400 and "status" in mine):
        case["oracles"].append("vllm-render")
        return
    if status == 200 and "token_ids" in mine:
        ids = answer["token_ids"]
        k = next((i for i, (x, y) in enumerate(zip(ids, mine["token_ids"], strict=False)) if x != y),
                 min(len(ids), len(mine["token_ids"])))
        note = (f"{case['id']}: vLLM render's {len(ids)} ids differ from transformers' {len(mine['token_ids'])} "
                f"at index {k}")
    else:
        note = f"{case['id']}: vLLM render answered {status}, transformers {mine.get('status', 200)}"
    case["disagreements"] = [note]
    disagreements.append(note)


def completions_cases(oracle: RenderOracle) -> list[dict[str, Any]]:
    prompts: list[tuple[str, Any]] = [
        ("string", "Hello, world"), ("string-unicode", "Grüße aus 東京 😀"), ("string-specials", "<|im_end|> <think>"),
        ("list-of-strings", ["first prompt", "second prompt"]), ("token-ids", oracle.encode("Hello world")),
        ("list-of-token-id-lists", [oracle.encode("Hello"), oracle.encode(" wörld 東京")]),
    ]
    cases = []
    for name, prompt in prompts:
        if isinstance(prompt, str):
            expect = [oracle.encode(prompt, True)]
        elif all(isinstance(p, str) for p in prompt):
            expect = [oracle.encode(p, True) for p in prompt]
        elif all(isinstance(p, int) for p in prompt):
            expect = [list(prompt)]
        else:
            expect = [list(p) for p in prompt]
        cases.append({"id": f"completions-{name}", "kind": "completions-render", "requirements": ["RENDER-005"],
                      "feature": "completions-render", "request": {"prompt": prompt},
                      "expect": {"token_ids": expect}, "oracles": ["transformers"]})
    return cases


def _outputs(tool_parser: str | None) -> list[tuple[str, str]]:
    return _TEXT_OUTPUTS + (_TOOL_OUTPUTS.get(tool_parser or "", []))


def _observed(choice: dict[str, Any]) -> dict[str, Any]:
    message = choice["message"]
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or []]
    return {"content": message.get("content") or None,
            "reasoning": message.get("reasoning") or message.get("reasoning_content") or None,
            "tool_calls": calls, "finish_reason": choice["finish_reason"]}


def derender_cases(oracle: RenderOracle, model: str, family: str, vllm_url: str,
                   disagreements: list[str]) -> list[dict[str, Any]]:
    """Chat derender cases whose expectation is vLLM's answer with the family's parsers (spec-corrected)."""
    tool_parser, reasoning_parser = FAMILY_PARSERS[family]
    cases = []
    variants = ["thinking", "thinking-off"] if reasoning_parser else ["thinking-off"]
    finishes = [("stop", "stop"), ("length", "length")]
    for shape, text in _outputs(tool_parser):
        ids = oracle.encode(text, False)
        for variant in variants:
            for finish_name, finish in finishes:
                if finish_name == "length" and variant == "thinking-off" and reasoning_parser:
                    continue  # enough coverage of length with thinking on
                request = table_request(model, tool_parser is not None, variant)  # specs/parsers.yaml's
                n = 2 if shape == "plain" and finish == "stop" else 1
                choices = [{"index": k, "token_ids": ids, "finish_reason": finish} for k in range(n)]
                body = {"model": model, "generate_response": {"request_id": "golden", "choices": choices},
                        "chat_request": request, "prompt_tokens": 7}
                cases.append(_recorded(f"derender-{shape}-{variant}-{finish_name}", body, text, tool_parser,
                                       reasoning_parser, vllm_url, disagreements))
    # the last character's bytes cut short: the decoder must not emit half a character
    cut = oracle.encode("Prix: 5 €", False)
    body = {"model": model, "generate_response": {"request_id": "golden", "choices": [
        {"index": 0, "token_ids": cut[:-1] if len(cut) > 1 else cut, "finish_reason": "length"}]},
        "chat_request": {"model": model, "messages": [{"role": "user", "content": "Price?"}],
                         "chat_template_kwargs": {"enable_thinking": False}}, "prompt_tokens": 7}
    cases.append(_recorded("derender-partial-utf8-end", body, "Prix: 5 €", tool_parser, reasoning_parser, vllm_url,
                           disagreements))
    return cases


def _recorded(case_id: str, body: dict[str, Any], text: str, tool_parser: str | None, reasoning_parser: str | None,
              vllm_url: str, disagreements: list[str]) -> dict[str, Any]:
    status, answer = _post(vllm_url, "/v1/chat/completions/derender", body)
    if status != 200:
        raise RuntimeError(f"vLLM's derender refused golden case {case_id}: {status} {answer}")
    expect, changed = _expected_choices(answer)
    notes = [f"{case_id} choice {k}: vLLM 0.32 keeps finish_reason stop after a parsed tool call; DERENDER-006 says"
             " tool_calls" for k in changed]
    disagreements.extend(notes)
    case = {"id": case_id, "kind": "derender-recorded", "requirements": ["DERENDER-001", "DERENDER-006"],
            "parsers": {"tool": tool_parser, "reasoning": reasoning_parser}, "output": text, "request": body,
            "expect": {"choices": expect}, "oracles": ["vllm-derender"] + (["spec:DERENDER-006"] if notes else [])}
    if notes:
        case["disagreements"] = notes
    return case


def _expected_choices(answer: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """vLLM's derendered choices as the golden file expects them, and which of them DERENDER-006 changed: a parsed
    tool call turns finish_reason stop into tool_calls."""
    expect = [_observed(c) for c in sorted(answer["choices"], key=lambda c: c["index"])]
    changed = [k for k, choice in enumerate(expect) if choice["tool_calls"] and choice["finish_reason"] == "stop"]
    for k in changed:
        expect[k]["finish_reason"] = "tool_calls"
    return expect, changed


def family_folder(family: str, model_dir: Path | None = None) -> Path:
    """The family's model folder: built into ``model_dir``, or into the cache (deterministic, seconds)."""
    from tokenspec.harness.models import build
    from tokenspec.harness.processes import cache_dir

    target = model_dir or cache_dir() / "families" / family
    return build(target, family).model_dir


def family_golden(family: str, model_dir: Path | None, out_dir: Path, *, vllm_url: str | None = None,
                  conversations: int = 130) -> tuple[Path, int]:
    """``tokenspec golden build --family``: build the folder, start vLLM's render server with the family's
    parsers unless ``vllm_url`` is given, and write the golden file; returns it and its disagreement count."""
    from contextlib import nullcontext

    from tokenspec.campaigns.golden_build import build_golden
    from tokenspec.harness.implementations import vllm

    folder = family_folder(family, model_dir)
    name = json.loads((folder / "tokenspec-model.json").read_text())["name"]
    tool, reasoning = FAMILY_PARSERS[family]
    server = None if vllm_url else vllm.VllmServer(vllm.find_vllm("auto"), "render", folder, name,
                                                    extra_args=vllm.parser_args(tool, reasoning))
    with server if server is not None else nullcontext():
        url = vllm_url or server.url  # type: ignore[union-attr]

        def corpus(oracle: RenderOracle, model: str, disagreements: list[str]) -> list[dict[str, Any]]:
            return [*render_cases(oracle, model, url, conversations, disagreements, tool is not None),
                    *completions_cases(oracle),
                    *dialect_cases(oracle, model, url, DIALECT_CASES, disagreements, tool is not None),
                    *derender_cases(oracle, model, family, url, disagreements)]

        path = build_golden(folder, out_dir, family=family, corpus=corpus)
    rerecord_changed(path, folder, name, family)
    return path, len(json.loads(path.read_text())["disagreements"])


def rerecord_changed(path: Path, folder: Path, name: str, family: str) -> None:
    """Record the derender cases again on each later vLLM release in which the family's parsers read outputs
    differently (specs/parsers.yaml ``changed``), as ``expect_in[generation]``: the suite holds a target of that
    generation to it, where it would otherwise have nothing to expect. A release not installed is skipped, and the
    cases stay unjudged there."""
    from tokenspec.golden import RECORDED_WITH
    from tokenspec.harness.implementations.base import Configuration
    from tokenspec.harness.implementations.vllm_release import VllmRelease
    from tokenspec.harness.processes import ServerProcess, free_port
    from tokenspec.specs.catalogue import read_generations
    from tokenspec.specs.parser_families import reading_changed

    tool, reasoning = FAMILY_PARSERS[family]
    doc = json.loads(path.read_text())
    cases = [c for c in doc["cases"] if c["kind"] == "derender-recorded"]
    for generation in reading_changed(reasoning, tool, RECORDED_WITH, list(read_generations())):
        release = VllmRelease(f"{generation}.0")
        if not cases or not release.installed():
            continue
        command = release.render_command(Configuration(folder, name, family, tool, reasoning))
        with ServerProcess(f"vLLM {release.release} render", command, env=release.environment(), port=free_port(),
                           expect="about 25 s on CPU") as server:
            for case in cases:
                status, answer = _post(server.url, "/v1/chat/completions/derender", case["request"])
                if status != 200:
                    raise RuntimeError(f"vLLM {release.release}'s derender refused golden case {case['id']}: {status}")
                case.setdefault("expect_in", {})[generation] = {"choices": _expected_choices(answer)[0]}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
