"""A target that renames a field of its answers is judged, never excused: the renamed field fails the tests that
read it, and no test the correct target had judged becomes "not tested" or "unsupported" (the quiet narrowing of
a verdict that vLLM 0.34's unannounced ``prev_tokens`` -> ``prev_token_ids`` rename once caused)."""

from __future__ import annotations

from broken_server import frontend_config
from frontend_server import running_frontend

from tokenspec.campaigns.mutants import Options, run_campaign
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.harness.mutants.defects import DEFECTS

RENAMES = ["stream-state-window-renamed", "stream-derender-state-key-renamed"]


def test_a_renamed_state_or_response_field_is_a_failure_not_a_gap(tiny_model, tmp_path) -> None:
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as target:
        options = Options(target, tokenizer=str(tiny_model.model_dir), model=DEFAULT_MODEL_NAME, workers="1",
                          select="stream_derender or stream_state")
        report = run_campaign(options, [DEFECTS[name] for name in RENAMES], tmp_path)
    assert not report.clean_failures, report.clean_failures
    assert report.clean_passed >= 20, f"the narrow campaign judged only {report.clean_passed} tests"
    for result in report.results:
        assert result.detected, f"{result.name} escaped: {result.verdict}"
        assert not result.silenced, f"{result.name} turned judged tests into gaps: {result.silenced}"
        assert "STREAM-015" in result.charged or "STREAM-007" in result.charged, (result.name, result.charged)

