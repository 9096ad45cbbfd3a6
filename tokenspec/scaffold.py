"""What ``tokenspec init`` writes into an implementer's repository: a gate that passes the day it is set up.

The target is probed once; what it was seen to offer becomes the profile draft, so later runs judge those
features as commitments (a feature that disappears fails PROFILE-001 instead of going quietly untested). A first
run with that profile and a fixed seed draws the examples every later gate run draws; its unexpected failures
become the expectations draft, each with its evidence and a reason left to write, so the gate passes with
known failures only until the server changes. The settings file ties them together, and the CI workflow and the
nox session run exactly ``tokenspec run`` on it.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomli_w
import yaml

from tokenspec.core.config import RunConfig
from tokenspec.core.config_file import CONFIG_NAME
from tokenspec.core.errors import UsageError

PROFILE = Path("conformance") / "profile.yaml"
EXPECTATIONS = Path("conformance") / "expectations.yaml"
REPORT = "tokenspec-report"
WORKFLOW = Path(".github") / "workflows" / "tokenspec.yml"

#: The ``tokenspec run`` options ``tokenspec init`` takes and writes into the settings file as given.
_WRITTEN = ("target", "engine", "reference", "model", "tokenizer", "level", "workers", "keyword", "max_examples",
            "no_shrink", "ca_bundle", "insecure", "max_concurrency", "max_rps", "header")


def probe_profile(config: RunConfig, implementation: dict[str, str]) -> dict[str, Any]:
    """The profile draft: every feature and parser the probe saw the target offer, the roles it does not host
    (declared absent, so their tests are unsupported rather than a gap of every run) and the optional request
    fields it honours; what the probe could not see stays undeclared (the probe decides it on every run)."""
    from tokenspec.specs.catalogue import SPEC_DIR
    from tokenspec.suite.engine.probe import probe
    from tokenspec.suite.engine.target import Codec, Target

    schema = yaml.safe_load((SPEC_DIR / "profile.schema.json").read_text())
    declarable = set(schema["$defs"]["feature"]["enum"])
    fields = set(schema["properties"]["optional_request_fields"]["items"]["enum"])
    assert config.model is not None and config.seed is not None
    target = Target(url=config.target, engine_url=config.engine, reference_url=config.reference, model=config.model,
                    tokenizer_dir=Path(config.tokenizer) if config.tokenizer else None,
                    timeout=config.transport.timeout("target"), max_examples=config.max_examples, seed=config.seed,
                    transport=config.transport)
    caps = probe(target, Codec(target))
    profile: dict[str, Any] = {"implementation": implementation}
    parsers = {kind: name for kind, name in caps.parsers.items() if name}
    if parsers:
        profile["parsers"] = parsers
    profile["features"] = {
        name: decision.status == "offered" for name, decision in sorted(caps.decisions.items())
        if name in declarable and (decision.status != "not-tested" or decision.evidence.startswith("not hosted"))}
    if caps.fields is not None:
        profile["optional_request_fields"] = sorted(caps.fields & fields)
    return profile


def settings_text(config: RunConfig, given: dict[str, Any], unjudged_must: int) -> str:
    """tokenspec.toml: the options given to ``tokenspec init``, the files it made, the seed of the first run."""
    settings: dict[str, Any] = {}
    for dest in _WRITTEN:
        value = given.get(dest)
        if value is None or value is False:
            continue
        if dest in ("tokenizer", "ca_bundle"):
            value = str(Path(value).resolve())
        settings[dest.replace("_", "-")] = int(value) if dest == "workers" else value
    settings.update({"profile": str(PROFILE), "expectations": str(EXPECTATIONS), "report": REPORT,
                     "seed": config.seed})
    if given.get("require_judged"):
        settings["require-judged"] = given["require_judged"]
    elif unjudged_must == 0:
        settings["require-judged"] = "must"
    for dest, key in (("api_key_env", "api-key-env"), ("timeout", "timeout")):
        if given.get(dest):
            settings[key] = _per_role(given[dest], float if dest == "timeout" else str)
    header = ("# tokenspec's settings for this repository (`tokenspec run` reads them; a flag overrides one).\n"
              "# Written by `tokenspec init`; the settings are `tokenspec run`'s options without the dashes.\n")
    if unjudged_must and "require-judged" not in settings:
        header += (f"# require-judged = \"must\" is not set: the first run could not judge {unjudged_must} MUST\n"
                   "# requirement(s) (its summary.md says why, and which flag judges each).\n")
    return header + tomli_w.dumps(settings)


def _per_role(values: list[str], kind: type) -> Any:
    """Repeatable ``[ROLE=]VALUE`` flags as the settings file writes them: one value, or a table by role."""
    if len(values) == 1 and "=" not in values[0]:
        return kind(values[0])
    table: dict[str, Any] = {}
    for value in values:
        role, _, item = value.rpartition("=")
        for one in ([role] if role else ["target", "engine", "reference"]):
            table[one] = kind(item)
    return table


def expectations_text(report: dict[str, Any], implementation: dict[str, str]) -> str:
    from tokenspec.suite.engine.expectations import draft

    return ("# Known failures of this server, drafted by `tokenspec init` from its first run (same seed as the\n"
            "# gate's). Each entry is a failure seen then: write its reason, or fix the server and delete it\n"
            "# (`tokenspec expectations prune` drops entries no failure needs any more).\n"
            + draft(report, implementation, {}))


def workflow_text(install: str, start: str | None, target: str, key_variables: tuple[str, ...] = ()) -> str:
    """The GitHub Actions workflow of the gate: once per pull request (and on pushes to main), the settings file
    as the one source of the run, the report kept as an artifact. ``key_variables``: the environment variables
    the settings name for API keys, each filled from the repository secret of the same name."""
    local = urlsplit(target).hostname in ("127.0.0.1", "localhost", "::1")
    port = urlsplit(target).port or 80
    start_step = ""
    if start:
        start_step = (
            "      - name: start the server under test\n"
            "        run: |\n"
            f"          ({start}) > server.log 2>&1 &\n"
            f"          for i in $(seq 1 150); do curl -sf {target}/health >/dev/null && exit 0; sleep 2; done\n"
            "          cat server.log; exit 1\n")
    elif local:
        start_step = (f"      # The target is this runner's port {port}: add the step that starts your server here\n"
                      "      # (or run `tokenspec init --start 'COMMAND'` to have it written).\n")
    return (
        "# The tokenspec conformance gate, written by `tokenspec init`. Settings: tokenspec.toml; known failures:\n"
        f"# {EXPECTATIONS}. Exit codes: 0 pass, 1 an unexpected MUST failure (or a MUST never judged when\n"
        "# require-judged is set), 2 a usage error, 3 no verdict (a server stopped answering).\n"
        "name: tokenspec\n"
        "on:\n"
        "  pull_request:\n"
        "  push:\n"
        "    branches: [main]\n"
        "jobs:\n"
        "  conformance:\n"
        "    runs-on: ubuntu-latest\n"
        "    timeout-minutes: 60\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - uses: actions/setup-python@v5\n"
        "        with:\n"
        "          python-version: \"3.11\"\n"
        "      - name: install tokenspec\n"
        f"        run: python -m pip install {_quoted(install)}\n"
        f"{start_step}"
        "      - name: conformance gate\n"
        "        env:\n"
        + "".join(f"          {name}: ${{{{ secrets.{name} }}}}\n"
                  for name in (key_variables or ("TOKENSPEC_API_KEY",))) +
        "        run: tokenspec run\n"
        "      - name: keep the report\n"
        "        if: always()\n"
        "        uses: actions/upload-artifact@v4\n"
        "        with:\n"
        "          name: tokenspec-report\n"
        f"          path: {REPORT}\n")


NOX_SESSION = '''

@nox.session(name="conformance", reuse_venv=True)
def tokenspec_conformance(session: nox.Session) -> None:
    """The tokenspec gate (written by `tokenspec init`): `tokenspec run` on tokenspec.toml; posargs are its flags,
    after nox's `--` (`nox -s conformance -- --seed 5`). Installs tokenspec once per virtualenv and ends with
    tokenspec's own exit status (0 pass, 1 fail, 2 usage, 3 no verdict, 130/143 interrupted)."""
    import subprocess
    from pathlib import Path as _Path

    marker = _Path(session.virtualenv.location) / ".tokenspec-installed"
    if not marker.is_file() or marker.read_text() != TOKENSPEC_INSTALL:
        session.install(TOKENSPEC_INSTALL)
        marker.write_text(TOKENSPEC_INSTALL)
    code = subprocess.call([str(_Path(session.bin) / "tokenspec"), "run", *session.posargs])
    if code:
        raise SystemExit(code if code in (1, 2, 3, 130, 143) else 1)
