"""The docs site's generated page: docs/requirements.md's catalogue, from specs/ and the suite itself.

Each requirement with its level, the releases it holds for, its sentence and the suite's tests that cite it
(read from their ``@pytest.mark.req`` markers), so the page cannot drift from what the suite judges.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- the catalogue, generated -->"


def citations(suite: Path = ROOT / "suite") -> dict[str, list[str]]:
    """Requirement ID -> the tests (``module::function``) whose ``req`` markers cite it, and the modules that cite
    it from their data tables (parametrized cases charged at run time)."""
    cited: dict[str, list[str]] = defaultdict(list)
    for module in sorted(suite.glob("test_*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test"):
                continue
            marks = [call for decorator in node.decorator_list for call in ast.walk(decorator)
                     if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "req"]
            for call in marks:  # its own markers, and those of its parametrized cases
                for arg in call.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        if f"{module.name}::{node.name}" not in cited[arg.value]:
                            cited[arg.value].append(f"{module.name}::{node.name}")
        for found in re.finditer(r"[\"']([A-Z]+-\d{3})[\"']", module.read_text()):
            if not any(t.startswith(module.name) for t in cited[found.group(1)]):
                cited[found.group(1)].append(f"{module.name} (cited from its data tables)")
    return cited


def catalogue_markdown() -> str:
    from tokenspec.specs.catalogue import read_catalogue

    cited = citations()
    by_area: dict[str, list[Any]] = defaultdict(list)
    for req in read_catalogue():
        by_area[req.area].append(req)
    lines = [f"{sum(len(v) for v in by_area.values())} requirements in {len(by_area)} areas.", ""]
    for area, reqs in sorted(by_area.items()):
        lines += [f"## {area}", "", "| ID | level | releases | requirement | tests |", "|---|---|---|---|---|"]
        for req in reqs:
            releases = f"{req.since or ''}-{req.until or ''}" if (req.since or req.until) else "all"
            statement = ("~~" + req.statement + "~~ (withdrawn)") if req.withdrawn else req.statement
            tests = "<br>".join(f"`{t}`" for t in cited.get(req.id, [])) or "-"
            lines.append(f"| <span id=\"{req.id.lower()}\">{req.id}</span> | {req.level} | {releases} |"
                         f" {statement.replace('|', '&#124;')} | {tests} |")
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == "requirements.md":
        return markdown.replace(MARKER, catalogue_markdown())
    return markdown
