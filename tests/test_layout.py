"""The project's layout rules, checked on the source: nothing in ``harness/`` imports the CLI.

The CLI sits on top (it parses flags and calls into the harness); a harness module that imports it turns the
dependency around. What the harness needs from the CLI it runs as a child process
(``python -m tokenspec ...``), as ``tokenspec bench suite`` does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = "tokenspec.cli"


def module_name(path: Path) -> str:
    """The import name of a file under harness/ (installed as ``tokenspec.harness``)."""
    parts = list(path.relative_to(ROOT / "harness").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["tokenspec", "harness", *parts])


def cli_imports(source: str, module: str, is_package: bool = False) -> list[int]:
    """Line numbers of the imports of ``tokenspec.cli`` in ``source`` (a module named ``module``), in any form:
    ``import tokenspec.cli``, ``from tokenspec.cli import x``, ``from tokenspec import cli`` and relative ones."""
    package = module if is_package else module.rpartition(".")[0]
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name == CLI or name.startswith(CLI + ".") for name in names):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("source", [
    "import tokenspec.cli",
    "import tokenspec.cli as c",
    "from tokenspec.cli import build_parser",
    "from tokenspec import cli",
    "from tokenspec import errors, cli",
    "def f():\n    from tokenspec.cli import main",
    "from ...cli import main",  # relative, from tokenspec.harness.benchmarks.x
    "from ... import cli",
])
def test_the_checker_sees_every_form_of_importing_the_cli(source: str) -> None:
    assert cli_imports(source, "tokenspec.harness.benchmarks.x")


@pytest.mark.parametrize("source", [
    "import tokenspec.client", "from tokenspec import cli_helpers", "from tokenspec.runner import run_from_args",
    "from tokenspec.harness import cli", "from .. import cli",  # tokenspec.harness.cli is not the CLI
])
def test_the_checker_leaves_other_imports_alone(source: str) -> None:
    assert not cli_imports(source, "tokenspec.harness.benchmarks.x")


def test_nothing_in_harness_imports_the_cli() -> None:
    files = sorted((ROOT / "harness").rglob("*.py"))
    assert len(files) > 10
    offenders = [f"{path.relative_to(ROOT)}:{line}"
                 for path in files
                 for line in cli_imports(path.read_text(), module_name(path), path.name == "__init__.py")]
    assert not offenders, f"harness/ must not import tokenspec.cli (run it as a child process): {offenders}"


def imported_modules(source: str) -> set[str]:
    """Every ``tokenspec.*`` module ``source`` imports, at any depth (function-level imports included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {name for name in out if name.startswith("tokenspec.")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports), each as a path back to its start."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    return found


def test_the_cycle_finder_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}}) and not cycles({"a": {"b"}, "b": set()})


def test_the_core_modules_import_no_circle() -> None:
    """tokenspec/*.py and the command modules (the CLI, the runner, the configuration, the golden builders ...)
    form no import circle: the CLI is on top, nothing below builds a command line to parse it again."""
    modules = {f"tokenspec.{path.stem}": path for path in (ROOT / "tokenspec").glob("*.py") if path.stem != "__init__"}
    modules |= {f"tokenspec.commands.{path.stem}": path for path in (ROOT / "tokenspec" / "commands").glob("*.py")
                if path.stem != "__init__"}
    graph = {name: {m for m in imported_modules(path.read_text()) if m in modules and m != name}
             for name, path in modules.items()}
    assert not cycles(graph), cycles(graph)
    assert [name for name, deps in graph.items() if "tokenspec.cli" in deps] == ["tokenspec.__main__"]
