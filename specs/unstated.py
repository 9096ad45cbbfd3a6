"""The refusals a request schema names but cannot state, as predicates over the request body.

JSON Schema cannot compare two fields (min_tokens above max_tokens), know the deployment (max_model_len) or look
into another list (a tool_choice naming a declared tool), and a few stateable rules stay prose because
schemathesis's generator gives up on a schema with more conditionals. Each request schema lists those rules under
``x-tokenspec-unstated`` as ``rule-name: sentence``; this module holds one predicate per rule name, true when the
body provably breaks it. A rule that only the server can decide (the template refuses the conversation) has no
predicate and is never taken as the reason for a refusal.

The predicates are the spec's, written from vLLM's request validators; they judge a request, never a response, so
no server's answer decides whether its own refusal was right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Limits", "RULES", "UNDECIDABLE", "broken_rules", "declared_rules"]

_GREEDY = 1e-5  # vLLM's _SAMPLING_EPS: a temperature below it is greedy


@dataclass(frozen=True)
class Limits:
    """What a rule may need to know of the deployment: the context length its /v1/models reports, and the bounds a
    server may state in its own ``/openapi.json`` (``info.x-tokenspec-limits``): its max_logprobs (vLLM's default
    when unstated), its vocabulary, its engine's max_num_seqs, whether its engine scores prompt_logprob_token_ids and
    honours thinking_token_budget, whether it has beam search, and whether it has a tool or a reasoning parser. A
    bound nobody stated is None, and no rule that needs it is ever found broken."""

    max_model_len: int | None = None
    max_logprobs: int = 20
    vocab_size: int | None = None
    max_num_seqs: int | None = None
    prompt_logprob_token_ids: bool | None = None
    thinking_token_budget: bool | None = None
    use_beam_search: bool | None = None
    tool_parser: bool | None = None
    reasoning_parser: bool | None = None


def _int(value: Any) -> int | None:
    """An integer as JSON Schema counts one (2.0 is the integer 2)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _output_caps(body: Mapping[str, Any]) -> list[int]:
    """The output caps a body sets (chat and completions max_tokens, chat's max_completion_tokens, Responses'
    max_output_tokens)."""
    caps = (body.get(k) for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"))
    return [v for v in map(_int, caps) if v is not None]


#: A completions request without max_tokens asks for 16 (OpenAI's default, vLLM's CompletionRequest).
_COMPLETIONS_DEFAULT_MAX_TOKENS = 16


def _min_tokens_above_max(body: Mapping[str, Any], limits: Limits) -> bool:
    """Above an explicit cap, or, with none, above the default: 16 for completions, else the room the prompt leaves
    (never more than the context)."""
    least = _int(body.get("min_tokens"))
    caps = _output_caps(body)
    if not caps and "prompt" in body and "max_tokens" not in body:
        caps = [_COMPLETIONS_DEFAULT_MAX_TOKENS]
    elif not caps and limits.max_model_len is not None:
        caps = [limits.max_model_len]
    return least is not None and any(least > cap for cap in caps)


def _max_tokens_above_context(body: Mapping[str, Any], limits: Limits) -> bool:
    return limits.max_model_len is not None and any(cap > limits.max_model_len for cap in _output_caps(body))


def _truncate_above_context(body: Mapping[str, Any], limits: Limits) -> bool:
    size = _int(body.get("truncate_prompt_tokens"))
    return limits.max_model_len is not None and size is not None and size > limits.max_model_len


def _token_prompt_above_context(body: Mapping[str, Any], limits: Limits) -> bool:
    """Provable for token-id prompts only: a text prompt's length is the tokenizer's to say."""
    prompt = body.get("prompt")
    if limits.max_model_len is None or not isinstance(prompt, list) or not prompt:
        return False
    prompts = prompt if isinstance(prompt[0], list) else [prompt]
    return any(isinstance(p, list) and len(p) > limits.max_model_len for p in prompts)


def _tool_names(tools: Any) -> set[str]:
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
    return names


def _chosen_name(choice: Any) -> str | None:
    """The tool a named tool_choice picks, in the chat ({"function": {"name"}}), Messages ({"type": "tool",
    "name"}) or Responses ({"type": "function", "name"}) form; None for a mode or an unnamed choice."""
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    if isinstance(function, dict):
        return function.get("name") if isinstance(function.get("name"), str) else None
    if choice.get("type") in ("tool", "function") and isinstance(choice.get("name"), str):
        return choice["name"]
    return None


def _tool_choice_names_no_tool(body: Mapping[str, Any], _: Limits) -> bool:
    name = _chosen_name(body.get("tool_choice"))
    return name is not None and name not in _tool_names(body.get("tools"))


def _tool_block_names_no_tool(body: Mapping[str, Any], _: Limits) -> bool:
    """A Messages tool_addition / tool_removal block referencing a tool neither declared nor added before it."""
    declared = _tool_names(body.get("tools"))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            change = block.get("tool") if isinstance(block, dict) else None
            if not isinstance(change, dict):
                continue
            definition = change.get("definition")
            if isinstance(definition, dict) and isinstance(definition.get("name"), str):
                declared.add(definition["name"])
            elif change.get("name") not in declared:
                return True
    return False


def _thinking_budget_not_below_max(body: Mapping[str, Any], _: Limits) -> bool:
    thinking = body.get("thinking")
    budget = _int(thinking.get("budget_tokens")) if isinstance(thinking, dict) else None
    cap = _int(body.get("max_tokens"))
    remote = isinstance(body.get("kv_transfer_params"), dict) and body["kv_transfer_params"].get("do_remote_decode")
    return (thinking.get("type") == "enabled" and budget is not None and cap is not None and budget >= cap
            and not remote) if isinstance(thinking, dict) else False


def _top_logprobs_without_logprobs(body: Mapping[str, Any], _: Limits) -> bool:
    top = _int(body.get("top_logprobs"))
    return top is not None and top != 0 and body.get("logprobs") is not True


def _logprob_token_ids_unsupported(body: Mapping[str, Any], _: Limits) -> bool:
    """Chat: logprob_token_ids needs logprobs true and no beam search; completions: no beam search."""
    if body.get("logprob_token_ids") is None:
        return False
    needs_logprobs = "messages" in body and body.get("logprobs") is not True
    return needs_logprobs or body.get("use_beam_search") is True


def _continue_with_generation_prompt(body: Mapping[str, Any], _: Limits) -> bool:
    """add_generation_prompt defaults to true: vLLM's validator lets an absent one pass, the template does not."""
    return body.get("continue_final_message") is True and body.get("add_generation_prompt", True) in (True, None)


def _prompt_logprobs_with_stream(body: Mapping[str, Any], _: Limits) -> bool:
    return body.get("prompt_logprobs") not in (None, 0) and body.get("stream") is True


def _greedy_with_several_choices(body: Mapping[str, Any], _: Limits) -> bool:
    n, temperature = _int(body.get("n")), body.get("temperature")
    return (n is not None and n > 1 and isinstance(temperature, int | float) and not isinstance(temperature, bool)
            and temperature < _GREEDY)


def _structured_outputs_with_named_tool(body: Mapping[str, Any], _: Limits) -> bool:
    outputs = body.get("structured_outputs")
    return (isinstance(outputs, dict) and any(outputs.get(k) is not None for k in ("json", "regex", "choice"))
            and _chosen_name(body.get("tool_choice")) is not None)


def _previous_response_id_given(body: Mapping[str, Any], _: Limits) -> bool:
    return body.get("previous_response_id") is not None


def _prompt_tokens_length(body: Mapping[str, Any], _: Limits) -> bool:
    responses = body.get("generate_responses")
    return isinstance(responses, list) and any(
        isinstance(body.get(key), list) and len(body[key]) != len(responses) for key in ("prompt_tokens",
                                                                                        "prompt_token_ids"))


def _generated_choices(body: Mapping[str, Any]) -> Iterator[list[Any]]:
    """The choice lists of a derender body's generate response(s) or chunk."""
    responses = body.get("generate_responses")
    single = [body.get("generate_response"), body.get("generate_chunk")]
    for response in [*(responses if isinstance(responses, list) else []), *single]:
        choices = response.get("choices") if isinstance(response, dict) else None
        if isinstance(choices, list):
            yield choices


def _choice_index_repeated(body: Mapping[str, Any], _: Limits) -> bool:
    for choices in _generated_choices(body):
        indexes = [_int(c.get("index")) for c in choices if isinstance(c, dict)]
        if len(set(indexes)) != len(indexes):
            return True
    return False


def _above_server_bounds(body: Mapping[str, Any], limits: Limits) -> bool:
    longest = limits.max_model_len
    for choices in _generated_choices(body):
        for choice in (c for c in choices if isinstance(c, dict)):
            logprobs = choice.get("logprobs")
            content = logprobs.get("content") if isinstance(logprobs, dict) else None
            content = content if isinstance(content, list) else []
            lists = [choice.get("token_ids"), content]
            if longest is not None and any(isinstance(x, list) and len(x) > longest for x in lists):
                return True
            tops = (e.get("top_logprobs") for e in content if isinstance(e, dict))
            if limits.max_logprobs >= 0 and any(isinstance(t, list) and len(t) > limits.max_logprobs for t in tops):
                return True
    return False


def _sampling(body: Mapping[str, Any]) -> Mapping[str, Any]:
    params = body.get("sampling_params")
    return params if isinstance(params, dict) else {}


def _empty_choice(body: Mapping[str, Any], _: Limits) -> bool:
    outputs = _sampling(body).get("structured_outputs", body.get("structured_outputs"))
    return isinstance(outputs, dict) and outputs.get("choice") == []


def _empty_prompt_logprob_rows(body: Mapping[str, Any], _: Limits) -> bool:
    rows = _sampling(body).get("prompt_logprob_token_ids")
    return isinstance(rows, list) and not any(isinstance(row, list) and row for row in rows)


def _ids(value: Any) -> list[int]:
    return [i for i in map(_int, value) if i is not None] if isinstance(value, list) else []


def _id_past_vocabulary(body: Mapping[str, Any], limits: Limits) -> bool:
    """Detokenize's tokens, generate's token_ids, a completions prompt of ids (one list or several), and the
    stop_token_ids, allowed_token_ids and logprob_token_ids of a request or of its sampling_params."""
    size = limits.vocab_size
    prompt = body.get("prompt")
    prompts = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], list) else [prompt]
    ids = _ids(body.get("tokens")) + _ids(body.get("token_ids")) + [i for p in prompts for i in _ids(p)]
    for fields in (body, _sampling(body)):
        for key in ("stop_token_ids", "allowed_token_ids", "logprob_token_ids"):
            ids += _ids(fields.get(key))
    return size is not None and any(i >= size for i in ids)


