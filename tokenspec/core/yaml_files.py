"""YAML read the one way the project reads it: PyYAML's safe loader, in its C form (libyaml) when PyYAML has it.

Every suite process reads the spec, the catalogue and ``specs/parsers.yaml`` (1200 rows, 0.31 s in the pure-Python
loader, 0.04 s in libyaml's), and a CI run starts some hundred of them. Both loaders build the same data from the
project's files (``tests/test_yaml_files.py`` holds them to it); the pure-Python one is the fallback.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load_yaml"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """The data of one YAML document, as ``yaml.safe_load`` gives it."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (SafeLoader or its C form)
