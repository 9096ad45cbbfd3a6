"""tokenspec as an implementer's CI gate, held to what its files promise, run as written:

- the example workflow (examples/github-actions-conformance.yml) with the composite action (action.yml) inlined,
  step by step, in a clean virtualenv holding the built wheel: it passes, with the job summary, the step outputs
  and the artifact it promises; the action fails a job on a broken server with one annotation per cause;
- ``tokenspec init`` in a scratch repository: the gate it writes passes right after with known failures only,
  fails when the server changes, runs the same through ``nox -s conformance`` (exit codes, SIGTERM included,
  no reinstall on the second run) and through the workflow it writes;
- the workflows and the action validate against the GitHub schemas (SchemaStore's, as vendored by
  check-jsonschema).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from broken_server import frontend_config, running_broken_server
from workflow_runner import Runner

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "github-actions-conformance.yml"
NOX = Path(sys.executable).parent / "nox"


@pytest.fixture(scope="module")
def action_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What GitHub checks out for ``uses: tokenspec/tokenspec@REF``: this repository's tracked files."""
    copy = tmp_path_factory.mktemp("action") / "tokenspec"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    return copy


def _env(installed_package) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")
            and not k.startswith(("GITHUB_", "TOKENSPEC_API"))}
    return {**keep, "PATH": f"{installed_package.venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_workflows_and_the_action_follow_githubs_schemas(tmp_path: Path) -> None:
    from tokenspec.scaffold import workflow_text

    written = tmp_path / "tokenspec.yml"
    written.write_text(workflow_text("tokenspec==0.1.0", "./serve.sh --port 8000", "http://127.0.0.1:8000",
                                     ("RENDER_KEY", "ENGINE_KEY")))
    steps = yaml.safe_load(written.read_text())["jobs"]["conformance"]["steps"]
    gate = next(step for step in steps if step.get("name") == "conformance gate")
    assert gate["env"] == {"RENDER_KEY": "${{ secrets.RENDER_KEY }}", "ENGINE_KEY": "${{ secrets.ENGINE_KEY }}"}
    checker = Path(sys.executable).parent / "check-jsonschema"
    for schema, files in (("vendor.github-workflows", [EXAMPLE, written]), ("vendor.github-actions",
                                                                            [ROOT / "action.yml"])):
        done = subprocess.run([str(checker), "--builtin-schema", schema, *map(str, files)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_workflow_passes_as_written(installed_package, action_checkout, tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    runner = Runner(workspace, installed_package.venv, action_checkout)
    job = runner.run_job(EXAMPLE)
    assert not job.failed, job.log()
    gate = job.step("conformance gate")
    assert "tokenspec: PASS" in gate.output and "0 not tested" in gate.output, gate.output[-3000:]
    assert "--require-judged must" not in gate.output  # a gap would have failed the job with that line
    assert job.summary.startswith("# tokenspec conformance report: PASS"), job.summary[:500]
    assert (workspace / "tokenspec-report" / "report.html").is_file()
    report = json.loads((workspace / "tokenspec-report" / "report.json").read_text())
    assert report["summary"]["passed"] > 100 and report["settings"]["require-judged"] == "command line"
    key = runner.env["TOKENSPEC_API_KEY"]  # the stand-in's key: judged with (AUTH), never written down
    assert len(key) == 32 and key not in gate.output and key not in job.summary
    for path in (workspace / "tokenspec-report").rglob("*"):
        assert not path.is_file() or key not in path.read_text(errors="replace"), path


def test_the_action_fails_the_job_with_one_annotation_per_cause(installed_package, action_checkout, tiny_model,
                                                                 tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    with running_broken_server("render-drops-system", frontend_config(tiny_model.model_dir,
                                                                      DEFAULT_MODEL_NAME)) as url:
        workflow = tmp_path / "gate.yml"
        workflow.write_text(
            "on: pull_request\njobs:\n  gate:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - uses: tokenspec/tokenspec@main\n        id: gate\n        with:\n"
            f"          target: {url}\n          tokenizer: {tiny_model.model_dir}\n          seed: '5'\n"
            "          args: -k 'test_golden or chat_render' -n 0\n"
            "      - if: always()\n        run: echo \"verdict=${{ steps.gate.outputs.verdict }}"
            " code=${{ steps.gate.outputs.exit-code }}\"\n")
        job = Runner(workspace, installed_package.venv, action_checkout).run_job(workflow)
    gate = job.steps[0]
    assert gate.outcome == "failure" and gate.exit_code == 1, job.log()
    errors = [line for line in gate.output.splitlines() if line.startswith("::error ")]
    assert errors and errors[0].startswith("::error title=RENDER-005 (MUST) x"), gate.output[-3000:]
    assert len(errors) == len({e.split("::")[1] for e in errors})  # one per cause
    assert "verdict=FAIL code=1" in job.steps[1].output
    assert job.summary.startswith("# tokenspec conformance report: FAIL")


@pytest.fixture(scope="module")
def initialised(installed_package, tiny_model, tmp_path_factory: pytest.TempPathFactory):
    """A scratch repository set up by ``tokenspec init`` against a server with a planted defect (the frontend,
    its system message dropped), and the time init took."""
    repo = tmp_path_factory.mktemp("implementer")
    with running_broken_server("render-drops-system", frontend_config(tiny_model.model_dir,
                                                                      DEFAULT_MODEL_NAME)) as url:
        started = time.monotonic()
        done = subprocess.run(
            [str(installed_package.venv / "bin" / "tokenspec"), "init", "--target", url, "--tokenizer",
             str(tiny_model.model_dir), "-k", "test_golden or chat_render or utilities", "--install",
             str(installed_package.wheel)],
            cwd=repo, env=_env(installed_package), capture_output=True, text=True, timeout=900)
        took = time.monotonic() - started
        yield repo, url, done, took


def test_init_writes_a_gate_that_passes_with_todays_failures_known(initialised, installed_package) -> None:
    repo, url, done, took = initialised
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"tokenspec init took {took:.1f} s")
    for name in ("tokenspec.toml", "conformance/profile.yaml", "conformance/expectations.yaml", "noxfile.py",
                 ".github/workflows/tokenspec.yml"):
        assert (repo / name).is_file(), name
    expectations = (repo / "conformance" / "expectations.yaml").read_text()
    assert "requirement: RENDER-005" in expectations
    gate = subprocess.run([str(installed_package.venv / "bin" / "tokenspec"), "run"], cwd=repo,
                          env=_env(installed_package), capture_output=True, text=True, timeout=900)
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-3000:]
    report = json.loads((repo / "tokenspec-report" / "report.json").read_text())
    assert report["headline"].startswith("PASS") and report["summary"]["xfailed"] > 0, report["headline"]
    assert report["settings"]["target"] == str(repo / "tokenspec.toml")


def test_the_gate_fails_when_the_server_changes(initialised, installed_package, tiny_model) -> None:
    repo = initialised[0]
    with running_broken_server("render-drops-stop", frontend_config(tiny_model.model_dir,
                                                                    DEFAULT_MODEL_NAME)) as other:
        gate = subprocess.run([str(installed_package.venv / "bin" / "tokenspec"), "run", "--target", other,
                               "--report", str(repo / "changed")], cwd=repo, env=_env(installed_package),
                              capture_output=True, text=True, timeout=900)
    assert gate.returncode == 1, gate.stdout[-3000:] + gate.stderr[-3000:]
    report = json.loads((repo / "changed" / "report.json").read_text())
    assert report["settings"]["target"] == "command line" and report["headline"].startswith("FAIL")


def test_nox_gives_the_gates_verdict_and_exit_code(initialised, installed_package) -> None:
    repo = initialised[0]
    env = {**_env(installed_package), "PATH": os.environ["PATH"]}
    runs = [subprocess.run([str(NOX), "-s", "conformance", "--", "--report", f"nox-{i}"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=1200) for i in range(2)]
    gate = subprocess.run([str(installed_package.venv / "bin" / "tokenspec"), "run", "--report", "direct"],
                          cwd=repo, env=_env(installed_package), capture_output=True, text=True, timeout=900)
    direct = json.loads((repo / "direct" / "report.json").read_text())
    assert gate.returncode == 0 and direct["headline"].startswith("PASS WITH KNOWN FAILURES"), direct["headline"]
    for i, done in enumerate(runs):
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        nox_report = json.loads((repo / f"nox-{i}" / "report.json").read_text())
        assert nox_report["headline"] == direct["headline"]
    assert "pip install" not in runs[1].stderr, runs[1].stderr[-2000:]
    usage = subprocess.run([str(NOX), "-s", "conformance", "--", "--level", "sometimes"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=600)
    assert usage.returncode == 2, usage.stderr[-2000:]


def test_nox_ends_a_terminated_gate_as_tokenspec_does(initialised, installed_package) -> None:
    repo = initialised[0]
    env = {**_env(installed_package), "PATH": os.environ["PATH"]}
    proc = subprocess.Popen([str(NOX), "-s", "conformance", "--", "--report", "killed", "-n", "0"], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (repo / "killed").is_dir() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGTERM)  # as a CI runner cancels a job: the whole process group
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode in (143, -signal.SIGTERM), out[-3000:]
    report = json.loads((repo / "killed" / "report.json").read_text())
    assert report["headline"].startswith("INTERRUPTED") and report["interrupted"] == "SIGTERM", report["headline"]


def test_the_workflow_init_writes_runs_the_gate(installed_package, action_checkout, tiny_model,
                                               tmp_path: Path) -> None:
    """init against a server started by the command the workflow will start it with; the workflow, run as
    written, starts it again and passes the gate."""
    port = _free_port()
    repo = tmp_path / "repo"
    repo.mkdir()
    start = f"tokenspec serve frontend --model {tiny_model.model_dir} --port {port}"
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(start.split(), env=_env(installed_package), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(120):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        done = subprocess.run(
            [str(installed_package.venv / "bin" / "tokenspec"), "init", "--target", url, "-k", "utilities",
             "--install", str(installed_package.wheel), "--start", start], cwd=repo, env=_env(installed_package),
            capture_output=True, text=True, timeout=900)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    job = Runner(repo, installed_package.venv, action_checkout).run_job(repo / ".github" / "workflows" /
                                                                         "tokenspec.yml")
    assert not job.failed, job.log()
    assert "tokenspec: PASS" in job.step("conformance gate").output


@pytest.mark.vllm
def test_the_matrix_fans_out_one_job_per_cell_and_lines_them_up(installed_package, action_checkout,
                                                                 tmp_path: Path) -> None:
    """.github/workflows/matrix.yml on one small cell (the reference server on tiny), then its merge job."""
    workflow = ROOT / ".github" / "workflows" / "matrix.yml"
    artifacts = tmp_path / "artifacts"
    jobs = {}
    for job, matrix in (("cell", {"implementation": "reference", "family": "tiny"}), ("page", None)):
        workspace = tmp_path / job
        workspace.mkdir()
        runner = Runner(workspace, installed_package.venv, action_checkout, checkout=action_checkout,
                        artifacts=artifacts, timeout=1500)
        jobs[job] = runner.run_job(workflow, job, matrix)
        assert not jobs[job].failed, jobs[job].log()
    (cell,) = (artifacts / "cell-reference-tiny").glob("*/cell.json")
    assert json.loads(cell.read_text())["headline"].startswith("PASS"), cell.read_text()[:500]
    page = (artifacts / "matrix" / "index.html").read_text()
    assert cell.parent.name in page and (artifacts / "matrix" / cell.parent.name / "report.html").is_file()
