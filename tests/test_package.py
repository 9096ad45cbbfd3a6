"""The package as a CI job installs it: a wheel built from the tree, installed into a clean virtualenv (no
source tree on its path), runs the suite against a server, and its pytest plugin runs an implementer's own
tests from their repository (``pytest --tokenspec-target URL``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from frontend_server import running_frontend

from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]

IMPLEMENTERS_TEST = '''
import pytest


@pytest.mark.req("UTIL-005")
def test_our_model_is_listed(api, target):
    cards = api.get("/v1/models").json()["data"]
    assert target.model in [card["id"] for card in cards]
'''


@pytest.fixture(scope="module")
def installed(installed_package) -> Path:
    return installed_package.venv


def test_the_installed_package_runs_the_suite_and_the_plugin(installed, tiny_model, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import tokenspec; print(tokenspec.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60).stdout
    assert str(installed) in where and str(ROOT) not in where, f"tokenspec imported from {where}"
    config = FrontendConfig(model_dir=tiny_model.model_dir, served_model_name=DEFAULT_MODEL_NAME,
                            tool_parser="hermes", reasoning_parser="qwen3")
    with running_frontend(config) as url:
        run = subprocess.run([str(installed / "bin" / "tokenspec"), "run", "--target", url, "-n", "0",
                              "--max-examples", "2", "-k", "utilities or test_chat_render_is_deterministic",
                              "--report", str(tmp_path / "run")], capture_output=True, text=True, cwd=tmp_path,
                             env=env, timeout=600)
        repo = tmp_path / "implementer"
        repo.mkdir()
        (repo / "test_ours.py").write_text(IMPLEMENTERS_TEST)
        plugin = subprocess.run([str(installed / "bin" / "pytest"), "-q", "-p", "no:cacheprovider",
                                 "--tokenspec-target", url, "--tokenspec-report", str(repo / "out"),
                                 "--tokenspec-suite-dir", str(repo)],
                                capture_output=True, text=True, cwd=repo, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["summary"]["passed"] > 5 and report["headline"].startswith("PASS"), report["headline"]
    assert plugin.returncode == 0 and "1 passed" in plugin.stdout, plugin.stdout[-3000:] + plugin.stderr[-2000:]
    ours = json.loads((repo / "out" / "report.json").read_text())["tests"]
    assert [(t["nodeid"], t["outcome"], t["requirement_ids"]) for t in ours] == [
        ("test_ours.py::test_our_model_is_listed", "passed", ["UTIL-005"])]
