"""The verdict can be trusted away from the configuration the suite was built in (issue: no false alarms, no
false passes). Each test runs ``tokenspec run`` as a user does, against the reference frontend (alone, as a
GPU-less render host), a deliberately broken variant of it, or a labelled test double (``tests/doubles.py``),
and reads ``report.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from broken_server import frontend_config, running_broken_server
from doubles import forcing_ignoring_reference, llama3_style_copy, padded_copy, padded_engine, render_only_host
from frontend_server import running_app, running_frontend

from tokenspec.harness.frontend import create_app
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
SEED = "20261201"


def run_suite(url: str, tmp_path: Path, *args: str, name: str = "run") -> tuple[int, dict, str]:
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "tokenspec", "run", "--target", url, "--report", str(out),
                           "--seed", SEED, "--max-examples", "8", *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert (out / "report.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads((out / "report.json").read_text()), done.stdout + done.stderr


def outcomes(report: dict, outcome: str) -> list[dict]:
    return [t for t in report["tests"] if t["outcome"] == outcome]


def unexpected(report: dict) -> list[str]:
    return [f"{t['nodeid']}: {t['message'][:400]}" for t in report["tests"]
            if t["outcome"] in ("failed", "error", "xpassed")]


@pytest.mark.parametrize("reasoning", ["qwen3", "deepseek_r1"])
def test_a_correct_render_only_server_passes_with_only_its_url(tiny_model, tmp_path, reasoning) -> None:
    """The bundled frontend alone (no engine, tokenizer or reference): what it hosts passes, the rest is
    not tested, named in the headline with the flag that enables it; nothing is a failure."""
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, reasoning_parser=reasoning)
    with running_frontend(config) as url:
        code, report, out = run_suite(url, tmp_path, "-n", "2")
    assert not unexpected(report), "\n".join(unexpected(report))
    assert code == 0, out[-2000:]
    assert report["capabilities"]["parsers"]["reasoning"] == reasoning, "the probe names the family it saw"
    not_tested = outcomes(report, "not_tested")
    assert any("--engine" in t["message"] for t in not_tested), "generate is not tested, with the flag to enable it"
    assert any("--reference" in t["message"] for t in not_tested)
    assert any("--tokenizer" in t["message"] for t in not_tested)
    assert f"{len(not_tested)} not tested" in report["headline"]
    assert report["summary"]["passed"] > 150


def test_a_derender_that_puts_reasoning_into_content_fails_rather_than_lacking_reasoning(tiny_model,
                                                                                         tmp_path) -> None:
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_broken_server("derender-reasoning-into-content", config) as url:
        code, report, _ = run_suite(url, tmp_path, "-k", "test_parser_family_split", "-n", "0")
    decision = next(d for d in report["capabilities"]["decisions"] if d["feature"] == "reasoning")
    assert decision["status"] == "offered" and "broken parser" in decision["evidence"], decision
    failed = outcomes(report, "failed")
    assert any(t["nodeid"].endswith("[think-thinking]") for t in failed), [t["nodeid"] for t in failed]
    assert all(t["failed_requirements"] == ["DERENDER-001"] for t in failed)
    assert not outcomes(report, "unsupported")
    assert code == 1


def test_a_reference_that_ignores_the_forcing_gives_not_tested(tiny_model, tmp_path) -> None:
    """Forced-markup parity against a reference that answered newlines instead of the forced text compares
    nothing: not tested, with why (never a pass of 96 newlines against 96 newlines)."""
    from tokenizers import Tokenizer

    newline = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json")).encode("\n").ids[0]
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_frontend(config) as url, \
            running_app(forcing_ignoring_reference(DEFAULT_MODEL_NAME, url, newline)) as reference:
        code, report, out = run_suite(url, tmp_path, "--reference", reference, "-k", "test_forced_markup_parity",
                                      "-n", "0")
    forced = [t for t in report["tests"] if "[whole-" in t["nodeid"] or "[stream-" in t["nodeid"]]
    assert len(forced) == 8 and all(t["outcome"] == "not_tested" for t in forced), forced
    assert all("did not emit the forced" in t["message"] for t in forced)
    assert not outcomes(report, "passed")
    assert code == 0, out[-2000:]


def test_a_padded_vocabulary_is_no_false_failure(tiny_model, tmp_path) -> None:
    """config.json has more rows than the tokenizer has ids (real models pad): an engine that accepts and samples
    padding ids is correct, and ids past the rows are still out of the vocabulary."""
    padded = padded_copy(tiny_model.model_dir, tmp_path / "padded", rows=1024)
    config = frontend_config(padded, DEFAULT_MODEL_NAME)
    with running_frontend(config) as url, running_app(padded_engine(DEFAULT_MODEL_NAME, 1024, 1000)) as engine:
        code, report, out = run_suite(url, tmp_path, "--engine", engine, "--tokenizer", str(padded), "-n", "0",
                                      "-k", "test_sampled_ids_and_usage or test_bad_prompt_ids_rejected"
                                            " or test_one_choice_with_index_zero")
    assert not unexpected(report), "\n".join(unexpected(report))
    assert len(outcomes(report, "passed")) == 5, [t["nodeid"] for t in report["tests"]]
    assert code == 0, out[-2000:]


def test_a_llama3_style_tokenizer_is_no_false_failure(tiny_model, tmp_path) -> None:
    """Special tokens named as Llama 3 names them (no <|im_end|>, <|im_start|> or </s>): EOS and special ids
    come from the model folder, and the checks that need them run (they are not skipped)."""
    llama = llama3_style_copy(tiny_model.model_dir, tmp_path / "llama3")
    config = frontend_config(llama, DEFAULT_MODEL_NAME, reasoning_parser=None, tool_parser=None)
    with running_frontend(config) as url:
        code, report, out = run_suite(url, tmp_path, "--tokenizer", str(llama), "-n", "2")
    assert not unexpected(report), "\n".join(unexpected(report))
    ran = {t["nodeid"].split("[")[0] for t in outcomes(report, "passed")}
    assert {"test_derender.py::test_final_eos_is_not_text",
            "test_derender.py::test_special_tokens_are_not_text_unless_asked"} <= ran
    assert report["capabilities"]["parsers"] == {"reasoning": None, "tool": None}
    assert code == 0, out[-2000:]


@pytest.mark.parametrize(("pattern", "outcome", "code"), [
    ("'usage' is a required property", "xfailed", 0),
    ("content: expected", "failed", 1),
], ids=["same-cause", "new-cause"])
def test_a_known_failure_only_covers_its_own_cause(tiny_model, tmp_path, pattern, outcome, code) -> None:
    expectations = tmp_path / "expectations.yaml"
    expectations.write_text(
        "implementation: {name: broken, version: '0'}\nconfiguration: {fault: derender-drops-usage}\n"
        "expectations:\n  - {test: test_derender.py::test_chat_derender_answers_a_chat_completion,"
        f" requirement: DERENDER-002, pattern: \"{pattern}\", reason: usage is dropped}}\n")
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_broken_server("derender-drops-usage", config) as url:
        got, report, _ = run_suite(url, tmp_path, "-k", "test_chat_derender_answers_a_chat_completion", "-n", "0",
                                   "--expectations", str(expectations))
    (test,) = report["tests"]
    assert test["outcome"] == outcome, test
    assert got == code
    if outcome == "failed":
        assert test["message"].startswith("NEW CAUSE"), test["message"][:300]
    assert "broken 0 (fault=derender-drops-usage)" in report["expectations"]


VACUOUS = '''
import pytest
from tokenspec.suite.engine.gating import not_tested


@pytest.mark.req("RENDER-001")
def test_checks_nothing(api, target):
    api.get("/health", validate=False)


@pytest.mark.req("RENDER-001")
def test_checks_something(api, target):
    assert api.get("/health", validate=False).status_code == 200


@pytest.mark.req("RENDER-001")
def test_skips_by_hand():
    pytest.skip("works on my machine")


@pytest.mark.req("RENDER-001")
def test_precondition_missing():
    not_tested("the precondition did not hold")
'''


def test_a_test_that_checks_nothing_is_reported_not_passed(tiny_model, tmp_path) -> None:
    suite = tmp_path / "mysuite"
    suite.mkdir()
    (suite / "test_vacuous.py").write_text(VACUOUS)
    (suite / "pytest.ini").write_text((ROOT / "suite" / "pytest.ini").read_text())
    report_dir = tmp_path / "report"
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_frontend(config) as url:
        env = {**__import__("os").environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
               "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
        subprocess.run([sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini"),
                        "--rootdir", str(suite), "-p", "tokenspec.suite.plugin", "-p", "no:cacheprovider",
                        "--tokenspec-target", url, "--tokenspec-report", str(report_dir),
                        "--tokenspec-suite-dir", str(suite)], capture_output=True, text=True, timeout=120, env=env)
    report = json.loads((report_dir / "report.json").read_text())
    by_name = {t["nodeid"].split("::")[-1]: t for t in report["tests"]}
    assert by_name["test_checks_nothing"]["outcome"] == "error"
    assert "vacuous pass" in by_name["test_checks_nothing"]["message"]
    assert by_name["test_checks_something"]["outcome"] == "passed"
    assert by_name["test_skips_by_hand"]["outcome"] == "error", "a skip outside gating.py is never silent"
    assert by_name["test_precondition_missing"]["outcome"] == "not_tested"


def test_a_declaration_the_probe_cannot_confirm_is_a_failure(tiny_model, tmp_path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("implementation: {name: frontend, version: '0'}\n"
                       "parsers: {reasoning: deepseek_r1, tool: hermes}\n"
                       "features: {generate: true, tools: true, chat-render: true}\n")
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)  # qwen3, and no engine behind it
    with running_frontend(config) as url:
        code, report, _ = run_suite(url, tmp_path, "--profile", str(profile), "-k", "test_profile", "-n", "0")
    by_id = {t["nodeid"].split("[")[1].rstrip("]"): t for t in report["tests"]}
    assert by_id["generate"]["outcome"] == "failed" and "declares generate offered" in by_id["generate"]["message"]
    assert by_id["reasoning-parser"]["outcome"] == "failed"
    assert "the probe found qwen3" in by_id["reasoning-parser"]["message"]
    assert by_id["tools"]["outcome"] == "passed" and by_id["tool-parser"]["outcome"] == "passed"
    assert report["profile"] == str(profile) and code == 1


@pytest.mark.vllm
def test_a_render_only_host_behind_a_real_engine_is_judged_without_errors(tiny_model, vllm_engine, tmp_path) -> None:
    """Render alone (no derender, no /version, no max_model_len on its card) with vLLM's engine as engine and
    reference: nothing errors before its route gate, nothing is a false alarm, the prompt ids are judged against
    the reference's (PARITY-005), and what breaks on the engine's answers is listed apart from the verdict."""
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_app(render_only_host(create_app(config))) as url:
        code, report, out = run_suite(url, tmp_path, "-n", "2", "--engine", vllm_engine.url,
                                      "--reference", vllm_engine.url)
    assert not outcomes(report, "error"), [t["nodeid"] for t in outcomes(report, "error")]
    # The double's own two deviations, both SHOULD: no /version (UTIL-007), no max_model_len on its card (UTIL-008).
    own = {"test_utilities.py::test_version_is_an_object_with_a_version_string",
           "test_utilities.py::test_model_card_reports_max_model_len"}
    target_failures = [t for t in report["tests"] if t["outcome"] in ("failed", "xpassed")
                       and t["charged_to"] == "target"]
    assert {t["nodeid"] for t in target_failures} == own, [f"{t['nodeid']}: {t['message'][:300]}"
                                                             for t in target_failures]
    parity = [t for t in report["tests"] if "test_render_equals_the_reference_prompt" in t["nodeid"]]
    assert parity and parity[0]["outcome"] == "passed", parity
    derender = [t for t in report["tests"] if t["nodeid"].startswith("test_derender.py::")]
    assert derender and all(t["outcome"] == "not_tested" for t in derender), "derender is not hosted"
    engine = [t for t in report["tests"] if t["outcome"] == "failed" and t["charged_to"] == "engine"]
    if engine:  # vLLM 0.32's engine accepts some schema-invalid bodies (ERROR-015): its own deviations
        assert report["summary"]["other_servers"].get("engine") == len(engine)
        assert "failure(s) of the engine's answers" in report["headline"]
    assert code == 0, out[-3000:]



def test_require_judged_fails_a_run_that_left_a_must_requirement_unjudged(tiny_model, tmp_path) -> None:
    """--require-judged must: the same URL-only selection passes without the flag and fails with it, naming the
    generate requirement nobody judged; a selection that judges everything it cites passes either way."""
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_frontend(config) as url:
        plain, report, _ = run_suite(url, tmp_path, "-n", "0", "-k", "test_logprobs_shape", name="plain")
        gated, _, out = run_suite(url, tmp_path, "-n", "0", "-k", "test_logprobs_shape", "--require-judged", "must",
                                  name="gated")
        judged, _, _ = run_suite(url, tmp_path, "-n", "0", "-k", "test_chat_render_is_a_valid_generate_request",
                                 "--require-judged", "must", name="judged")
    assert plain == 0 and "GENERATE-012" in {u["id"] for u in report["unjudged"]}
    assert gated == 1 and "FAIL (--require-judged must)" in out and "GENERATE-012" in out, out[-2000:]
    assert judged == 0
