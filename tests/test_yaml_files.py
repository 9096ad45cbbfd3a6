"""The C loader the project reads YAML with (``tokenspec/core/yaml_files.py``) builds the same data as PyYAML's
pure-Python safe loader from every YAML file in the repository, type for type, and refuses what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenspec.core.yaml_files import load_yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for p in ROOT.rglob("*.yaml") if not {".venv", "out", ".git"} & set(p.relative_to(ROOT).parts))


def _typed(value: Any) -> Any:
    """``value`` with each scalar's type beside it (``==`` alone takes ``1 == 1.0 == True``)."""
    if isinstance(value, dict):
        return {_typed(k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def test_every_project_yaml_file_is_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"specs/parsers.yaml", "specs/components.yaml", "golden/cases.yaml",
            "reports/expectations/vllm-0.32.0-cpu.yaml"} <= names, names
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_the_c_loader_reads_every_file_as_the_python_loader_does(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _typed(load_yaml(text)) == _typed(yaml.load(text, Loader=yaml.SafeLoader))  # noqa: S506


@pytest.mark.parametrize("text", ["a: [1, 2", "a: b: c", "- a\nb: c", "key: 'unterminated", "\t- tab"])
def test_what_the_python_loader_refuses_the_c_loader_refuses(text: str) -> None:
    with pytest.raises(yaml.YAMLError):
        yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506
    with pytest.raises(yaml.YAMLError):
        load_yaml(text)


def test_the_c_loader_is_the_one_in_use() -> None:
    """The speed is the point: a PyYAML without libyaml would silently fall back."""
    assert yaml.__with_libyaml__
    assert load_yaml.__globals__["_LOADER"] is yaml.CSafeLoader