def _routed_experts_start_past_prompt(body: Mapping[str, Any], _: Limits) -> bool:
    start, prompt = _int(_sampling(body).get("routed_experts_prompt_start")), body.get("token_ids")
    return start is not None and isinstance(prompt, list) and start > len(prompt)


def _n_above_engine_limit(body: Mapping[str, Any], limits: Limits) -> bool:
    """generate's sampling_params.n, or the coupled API's n."""
    n = _int(_sampling(body).get("n", body.get("n")))
    return limits.max_num_seqs is not None and n is not None and n > limits.max_num_seqs


def _prompt_logprob_token_ids_unavailable(body: Mapping[str, Any], limits: Limits) -> bool:
    rows = _sampling(body).get("prompt_logprob_token_ids")
    if rows is None:
        return False
    too_many = isinstance(rows, list) and limits.max_model_len is not None and len(rows) > limits.max_model_len - 1
    return limits.prompt_logprob_token_ids is False or too_many


def _thinking_budget_without_reasoning(body: Mapping[str, Any], limits: Limits) -> bool:
    budget = _sampling(body).get("thinking_token_budget", body.get("thinking_token_budget"))
    return limits.thinking_token_budget is False and budget is not None


def _logprobs_above_max_logprobs(body: Mapping[str, Any], limits: Limits) -> bool:
    """-1 asks for the whole vocabulary, which is above any max_logprobs but -1 (no limit)."""
    if limits.max_logprobs < 0:
        return False
    asked = [_int(body.get(k)) for k in ("top_logprobs", "prompt_logprobs")]
    if "prompt" in body:  # completions' logprobs is a count; chat's is a flag
        asked.append(_int(body.get("logprobs")))
    return any(n is not None and (n > limits.max_logprobs or n == -1) for n in asked)


