"""The project's layers, checked on the source of every module (function-level and type-only imports included).

pyproject.toml declares which folder installs as which ``tokenspec.*`` package; the layers stand on each other:

- core (``tokenspec/core``) imports nothing of the others;
- specs (``specs/``, ``golden/``: the spec and its golden answers, with their readers) only core;
- suite (``suite/``) only core and specs; harness (``harness/``: the reference servers) only core and specs;
- the application (the public API in ``tokenspec/__init__``, the CLI, its commands, the runner,
  ``tokenspec/campaigns``, ``benchmarks/``) on top.

No module imports another in a circle, and only ``tokenspec.__main__`` imports the CLI (what lies below runs it as
a child process). Importing a module of one's own package implies its ``__init__``; that implied step is not an
arrow.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]

#: Each layer and the layers it may import.
ALLOWED = {
    "core": {"core"},
    "specs": {"core", "specs"},
    "suite": {"core", "specs", "suite"},
    "harness": {"core", "specs", "harness"},
    "application": {"core", "specs", "suite", "harness", "application"},
}


def layer(module: str) -> str:
    parts = module.split(".")
    if module == "tokenspec":
        return "application"  # the public API's front door (``tokenspec.run``)
    if parts[1] == "core":
        return "core"
    if parts[1] in ("specs", "golden"):
        return "specs"
    if parts[1] in ("suite", "harness"):
        return parts[1]
    return "application"


def modules() -> dict[str, Path]:
    """Every module of the package, by import name, from pyproject's folder -> package mapping."""
    found = {}
    for package, folder in PYPROJECT["package-dir"].items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if "__init__" in parts[:-1] or any(p.startswith(".") or p == "build" for p in parts):
                continue
            found[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return found


def imports_of(source: str, module: str, known: set[str], is_package: bool = False) -> dict[str, int]:
    """The modules of ``known`` that ``source`` (the module ``module``) imports, with a line of each, at any
    depth: ``import a.b``, ``from a import b`` (b a module, else a), relative imports. An ancestor package of
    ``module`` is implied by being in it, not an arrow."""
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                found.setdefault(name, node.lineno)
    return found


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line}, for ``sources`` (module -> (source, is a package's __init__))."""
    known = set(sources)
    return {name: imports_of(source, name, known, is_package) for name, (source, is_package) in sources.items()}


@functools.cache
def sources() -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(), path.name == "__init__.py") for name, path in modules().items()}


@functools.cache
def the_graph() -> dict[str, dict[str, int]]:
    return import_graph(sources())


def back_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import that goes against the layers, as ``module:line -> imported (layer -> layer)``."""
    return [f"{name}:{line} -> {dep} ({layer(name)} -> {layer(dep)})"
            for name, deps in sorted(graph.items()) for dep, line in sorted(deps.items())
            if layer(dep) not in ALLOWED[layer(name)]]


def cycles(graph: dict[str, dict[str, int]] | dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports), each as a path back to its start."""
    found: list[list[str]] = []
    done: set[str] = set()

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


def test_every_package_folder_is_declared() -> None:
    """A folder with an ``__init__.py`` under a mapped root that pyproject's ``packages`` does not list would be
    missing from the wheel (and a listed one without a folder breaks the build)."""
    declared = set(PYPROJECT["packages"])
    on_disk = {name for name, path in modules().items() if path.name == "__init__.py"} | {"tokenspec.reports"}
    assert declared == on_disk, {"not declared": sorted(on_disk - declared), "no folder": sorted(declared - on_disk)}


def test_the_graph_holds_every_layer() -> None:
    graph = the_graph()
    assert len(graph) > 140
    assert {layer(name) for name in graph} == set(ALLOWED)
    assert "tokenspec.suite.engine.client" in graph["tokenspec.suite.engine.fixtures"]  # a module-level import
    assert "tokenspec.suite.engine.fixtures" in graph["tokenspec.suite.plugin"]  # a function-level one


