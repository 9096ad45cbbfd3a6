"""The documentation is true: the site builds strictly (links and anchors checked), its catalogue page lists every
requirement, and every command, settings file and workflow snippet in README.md and docs/ is one the project
accepts (a command parses with the CLI as written, a nox session exists, a script exists, a tokenspec.toml
snippet passes the settings check). The commands that set up and run a gate are also run, as written, by
tests/test_ci_gate.py."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tokenspec.cli import build_parser
from tokenspec.core.config_file import load_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOX_SESSIONS = {"tests", "conformance", "embedded", "matrix", "vllm", "docs", "lint"}


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, and ("", code) of every indented one."""
    blocks = [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]
    without_fenced = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    indented = re.findall(r"(?:(?<=\n\n)|^)((?: {4}.*\n?)+)", without_fenced)
    return blocks + [("", "\n".join(line[4:] for line in block.splitlines())) for block in indented]


def _commands(code: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip()
            and not line.lstrip().startswith("#")]


def _snippets(kind: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for language, code in _blocks(page.read_text()):
            if kind == "toml" and language == "toml":
                found.append((page.name, code))
            elif kind == "yaml" and language == "yaml":
                found.append((page.name, code))
            elif kind == "shell" and language in ("", "bash", "console", "sh"):
                found += [(page.name, c) for c in _commands(code)]
    return found


def test_the_pages_hold_commands_to_check() -> None:
    assert len([c for _, c in _snippets("shell") if "tokenspec " in c.split("#")[0][:20]]) >= 8
    assert _snippets("toml") and _snippets("yaml")


@pytest.mark.parametrize(("page", "command"), [s for s in _snippets("shell") if Path(s[1].split()[0]).name in
                                               ("tokenspec", "nox", "bash")], ids=lambda v: str(v)[:60])
def test_every_command_in_the_docs_is_accepted_as_written(page: str, command: str) -> None:
    for part in command.split("&&"):
        words = shlex.split(part)
        words[0] = Path(words[0]).name
        if words[0] == "tokenspec":
            try:
                args = build_parser().parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{page}: `{part.strip()}` does not parse (exit {exc.code})")
            assert args.handler is not None
        elif words[0] == "nox":
            session = words[words.index("-s") + 1]
            assert session in NOX_SESSIONS, f"{page}: no nox session {session}"
            assert f"def {session}(" in (ROOT / "noxfile.py").read_text() or session == "conformance"
        elif words[0] == "bash":
            assert (ROOT / words[1]).is_file(), f"{page}: no script {words[1]}"


@pytest.mark.parametrize(("page", "text"), _snippets("toml"), ids=lambda v: str(v)[:40])
def test_every_settings_snippet_passes_the_settings_check(page: str, text: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tokenspec.toml").write_text(text)
    assert load_config(tmp_path / "tokenspec.toml").values, page


@pytest.mark.parametrize(("page", "text"), _snippets("yaml"), ids=lambda v: str(v)[:40])
def test_every_workflow_snippet_uses_inputs_the_action_has(page: str, text: str) -> None:
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
    for step in yaml.safe_load(text):
        if str(step.get("uses", "")).startswith("tokenspec/tokenspec@"):
            assert set(step.get("with", {})) <= inputs, f"{page}: {step}"


def test_the_site_builds_strictly_with_the_whole_catalogue(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    from tokenspec.specs.catalogue import read_catalogue

    page = (tmp_path / "site" / "requirements" / "index.html").read_text()
    missing = [r.id for r in read_catalogue() if f'id="{r.id.lower()}"' not in page]
    assert not missing, missing
    assert "test_auth.py::test_a_request_without_the_key_is_refused" in page
    for image in ("report-first-screen.png", "report-cause-card.png", "report-pass.png"):
        assert (tmp_path / "site" / "img" / image).is_file()
