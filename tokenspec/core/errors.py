"""The one exception type the CLI turns into a one-line message and exit code 2.

Anything a user can get wrong (a bad URL, an unreachable target, a model folder that is not one) raises
``UsageError`` with a sentence that says what to do; ``tokenspec.cli`` prints it without a traceback.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["UsageError", "one_line", "read_user_yaml", "writable_folder"]


class UsageError(Exception):
    """Bad input from the user or the environment; the message is shown as is, exit code 2."""


def one_line(text: str) -> str:
    """A message as one line: the CLI's contract, whatever text a library put in an exception."""
    return "; ".join(part.strip() for part in text.strip().splitlines() if part.strip())


def read_user_yaml(path: object, what: str) -> object:
    """A YAML file the user named (profile, expectations): missing or malformed is a one-line usage error."""
    import yaml

    from tokenspec.core.yaml_files import load_yaml

    file = Path(str(path))
    try:
        return load_yaml(file.read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {file}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{what} {file} is not valid YAML: {str(exc).splitlines()[0]}") from None


def writable_folder(path: object, flag: str) -> Path:
    """A folder the user named for output (``--report``), created and proven writable before any work: a folder
    that cannot take the results would otherwise surface only at the end, as a traceback."""
    folder = Path(str(path))
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {folder} is a file; give a folder (it is created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tokenspec-probe-"):
            pass
    except NotADirectoryError:
        raise UsageError(f"{flag} {folder}: part of that path is a file, not a folder") from None
    except OSError as exc:
        raise UsageError(f"{flag} {folder}: cannot write there ({exc.strerror or exc})") from None
    return folder
