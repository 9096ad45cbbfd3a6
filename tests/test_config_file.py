"""The settings file (tokenspec.toml, or [tool.tokenspec] in pyproject.toml): it holds exactly the options of
``tokenspec run``, a flag overrides it, its mistakes are one line naming the file and the key, and the report
says where each setting came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from broken_server import frontend_config
from frontend_server import running_frontend

from tokenspec.cli import build_parser
from tokenspec.core.config import _RUN_SETTINGS, RunConfig
from tokenspec.core.config_file import SETTINGS_SCHEMA, find_config, load_config
from tokenspec.core.errors import UsageError
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME


def _run_args(*flags: str):  # noqa: ANN202 - argparse.Namespace
    return build_parser().parse_args(["run", *flags])


def test_the_file_holds_exactly_the_options_of_tokenspec_run() -> None:
    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    dests = {a.dest for a in run_parser._actions} - {"help", "config", "no_config"}
    assert dests == set(_RUN_SETTINGS)
    assert {key.replace("-", "_") for key in SETTINGS_SCHEMA["properties"]} == set(_RUN_SETTINGS)


def test_a_flag_overrides_the_file_and_the_file_overrides_the_defaults(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "secret")
    (tmp_path / "tokenspec.toml").write_text(
        'target = "http://127.0.0.1:9"\nexpectations = "gate/known.yaml"\nlevel = "must"\nseed = 5\n'
        'timeout = {engine = 90}\napi-key-env = "MY_KEY"\nworkers = 0\n')
    settings = load_config(tmp_path / "tokenspec.toml")
    config = RunConfig.from_args(_run_args("--seed", "6"), settings)
    assert config.target == "http://127.0.0.1:9" and config.level == "must" and config.seed == 6
    assert config.expectations == str(tmp_path.resolve() / "gate" / "known.yaml")  # relative to the file
    assert config.workers == "0" and config.max_examples == 25  # the file's, and the default
    assert config.transport.access["engine"].timeout == 90 and config.transport.access["target"].timeout == 30
    assert config.transport.access["target"].api_key_env == "MY_KEY"
    file = str(tmp_path / "tokenspec.toml")
    assert config.origins == {"target": file, "expectations": file, "level": file, "seed": "command line",
                              "timeout": file, "api-key-env": file, "workers": file}
    assert RunConfig.from_json(config.to_json()) == config
    assert "--seed 6" in config.replay_command(6) and "--level must" in config.replay_command(6)


def test_the_file_is_found_above_the_working_directory_and_in_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) is None  # a pyproject without [tool.tokenspec] is not a settings file
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.tokenspec]\ntarget = "http://h:1"\n')
    assert find_config(deep) == tmp_path / "pyproject.toml"
    assert load_config(find_config(deep)).values["target"] == "http://h:1"
    (tmp_path / "a" / "tokenspec.toml").write_text('target = "http://h:2"\n')
    assert find_config(deep) == tmp_path / "a" / "tokenspec.toml"


@pytest.mark.parametrize(("text", "says"), [
    ('tagret = "http://h:1"\n', "unknown setting 'tagret' (did you mean 'target'?)"),
    ('target = "ftp://h"\n', "setting 'target': 'ftp://h' is not an http:// or https:// URL"),
    ('target = "http://h:1"\nworkers = "2"\n', "setting 'workers': '2' is not of type 'integer'"),
    ('target = "http://h:1"\ntimeout = {target = 0}\n', "setting 'timeout.target'"),
    ('target = "http://h:1"\ntimeout = {gpu = 5}\n', "setting 'timeout'"),
    ('target = "http://h:1"\nlevel = "sometimes"\n', "setting 'level': 'sometimes' is not one of"),
    ('target = "http://h:1"\napi-key-env = "not a name"\n', "setting 'api-key-env'"),
    ('target = \n', "not valid TOML"),
])
def test_each_mistake_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "tokenspec.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ") and says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_cli_says_what_is_missing_without_a_target_or_a_file(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tokenspec", "run"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.strip().startswith("tokenspec: error: no target: pass --target URL")
    done = subprocess.run([sys.executable, "-m", "tokenspec", "run", "--config", "nope.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--config nope.toml: no such file" in done.stderr


def test_a_run_from_the_file_reports_where_each_setting_came_from(tmp_path: Path, tiny_model) -> None:
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as url:
        (tmp_path / "tokenspec.toml").write_text(
            f'target = "{url}"\ntokenizer = "{tiny_model.model_dir}"\nreport = "out"\nlevel = "must"\nworkers = 0\n')
        done = subprocess.run([sys.executable, "-m", "tokenspec", "run", "-k", "test_golden", "--seed", "3"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)
        verbose = subprocess.run([sys.executable, "-m", "tokenspec", "run", "-k", "test_golden", "--verbose",
                                  "--report", "loud"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # The terminal is tokenspec's: what is tested and where the settings came from first, no pytest header.
    assert done.stdout.startswith(f"tokenspec: testing target {url} (model {DEFAULT_MODEL_NAME}); seed 3;"
                                  f" settings from {tmp_path / 'tokenspec.toml'}\n"), done.stdout[:500]
    assert "rootdir:" not in done.stdout and "site-packages" not in done.stdout
    assert verbose.returncode == 0 and "rootdir:" in verbose.stdout, verbose.stdout[:1500]
    assert "PASSED" in verbose.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    file = str(tmp_path / "tokenspec.toml")
    assert report["settings"] == {"target": file, "tokenizer": file, "report": file, "level": file, "workers": file,
                                  "keyword": "command line", "seed": "command line"}
    assert report["seed"] == 3 and report["summary"]["passed"] > 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert f"- settings: from `{file}`: target, tokenizer, report, level, workers; from the command line:" in summary
