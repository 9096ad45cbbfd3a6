"""Generic OpenAPI tools give the answer the suite gives: Spectral lints the documents, schemathesis judges the
reference frontend by them (the whole published render and derender documents, with the repository's
schemathesis.toml, and the frontend's own /openapi.json), and each is shown to fail.

Spectral (``@stoplight/spectral-cli``, its ``spectral:oas`` ruleset) comes from the npm registry, installed once
under ~/.cache/tokenspec/spectral; only a machine without npm skips. schemathesis is a project dependency; it runs
its default phases against the in-process frontend on the tiny model, bounded by --max-examples and seeded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frontend_server import running_frontend
from tokenspec.harness.frontend import FrontendConfig
from tokenspec.specs.openapi import SPEC_DIR

DOCUMENTS = ("render.yaml", "derender.yaml", "generate.yaml", "utilities.yaml", "coupled.yaml", "token-native.yaml",
             "components.yaml")
SPECTRAL_HOME = Path(os.environ.get("TOKENSPEC_CACHE", Path.home() / ".cache" / "tokenspec")) / "spectral"
SPECTRAL_PACKAGE = "@stoplight/spectral-cli@6"
RULESET = 'extends: ["spectral:oas"]\n'
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
#: The repository's schemathesis configuration: it loads specs/schemathesis_hooks.py, which excuses a refusal only
#: where the body breaks a rule its schema names under x-tokenspec-unstated (specs/unstated.py).
CONFIG = Path(__file__).resolve().parents[1] / "schemathesis.toml"
#: Of the served document, the operations whose refusals it states for this frontend (tiny model, no parsers).
SERVED_EXACT = ("/tokenize", "/v1/models", "/health", "/version")


def _spectral() -> Path:
    """The Spectral CLI, installed into the cache on first use (npm); skips only where npm is missing."""
    binary = SPECTRAL_HOME / "node_modules" / ".bin" / "spectral"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: Spectral (an npm package) cannot be installed on this machine")
    SPECTRAL_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(SPECTRAL_HOME), "--no-audit", "--no-fund", "--loglevel=error",
                    SPECTRAL_PACKAGE], check=True, timeout=600, capture_output=True)
    return binary


def _lint(folder: Path, tmp_path: Path) -> list[dict]:
    ruleset = tmp_path / ".spectral.yaml"
    ruleset.write_text(RULESET, encoding="utf-8")
    out = subprocess.run([str(_spectral()), "lint", "--ruleset", str(ruleset), "-f", "json", "--quiet",
                          *[str(folder / name) for name in DOCUMENTS]],
                         capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.stdout.strip().startswith("["), f"spectral gave no report (rc {out.returncode}): {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def _errors(results: list[dict]) -> list[str]:
    return [f"{Path(r['source']).name} {'/'.join(map(str, r['path']))}: {r['code']} {r['message']}"
            for r in results if r["severity"] == 0]


def test_spectral_finds_no_error_in_the_documents(tmp_path: Path) -> None:
    results = _lint(SPEC_DIR, tmp_path)
    assert not _errors(results), "\n".join(_errors(results))


def test_spectral_reports_a_planted_error(tmp_path: Path) -> None:
    """The lint can fail: an array schema without items (Spectral's array-items error) planted in a copy."""
    folder = tmp_path / "specs"
    shutil.copytree(SPEC_DIR, folder, ignore=shutil.ignore_patterns("*.py", "requirements", "__pycache__"))
    text = (folder / "components.yaml").read_text(encoding="utf-8")
    planted = text.replace("        bad_words:\n          type: array\n          items:\n            type: string\n"
                           "            minLength: 1\n", "        bad_words:\n          type: array\n", 1)
    assert planted != text
    (folder / "components.yaml").write_text(planted, encoding="utf-8")
    errors = _errors(_lint(folder, tmp_path))
    assert any("array-items" in e and "bad_words" in e for e in errors), errors


def _schemathesis(location: str, url: str | None, tmp_path: Path, *paths: str, examples: int = 10,
                  phases: str | None = None, seed: int = 20261201) -> tuple[int, str]:
    command = [str(SCHEMATHESIS), "--config-file", str(CONFIG), "run", location, "--checks", "all", "--seed",
               str(seed), "--workers", "1", "--max-examples", str(examples), "--no-shrink", "--output-sanitize",
               "false"]
    if url:
        command += ["--url", url]
    if phases:
        command += ["--phases", phases]
    for path in paths:
        command += ["--include-path", path]
    out = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)  # cache under tmp
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def plain_frontend(model_dir: Path):
    """The frontend on the tiny model without parsers (with one, chat derender needs chat_request: the served
    /openapi.json says so, the published file cannot)."""
    with running_frontend(FrontendConfig(model_dir=model_dir)) as url:
        yield url