@pytest.mark.parametrize("source", [
    "import tokenspec.suite.engine.client",
    "from tokenspec.suite import client",
    "from tokenspec.suite.engine.client import SuiteClient",
    "def f():\n    from tokenspec.harness.processes import stop",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tokenspec.runner import run",
])
def test_a_planted_back_import_is_seen(source: str) -> None:
    """The checker broken on purpose: core's transport importing the suite, the harness or the application."""
    planted = dict(sources())
    planted["tokenspec.core.transport"] = (planted["tokenspec.core.transport"][0] + "\n" + source + "\n", False)
    assert back_imports(import_graph(planted)) and not back_imports(the_graph())


def test_a_planted_loop_is_seen() -> None:
    """The checker broken on purpose: the suite's check record importing the plugin that imports it."""
    planted = dict(sources())
    planted["tokenspec.suite.engine.checks"] = (planted["tokenspec.suite.engine.checks"][0]
                                         + "\ndef f():\n    from tokenspec.suite.plugin import SUITE_DIR\n", False)
    assert cycles(import_graph(planted)) and not cycles(the_graph())


def test_relative_and_package_imports_resolve() -> None:
    known = {"tokenspec.harness.frontend", "tokenspec.harness.frontend.app", "tokenspec.harness.frontend.gateway",
             "tokenspec.core.errors", "tokenspec.core"}
    assert imports_of("from .gateway import Gateway", "tokenspec.harness.frontend.app", known) == {
        "tokenspec.harness.frontend.gateway": 1}
    assert imports_of("from tokenspec.harness.frontend import gateway", "tokenspec.harness.frontend.app", known) == {
        "tokenspec.harness.frontend.gateway": 1}
    assert imports_of("from ...core import errors", "tokenspec.harness.frontend.app", known) == {
        "tokenspec.core.errors": 1}
    assert imports_of("from tokenspec.harness.frontend import FrontendConfig", "tokenspec.harness.frontend.app",
                      known) == {}  # its own package: implied


def test_no_module_imports_against_the_layers() -> None:
    assert not back_imports(the_graph()), "\n".join(back_imports(the_graph()))


def test_no_import_circle() -> None:
    assert not cycles(the_graph()), cycles(the_graph())


def test_the_cycle_finder_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}}) and not cycles({"a": {"b"}, "b": set()})


def test_only_the_entry_point_imports_the_cli() -> None:
    """The CLI is on top: nothing else builds a command line to parse it again (child runs are built from a
    RunConfig, and whatever needs the CLI runs it as a child process)."""
    importers = sorted(name for name, deps in the_graph().items() if "tokenspec.cli" in deps)
    assert importers == ["tokenspec.__main__"]


def test_the_run_configuration_is_read_from_pytest_options_in_one_place() -> None:
    """``tokenspec run`` hands the suite a RunConfig object; only the builder for direct pytest runs reads the
    plugin's options, so no part of the suite parses a command line back."""
    readers = sorted(name for name, (source, _) in sources().items() if ".getoption(" in source)
    assert readers == ["tokenspec.suite.engine.run_config"]


def test_the_suite_stages_never_import_the_plugin_or_a_test_module() -> None:
    """The plugin drives the suite's engine, oracles and reports; none of them (nor a test module) imports it back,
    and no stage imports a test module."""
    offenders = [f"{name} -> {dep}" for name, deps in the_graph().items() if name.startswith("tokenspec.suite.")
                 for dep in deps if dep == "tokenspec.suite.plugin"
                 or (dep.startswith("tokenspec.suite.test_") and not name.startswith("tokenspec.suite.test_"))]
    assert not offenders, offenders


def test_every_module_imports() -> None:
    """A moved module leaves no import behind that names its old home (in a fresh interpreter: the suite's test
    modules are imported as modules there, never collected)."""
    import subprocess
    import sys

    names = sorted(modules())
    script = "\n".join([
        "import importlib, sys",
        "for name in sys.argv[1:]:",
        "    try:",
        "        importlib.import_module(name)",
        "    except Exception as exc:",
        "        print(f'{name}: {type(exc).__name__}: {exc}')"])
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout[-3000:] + done.stderr[-3000:]
