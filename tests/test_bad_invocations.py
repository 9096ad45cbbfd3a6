"""Every bad invocation of the real CLI is one line on stderr and exit code 2 (issue 36).

Each case runs ``python -m tokenspec`` as a subprocess, as a user would, against real servers on loopback: the
bundled frontend (an LLM server that answers) and Python's own ``http.server`` (a web server that is not one).
The report-folder cases point at a live target, so a folder checked only after the suite would show here as
test output and a traceback rather than as one line before any test.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Servers:
    llm: str
    web: str


@dataclass(frozen=True)
class Case:
    args: Callable[[Servers, Path], list[str]]
    says: str
    quiet: bool = False  # stdout must be empty too: nothing (no test, no comparison) ran before the refusal


def _unwritable(tmp: Path) -> Path:
    """A folder this process cannot write to: read-only by mode, or, for root (whom modes do not stop), sysfs."""
    if os.geteuid() == 0:
        return Path("/sys/tokenspec-report")
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "report"


def _a_file(tmp: Path) -> Path:
    file = tmp / "a-file"
    file.write_text("not a folder")
    return file


def _profile(tmp: Path) -> Path:
    file = tmp / "profile.yaml"
    file.write_text("features: {tools: [\n")
    return file


SUITE = ["-k", "test_models", "-n", "0"]  # a few seconds of suite, were a folder checked only after it

CASES = {
    "unknown-flag": Case(lambda s, t: ["run", "--target", s.llm, "--frobnicate"],
                         "unrecognized argument: --frobnicate"),
    "flag-typo-read-as-missing-target": Case(lambda s, t: ["run", "--targt", s.llm],
                                             "--targt (did you mean --target?)"),
    "flag-typo": Case(lambda s, t: ["run", "--target", s.llm, "--levle", "must"], "--levle (did you mean --level?)"),
    "top-level-flag-typo": Case(lambda s, t: ["--verison"], "--verison (did you mean --version?)"),
    "unknown-short-flag": Case(lambda s, t: ["run", "--target", s.llm, "-x"], "run: unrecognized argument: -x"),
    "extra-word": Case(lambda s, t: ["run", "--target", s.llm, "again"], "run: unrecognized argument: again"),
    "subcommand-typo": Case(lambda s, t: ["rn", "--target", s.llm], "invalid choice: 'rn' (did you mean run?)"),
    "nested-subcommand-typo": Case(lambda s, t: ["model", "biuld", str(t / "m")], "(did you mean build?)"),
    "choice-typo": Case(lambda s, t: ["run", "--target", s.llm, "--level", "shuld"], "(did you mean should?)"),
    "missing-value": Case(lambda s, t: ["run", "--target"], "argument --target: expected one argument"),
    "unwritable-report-folder": Case(lambda s, t: ["run", "--target", s.llm, "--report", str(_unwritable(t)), *SUITE],
                                     "cannot write there", quiet=True),
    "report-under-a-file": Case(lambda s, t: ["run", "--target", s.llm, "--report", str(_a_file(t) / "r"), *SUITE],
                                "part of that path is a file", quiet=True),
    "report-is-a-file": Case(lambda s, t: ["run", "--target", s.llm, "--report", str(_a_file(t)), *SUITE],
                             "is a file; give a folder", quiet=True),
    "parity-report-is-a-file": Case(lambda s, t: ["parity", "--a", s.llm, "--b", s.llm, "--report", str(_a_file(t))],
                                    "is a file; give a folder", quiet=True),
    "not-a-url": Case(lambda s, t: ["run", "--target", "notaurl"], "not an http(s) URL: 'notaurl'"),
    "ftp-url": Case(lambda s, t: ["run", "--target", "ftp://x"], "not an http(s) URL: 'ftp://x'"),
    "web-server-not-llm": Case(lambda s, t: ["run", "--target", s.web],
                               "is not an LLM server: /v1/models answered 404 text/html", quiet=True),
    "web-server-with-model": Case(lambda s, t: ["run", "--target", s.web, "--model", "m"],
                                  "is not an LLM server: /v1/models answered 404 text/html", quiet=True),
    "missing-expectations": Case(lambda s, t: ["run", "--target", s.llm, "--expectations", str(t / "nope.yaml")],
                                 "expectations file not found", quiet=True),
    "malformed-profile": Case(lambda s, t: ["run", "--target", s.llm, "--profile", str(_profile(t))],
                              "is not valid YAML", quiet=True),
}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def servers(tiny_model, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The bundled frontend (an LLM server) and a plain static-file web server, both on loopback."""
    from broken_server import frontend_config
    from frontend_server import running_frontend

    from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

    handler = functools.partial(_QuietHandler, directory=str(tmp_path_factory.mktemp("www")))
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    try:
        with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as llm:
            yield Servers(llm=llm, web=f"http://127.0.0.1:{web.server_address[1]}")
    finally:
        web.shutdown()
        web.server_close()


@pytest.mark.parametrize("name", CASES)
def test_a_bad_invocation_is_one_line_and_exit_2(name: str, servers: Servers, tmp_path: Path) -> None:
    case = CASES[name]
    args = case.args(servers, tmp_path)
    done = subprocess.run([sys.executable, "-m", "tokenspec", *args], capture_output=True, text=True, timeout=120)
    shown = f"tokenspec {' '.join(args)}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stdout + done.stderr, shown
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tokenspec: error: "), shown
    assert case.says in lines[0], shown
    assert done.returncode == 2, shown
    if case.quiet:
        assert done.stdout == "", shown
