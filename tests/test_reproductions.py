"""A failing case's printed reproduction, run as printed, reproduces the failure (issue: exact reproductions).

The fuzzer's case is sent through the reference frontend behind the ``500-on-bad-input`` fault (a labelled test
double, ``tests/broken_server.py``); the curl command the report prints for it is run in a shell, byte for byte.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from broken_server import frontend_config, running_broken_server

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]


def test_a_fuzz_case_reproduces_from_its_printed_curl(tiny_model, tmp_path) -> None:
    config = frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)
    with running_broken_server("500-on-bad-input", config) as url:
        subprocess.run([sys.executable, "-m", "tokenspec", "run", "--target", url, "--report", str(tmp_path),
                        "--seed", "7", "-n", "0", "-k", "test_fuzz_operation and chat/completions/render and negative"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
        (test,) = [t for t in json.loads((tmp_path / "report.json").read_text())["tests"]
                   if t["outcome"] == "failed"]
        commands = re.findall(r"^\s+((?:printf .*\| )?curl .*)$", test["message"], re.M)
        assert commands, test["message"][:1000]
        for command in [c for c in commands if "@body.json" not in c]:  # (over 16 KiB: not inlined)
            status = subprocess.run(["bash", "-c", command + " -o /dev/null -w '%{http_code}'"],
                                    capture_output=True, text=True, timeout=30).stdout
            assert status == "500", f"{command[:300]} answered {status}, not the recorded 500"
    assert "[Filtered]" not in test["message"], "the fuzzer's sanitising never reaches a reproduction"