def _beam_search_unavailable(body: Mapping[str, Any], limits: Limits) -> bool:
    return limits.use_beam_search is False and body.get("use_beam_search") is True


def _parser_needs_chat_request(body: Mapping[str, Any], limits: Limits) -> bool:
    """Streamed, prompt_token_ids is needed too (DERENDER-036)."""
    if not (limits.tool_parser or limits.reasoning_parser):
        return False
    return body.get("chat_request") is None or (body.get("stream") is True and body.get("prompt_token_ids") is None)


def _auto_tool_choice_needs_parser(body: Mapping[str, Any], limits: Limits) -> bool:
    """Chat and Responses say "auto"; Messages says {"type": "auto"}; absent or null is auto where tools are given."""
    choice = body.get("tool_choice")
    auto = choice in (None, "auto") or (isinstance(choice, dict) and choice.get("type") == "auto")
    tools = body.get("tools")
    return limits.tool_parser is False and isinstance(tools, list) and bool(tools) and auto


def _features_modalities_differ(body: Mapping[str, Any], _: Limits) -> bool:
    features = body.get("features")
    if not isinstance(features, dict):
        return False
    hashes, placeholders = features.get("mm_hashes"), features.get("mm_placeholders")
    return isinstance(hashes, dict) and isinstance(placeholders, dict) and set(hashes) != set(placeholders)


