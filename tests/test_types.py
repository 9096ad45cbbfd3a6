"""The layers others build on are typed strictly: mypy --strict on ``tokenspec.core`` (the foundation, with the
public API's configuration and transport types) and on ``tokenspec.suite.engine`` (what hands the run
configuration to every test and turns answers into results).

The package's folders are mapped onto ``tokenspec.*`` by pyproject's package-dir, which mypy cannot follow through
the editable install, so the check runs on a tree of links laid out as the installed package is."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STRICT = ("tokenspec.core", "tokenspec.suite.engine")


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as a wheel lays it out (``tokenspec/suite`` for ``suite/``, ...), as links into the checkout."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    root = tmp_path_factory.mktemp("layout")
    (root / "tokenspec").mkdir()
    for entry in (ROOT / "tokenspec").iterdir():
        (root / "tokenspec" / entry.name).symlink_to(entry)
    for package, folder in dirs.items():
        if package != "tokenspec" and (ROOT / folder).is_dir():
            (root / package.replace(".", "/")).symlink_to(ROOT / folder)
    return root


@pytest.mark.parametrize("package", STRICT)
def test_the_layer_is_strictly_typed(package: str, installed_layout: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), "-p", package],
                          cwd=installed_layout, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "no issues found" in done.stdout, done.stdout


def test_every_core_module_says_what_it_exports() -> None:
    """The public names of the foundation are declared (``__all__``), and each one exists."""
    import importlib

    for path in sorted((ROOT / "tokenspec" / "core").glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"tokenspec.core.{path.stem}")
        assert getattr(module, "__all__", None), f"{path.name} declares no __all__"
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, f"{path.name}: __all__ names what it does not define: {missing}"
