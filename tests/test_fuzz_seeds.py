"""The reference server passes the suite's fuzzing on any seed, not only on the main job's fixed one.

Every operation's positive and negative fuzzing runs against the bundled frontend (with its checked generate
gateway in front of real vLLM) on several seeds. A failure here is either the frontend accepting what its own
spec refuses (fix the frontend) or the suite judging wrongly (fix the suite); never an expectation.
The seeds are fixed (CI must not pass by luck) and differ from the main job's, which the end-to-end test runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from broken_server import frontend_config
from frontend_server import running_frontend

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

pytestmark = pytest.mark.vllm

#: Bounded: about 25 s of fuzzing per seed on two cores.
SEEDS = [101, 202, 303, 404]


@pytest.fixture(scope="module")
def reference_url(tiny_model, vllm_engine) -> Iterator[str]:
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME, engine_url=vllm_engine.url)) as url:
        yield url


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_server_passes_fuzzing_on_seed(seed: int, reference_url: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tokenspec", "run", "--target", reference_url, "-k", "test_fuzz_operation",
         "--seed", str(seed), "--report", str(tmp_path), "-n", "2"],
        capture_output=True, text=True, timeout=900,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    fuzzed = [t for t in report["tests"] if t["nodeid"].startswith("test_fuzz.py::test_fuzz_operation")]
    assert len(fuzzed) >= 14, "every operation is fuzzed, positive and negative"
    bad = [f"{t['nodeid']}: {t['message'][:1500]}" for t in fuzzed if t["outcome"] != "passed"]
    assert not bad, f"seed {seed}:\n" + "\n".join(bad)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]


def test_an_empty_trace_list_is_nothing_to_trace_not_an_engine_crash(reference_url: str) -> None:
    """Seed 101 drew it: ``trace_decode_token_ids: []`` is valid by the spec, and vLLM 0.32's engine answers it with
    a bare 500 (a non-empty list gets its 400 about trace replay). The gateway forwards it as null."""
    import httpx

    body = {"model": DEFAULT_MODEL_NAME, "token_ids": [0],
            "sampling_params": {"trace_decode_token_ids": [], "max_tokens": 2}}
    answer = httpx.post(f"{reference_url}/inference/v1/generate", json=body, timeout=60)
    assert answer.status_code == 200, answer.text[:300]
    refused = httpx.post(f"{reference_url}/inference/v1/generate", timeout=60,
                         json={**body, "sampling_params": {"trace_decode_token_ids": [5], "max_tokens": 2}})
    assert refused.status_code == 400 and "trace replay" in refused.text, refused.text[:300]