#: rule name (as ``x-tokenspec-unstated`` names it) -> whether a body provably breaks it.
RULES: dict[str, Callable[[Mapping[str, Any], Limits], bool]] = {
    "min-tokens-above-max-tokens": _min_tokens_above_max,
    "max-tokens-above-context": _max_tokens_above_context,
    "truncate-above-context": _truncate_above_context,
    "prompt-above-context": _token_prompt_above_context,
    "tool-choice-names-no-tool": _tool_choice_names_no_tool,
    "tool-block-names-no-tool": _tool_block_names_no_tool,
    "thinking-budget-not-below-max-tokens": _thinking_budget_not_below_max,
    "top-logprobs-without-logprobs": _top_logprobs_without_logprobs,
    "logprob-token-ids-unsupported": _logprob_token_ids_unsupported,
    "continue-with-generation-prompt": _continue_with_generation_prompt,
    "prompt-logprobs-with-stream": _prompt_logprobs_with_stream,
    "greedy-with-several-choices": _greedy_with_several_choices,
    "structured-outputs-with-named-tool": _structured_outputs_with_named_tool,
    "previous-response-id-given": _previous_response_id_given,
    "prompt-tokens-length": _prompt_tokens_length,
    "choice-index-repeated": _choice_index_repeated,
    "above-server-bounds": _above_server_bounds,
    "empty-choice": _empty_choice,
    "empty-prompt-logprob-rows": _empty_prompt_logprob_rows,
    "id-past-vocabulary": _id_past_vocabulary,
    "n-above-engine-limit": _n_above_engine_limit,
    "prompt-logprob-token-ids-unavailable": _prompt_logprob_token_ids_unavailable,
    "thinking-budget-without-reasoning": _thinking_budget_without_reasoning,
    "logprobs-above-max-logprobs": _logprobs_above_max_logprobs,
    "beam-search-unavailable": _beam_search_unavailable,
    "parser-needs-chat-request": _parser_needs_chat_request,
    "auto-tool-choice-needs-parser": _auto_tool_choice_needs_parser,
    "features-modalities-differ": _features_modalities_differ,
    "routed-experts-start-past-prompt": _routed_experts_start_past_prompt,
}
#: Rules only the server can decide (its chat template): named in the documents, never a reason.
UNDECIDABLE = frozenset({"template-refuses"})


def declared_rules(schema: Any, root: Any = None) -> dict[str, str]:
    """The ``x-tokenspec-unstated`` rules of a request schema: its own and its members' (allOf, and oneOf / anyOf,
    whose rules the predicates only find broken in a body of that member's shape). Local ``$ref``s are followed
    within ``root`` (the schema itself by default: schemathesis bundles a resolved schema's refs under it)."""
    root = schema if root is None else root
    found: dict[str, str] = {}
    if not isinstance(schema, dict):
        return found
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        found.update(declared_rules(target, root))
    rules = schema.get("x-tokenspec-unstated")
    if isinstance(rules, dict):
        found.update({str(k): str(v) for k, v in rules.items()})
    for member in [*(schema.get("allOf") or []), *(schema.get("oneOf") or []), *(schema.get("anyOf") or [])]:
        found.update(declared_rules(member, root))
    return found


def broken_rules(body: Any, declared: Mapping[str, str], limits: Limits) -> Iterator[str]:
    """The declared rules ``body`` provably breaks."""
    if not isinstance(body, dict):
        return
    for name in declared:
        predicate = RULES.get(name)
        if predicate is not None and predicate(body, limits):
            yield name
