"""The rules the documents name but cannot state (specs/unstated.py): each predicate finds its rule broken in a
body that breaks it and only there, and the documents and the predicates name the same rules."""

from __future__ import annotations

from typing import Any

import pytest

from tokenspec.specs.openapi import DOCUMENTS, load_document
from tokenspec.specs.unstated import RULES, UNDECIDABLE, Limits, broken_rules, declared_rules

LIMITS = Limits(max_model_len=2048, max_logprobs=20, vocab_size=1000, max_num_seqs=128,
                prompt_logprob_token_ids=False, thinking_token_budget=False,
                use_beam_search=False, tool_parser=False, reasoning_parser=True)
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
TOOLS = [{"type": "function", "function": {"name": "get_weather"}}]

#: rule -> (a body that breaks it, the nearest body that does not)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "min-tokens-above-max-tokens": ({**CHAT, "min_tokens": 9, "max_tokens": 8}, {**CHAT, "min_tokens": 8,
                                                                                  "max_tokens": 8}),
    "max-tokens-above-context": ({**CHAT, "max_completion_tokens": 2049}, {**CHAT, "max_completion_tokens": 2048}),
    "truncate-above-context": ({"prompt": "a", "truncate_prompt_tokens": 2049},
                               {"prompt": "a", "truncate_prompt_tokens": 2048}),
    "prompt-above-context": ({"prompt": [[1] * 2049]}, {"prompt": [[1] * 2048]}),
    "tool-choice-names-no-tool": ({**CHAT, "tools": TOOLS, "tool_choice": {"type": "function",
                                                                           "function": {"name": "other"}}},
                                  {**CHAT, "tools": TOOLS, "tool_choice": {"type": "function",
                                                                           "function": {"name": "get_weather"}}}),
    "tool-block-names-no-tool": (
        {"messages": [{"role": "system", "content": [{"type": "tool_removal",
                                                      "tool": {"type": "tool_reference", "name": "x"}}]}]},
        {"messages": [{"role": "system", "content": [
            {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {"name": "x"}}},
            {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "x"}}]}]}),
    "thinking-budget-not-below-max-tokens": ({"max_tokens": 2048, "thinking": {"type": "enabled",
                                                                               "budget_tokens": 2048}},
                                             {"max_tokens": 2049, "thinking": {"type": "enabled",
                                                                               "budget_tokens": 2048}}),
    "top-logprobs-without-logprobs": ({**CHAT, "top_logprobs": 2}, {**CHAT, "top_logprobs": 2, "logprobs": True}),
    "logprob-token-ids-unsupported": ({**CHAT, "logprob_token_ids": [1]},
                                      {**CHAT, "logprob_token_ids": [1], "logprobs": True}),
    "continue-with-generation-prompt": ({**CHAT, "continue_final_message": True},
                                        {**CHAT, "continue_final_message": True, "add_generation_prompt": False}),
    "prompt-logprobs-with-stream": ({"prompt": "a", "prompt_logprobs": 1, "stream": True},
                                    {"prompt": "a", "prompt_logprobs": 0, "stream": True}),
    "greedy-with-several-choices": ({"prompt": "a", "n": 2, "temperature": 0.0},
                                    {"prompt": "a", "n": 2, "temperature": 0.5}),
    "structured-outputs-with-named-tool": (
        {**CHAT, "tools": TOOLS, "structured_outputs": {"regex": "a"},
         "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        {**CHAT, "tools": TOOLS, "structured_outputs": {"regex": "a"}, "tool_choice": "auto"}),
    "previous-response-id-given": ({"input": "a", "previous_response_id": ""}, {"input": "a",
                                                                               "previous_response_id": None}),
    "prompt-tokens-length": ({"generate_responses": [{}, {}], "prompt_tokens": [1]},
                             {"generate_responses": [{}, {}], "prompt_tokens": [1, 1]}),
    "choice-index-repeated": ({"generate_response": {"choices": [{"index": 0}, {"index": 0.0}]}},
                              {"generate_response": {"choices": [{"index": 0}, {"index": 1}]}}),
    "above-server-bounds": (
        {"generate_chunk": {"choices": [{"index": 0, "logprobs": {"content": [{"top_logprobs": [{}] * 21}]}}]}},
        {"generate_chunk": {"choices": [{"index": 0, "logprobs": {"content": [{"top_logprobs": [{}] * 20}]}}]}}),
    "empty-choice": ({"token_ids": [1], "sampling_params": {"structured_outputs": {"choice": []}}},
                     {"token_ids": [1], "sampling_params": {"structured_outputs": {"choice": ["a"]}}}),
    "features-modalities-differ": (
        {"token_ids": [1], "features": {"mm_hashes": {"image": []}, "mm_placeholders": {"audio": []}}},
        {"token_ids": [1], "features": {"mm_hashes": {"image": []}, "mm_placeholders": {"image": []}}}),
    "empty-choice-chat": ({**CHAT, "structured_outputs": {"choice": []}}, {**CHAT, "structured_outputs": {}}),
    "empty-prompt-logprob-rows": ({"token_ids": [1], "sampling_params": {"prompt_logprob_token_ids": [[]]}},
                                  {"token_ids": [1], "sampling_params": {"prompt_logprob_token_ids": [[], [5]]}}),
    "id-past-vocabulary": ({"tokens": [5, 1000.0]}, {"tokens": [5, 999]}),
    "id-past-vocabulary-prompt": ({"prompt": [[5], [1000]]}, {"prompt": [[5], [999]]}),
    "id-past-vocabulary-stop": ({**CHAT, "stop_token_ids": [1000]}, {**CHAT, "stop_token_ids": [999]}),
    "id-past-vocabulary-sampling": ({"token_ids": [1], "sampling_params": {"logprob_token_ids": [1000]}},
                                    {"token_ids": [1], "sampling_params": {"logprob_token_ids": [999]}}),
    "routed-experts-start-past-prompt": ({"token_ids": [1, 2], "sampling_params": {"routed_experts_prompt_start": 3}},
                                         {"token_ids": [1, 2], "sampling_params": {"routed_experts_prompt_start": 2}}),
    "n-above-engine-limit": ({"token_ids": [1], "sampling_params": {"n": 129}},
                             {"token_ids": [1], "sampling_params": {"n": 128}}),
    "prompt-logprob-token-ids-unavailable": (
        {"token_ids": [1], "sampling_params": {"prompt_logprob_token_ids": [[5]]}},
        {"token_ids": [1], "sampling_params": {"prompt_logprob_token_ids": None}}),
    "thinking-budget-without-reasoning": ({**CHAT, "thinking_token_budget": 0},
                                          {**CHAT, "thinking_token_budget": None}),
    "logprobs-above-max-logprobs": ({"prompt": "a", "logprobs": 21}, {"prompt": "a", "logprobs": 20}),
    "beam-search-unavailable": ({**CHAT, "use_beam_search": True}, {**CHAT, "use_beam_search": False}),
    "parser-needs-chat-request": ({"generate_response": {}}, {"generate_response": {}, "chat_request": CHAT}),
    "parser-needs-chat-request-stream": ({"stream": True, "generate_chunk": {}, "chat_request": CHAT},
                                         {"stream": True, "generate_chunk": {}, "chat_request": CHAT,
                                          "prompt_token_ids": [1]}),
    "auto-tool-choice-needs-parser": ({**CHAT, "tools": TOOLS}, {**CHAT, "tools": TOOLS, "tool_choice": "none"}),
    "auto-tool-choice-needs-parser-messages": ({**CHAT, "tools": TOOLS, "tool_choice": {"type": "auto"}},
                                               {**CHAT, "tools": [], "tool_choice": {"type": "auto"}}),
}


def _rule(case: str) -> str:
    """A case is named after its rule, or its rule and a suffix for a second shape of body."""
    return case if case in RULES else next(r for r in RULES if case.startswith(f"{r}-"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rule_is_broken_only_by_a_body_that_breaks_it(case: str) -> None:
    rule = _rule(case)
    broken, kept = CASES[case]
    assert list(broken_rules(broken, {rule: ""}, LIMITS)) == [rule]
    assert list(broken_rules(kept, {rule: ""}, LIMITS)) == []


def test_integral_floats_count_as_integers_and_defaults_as_caps() -> None:
    """JSON Schema's integer 5.0; completions' default max_tokens 16; chat's default, the context."""
    rule = {"min-tokens-above-max-tokens": ""}
    assert list(broken_rules({**CHAT, "min_tokens": 9.0, "max_tokens": 8}, rule, LIMITS))
    assert list(broken_rules({"prompt": "a", "min_tokens": 17}, rule, LIMITS))
    assert not list(broken_rules({"prompt": "a", "min_tokens": 17, "max_tokens": None}, rule, LIMITS))
    assert list(broken_rules({**CHAT, "min_tokens": 2049}, rule, LIMITS))
    assert not list(broken_rules({**CHAT, "min_tokens": 2049}, rule, Limits()))  # no context known: not provable


def test_a_bound_the_server_did_not_state_decides_nothing() -> None:
    """Without the server's own statement of its vocabulary, engine batch size or runner, no body breaks those."""
    for rule in ("id-past-vocabulary", "n-above-engine-limit", "prompt-logprob-token-ids-unavailable",
                 "thinking-budget-without-reasoning", "beam-search-unavailable", "parser-needs-chat-request",
                 "auto-tool-choice-needs-parser"):
        assert not list(broken_rules(CASES[rule][0], {rule: ""}, Limits(max_model_len=2048)))
    assert list(broken_rules({"n": 129, "messages": []}, {"n-above-engine-limit": ""}, LIMITS))  # the coupled API


def test_logprob_counts_above_the_servers_limit() -> None:
    """-1 (the whole vocabulary) is above a limit; chat's logprobs is a flag, not a count."""
    rule = {"logprobs-above-max-logprobs": ""}
    assert list(broken_rules({**CHAT, "logprobs": True, "top_logprobs": -1}, rule, LIMITS))
    assert list(broken_rules({**CHAT, "prompt_logprobs": 21}, rule, LIMITS))
    assert not list(broken_rules({**CHAT, "logprobs": True, "top_logprobs": 20}, rule, LIMITS))
    assert not list(broken_rules({"prompt": "a", "logprobs": -1}, rule, Limits(max_logprobs=-1)))


def _documented() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in DOCUMENTS:
        schemas = load_document(name).get("components", {}).get("schemas", {})
        for schema in schemas.values():
            found.update(declared_rules(schema))
    return found


def test_the_documents_and_the_predicates_name_the_same_rules() -> None:
    documented = set(_documented())
    assert documented - set(RULES) - UNDECIDABLE == set(), "a rule the documents name has no predicate"
    assert set(RULES) | UNDECIDABLE == documented, "a predicate or undecidable rule no document names"
    assert {_rule(case) for case in CASES} == set(RULES)


def test_a_refs_rules_are_followed_within_a_bundled_schema() -> None:
    bundled = {"allOf": [{"$ref": "#/x-bundled/a"}], "x-bundled": {"a": {"x-tokenspec-unstated": {"r": "s"}}}}
    assert declared_rules(bundled) == {"r": "s"}
