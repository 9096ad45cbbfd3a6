"""What a run did not judge, and whose answer broke what it did: no-server units of suite/reporting/coverage.py, the
role-aware verdict (suite/engine/results.py) and the constraint walker (suite/oracles/constraints.py)."""

from __future__ import annotations

from tokenspec.specs.openapi import request_schema
from tokenspec.suite.engine.results import TestResult, exit_code, summarise
from tokenspec.suite.oracles.builders import chat_derender, choice, completions_derender, generate_response
from tokenspec.suite.oracles.constraints import violations
from tokenspec.suite.reporting.coverage import blind, unjudged
from tokenspec.suite.reporting.report import headline

ENGINE_HINT = "not tested: generate: not hosted: POST /inference/v1/generate answered 404; pass --engine URL (x)"


def result(outcome: str, ids: list[str], message: str = "", nodeid: str = "t.py::a", **kw) -> TestResult:
    return TestResult(nodeid, ids, "MUST", outcome, 0.1, message=message, **kw)


def test_a_requirement_is_unjudged_only_when_no_test_of_it_ran_its_checks() -> None:
    results = [result("passed", ["RENDER-001"]), result("not_tested", ["RENDER-001"], ENGINE_HINT, "t.py::b"),
               result("not_tested", ["GENERATE-001"], ENGINE_HINT, "t.py::c"),
               result("unsupported", ["TOKNAT-001"], "unsupported: token-native: no card", "t.py::d"),
               result("xfailed", ["DERENDER-001"], "known", "t.py::e")]
    never = {u.id: u for u in unjudged(results)}
    assert "RENDER-001" not in never and "DERENDER-001" not in never, "a pass or a known failure judges"
    assert never["GENERATE-001"].state == "not_tested"
    assert never["GENERATE-001"].enable == ("pass --engine URL (x)",), "the flag that would judge it"
    assert never["TOKNAT-001"].state == "unsupported"
    assert never["RENDER-002"].state == "no_test", "a requirement no test of the run cites is listed too"
    gaps = {u.id for u in blind(results, "must")}
    assert "GENERATE-001" in gaps and "TOKNAT-001" not in gaps and "RENDER-002" not in gaps, (
        "--require-judged fails on requirements the run's tests cite but could not judge, not on the target's"
        " declared absences nor on deselected ones")
    assert "requirements never judged" in headline(results)


def test_a_failure_of_the_engines_answer_is_listed_apart_from_the_targets_verdict() -> None:
    engine = result("failed", ["GENERATE-005"], "boom", charged_to="engine")
    assert exit_code([engine]) == 0, "the verdict is the target's"
    summary = summarise([engine])
    assert summary.by_level["MUST"]["failed"] == 0 and summary.others == {"engine": 1}
    assert "1 failure(s) of the engine's answers" in headline([engine])
    assert exit_code([result("failed", ["GENERATE-005"], "boom")]) == 1, "the same failure on the target counts"


def test_every_constraint_of_the_embedded_generate_response_is_violated_once() -> None:
    body = chat_derender("m", generate_response(choice([5, 6])))
    found = {(v.where, v.constraint.split()[0]) for v in violations("/v1/chat/completions/derender", "post", body)}
    for wanted in [("generate_response.choices[0].finish_reason", "enum"), ("prompt_tokens", "minimum"),
                   ("generate_response.choices[0].token_ids[0]", "minimum"), ("generate_response.choices", "required"),
                   ("generate_response.output_mode", "enum"), ("chat_request.messages", "minItems")]:
        assert wanted in found, f"{wanted} not violated; found {sorted(found)[:20]} ..."
    validator = request_schema("/v1/completions/derender", "post")
    body = completions_derender("m", [generate_response(choice([5]))])
    cases = violations("/v1/completions/derender", "post", body)
    assert validator.is_valid(body) and cases
    assert all(not validator.is_valid(c.body) for c in cases), "the spec's validator is the oracle of every case"
    assert len({str(c.body) for c in cases}) == len(cases), "no case is sent twice"


def test_the_banner_line_names_the_commonest_reasons_in_whole_words() -> None:
    from tokenspec.suite.reporting.coverage import blind_spot_line

    key = {"level": "MUST", "state": "not_judged", "enable": ["pass --api-key-env NAME (the variable holding it)"],
           "reasons": ["api-key: the run sends the target no API key (how a key-protected server refuses is unseen)"]}
    engine = {"level": "MUST", "state": "not_judged", "enable": ["pass --engine URL"],
              "reasons": ["generate: not hosted: GET /inference/v1/generate answered 404 on every URL of the run"]}
    line = blind_spot_line([engine, engine, key, {"level": "SHOULD", "state": "no_test"}])
    assert line == ("3 MUST never judged: 2 generate: not hosted (pass --engine URL),"
                    " 1 api-key: the run sends the target no API key (pass --api-key-env NAME)"), line
    long = {**engine, "reasons": ["generate: " + "word " * 30]}
    assert blind_spot_line([long]).endswith("word… (pass --engine URL)")
    assert blind_spot_line([]) == ""
