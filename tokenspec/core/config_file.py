"""A run's settings kept in a file: ``tokenspec.toml``, or ``[tool.tokenspec]`` in ``pyproject.toml``.

An implementer's CI gate keeps its target, roles, files and policy in the repository (as pytest, schemathesis
and nox users keep theirs) instead of a long command line. The file holds exactly the options of
``tokenspec run``, under the flags' names; flags given on the command line override it. Paths are relative to
the file's folder, so the gate gives the same run from any working directory. Secrets never live here: keys are
named by the environment variable that holds them (``api-key-env``), as with the flags.

The file is found in the working directory or the nearest folder above it that has one (``tokenspec.toml``
first, then a ``pyproject.toml`` with a ``[tool.tokenspec]`` table), or named with ``--config FILE``.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from tokenspec.core.errors import UsageError

__all__ = ["CONFIG_NAME", "SETTINGS_SCHEMA", "FileSettings", "find_config", "load_config"]

CONFIG_NAME = "tokenspec.toml"

_ROLES = ["target", "engine", "reference"]
_URL = {"type": "string", "pattern": "^https?://"}
_PATH = {"type": "string", "minLength": 1}
_LEVEL = {"enum": ["must", "should", "may"]}
_PER_ROLE_NUMBER = {"type": "object", "propertyNames": {"enum": _ROLES},
                    "additionalProperties": {"type": "number", "exclusiveMinimum": 0}}

#: The settings a file may hold: the options of ``tokenspec run`` (flag names without the dashes).
SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "target": _URL, "engine": _URL, "reference": _URL,
        "model": {"type": "string", "minLength": 1},
        "tokenizer": _PATH, "report": _PATH, "expectations": _PATH, "profile": _PATH, "ca-bundle": _PATH,
        "level": _LEVEL, "require-judged": _LEVEL,
        "workers": {"type": "integer", "minimum": 0},
        "keyword": {"type": "string"},
        "seed": {"type": "integer", "minimum": 0},
        "max-examples": {"type": "integer", "minimum": 1},
        "no-shrink": {"type": "boolean"},
        "insecure": {"type": "boolean"},
        "verbose": {"type": "boolean"},
        "max-concurrency": {"type": "integer", "minimum": 1},
        "max-rps": {"type": "number", "exclusiveMinimum": 0},
        "timeout": {"oneOf": [{"type": "number", "exclusiveMinimum": 0}, _PER_ROLE_NUMBER]},
        "api-key-env": {"oneOf": [
            {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            {"type": "object", "propertyNames": {"enum": _ROLES},
             "additionalProperties": {"type": "string", "pattern": "^([A-Za-z_][A-Za-z0-9_]*)?$"}}]},
        "header": {"type": "array", "items": {"type": "string", "pattern": "^([a-z]+=)?[^:]+:"}},
    },
}

_PATHS = ("tokenizer", "report", "expectations", "profile", "ca-bundle")


@dataclass(frozen=True)
class FileSettings:
    """The settings of one file, under the ``tokenspec run`` flags' destinations (``api_key_env``, ...) and in
    the shapes those flags parse to, so one merge serves both."""

    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)


def find_config(start: Path) -> Path | None:
    """The nearest ``tokenspec.toml``, or ``pyproject.toml`` holding ``[tool.tokenspec]``, at or above ``start``."""
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder / CONFIG_NAME
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "tokenspec" in _read(pyproject).get("tool", {}):
            return pyproject
    return None


def load_config(path: Path | None) -> FileSettings:
    """The checked settings of ``path`` (none: no file). Every mistake is one line naming the file and the key."""
    if path is None:
        return FileSettings()
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    data = _read(path)
    table = data.get("tool", {}).get("tokenspec") if path.name == "pyproject.toml" else data
    if not isinstance(table, dict):
        raise UsageError(f"{path}: no [tool.tokenspec] table")
    _check(path, table)
    base = path.parent.resolve()
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in _PATHS:
            value = str((base / value) if not Path(value).is_absolute() else Path(value))
        values[key.replace("-", "_")] = _as_flag_value(key, value)
    return FileSettings(path=path, values=values)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None


def _check(path: Path, table: dict[str, Any]) -> None:
    known = SETTINGS_SCHEMA["properties"]
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; the settings are: {', '.join(known)}"
            raise UsageError(f"{path}: unknown setting '{key}'{hint}")
    validator = jsonschema.Draft202012Validator(SETTINGS_SCHEMA)
    error = jsonschema.exceptions.best_match(validator.iter_errors(table))
    if error is not None:
        key = ".".join(str(p) for p in error.absolute_path) or "(top)"
        raise UsageError(f"{path}: setting '{key}': {_explain(error)}")


def _explain(error: jsonschema.ValidationError) -> str:
    if error.validator == "pattern" and error.schema is _URL:
        return f"{error.instance!r} is not an http:// or https:// URL"
    if error.validator == "oneOf":
        return f"{error.instance!r} is neither a value for every role nor a table of target/engine/reference"
    return error.message


def _as_flag_value(key: str, value: Any) -> Any:
    """The value in the shape the flag's argparse action gives (repeatable ``[ROLE=]VALUE`` lists, strings)."""
    if key in ("timeout", "api-key-env"):
        if isinstance(value, dict):
            return [f"{role}={item:g}" if isinstance(item, (int, float)) else f"{role}={item}"
                    for role, item in value.items()]
        return [f"{value:g}" if isinstance(value, (int, float)) else str(value)]
    if key == "workers":
        return str(value)
    return value
