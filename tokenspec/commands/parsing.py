"""How a subcommand declares itself: plain-text help with defaults, its exit codes and examples, and the flags
several commands share (the run's, the transport's). Each command module's ``register`` builds its parser
with these; ``tokenspec.cli`` only assembles them."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence

#: The main job's default seed: the README's command gives the same verdict on every run and machine.
EMBEDDED_SEED = 20261201

#: ``tokenspec model build --family`` values (harness/models/families.py holds the facts of each).
MODEL_FAMILIES = ("tiny", "qwen3", "llama3", "deepseek-r1", "qwen3-coder", "gemma-4")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Plain-text help: descriptions and epilogs as written, and every option that has a default shows it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and "default:" not in text
            and default not in (None, False, argparse.SUPPRESS)
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's contract for usage errors: one line on stderr, exit code 2, and a did-you-mean for
    a mistyped flag, subcommand or choice (argparse alone reports ``--targt URL`` as a missing ``--target``).

    Unknown flags are refused before argparse checks required ones, by the parser that owns them, so the message
    names the flag the user meant and the subcommand's own --help."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        if unknown := self._unknown_flags(args):
            self._refuse(unknown)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not self._subcommands():
            self._refuse(extras)
        return parsed, extras

    def _refuse(self, unknown: list[str]) -> None:
        self.error(f"unrecognized argument{'s' if len(unknown) > 1 else ''}: "
                   + ", ".join(word + self._suggest(word, self._flags()) for word in unknown))

    def error(self, message: str) -> None:  # type: ignore[override]
        if refused := re.search(r"argument (\S+): invalid choice: '([^']*)'", message):
            hint = self._suggest(refused.group(2), self._choices(refused.group(1)))
            message = message[:refused.end()] + hint + message[refused.end():]
        self.exit(2, f"tokenspec: error: {self.prog}: {message} (see {self.prog} --help)\n")

    def _subcommands(self) -> list[argparse._SubParsersAction]:  # type: ignore[type-arg]
        return [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]

    def _flags(self) -> list[str]:
        return [flag for flag in self._option_string_actions if flag.startswith("--")]

    def _choices(self, name: str) -> list[str]:
        """The choices of the argument argparse names ``name`` in its message (a flag, or the subcommand metavar)."""
        for action in self._actions:
            if action.choices and name == argparse._get_action_name(action):
                return [str(choice) for choice in action.choices]
        return []

    def _unknown_flags(self, args: list[str]) -> list[str]:
        """Flags of ``args`` this parser does not know, even as an abbreviation: those before ``--`` and, where it
        has subcommands, before the first word (the subcommand's name, or a misspelling of it: the rest is its)."""
        mine = args[:args.index("--")] if "--" in args else args
        if self._subcommands():
            mine = next((mine[:i] for i, word in enumerate(mine) if not word.startswith("-")), mine)
        known = list(self._option_string_actions)
        unknown = []
        for word in mine:
            if word.startswith("--") and len(word) > 2:
                name = word.split("=", 1)[0]
                if name in known or (self.allow_abbrev and any(flag.startswith(name) for flag in known)):
                    continue  # a flag, its abbreviation, or an ambiguous one argparse itself reports
                unknown.append(name)
            elif len(word) > 1 and word[0] == "-" and word[1].isalpha() and word[:2] not in known:
                unknown.append(word[:2])
        return unknown

    @staticmethod
    def _suggest(word: str, candidates: Sequence[str]) -> str:
        close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
        return f" (did you mean {close[0]}?)" if close else ""


#: What every exit status means; each subcommand's --help lists the ones it can return.
EXIT_OK = "0  done"
EXIT_USAGE = "2  usage error: a bad flag or value, an unreachable URL, a missing file (one line on stderr)"
EXIT_INTERRUPTED = "130  interrupted (Ctrl-C, SIGINT); 143 for SIGTERM (the report says INTERRUPTED)"
RUN_EXITS = (
    "0  verdict PASS or PASS WITH KNOWN FAILURES: no MUST-level test failed unexpectedly",
    "1  verdict FAIL: a MUST-level test failed (or errored) and no expectation explains it",
    EXIT_USAGE,
    "3  INCONCLUSIVE, no verdict: a server the run needs (target, engine or reference) stopped answering;"
    " the tests that needed it after that are not tested (report.json: lost_servers)",
    EXIT_INTERRUPTED,
)


def command(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    summary: str,
    *,
    description: str = "",
    examples: Sequence[str] = (),
    exits: Sequence[str] = (EXIT_OK, EXIT_USAGE),
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does, how it exits and how it is used."""
    epilog = "exit codes:\n" + "\n".join(f"  {line}" for line in exits)
    if examples:
        epilog += "\n\nexamples:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}." + (f"\n\n{description}" if description else ""),
        epilog=epilog,
        formatter_class=HelpFormatter,
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``tokenspec run`` (also accepted by ``nox -s conformance -- ...``). Each may be kept in the
    settings file instead (``tokenspec/core/config_file.py``), so every default is None here and the defaults
    the help names are applied once, by ``RunConfig.from_args``."""
    p.add_argument("--config", metavar="FILE",
                   help="settings file (default: the nearest tokenspec.toml, or pyproject.toml with [tool.tokenspec],"
                        " at or above the working directory); flags override its settings")
    p.add_argument("--no-config", action="store_true", help="ignore any settings file")
    p.add_argument("--target", metavar="URL",
                   help="base URL (no /v1) hosting render/derender, and generate unless --engine is given")
    p.add_argument("--engine", metavar="URL", help="base URL hosting /inference/v1/generate")
    p.add_argument("--reference", metavar="URL",
                   help="a standard serve endpoint (/v1/chat/completions) used for parity")
    p.add_argument("--model", metavar="NAME",
                   help="model name, checked against the target's /v1/models (default: its first entry)")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="local model folder with the target's tokenizer, for token-level checks")
    p.add_argument("--report", metavar="DIR",
                   help="write report.json, summary.md, report.html and junit.xml here (default: a new temporary"
                        " folder)")
    p.add_argument("--level", choices=["must", "should", "may"], help="lowest level to run (default: may)")
    p.add_argument("--expectations", metavar="FILE",
                   help="YAML file of known failures (tokenspec init drafts one; tokenspec expectations draft)")
    p.add_argument("--profile", metavar="FILE",
                   help="YAML target profile: what the target declares (specs/profile.schema.json); "
                        "without it the probe decides")
    p.add_argument("-n", "--workers", help="parallel workers (pytest-xdist), or 0 for none (default: 2)")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="only tests matching this pytest -k expression")
    p.add_argument("--seed", type=int, help="hypothesis/schemathesis seed (default: random, printed by every run)")
    p.add_argument("--timeout", action="append", metavar="[ROLE=]SECONDS",
                   help="request timeout; ROLE is target, engine or reference, none for every role; repeatable"
                        " (default: target=30 engine=60 reference=60)")
    add_transport_arguments(p)
    p.add_argument("--max-examples", type=int, help="hypothesis examples per property test (default: 25)")
    p.add_argument("--no-shrink", action="store_true", default=None,
                   help="report a property test's first failing example without shrinking it (a faster verdict, "
                        "a longer reproduction)")
    p.add_argument("-v", "--verbose", action="store_true", default=None,
                   help="show pytest's own lines too (its header, each test's name), not only tokenspec's")
    p.add_argument("--require-judged", choices=["must", "should", "may"], metavar="LEVEL",
                   help="fail the run (exit 1) when a requirement of LEVEL or stronger that this run's tests cite"
                        " was never judged (each of its tests not tested or broken); must, should or may")


def add_transport_arguments(p: argparse.ArgumentParser) -> None:
    """Credentials, TLS and rate flags of every command that talks to a server (tokenspec/core/transport.py)."""
    p.add_argument("--api-key-env", action="append", metavar="[ROLE=]NAME",
                   help="environment variable holding the API key, sent as `Authorization: Bearer`; ROLE is"
                        " target, engine or reference (none: every role; ROLE= with no name: no key for it);"
                        " repeatable (default: TOKENSPEC_API_KEY, when it is set)")
    p.add_argument("--header", action="append", metavar="[ROLE=]'NAME: VALUE'",
                   help="extra request header; VALUE may be $ENV_VAR (keep secrets there: reports show the"
                        " variable, never its value); repeatable")
    p.add_argument("--ca-bundle", metavar="FILE", help="PEM file of the CA(s) that sign the servers' TLS certificates")
    p.add_argument("--insecure", action="store_true", default=None,
                   help="do not verify TLS certificates (the report's headline says so)")
    p.add_argument("--max-concurrency", type=int, metavar="N", help="at most N requests in flight, whole run")
    p.add_argument("--max-rps", type=float, metavar="R", help="at most R requests started per second, whole run")
