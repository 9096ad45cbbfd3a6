"""The CLI's contract with users: bad input ends in one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tokenspec.cli import build_parser, main
from tokenspec.core.errors import UsageError
from tokenspec.core.target import normalise_url


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenspec", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--target", "not a url"],
        ["run", "--target", "ftp://example.com"],
        ["run", "--target", "http://127.0.0.1:1"],  # nothing listens on port 1
        ["run", "--target", "http://127.0.0.1:99999"],
        ["spec", "drift", "--target", "http://127.0.0.1:1"],
        ["parity", "--a", "http://127.0.0.1:1", "--b", "http://127.0.0.1:1"],
        ["serve", "frontend", "--model", "/nonexistent/model"],
        ["serve", "frontend", "--model", "MODEL", "--tool-parser", "nope"],
        ["run", "--target", "http://127.0.0.1:1", "--expectations", "/nonexistent.yaml"],
        ["run", "--target", "http://127.0.0.1:8000/v1"],
        ["run"],
        ["run", "--target", "http://127.0.0.1:1", "--level", "sometimes"],
        ["run", "--target", "http://127.0.0.1:1", "--seed", "abc"],
        ["teleport"],
        [],
        ["model"],
        ["vllm", "serve-everything"],
        ["vllm", "engine"],
        ["vllm", "render", "--model", "/nonexistent/model"],
        ["mutants", "--list", "--only", "no-such-defect"],
        ["mutants", "--target", "http://127.0.0.1:1"],
    ],
    ids=["garbage", "scheme", "unreachable", "bad-port", "drift-unreachable", "parity-unreachable",
         "serve-missing-model", "serve-unknown-parser", "run-unreachable-first", "url-with-v1", "missing-target",
         "bad-choice", "bad-int", "unknown-command", "no-command", "no-action", "bad-action", "vllm-no-model",
         "vllm-bad-model", "mutants-unknown-defect", "mutants-unreachable"],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], tiny_model) -> None:
    done = run_cli(*[str(tiny_model.model_dir) if a == "MODEL" else a for a in args])
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokenspec: error: "), done.stderr
    assert "Traceback" not in done.stderr


def test_model_build_into_foreign_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("do not overwrite")
    done = run_cli("model", "build", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (tmp_path / "precious.txt").read_text() == "do not overwrite"


def test_model_build_prints_the_fingerprint(tmp_path: Path) -> None:
    done = run_cli("model", "build", str(tmp_path / "m"))
    assert done.returncode == 0, done.stderr
    fingerprint = (tmp_path / "m" / "tokenspec-model.json").read_text()
    assert done.stdout.split("fingerprint ")[1].rstrip(")\n") in fingerprint


def test_missing_expectations_file_is_a_usage_error(tmp_path: Path) -> None:
    from tokenspec.suite.engine.expectations import load_expectations

    with pytest.raises(UsageError, match="not found"):
        load_expectations(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("implementation: {name: x, version: '1'}\nconfiguration: {}\nexpectations:\n  - test: x\n")
    with pytest.raises(UsageError, match="needs requirement, pattern, reason"):
        load_expectations(bad)


@pytest.mark.parametrize(("text", "says"), [
    ("features: {tools: yes-please}", "features/tools: 'yes-please' is not of type 'boolean'"),
    ("features: {teleport: true}", "'teleport' is not one of"),
    ("parsers: {reasoning: qwen9}", "parsers/reasoning: 'qwen9' is not one of"),
    ("limits: [1]", "limits: [1] is not of type 'object'"),
    ("a: [", "is not valid YAML"),
])
def test_a_bad_profile_is_a_one_line_usage_error(tmp_path: Path, text: str, says: str) -> None:
    from tokenspec.suite.engine.profile import load_profile

    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_profile(path)
    assert says in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UsageError, match="profile not found"):
        load_profile(tmp_path / "nope.yaml")


def test_normalise_url_strips_the_trailing_slash() -> None:
    assert normalise_url("http://127.0.0.1:8000/ ") == "http://127.0.0.1:8000"
    with pytest.raises(UsageError):
        normalise_url("http://host:8000/?q=1")


def test_spec_lint_command_passes() -> None:
    assert main(["spec", "lint"]) == 0


def test_serve_without_vllm_names_the_fix(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "TOKENSPEC_CACHE": str(tmp_path / "empty-cache")}
    env.pop("TOKENSPEC_VLLM_PYTHON", None)
    done = subprocess.run([sys.executable, "-m", "tokenspec", "serve", "--flavour", "cpu"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "tokenspec vllm install" in done.stderr, done.stderr


def test_a_model_the_target_does_not_serve_is_a_usage_error(tiny_model) -> None:
    from broken_server import frontend_config
    from frontend_server import running_frontend

    from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as url:
        done = run_cli("run", "--target", url, "--model", "no-such-model")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"tokenspec: error: --model no-such-model is not served by {url}"
                                   f" (its /v1/models lists: {DEFAULT_MODEL_NAME})")
    assert "Traceback" not in done.stderr and done.stdout == ""


def _subcommand_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the CLI (``()``, ``("run",)``, ``("model", "build")``, ...), read from the parser."""
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                paths += _subcommand_paths(child, (*prefix, name))
    return paths


