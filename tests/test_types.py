"""The foundation is typed strictly: mypy --strict on ``tokenspec.core`` (the layer every other one stands on, and
the public API's configuration and transport types). The suite engine and the harness are annotated but not yet
held to strict mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_core_is_strictly_typed(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), "-p", "tokenspec.core"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


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
