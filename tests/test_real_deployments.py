"""The suite against deployments as they are run: behind an API key, TLS with a private CA, a rate limit.

The verdict behind all three must equal the plain run's, no secret may reach any artifact (and one does when
redaction is taken out), and a missing key or an unknown CA stops the run before any test with one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from doubles import echoing_the_key, rate_limited
from frontend_server import running_app

from tokenspec.harness.frontend import FrontendConfig, create_app
from tokenspec.harness.frontend.auth import ApiKeyGate, digest
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-tokenspec-test-5f3a9c1e7b2d4068"
SELECTION = "render or utilities or auth or errors"


def _run(url: str, out: Path, *args: str, env: dict | None = None, launcher: str | None = None) -> tuple[int, str]:
    head = [sys.executable, "-c", launcher] if launcher else [sys.executable, "-m", "tokenspec"]
    done = subprocess.run([*head, "run", "--target", url, "--report", str(out), "--seed", "20261201",
                           "--max-examples", "4", *args], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, **(env or {})})
    return done.returncode, done.stdout + done.stderr


def _verdicts(out: Path) -> dict[str, str]:
    report = json.loads((out / "report.json").read_text())
    return {t["nodeid"]: t["outcome"] for t in report["tests"]}


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory) -> tuple[str, str, str]:
    """A CA of its own and a certificate for 127.0.0.1 signed by it: (CA file, certificate, key)."""
    folder = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=tokenspec test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return str(folder / "ca.pem"), str(folder / "server.pem"), str(folder / "server.key")


def _frontend(tiny_model) -> FrontendConfig:
    return FrontendConfig(model_dir=tiny_model.model_dir, served_model_name=DEFAULT_MODEL_NAME, tool_parser="hermes",
                          reasoning_parser="qwen3")


def test_the_verdict_behind_a_key_tls_and_a_rate_limit_equals_the_plain_one(tiny_model, private_ca, tmp_path):
    ca, cert, key = private_ca
    config = _frontend(tiny_model)
    with running_app(create_app(config)) as url:
        plain_code, plain_out = _run(url, tmp_path / "plain", "-k", SELECTION, "--tokenizer", str(tiny_model.model_dir))
    guarded = ApiKeyGate(rate_limited(create_app(config), every=3), digests=(digest(SECRET),))
    with running_app(guarded, tls=(cert, key)) as url:
        assert url.startswith("https://")
        code, out = _run(url, tmp_path / "guarded", "-k", SELECTION, "--tokenizer", str(tiny_model.model_dir),
                         "--ca-bundle", ca, "--api-key-env", "DEPLOY_KEY", env={"DEPLOY_KEY": SECRET})
        no_key, no_key_out = _run(url, tmp_path / "no-key", "--ca-bundle", ca, "--model", DEFAULT_MODEL_NAME)
        no_ca, no_ca_out = _run(url, tmp_path / "no-ca", "--api-key-env", "DEPLOY_KEY", env={"DEPLOY_KEY": SECRET})
    assert (code, plain_code) == (0, 0), out[-3000:] + plain_out[-3000:]
    plain, behind = _verdicts(tmp_path / "plain"), _verdicts(tmp_path / "guarded")
    auth = {n for n in behind if n.startswith("test_auth.py::")}
    # Generate is not hosted by the frontend alone: its refusals are not tested, every other one is judged.
    assert auth and all(behind[n] == ("not_tested" if "[generate-" in n else "passed") for n in auth), {
        n: behind[n] for n in auth}
    assert all(plain[n] == "not_tested" for n in auth), "without a key the AUTH tests are not tested, never passed"
    assert {n: v for n, v in behind.items() if n not in auth} == {n: v for n, v in plain.items() if n not in auth}
    report = json.loads((tmp_path / "guarded" / "report.json").read_text())
    assert report["retries"] > 10 and "retried after 429/503" in report["headline"], report["headline"]
    assert report["headline"].split(":")[0] == json.loads((tmp_path / "plain" / "report.json").read_text()
                                                          )["headline"].split(":")[0]
    # Without the key: one line naming the role, the URL and the flag; no test ran.
    assert no_key == 2 and not (tmp_path / "no-key" / "report.json").exists(), no_key_out[-2000:]
    line = [x for x in no_key_out.splitlines() if x.startswith("tokenspec: error:")]
    assert len(line) == 1 and "401" in line[0] and "--api-key-env" in line[0] and url in line[0], no_key_out
    assert no_ca == 2 and "--ca-bundle" in no_ca_out and "Traceback" not in no_ca_out, no_ca_out[-2000:]
    _assert_no_secret(tmp_path / "guarded", out)


def _assert_no_secret(folder: Path, output: str) -> None:
    leaks = [str(p) for p in folder.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaks and SECRET not in output, f"the key reached {leaks or 'the terminal'}"


#: A run with redaction taken out: the same CLI, with the two redaction steps replaced by the identity.
WITHOUT_REDACTION = ("import sys, tokenspec.runner as r, tokenspec.core.transport as t;"
                     " t.redact_folder = lambda *a: None; r.redact = lambda text, secrets: text;"
                     " from tokenspec.cli import main; sys.argv[0] = 'tokenspec'; raise SystemExit(main(sys.argv[1:]))")


def test_a_key_echoed_by_the_server_never_reaches_the_report(tiny_model, tmp_path):
    """The double quotes the key in a failing answer: the report, summary, HTML, junit.xml, bodies/ and the
    terminal show $TOKENSPEC_API_KEY, and the printed curl still reproduces with the variable set. The same run
    with redaction taken out leaks it (the check can fail)."""
    app = ApiKeyGate(echoing_the_key(create_app(_frontend(tiny_model))), digests=(digest(SECRET),))
    env = {"TOKENSPEC_API_KEY": SECRET}
    with running_app(app) as url:
        code, out = _run(url, tmp_path / "redacted", "-n", "0", "-k", "version", env=env)
        _, leaky = _run(url, tmp_path / "leaky", "-n", "0", "-k", "version", env=env, launcher=WITHOUT_REDACTION)
        report = json.loads((tmp_path / "redacted" / "report.json").read_text())
        failed = [t for t in report["tests"] if t["outcome"] == "failed"]
        assert failed and "$TOKENSPEC_API_KEY" in failed[0]["message"], report["headline"]
        curl = failed[0]["reproduce"]
        assert '"Authorization: Bearer $TOKENSPEC_API_KEY"' in curl, curl
        replay = subprocess.run(["bash", "-c", curl + " -o /dev/null -w '%{http_code}'"], capture_output=True,
                                text=True, timeout=30, env={**os.environ, **env})
        assert replay.stdout == "404", "the curl reproduces the failing answer once the variable is set"
    _assert_no_secret(tmp_path / "redacted", out)
    with pytest.raises(AssertionError, match="the key reached"):
        _assert_no_secret(tmp_path / "leaky", leaky)


def test_a_key_refused_on_a_route_but_not_on_the_model_list_stops_the_run(tiny_model, tmp_path):
    """A gateway that leaves /v1/models open and guards render: the run stops before any test, naming the route."""
    plain = create_app(_frontend(tiny_model))
    guarded = ApiKeyGate(plain, digests=(digest(SECRET),))

    async def app(scope, receive, send):
        await (plain if scope.get("path") == "/v1/models" else guarded)(scope, receive, send)

    with running_app(app) as url:
        code, out = _run(url, tmp_path / "run", env={"TOKENSPEC_API_KEY": "sk-not-the-deployment-key"})
    line = [x for x in out.splitlines() if x.startswith("tokenspec: error:")]
    assert code == 2 and len(line) == 1, out[-2000:]
    assert "401 to POST /v1/chat/completions/render" in line[0] and "$TOKENSPEC_API_KEY was refused" in line[0], line


def test_a_mutants_campaign_behind_a_key_keeps_it_out_of_every_artifact(tiny_model, tmp_path):
    """The same echoing, key-protected server judged by a one-defect campaign: the proxies pass the key through,
    and neither the campaign's pages nor any of its runs' reports holds it."""
    app = ApiKeyGate(echoing_the_key(create_app(_frontend(tiny_model))), digests=(digest(SECRET),))
    with running_app(app) as url:
        done = subprocess.run([sys.executable, "-m", "tokenspec", "mutants", "--target", url, "--only",
                               "derender-drops-usage", "--max-examples", "1", "--report", str(tmp_path / "mutants")],
                              capture_output=True, text=True, timeout=900, cwd=ROOT,
                              env={**os.environ, "TOKENSPEC_API_KEY": SECRET})
    out = done.stdout + done.stderr
    assert (tmp_path / "mutants" / "mutants.json").is_file(), out[-3000:]
    runs = list((tmp_path / "mutants").rglob("report.json"))
    assert len(runs) >= 2 and any("$TOKENSPEC_API_KEY" in p.read_text() for p in runs), "the echo reached a report"
    _assert_no_secret(tmp_path / "mutants", out)