'''


def noxfile_text(existing: str | None, install: str) -> str | None:
    """The noxfile with the gate's session added; None when it already has a ``conformance`` session."""
    if existing is not None and ('"conformance"' in existing or "def conformance(" in existing):
        return None
    head = existing.rstrip("\n") + "\n" if existing else '"""nox sessions of this repository."""\n'
    if existing is None or "import nox" not in existing:
        head += "\nimport nox\n"
    return head + f"\nTOKENSPEC_INSTALL = {install!r}\n" + NOX_SESSION


def _quoted(text: str) -> str:
    return f'"{text}"' if any(c in text for c in " <>;&|$") else text


def new_seed() -> int:
    return random.randrange(1, 1 << 31)


def implementation_of(config: RunConfig, named: str | None) -> dict[str, str]:
    """``NAME VERSION`` as given, else the server's /version and its model card's owner (vLLM's shape)."""
    if named:
        name, _, version = named.partition(" ")
        return {"name": name, "version": version or "unknown"}
    from tokenspec.suite.engine.target import model_card

    card = model_card(config.target, config.transport, model=config.model)
    version = "unknown"
    try:
        with config.transport.client("target") as client:
            answer = client.get(f"{config.target}/version")
        if answer.status_code == 200 and isinstance(answer.json(), dict):
            version = str(answer.json().get("version") or "unknown")
    except Exception:  # noqa: BLE001 - a server without /version keeps "unknown"
        pass
    return {"name": str(card.get("owned_by") or urlsplit(config.target).hostname or "server"), "version": version}


def refuse_overwrite(root: Path, force: bool) -> None:
    if (root / CONFIG_NAME).exists() and not force:
        raise UsageError(f"{root / CONFIG_NAME} exists: this repository has a gate already (--force rewrites it)")


def with_first_run_settings(config: RunConfig, root: Path) -> RunConfig:
    seed = config.seed if config.seed is not None else new_seed()
    return replace(config, seed=seed, report=str(root / REPORT))
