"""TEST DOUBLE of a GitHub Actions runner: runs a workflow job's steps on this machine, as written.

Not a test module. It exists so the project's tests can hold the shipped workflows (examples/, the one
``tokenspec init`` writes) and the composite action (action.yml) to what they promise: every ``run:`` step runs
with bash (``-eo pipefail``, as the hosted runner's default shell) in the job's workspace, with the runner's
files (GITHUB_ENV, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_PATH) and ``GITHUB_ACTIONS=true``; tokenspec's own
action is inlined from action.yml (``GITHUB_ACTION_PATH``: a copy of this checkout); checkout and setup-python
are the prepared workspace and virtualenv; an artifact upload checks that what it would upload exists. Only
the expression forms these files use are understood (contexts, ``==``/``!=``, ``&&``/``||``, ``always()``),
and anything else is an error, so a workflow cannot pass here by being misread.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TOKENSPEC_ACTION = re.compile(r"^tokenspec/tokenspec@[\w.\-]+$")
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepResult:
    name: str
    outcome: str  # success, failure, skipped
    exit_code: int | None = None
    output: str = ""


@dataclass
class JobRun:
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""

    @property
    def failed(self) -> bool:
        return any(s.outcome == "failure" for s in self.steps)

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name == name)

    def log(self) -> str:
        return "\n".join(f"--- {s.name}: {s.outcome} ({s.exit_code})\n{s.output[-4000:]}" for s in self.steps)


class Runner:
    """One job on one workspace. ``venv``: the virtualenv standing for setup-python's interpreter."""

    def __init__(self, workspace: Path, venv: Path, action_path: Path, secrets: dict[str, str] | None = None,
                 timeout: float = 900, checkout: Path | None = None, artifacts: Path | None = None) -> None:
        """``checkout``: what actions/checkout puts in the workspace (None: the workspace is already the
        repository); ``artifacts``: where uploads are kept for later jobs' downloads."""
        self.workspace, self.venv, self.action_path = workspace, venv, action_path
        self.secrets = secrets or {}
        self.checkout = checkout
        self.artifacts = artifacts or workspace.parent / f"{workspace.name}-artifacts"
        self.matrix: dict[str, str] = {}
        self.timeout = timeout
        files = workspace.parent / f"{workspace.name}-runner"
        files.mkdir(exist_ok=True)
        self.files = {name: files / name for name in ("env", "path", "summary")}
        for path in self.files.values():
            path.write_text("")
        self.env: dict[str, str] = {}
        self.groups: list[int] = []

    # -- the job ------------------------------------------------------------------------------------------------
    def run_job(self, workflow: Path, job: str | None = None, matrix: dict[str, str] | None = None) -> JobRun:
        """Run one job (one ``matrix`` combination of it, which must be one the workflow lists)."""
        doc = yaml.safe_load(workflow.read_text())
        name = job or next(iter(doc["jobs"]))
        spec = doc["jobs"][name]
        self.matrix = dict(matrix or {})
        axes = (spec.get("strategy") or {}).get("matrix") or {}
        for axis, value in self.matrix.items():
            assert value in axes.get(axis, []), f"{name}: {axis}={value} is not in the workflow's matrix"
        self.env = {k: str(v) for k, v in {**(doc.get("env") or {}), **(spec.get("env") or {})}.items()}
        result = JobRun()
        try:
            for index, step in enumerate(spec["steps"]):
                self._step(step, f"{index}", result, context={})
        finally:
            self._stop_background()
        result.summary = self.files["summary"].read_text()
        return result

    def _step(self, step: dict[str, Any], key: str, job: JobRun, context: dict[str, Any]) -> None:
        name = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
        condition = step.get("if")
        if not self._condition(condition, job, context):
            job.steps.append(StepResult(name, "skipped"))
            return
        env = {k: self._expand(str(v), job, context) for k, v in (step.get("env") or {}).items()}
        if "uses" in step:
            self._uses(step, name, env, job, context)
            return
        code, output, outputs = self._bash(self._expand(step["run"], job, context), env, context)
        job.steps.append(StepResult(name, "success" if code == 0 else "failure", code, output))
        if "id" in step:
            job.outputs[self._scoped(step["id"], context)] = outputs

    def _uses(self, step: dict[str, Any], name: str, env: dict[str, str], job: JobRun,
              context: dict[str, Any]) -> None:
        uses = step["uses"]
        given = {k: self._expand(str(v), job, context) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/checkout@"):
            if self.checkout is not None:
                shutil.copytree(self.checkout, self.workspace, dirs_exist_ok=True)
            job.steps.append(StepResult(name, "success", 0, "(the prepared workspace)"))
        elif uses.startswith(("actions/setup-python@", "actions/cache@")):
            job.steps.append(StepResult(name, "success", 0, "(the prepared virtualenv and cache)"))
        elif uses.startswith("actions/upload-artifact@"):
            path = self.workspace / given["path"]
            ok = path.exists() and any(path.iterdir() if path.is_dir() else [path])
            if ok:
                shutil.copytree(path, self.artifacts / given["name"], dirs_exist_ok=True)
            job.steps.append(StepResult(name, "success" if ok else "failure", 0 if ok else 1,
                                        f"uploaded {path} as {given.get('name')}" if ok else f"no {path}"))
        elif uses.startswith("actions/download-artifact@"):
            assert given.get("merge-multiple", "").lower() == "true", "the test runner merges downloads only"
            found = sorted(self.artifacts.glob(given["pattern"]))
            for folder in found:
                shutil.copytree(folder, self.workspace / given["path"], dirs_exist_ok=True)
            job.steps.append(StepResult(name, "success" if found else "failure", 0 if found else 1,
                                        f"downloaded {[f.name for f in found]}"))
        elif TOKENSPEC_ACTION.match(uses):
            self._composite(step, name, given, job, context)
        else:
            raise AssertionError(f"the test runner does not know the action {uses}")

    def _composite(self, step: dict[str, Any], name: str, given: dict[str, str], job: JobRun,
                   context: dict[str, Any]) -> None:
        action = yaml.safe_load((self.action_path / "action.yml").read_text())
        unknown = set(given) - set(action["inputs"])
        if unknown:
            raise AssertionError(f"{name}: inputs the action does not have: {sorted(unknown)}")
        inputs = {k: given.get(k, str(v.get("default", ""))) for k, v in action["inputs"].items()}
        scope = step.get("id") or f"_{len(job.steps)}"
        inner = {"inputs": inputs, "scope": scope}
        before = len(job.steps)
        for index, inner_step in enumerate(action["runs"]["steps"]):
            self._step(inner_step, f"{scope}.{index}", job, inner)
        mine = job.steps[before:]
        del job.steps[before:]
        failed = next((s for s in mine if s.outcome == "failure"), None)
        job.steps.append(StepResult(name, "failure" if failed else "success",
                                    failed.exit_code if failed else 0, "\n".join(s.output for s in mine)))
        outputs = {k: self._expand(str(v["value"]), job, inner) for k, v in (action.get("outputs") or {}).items()}
        if "id" in step:
            job.outputs[step["id"]] = outputs

    # -- bash ---------------------------------------------------------------------------------------------------
    def _bash(self, script: str, step_env: dict[str, str], context: dict[str, Any]) -> tuple[int, str, dict]:
        output_file = self.files["env"].parent / "output"
        output_file.write_text("")
        path = [*(p for p in self.files["path"].read_text().splitlines() if p), str(self.venv / "bin"),
                os.environ["PATH"]]
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH") and
               not k.startswith(("GITHUB_", "TOKENSPEC_", "PYTEST_"))}
        env.update({**self.env, **step_env, "PATH": os.pathsep.join(path), "GITHUB_ACTIONS": "true", "CI": "true",
                    "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ENV": str(self.files["env"]),
                    "GITHUB_PATH": str(self.files["path"]), "GITHUB_STEP_SUMMARY": str(self.files["summary"]),
                    "GITHUB_OUTPUT": str(output_file), "RUNNER_TEMP": str(self.files["env"].parent)})
        if "inputs" in context:
            env["GITHUB_ACTION_PATH"] = str(self.action_path)
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                                cwd=self.workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        self.groups.append(proc.pid)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return 124, out + "\n(timed out)", {}
        self.env.update(_key_values(self.files["env"].read_text()))
        return proc.returncode, out, _key_values(output_file.read_text())

    def _stop_background(self) -> None:
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass

    # -- expressions --------------------------------------------------------------------------------------------
    def _scoped(self, step_id: str, context: dict[str, Any]) -> str:
        return f"{context['scope']}.{step_id}" if "scope" in context else step_id

    def _value(self, ref: str, job: JobRun, context: dict[str, Any]) -> str:
        if ref.startswith("hashFiles("):
            return "0" * 16
        parts = ref.split(".")
        if parts[0] == "matrix":
            return self.matrix[parts[1]]
        if parts[0] == "secrets":
            return self.secrets.get(parts[1], "")
        if parts[0] == "inputs":
            return context["inputs"][".".join(parts[1:])]
        if parts[0] == "env":
            return self.env.get(parts[1], "")
        if parts[0] == "github":
            return {"workspace": str(self.workspace), "ref": "refs/pull/1/merge",
                    "action_path": str(self.action_path)}[parts[1]]
        if parts[0] == "steps" and parts[2] == "outputs":
            return job.outputs.get(self._scoped(parts[1], context), {}).get(parts[3], "")
        raise AssertionError(f"the test runner does not know the expression {ref!r}")

    def _expand(self, text: str, job: JobRun, context: dict[str, Any]) -> str:
        return _EXPR.sub(lambda m: self._value(m.group(1), job, context), text)

    def _condition(self, condition: str | None, job: JobRun, context: dict[str, Any]) -> bool:
        failed = job.failed
        if condition is None:
            return not failed
        text = _EXPR.sub(lambda m: m.group(1), str(condition))
        always = "always()" in text
        clauses = [c.strip() for c in text.replace("always()", "true").split("&&")]
        for clause in clauses:
            if clause == "true":
                continue
            match = re.fullmatch(r"([\w.\-]+)\s*(==|!=)\s*'([^']*)'", clause)
            if not match:
                raise AssertionError(f"the test runner does not know the condition {clause!r}")
            value = self._value(match.group(1), job, context)
            if (value == match.group(3)) != (match.group(2) == "=="):
                return False
        return always or not failed


def _key_values(text: str) -> dict[str, str]:
    """``NAME=value`` lines (and ``NAME<<EOF`` blocks) of a runner file."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and "=" not in line.split("<<")[0]:
            name, marker = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == marker:
                    break
                block.append(inner)
            out[name] = "\n".join(block)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
    return out
