"""A streaming parser's progress as a small JSON object the client carries between derender calls.

Streaming derender is stateless on the server: everything a parser needs to continue travels in
``stream_state``. Carrying the parser's progress (its mode and the text it has not decided yet) instead of the
output history is what keeps a chunk's cost and the state's size flat as a stream grows (STREAM-019): the
alternative, replaying the whole history through a fresh parser on every call, costs O(n) per chunk.

Each parser names the attributes that make up its progress and a JSON Schema for each; a carried progress is
checked against them before it is trusted, so a tampered one is a 400 (STREAM-013), never a 5xx.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from jsonschema import Draft202012Validator


class InvalidProgress(ValueError):
    """A carried parser progress that this parser could not have written."""


TEXT: dict[str, Any] = {"type": "string"}
COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
FLAG: dict[str, Any] = {"type": "boolean"}


@cache
def _validator(cls: type[Resumable]) -> Draft202012Validator:
    schema = {"type": "object", "additionalProperties": False, "required": sorted(cls.PROGRESS),
              "properties": cls.PROGRESS}
    return Draft202012Validator(schema)


class Resumable:
    """Mixin: ``progress()`` out, ``resume(saved)`` back in, for the attributes named in ``PROGRESS``."""

    #: attribute name -> JSON Schema of its value; together they are all a stream needs to continue
    PROGRESS: ClassVar[dict[str, Any]] = {}

    def progress(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.PROGRESS}

    def resume(self, saved: Any) -> None:
        error = next(iter(_validator(type(self)).iter_errors(saved)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "progress"
            raise InvalidProgress(f"{type(self).__name__} {where}: {error.message}")
        for name in self.PROGRESS:
            setattr(self, name, saved[name])
