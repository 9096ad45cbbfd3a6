"""Check the checker: the conformance suite, run as a user runs it, must fail against a broken server.

Each case starts the reference frontend behind ONE planted defect of the ``tokenspec mutants`` catalogue
(``tests/broken_server.py``, a labelled test double) on loopback, runs ``tokenspec run`` in a subprocess with
a tight ``-k`` selection, and reads
``report.json``: the test aimed at the broken requirement must be ``failed``, its message must name the
problem, and the run must exit 1 (0 where the requirement is a SHOULD, whose failure is reported but passes the
run). The runs of the module start together (one server and one subprocess per fault) and are awaited by a module
fixture; each test then checks one.

A control run of the same selections against the same wrapper without a fault must pass with exit 0, so a
test that fails for an unrelated reason (a bad selection, a missing fixture) cannot make a fault case pass
vacuously.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from broken_server import frontend_config, running_broken_server

from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, BuildResult
from tokenspec.harness.mutants.defects import DEFECTS

RUN_TIMEOUT = 180


@dataclass(frozen=True)
class Case:
    fault: str
    selection: str  # the -k expression
    breaks: tuple[str, ...]  # nodeids (relative to suite/) that must fail
    says: tuple[str, ...]  # regexes every failing test's message must match: the problem, named
    exit_code: int = 1  # a MUST failure fails the run; a SHOULD-only one (0) is reported and passes it


CASES = [
    Case("derender-drops-usage", "test_chat_derender_answers_a_chat_completion",
         ("test_derender.py::test_chat_derender_answers_a_chat_completion",),
         (r"POST /v1/chat/completions/derender -> 200: response violates the spec schema",
          r"'usage' is a required property")),
    Case("error-without-error-object", "test_malformed_json_rejected and derender",
         ("test_errors.py::test_malformed_json_rejected[chat-derender]",
          "test_errors.py::test_malformed_json_rejected[completions-derender]"),
         (r"-> 400: response violates the spec schema", r"'error' is a required property")),
    Case("500-on-bad-input", "test_fuzz_operation and chat/completions/render and negative",
         ("test_fuzz.py::test_fuzz_operation[POST /v1/chat/completions/render negative]",),
         (r"answered 500: Internal Server Error", r"curl ")),
    Case("render-drops-default-params", "test_sampling_parameter_survives_chat_render and default",
         ("test_render.py::test_sampling_parameter_survives_chat_render[n-default]",
          "test_render.py::test_sampling_parameter_survives_chat_render[top_k-default]"),
         (r"(n=1|top_k=0) was set but sampling_params has no (n|top_k)",)),
    Case("render-nondeterministic", "test_chat_render_is_deterministic",
         ("test_render.py::test_chat_render_is_deterministic",),
         (r"At index \d+ diff: \d+ != \d+", r"Failing test case")),
    Case("derender-usage-off-by-one", "test_usage_arithmetic",
         ("test_derender.py::test_usage_arithmetic",),
         (r"assert \d+ == \d+\n \+  where \d+ = sum\(",)),  # completion_tokens != sum of the choice lengths
    Case("stream-derender-drops-last-char", "test_chat_deltas_concatenate_to_the_non_stream_content",
         ("test_stream_derender.py::test_chat_deltas_concatenate_to_the_non_stream_content",),
         (r"assert '(.*)' == '\1.'",)),  # the streamed text is the whole text short of its last character
    Case("derender-replacement-char", "test_no_replacement_character_for_valid_utf8",
         ("test_derender.py::test_no_replacement_character_for_valid_utf8",),
         ("\ufffd",)),
    Case("derender-accepts-negative-ids", "test_negative_ids_rejected",
         ("test_derender.py::test_negative_ids_rejected[token_ids]",
          "test_derender.py::test_negative_ids_rejected[prompt_token_ids]"),
         (r"assert 200 == 400",)),
    Case("derender-reasoning-into-content", "test_parser_family_split and think-thinking",
         ("test_derender.py::test_parser_family_split[think-thinking]",),
         (r"\[DERENDER-001\] split differs from", r"reasoning: expected 'Let me think.', got None")),
    Case("oversized-500", "test_oversized_body_rejected and chat-render",
         ("test_errors.py::test_oversized_body_rejected[chat-render]",),
         (r"a 64 MiB body answered 500",)),
    Case("render-request-id-random", "test_request_id_follows_the_client and header",
         ("test_render.py::test_request_id_follows_the_client[chat-header]",
          "test_render.py::test_request_id_follows_the_client[completions-header-over-body]"),
         (r"\[RENDER-037\] request_id '(chatcmpl|cmpl)-[0-9a-f]{16}', wanted '(chatcmpl|cmpl)-tokenspec-h'",),
         exit_code=0),  # RENDER-037 is a SHOULD
    Case("messages-render-merges-inline-system", "test_messages_inline_system_turns and middle",
         ("test_render_dialects.py::test_messages_inline_system_turns[middle-with-system]",
          "test_render_dialects.py::test_messages_inline_system_turns[middle-without-system]"),
         (r"\[RENDER-038\] Messages \(inline system kept in place\) render gave \d+ ids",)),
    Case("render-reasoning-kwargs-from-defaults", "test_reasoning_parser_kwargs_are_the_templates_arguments",
         ("test_render.py::test_reasoning_parser_kwargs_are_the_templates_arguments",),
         (r"\[RENDER-039\] the engine's parser would get \{'enable_thinking': '<absent>', 'tokenspec_flag'",)),
    Case("render-reasoning-ended-ignores-prompt", "test_reasoning_ended_is_the_parsers_verdict_on_the_prompt",
         ("test_render.py::test_reasoning_ended_is_the_parsers_verdict_on_the_prompt[thinking-off]",),
         (r"\[RENDER-040\] reasoning_ended False with thinking off; the prompt ends '.*</think>.*', so wanted True",)),
    Case("render-drops-empty-collections", "test_field_at_the_end_of_its_range_is_rendered and empty",
         ("test_render.py::test_field_at_the_end_of_its_range_is_rendered[chat-allowed_token_ids-empty]",
          "test_render.py::test_field_at_the_end_of_its_range_is_rendered[completions-logit_bias-empty]"),
         (r"\[RENDER-041\] \{'(allowed_token_ids|logit_bias)': (\[\]|\{\})\} rendered, but sampling_params has no",)),
    Case("render-clamps-out-of-range", "test_field_just_outside_its_range_is_refused and (temperature or seed)",
         ("test_render.py::test_field_just_outside_its_range_is_refused[chat-temperature-above-2]",
          "test_render.py::test_field_just_outside_its_range_is_refused[completions-seed-above-int64]"),
         (r"\[RENDER-042\] \{\"(temperature|seed)\": [-0-9.]+\} answered 200",)),
    Case("render-refuses-empty-tools", "test_empty_tools_list_is_no_tools",
         ("test_render.py::test_empty_tools_list_is_no_tools[no-choice]",
          "test_render.py::test_empty_tools_list_is_no_tools[auto]"),
         (r"\[RENDER-043\] \{'tools': \[\].*\} answered 400",)),
    Case("render-max-tokens-not-lowered", "test_max_tokens_above_the_room_is_lowered_to_it",
         ("test_render.py::test_max_tokens_above_the_room_is_lowered_to_it[max_tokens]",
          "test_render.py::test_max_tokens_above_the_room_is_lowered_to_it[max_completion_tokens]"),
         (r"\[RENDER-011\] max_(completion_)?tokens (\d+) with a \d+-token prompt in a \d+-token context rendered to"
          r" max_tokens \2, not the room \d+",)),
    Case("render-null-as-zero", "test_null_field_renders_as_an_absent_one",
         ("test_render.py::test_null_field_renders_as_an_absent_one[chat]",
          "test_render.py::test_null_field_renders_as_an_absent_one[completions]"),
         (r"\[RENDER-044\] fields sent as null rendered unlike the request without them: .*'temperature'",)),
]
#: Run URL-only, as a render/derender host without a GPU is judged (no --tokenizer, no --engine): each of these
#: behaviours lives in derender, so the suite must judge it from derender's own answers to generate responses it
#: writes itself.
URL_ONLY_CASES = [
    Case("derender-keeps-stop-string", "test_text_ends_at_the_stop_string or test_stop_string_cut_anywhere",
         ("test_derender.py::test_text_ends_at_the_stop_string[cut-/v1/chat/completions/derender]",
          "test_derender.py::test_text_ends_at_the_stop_string[cut-/v1/completions/derender]",
          "test_derender.py::test_stop_string_cut_anywhere[/v1/chat/completions/derender]",
          "test_derender.py::test_stop_string_cut_anywhere[/v1/completions/derender]"),
         (r"hello th|\[DERENDER-022\] stop string",)),
    Case("derender-stringifies-arguments", "test_tool_call_arguments_keep_every_json_type",
         ("test_derender.py::test_tool_call_arguments_keep_every_json_type",),
         (r"\[DERENDER-027\] the markup's arguments .* came back as",)),
    Case("derender-drops-logprobs", "test_tokens_logprobs_become_chat_logprobs or test_top_logprobs_count",
         ("test_derender.py::test_tokens_logprobs_become_chat_logprobs",
          "test_derender.py::test_top_logprobs_count_is_what_was_asked[1]"),
         (r"\[DERENDER-0(18|23)\] the generate response carried tokens-mode logprobs",)),
    # The frontend's card reports its tokenizer fingerprint as tokenizer_version: its golden file applies.
    Case("render-drops-system", "test_golden_case and (system-user-unicode or chat-001)",
         ("test_golden.py::test_golden_case[system-user-unicode]", "test_golden.py::test_golden_case[chat-001]"),
         (r"\[RENDER-005\] render differs from (transformers|the hand-written golden case)",)),
]
VLLM_CASES = [
    # On the tiny model the reference's free greedy output is all reasoning or whitespace, so same-token parity
    # forces readable content with structured outputs in part of its examples; without that it was blind here.
    Case("derender-content-upper", "test_same_token_parity or (test_forced_markup_parity and whole-reasoning)",
         ("test_parity.py::test_same_token_parity", "test_parity.py::test_forced_markup_parity[whole-reasoning]"),
         (r'choices\[0\]\.content: ".*" != ".*"',)),
    # The tiny model's greedy first choice under a constraint that lets a reasoning block open is "<": a render
    # that loosens the request's constraint so (vllm-rs 0.34) shows on every case whose constraint starts otherwise.
    Case("render-structured-outputs-allow-think",
         "test_structured_outputs_constrain_generate_as_the_coupled_endpoint and (regex or choice)",
         ("test_render.py::test_structured_outputs_constrain_generate_as_the_coupled_endpoint[regex]",
          "test_render.py::test_structured_outputs_constrain_generate_as_the_coupled_endpoint[choice]"),
         (r"\[RENDER-046\] render -> generate of .* gave other ids than the coupled endpoint: .*structural_tag",)),
]
CONTROL = "control"
assert {c.fault for c in CASES + URL_ONLY_CASES + VLLM_CASES} <= set(DEFECTS), "every case plants a catalogue defect"


@dataclass
class Run:
    code: int
    tests: dict[str, dict]
    output: str


class SuiteRun:
    """One ``tokenspec run`` exactly as a user types it, in its own interpreter, started now and awaited later
    (the runs of a module go in parallel: each costs seconds of imports and hypothesis shrinking)."""

    def __init__(self, url: str, model_dir: Path | None, report: Path, selection: str, extra: tuple[str, ...]
                 ) -> None:
        self.report = report
        folder = ["--tokenizer", str(model_dir)] if model_dir is not None else []
        self.cmd = [sys.executable, "-m", "tokenspec", "run", "--target", url, *folder,
                    "--report", str(report), "-n", "0", "--max-examples", "10", "--seed", "1", "-k", selection,
                    *extra]
        self.log = report.with_suffix(".log")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> Run:
        code = self.process.wait(timeout=RUN_TIMEOUT)  # on timeout, _run_all kills what is still running
        output = f"$ {shlex.join(self.cmd)}\n{self.log.read_text(errors='replace')[-6000:]}"
        report = self.report / "report.json"
        tests = {t["nodeid"]: t for t in json.loads(report.read_text())["tests"]} if report.exists() else {}
        return Run(code, tests, output)


def either(cases: list[Case]) -> str:
    return " or ".join(f"({case.selection})" for case in cases)


def _selected(request: pytest.FixtureRequest, test_name: str, param: str) -> list[str]:
    """The fault names (or CONTROL) of this module's tests that this session will run, so a -k run of one case
    starts only its own server and suite run."""
    names = []
    for item in request.session.items:
        if getattr(item, "module", None) is request.module and item.originalname == test_name:
            value = item.callspec.params.get(param)
            names.append(CONTROL if value is None else getattr(value, "fault", value))
    return names


def _run_all(wanted: list[str], cases: list[Case], config: FrontendConfig, model_dir: Path | None, reports: Path,
             extra: tuple[str, ...] = ()) -> dict[str, Run]:
    by_name = {c.fault: c for c in cases}
    with ExitStack() as servers:
        started: dict[str, SuiteRun] = {}
        try:
            for name in wanted:
                url = servers.enter_context(running_broken_server(None if name == CONTROL else name, config))
                selection = either(cases) if name == CONTROL else by_name[name].selection
                started[name] = SuiteRun(url, model_dir, reports / name, selection, extra)
            return {name: run.wait() for name, run in started.items()}
        finally:
            for run in started.values():
                if run.process.poll() is None:
                    run.process.kill()
                    run.process.wait()


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tiny_model: BuildResult, tmp_path_factory) -> dict[str, Run]:
    wanted = _selected(request, "test_suite_catches_the_fault", "case")
    if _selected(request, "test_control_without_a_fault_passes", "none"):
        wanted.append(CONTROL)
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    return _run_all(wanted, CASES, config, tiny_model.model_dir, tmp_path_factory.mktemp("fault-runs"))


def assert_caught(run: Run, case: Case) -> None:
    for nodeid in case.breaks:
        assert nodeid in run.tests, f"{nodeid} did not run; ran {sorted(run.tests)}\n{run.output}"
        result = run.tests[nodeid]
        assert result["outcome"] == "failed", (
            f"SUITE BLIND SPOT: fault {case.fault!r} did not fail {nodeid} (outcome {result['outcome']!r},"
            f" message {result['message'][:300]!r})\n{run.output}")
        for pattern in case.says:
            assert re.search(pattern, result["message"]), (
                f"{nodeid}: the message does not match {pattern!r}: {result['message'][:1500]}")
        if "test_fuzz" not in nodeid:  # the fuzz test prints a curl per failing case in its message instead
            assert result["reproduce"].startswith("curl "), f"{nodeid}: a failure must carry a curl command"
    assert run.code == case.exit_code, f"the run must exit {case.exit_code}, got {run.code}\n{run.output}"


def assert_clean(run: Run, cases: list[Case]) -> None:
    expected = {nodeid for case in cases for nodeid in case.breaks}
    assert expected <= set(run.tests), f"the control did not run {sorted(expected - set(run.tests))}\n{run.output}"
    bad = {nodeid: t["outcome"] for nodeid, t in run.tests.items() if t["outcome"] != "passed"}
    assert not bad, f"the control run without a fault did not pass: {bad}\n{run.output}"
    assert run.code == 0, run.output


@pytest.mark.parametrize("none", [None], ids=["same-selections"])
def test_control_without_a_fault_passes(runs: dict[str, Run], none: None) -> None:
    assert_clean(runs[CONTROL], CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.fault for c in CASES])
def test_suite_catches_the_fault(runs: dict[str, Run], case: Case) -> None:
    assert_caught(runs[case.fault], case)


# -- URL-only: no model folder, no engine -------------------------------------------------------------------


@pytest.fixture(scope="module")
def url_only_runs(request: pytest.FixtureRequest, tiny_model: BuildResult, tmp_path_factory) -> dict[str, Run]:
    wanted = _selected(request, "test_url_only_run_catches_the_fault", "fault")
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    return _run_all(wanted, URL_ONLY_CASES, config, None, tmp_path_factory.mktemp("url-only-runs"))


@pytest.mark.parametrize("fault", [None, *(c.fault for c in URL_ONLY_CASES)],
                         ids=[CONTROL, *(c.fault for c in URL_ONLY_CASES)])
def test_url_only_run_catches_the_fault(url_only_runs: dict[str, Run], fault: str | None) -> None:
    if fault is None:
        assert_clean(url_only_runs[CONTROL], URL_ONLY_CASES)
    else:
        assert_caught(url_only_runs[fault], next(c for c in URL_ONLY_CASES if c.fault == fault))


# -- parity: the real vLLM engine is the reference (and the engine) ----------------------------------------


@pytest.fixture(scope="module")
def parity_runs(request: pytest.FixtureRequest, vllm_engine, tiny_model: BuildResult, tmp_path_factory
                ) -> dict[str, Run]:
    wanted = _selected(request, "test_parity_catches_the_fault", "fault")
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, engine_url=vllm_engine.url)
    extra = ("--engine", vllm_engine.url, "--reference", vllm_engine.url)
    return _run_all(wanted, VLLM_CASES, config, tiny_model.model_dir, tmp_path_factory.mktemp("parity-runs"), extra)


@pytest.mark.vllm
@pytest.mark.parametrize("fault", [None, *(c.fault for c in VLLM_CASES)],
                         ids=[CONTROL, *(c.fault for c in VLLM_CASES)])
def test_parity_catches_the_fault(parity_runs: dict[str, Run], fault: str | None) -> None:
    if fault is None:
        assert_clean(parity_runs[CONTROL], VLLM_CASES)
    else:
        assert_caught(parity_runs[fault], next(c for c in VLLM_CASES if c.fault == fault))
