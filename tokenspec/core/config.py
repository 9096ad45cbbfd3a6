"""One typed configuration of a suite run.

The CLI builds a :class:`RunConfig` from its flags over the settings file's values (:meth:`RunConfig.from_args`,
``tokenspec/core/config_file.py``); the embedded job, the matrix and the mutants campaign build one directly. It
crosses into pytest as an object (and into xdist workers as :meth:`RunConfig.to_json`'s text), never as flags;
:meth:`RunConfig.cli_args` is the only way back to flags: the replay command a report prints, and the command
line of a run started as a child process.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field, fields

from tokenspec.core.config_file import FileSettings
from tokenspec.core.errors import UsageError
from tokenspec.core.target import normalise_url
from tokenspec.core.transport import Transport

__all__ = ["RunConfig"]

#: The ``tokenspec run`` options a settings file may hold, by argparse destination.
_RUN_SETTINGS = ("target", "engine", "reference", "model", "tokenizer", "report", "level", "expectations",
                 "profile", "workers", "keyword", "seed", "max_examples", "no_shrink", "require_judged", "verbose",
                 "timeout", "api_key_env", "header", "ca_bundle", "insecure", "max_concurrency", "max_rps")


@dataclass(frozen=True)
class RunConfig:
    target: str
    engine: str | None = None
    reference: str | None = None
    model: str | None = None
    tokenizer: str | None = None
    report: str | None = None
    level: str = "may"
    expectations: str | None = None
    profile: str | None = None
    workers: str = "2"
    keyword: str | None = None
    seed: int | None = None
    max_examples: int = 25
    no_shrink: bool = False
    require_judged: str | None = None
    #: pytest's own lines too (its header, each test's name), not only tokenspec's progress and summary.
    verbose: bool = False
    transport: Transport = field(default_factory=Transport)
    #: Where each setting that is not a default came from: "command line" or the settings file's path.
    origins: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("target", "engine", "reference"):
            if (url := getattr(self, name)) is not None:
                object.__setattr__(self, name, normalise_url(url))

    @classmethod
    def from_args(cls, args: argparse.Namespace, settings: FileSettings | None = None) -> RunConfig:
        """The flags of ``tokenspec run`` (``add_run_arguments``, whose defaults are all None) over the values of
        its settings file, checked: a flag given overrides the file, the file overrides the defaults."""
        given = vars(args)
        merged = dict(given)
        origins: dict[str, str] = {}
        for dest in _RUN_SETTINGS:
            if given.get(dest) is not None:
                origins[dest] = "command line"
            elif settings is not None and dest in settings.values:
                merged[dest] = settings.values[dest]
                origins[dest] = str(settings.path)
        if not merged.get("target"):
            raise UsageError("no target: pass --target URL, or set target in tokenspec.toml"
                             " (tokenspec init writes one)")
        values = argparse.Namespace(**merged)
        return cls(
            target=values.target, engine=values.engine, reference=values.reference, model=values.model,
            tokenizer=values.tokenizer, report=values.report, level=values.level or "may",
            expectations=values.expectations, profile=values.profile, workers=str(values.workers or "2"),
            keyword=values.keyword, seed=values.seed,
            max_examples=values.max_examples if values.max_examples is not None else 25,
            no_shrink=bool(values.no_shrink), require_judged=values.require_judged, verbose=bool(values.verbose),
            transport=Transport.from_args(values),
            origins={dest.replace("_", "-"): origin for dest, origin in origins.items()},
        )

    def to_json(self) -> str:
        """The whole configuration as text (secrets only by the names of the variables that hold them)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "transport"}
        return json.dumps({**data, "transport": json.loads(self.transport.to_json())})

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        data = json.loads(text)
        return cls(**{**data, "transport": Transport.from_json(json.dumps(data["transport"]))})

    @property
    def generate_url(self) -> str:
        return self.engine or self.target

    def urls(self) -> dict[str, str]:
        """The servers of this run by role."""
        return {role: url for role, url in (("target", self.target), ("engine", self.engine),
                                            ("reference", self.reference)) if url}

    def cli_args(self, *, seed: int | None = None, report: bool = True) -> list[str]:
        """The ``tokenspec run`` flags of this configuration (paths as given; secrets only by variable name)."""
        parts = ["--target", self.target]
        for flag, value in (("--engine", self.engine), ("--reference", self.reference), ("--model", self.model),
                            ("--tokenizer", self.tokenizer), ("--expectations", self.expectations),
                            ("--profile", self.profile), *((("--report", self.report),) if report else ())):
            if value:
                parts += [flag, str(value)]
        seed = self.seed if seed is None else seed
        if seed is not None:
            parts += ["--seed", str(seed)]
        parts += ["--level", self.level, "--max-examples", str(self.max_examples)]
        parts += self.transport.flags()
        if self.no_shrink:
            parts.append("--no-shrink")
        if self.require_judged:
            parts += ["--require-judged", self.require_judged]
        if self.verbose:
            parts.append("--verbose")
        if self.keyword:
            parts += ["-k", self.keyword]
        return parts

    def child_command(self) -> list[str]:
        """This run as a child process (``python -m tokenspec run ...``, with its report folder and workers): how a
        campaign runs the suite, each run with its own pytest, interrupts and exit code."""
        return [sys.executable, "-m", "tokenspec", "run", *self.cli_args(), "-n", self.workers]

    def replay_command(self, seed: int) -> str:
        """The ``tokenspec run`` command that replays this run: same servers, model, files, seed, level and
        examples. A report appends ``-k NAME`` to replay one test: argparse keeps the last ``-k``."""
        return shlex.join(["tokenspec", "run", *self.cli_args(seed=seed, report=False)])
