"""Failures grouped by cause (suite/reporting/causes.py) and token ids shown as text (suite/oracles/token_text.py):
one defect reads as one cause however many tests it broke, two defects never read as one, and a difference of ids reads
as the text that differs."""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from tokenspec.suite.engine.results import TestResult
from tokenspec.suite.oracles.token_text import decoded, first_difference, id_pairs
from tokenspec.suite.reporting.causes import causes, normalised, signature
from tokenspec.suite.reporting.report import cause_lines


def failed(nodeid: str, ids: list[str], message: str, **kw) -> TestResult:
    return TestResult(nodeid, ids, "MUST", "failed", 0.1, message=message, failed_requirements=ids, **kw)


def test_the_variable_parts_of_a_message_do_not_make_a_new_signature() -> None:
    a = failed("t.py::a[1]", ["RENDER-005"], "AssertionError: [RENDER-005] first difference at index 1: got [515, 198],"
               " expected [712, 311] (22 vs 30 ids)\nassert [1] == [2]")
    b = failed("t.py::a[2]", ["RENDER-005"], "AssertionError: [RENDER-005] first difference at index 7: got [9, 1, 4],"
               " expected [3, 3] (2 vs 3 ids)")
    assert signature(a) == signature(b) == (
        "RENDER-005 | first difference at index N: got [ids], expected [ids] (N vs N ids)")
    assert normalised("failure 1 of 2: AssertionError: field 'reasoning' is 'abc'") == "field '…' is '…'"


def test_one_broken_requirement_is_one_cause_and_two_are_two() -> None:
    dropped = [failed(f"test_golden.py::case[{i}]", ["RENDER-005"], f"[RENDER-005] differs at index {i}")
               for i in range(89)]
    # the same defect seen by a test that also charges another requirement joins the widest-broken one
    dropped.append(failed("test_utilities.py::tokenize", ["RENDER-005", "UTIL-002"], "At index 1 diff: 515 != 712"))
    other = failed("test_derender.py::usage", ["DERENDER-002"], "[DERENDER-002] no usage")
    engine = failed("test_generate.py::x", ["GENERATE-005"], "boom", charged_to="engine")
    found = causes([*dropped, other, engine, TestResult("t.py::ok", ["RENDER-002"], "MUST", "passed", 0.1)])
    assert [(c.requirement, len(c.tests), c.charged_to) for c in found] == [
        ("RENDER-005", 90, "target"), ("DERENDER-002", 1, "target"), ("GENERATE-005", 1, "engine")]
    assert len(found[0].ways) == 2, "the two ways the one cause showed are kept"
    assert found[0].id == "cause-RENDER-005" and found[2].id == "cause-GENERATE-005-engine"
    assert cause_lines(found)[0].startswith("RENDER-005 (MUST) x90: differs at index N (and 1 other way(s) it showed)")


def test_parity_differences_join_the_broken_stage_and_stand_alone_without_one() -> None:
    """The dropped system message also makes the split pipeline disagree with the coupled server (PARITY-005/006/008
    in a run with --reference): one cause, with parity among its ways. A defect seen only through parity (content
    changed after derender) is a cause of its own, and an engine's stage cause never takes the target's parity."""
    dropped = [failed(f"test_golden.py::case[{i}]", ["RENDER-005"], f"[RENDER-005] differs at index {i}")
               for i in range(5)]
    parity = [failed("test_parity.py::prompt", ["PARITY-005"], "[PARITY-005] prompt ids differ"),
              failed("test_parity.py::seeded", ["PARITY-006"], "[PARITY-006] content differs"),
              failed("test_parity.py::logprobs", ["PARITY-008"], "[PARITY-008] logprobs differ")]
    found = causes([*dropped, *parity])
    assert [(c.requirement, len(c.tests)) for c in found] == [("RENDER-005", 8)]
    assert {sig.partition(" |")[0] for sig, _ in found[0].ways} == {"RENDER-005", "PARITY-005", "PARITY-006",
                                                                      "PARITY-008"}
    assert found[0].example.nodeid.startswith("test_golden.py"), "the representative is a direct failure"
    alone = causes(parity[1:2])
    assert [(c.requirement, len(c.tests)) for c in alone] == [("PARITY-006", 1)]
    engine = causes([failed("test_generate.py::x", ["GENERATE-005"], "boom", charged_to="engine"), *parity[:1]])
    assert sorted(c.requirement for c in engine) == ["GENERATE-005", "PARITY-005"]


def test_token_ids_are_shown_as_text_with_the_runs_codec(tiny_model) -> None:
    tokenizer = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    system = "<|im_start|>system\nYou are terse.<|im_end|>\n"
    user = "<|im_start|>user\nHi<|im_end|>\n"
    expected, actual = tokenizer.encode(system + user).ids, tokenizer.encode(user).ids
    left, right = decoded(json.dumps(expected), json.dumps(actual), decode)
    assert left == system + user and right == user, "special tokens stay visible"
    line = first_difference(left, right)
    assert line.startswith("expected `<|im_start|>system\\nYou are terse.") and "got `<|im_start|>user" in line
    nested = decoded(json.dumps({"token_ids": expected, "n": 1}), json.dumps({"token_ids": actual, "n": 1}), decode)
    assert nested == (left, right), "a field of ids on both sides is decoded too"
    assert id_pairs('"stop"', '"length"') == [] and decoded("[1, 2]", "[1, 3]", lambda ids: 1 / 0) == ("", ""), \
        "no ids, or a codec that cannot decode them: nothing shown as text, the ids still are"


def test_a_flaky_hypothesis_failure_keeps_its_message_and_its_failing_example() -> None:
    """Hypothesis reports a failure that does not repeat (a server that answers at random) as a group: the report
    must still give the assertion first (the cause is read from it), the example to replay, and the verdict."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tokenspec.suite.plugin import _group_message

    calls = []

    @settings(database=None)
    @given(st.integers())
    def answers_at_random(x: int) -> None:
        calls.append(x)
        assert len(calls) != 3, "two renders of one request gave different token_ids"

    try:
        answers_at_random()
    except BaseExceptionGroup as group:
        message = _group_message(group)
    else:
        raise AssertionError("hypothesis did not report the failure")
    assert normalised(message) == "two renders of one request gave different token_ids"
    assert "Failing test case: answers_at_random(" in message and "produces unreliable results" in message