#: A context the generator's largest chat bodies fit in: how many tokens a text prompt makes is the tokenizer's to
#: say, so no hook can excuse the refusal of one that is too long (specs/unstated.py, prompt-above-context).
ROOMY_CONTEXT = 65536


@pytest.fixture(scope="module")
def tool_frontend(model_dir: Path):
    """The frontend with a tool parser (without one, tools with tool_choice auto are refused: a server setting)."""
    with running_frontend(FrontendConfig(model_dir=model_dir, tool_parser="hermes",
                                         max_model_len=ROOMY_CONTEXT)) as url:
        yield url


#: The errors of schemathesis's own that are no verdict on the server: for some draws its generator cannot negate a
#: schema with conditionals (jsonschema-rs canonical form) or fill an array it demanded, and that operation's fuzzing
#: phase stops early. Which draws meet them moves with any change to the documents.
GENERATOR_LIMITS = ("result is not supported in canonical form", "Cannot generate an array with")


def _no_failure(code: int, output: str) -> None:
    """No failure of any check; a run that errs may only have met the generator's limit."""
    assert "Failures:" not in output and " failure" not in output.splitlines()[-1], output[-6000:]
    lines = output.splitlines()
    start = lines.index("Errors:") + 1 if "Errors:" in lines else len(lines)
    kinds = [line.strip() for line in lines[start:start + 8] if line.startswith("  🚫 ")]
    causes = [line for line in lines if line.startswith("Failed to generate")]
    assert code == 0 or (all(k.startswith("🚫 Schema Error") for k in kinds) and kinds
                         and all(any(limit in c for limit in GENERATOR_LIMITS) for c in causes)), output[-6000:]


@pytest.mark.parametrize("seed", [20261201, 7])
def test_schemathesis_finds_no_failure_in_render(tool_frontend: str, tmp_path: Path, seed: int) -> None:
    """Every phase, every render operation: what the documents do not state as JSON Schema they name, and the
    repository's hooks excuse a refusal only for a body that breaks a named rule."""
    _no_failure(*_schemathesis(str(SPEC_DIR / "render.yaml"), tool_frontend, tmp_path, seed=seed))


def test_schemathesis_finds_no_failure_in_derender(plain_frontend: str, tmp_path: Path) -> None:
    _no_failure(*_schemathesis(str(SPEC_DIR / "derender.yaml"), plain_frontend, tmp_path))


def test_schemathesis_finds_no_failure_against_the_served_openapi_json(plain_frontend: str, tmp_path: Path) -> None:
    code, output = _schemathesis(f"{plain_frontend}/openapi.json", None, tmp_path, *SERVED_EXACT)
    assert code == 0, output[-6000:]


def test_schemathesis_reports_a_loosened_schema(plain_frontend: str, tmp_path: Path) -> None:
    """The check can fail: a chat message's role loosened back to any string (the tiny model's template refuses
    other roles) makes schemathesis report the frontend's 400 as a schema-valid request rejected."""
    folder = tmp_path / "specs"
    shutil.copytree(SPEC_DIR, folder, ignore=shutil.ignore_patterns("*.py", "requirements", "__pycache__"))
    text = (folder / "components.yaml").read_text(encoding="utf-8")
    loosened = text.replace("          enum: [system, developer, user, assistant, tool]\n", "          type: string\n",
                            1)
    assert loosened != text
    (folder / "components.yaml").write_text(loosened, encoding="utf-8")
    code, output = _schemathesis(str(folder / "render.yaml"), plain_frontend, tmp_path, "/v1/chat/completions/render",
                                 phases="coverage")
    assert code != 0 and "Schema-valid request rejected" in output and "Unknown message role" in output, \
        output[-6000:]