@pytest.mark.parametrize("path", _subcommand_paths(build_parser()), ids=lambda p: " ".join(p) or "tokenspec")
def test_every_help_has_defaults_exit_codes_and_examples(path: tuple[str, ...], capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes:\n  0  " in text and "\n  2  usage error" in text, text
    assert "examples:\n  tokenspec " in text, text
    assert "``" not in text and ":func:" not in text, "reST markup in plain-text help"
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert f"default: {action.default}" in " ".join(text.split()), f"{action.dest} hides its default"


def test_nox_conformance_keeps_tokenspecs_exit_codes(tmp_path: Path) -> None:
    """Through `nox -s conformance` a usage error is still 2 (nox alone folds every failure into 1), and a second
    run reuses the session's environment without installing the package again."""
    nox = Path(sys.executable).parent / "nox"
    root = Path(__file__).resolve().parent.parent
    runs = [subprocess.run([str(nox), "-f", str(root / "noxfile.py"), "-s", "conformance", "--",
                            "--target", "http://127.0.0.1:8000/v1"], capture_output=True, text=True, timeout=600,
                           cwd=root) for _ in range(2)]
    for done in runs:
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1].startswith("tokenspec: error: "), done.stderr[-2000:]
    assert "pip install" not in runs[1].stderr, runs[1].stderr[-2000:]


def test_serve_frontend_announces_itself_and_logs_refusals_in_one_line(tiny_model) -> None:
    """`tokenspec serve frontend` prints the URL it listens on and the model it serves once it is up; every
    refused request is one log line (status, route, message), never a traceback."""
    import re
    import signal

    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "tokenspec", "serve", "frontend", "--model",
                             str(tiny_model.model_dir), "--served-model-name", "tiny", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"ready at (http://127\.0\.0\.1:\d+): model tiny from ", first)
        assert found, first
        url = found.group(1)
        bad = [
            ("/v1/completions/render", b"{not json"),
            ("/v1/completions/render", b'{"prompt": "hi", "max_tokens": -2}'),
            ("/v1/chat/completions/render", b'{"model": "other", "messages": [{"role": "user", "content": "x"}]}'),
            ("/detokenize", b'{"tokens": [99999999]}'),
        ]
        statuses = [httpx.post(url + path, content=body, headers={"content-type": "application/json"},
                               timeout=10).status_code for path, body in bad]
        assert all(400 <= s < 500 for s in statuses), statuses
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err, err
    refusals = [line for line in err.splitlines() if " -> 4" in line]
    assert len(refusals) == len(bad), err
    assert all(re.search(r" POST /\S+ -> 4\d\d: \S", line) for line in refusals), refusals


def test_the_replay_command_names_everything_that_decides_the_verdict(monkeypatch) -> None:
    from tokenspec.core.config import RunConfig
    from tokenspec.runner import pytest_args

    monkeypatch.setenv("REF_KEY", "sk-reference-secret")
    monkeypatch.setenv("TENANT", "blue")
    args = build_parser().parse_args(["run", "--target", "http://127.0.0.1:8000/", "--reference", "http://r:1",
                                      "--model", "m", "--tokenizer", "models/tiny", "--expectations", "e.yaml",
                                      "--profile", "p.yaml", "--seed", "7", "--level", "should",
                                      "--max-examples", "3", "-n", "2", "--timeout", "engine=90",
                                      "--api-key-env", "reference=REF_KEY", "--header", "X-Tenant: $TENANT",
                                      "--max-rps", "5"])
    config = RunConfig.from_args(args)
    command = config.replay_command(7)
    assert command == ("tokenspec run --target http://127.0.0.1:8000 --reference http://r:1 --model m"
                       " --tokenizer models/tiny --expectations e.yaml --profile p.yaml --seed 7 --level should"
                       " --max-examples 3 --api-key-env reference=REF_KEY --header 'X-Tenant: $TENANT'"
                       " --timeout engine=90 --max-rps 5")
    parsed = build_parser().parse_args([*shlex.split(command)[1:], "-k", "test_a"])
    assert (parsed.seed, parsed.level, parsed.max_examples, parsed.keyword) == (7, "should", 3, "test_a"), \
        "the command parses back, and a report's appended -k selects one test"
    assert RunConfig.from_args(parsed).transport == config.transport, "the transport survives the round trip"
    assert RunConfig.from_json(config.to_json()) == config, "the configuration crosses into xdist workers whole"
    assert "sk-reference-secret" not in config.to_json() and "blue" not in config.to_json(), "names, never values"
    argv = pytest_args(config)
    assert not [part for part in argv if part.startswith("--tokenspec-")], \
        "the configuration is handed to pytest as an object, never as flags to be parsed back"
    monkeypatch.delenv("REF_KEY")
    with pytest.raises(UsageError, match="REF_KEY"):
        RunConfig.from_args(args)


@pytest.mark.parametrize("path", _subcommand_paths(build_parser()), ids=lambda p: " ".join(p) or "tokenspec")
def test_every_help_example_parses_and_needs_no_clone(path: tuple[str, ...], capsys) -> None:
    """What --help shows works from a package install: each example parses as written and names no file that only
    a checkout of this repository has."""
    import shlex

    with pytest.raises(SystemExit):
        main([*path, "--help"])
    examples = capsys.readouterr().out.split("examples:\n", 1)[1].splitlines()
    for line in (e.strip() for e in examples if e.strip().startswith("tokenspec ")):
        words = shlex.split(line.split("  #")[0].split(" > ")[0])
        build_parser().parse_args(words[1:])  # SystemExit(2) on a bad example
        clone_only = [w for w in words if w.startswith(("reports/", "specs/", "golden/", "harness/", "suite/"))]
        assert not clone_only, f"{line}: {clone_only} exist only in a checkout"
