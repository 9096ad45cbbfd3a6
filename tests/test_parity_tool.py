"""`tokenspec parity` against two labelled TEST DOUBLE servers: one agrees with itself, one differs, one is a
hosted-style API that refuses `return_token_ids`. The comparison and the reports must say exactly that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from frontend_server import running_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tokenspec.cli import main

ROOT = Path(__file__).resolve().parents[1]


def canned_server(content: str, token_ids: bool = True) -> Starlette:
    """TEST DOUBLE of an OpenAI-compatible server: every chat answer is ``content``."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        if "return_token_ids" in body and not token_ids:
            return JSONResponse({"error": {"message": "Unrecognized request argument: return_token_ids",
                                           "type": "invalid_request_error", "param": None, "code": 400}}, 400)
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if token_ids:
            choice["token_ids"] = [1, 2, 3]
        return JSONResponse({"id": "x", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                                      "total_tokens": 6}})

    async def completions(request: Request) -> Response:
        choice = {"index": 0, "text": content, "finish_reason": "stop"}
        return JSONResponse({"id": "x", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                                      "total_tokens": 6}})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/completions", completions, methods=["POST"]),
                             Route("/v1/models", models), Route("/health", health)])


def test_identical_servers_agree_everywhere(tmp_path: Path) -> None:
    with running_app(canned_server("same")) as a, running_app(canned_server("same")) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "parity.json").read_text())
    assert report["agreement"]["content"]["rate"] == 1.0 and report["agreement"]["token_ids"]["agree"] == 8


def test_a_difference_is_counted_and_shown_side_by_side(tmp_path: Path, capsys) -> None:
    with running_app(canned_server("Paris")) as a, running_app(canned_server("paris")) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "parity.json").read_text())
    assert report["agreement"]["content"]["disagree"] == 8 and report["agreement"]["text"]["disagree"] == 2
    page = (tmp_path / "parity.html").read_text()
    assert "aris" in page and "diff_chg" in page and "case-" in page
    assert "10 cases generated from seed 0. No errors." in page and "<h2>Disagreements (10)</h2>" in page
    assert "<h2>Errors" not in page
    assert "tokenspec: parity FAIL: 10 disagreements (content 8, text 2)\n" in capsys.readouterr().out


def _traffic(outcomes: list) -> dict:
    from tokenspec.campaigns.traffic import to_report

    return to_report(outcomes, [], {"target": "http://t", "engine": "http://e", "reference": "http://r"}, "m")


def test_the_report_s_sentences_are_right_for_0_1_and_many() -> None:
    """Singular and plural, no empty list after a colon, errors apart from disagreements, whatever the count."""
    from tokenspec.campaigns.parity import to_html, to_json, verdict
    from tokenspec.campaigns.traffic import Outcome
    from tokenspec.campaigns.traffic import Request as Line

    def outcome(n: int, mode: str = "", error: str = "", agree: bool = True) -> Outcome:
        fields = {"content": (agree, "x", "x" if agree else "y")} if mode else {}
        return Outcome(Line(n, f"r{n}", "chat", {}), mode=mode, fields=fields,
                       errors={"reference": error} if error else {})

    none = to_json("http://a", "http://b", "m", 7, [])
    assert "0 cases generated from seed 7. No errors." in to_html(none)
    assert verdict(none) == (0, "tokenspec: parity PASS: 0 cases, no disagreement and no error")
    one = _traffic([outcome(1, error="answered 404: Not Found")])
    page = to_html(one)
    assert "1 request of the operator&#x27;s file. 1 request of 1 failed with an error" in page, page
    assert "<h2>Disagreements</h2><p>None.</p>" in page and "<h2>Errors (1)</h2><h3>r1</h3>" in page
    assert ": ," not in page and "1 requests" not in page
    many = _traffic([outcome(1, "tokens"), outcome(2, "greedy", agree=False), outcome(3, error="HTTP 500"),
                     outcome(4, "tokens")])
    page = to_html(many)
    assert ("4 requests of the operator&#x27;s file (2 compared at the tokens level, 1 compared at the greedy"
            " level). 1 request of 4 failed with an error") in page, page
    assert "<h2>Disagreements (1)</h2><h3>r2: content</h3>" in page and "<h2>Errors (1)</h2><h3>r3</h3>" in page
    assert verdict(many) == (1, "tokenspec: parity FAIL: 1 disagreement (content 1); 1 request of 4 failed with an"
                                " error (first, r3: reference: HTTP 500)")


def test_a_reference_that_answers_404_is_named_on_the_terminal(tmp_path: Path, capsys) -> None:
    """One valid line, a reference without the route: exit 1, the terminal names the 404, the page lists it as an
    error (not a disagreement)."""
    line = {"custom_id": "only", "method": "POST", "url": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": "Hi"}]}}
    requests = tmp_path / "traffic.jsonl"
    requests.write_text(json.dumps(line) + "\n")
    with running_app(canned_server("x")) as target, running_app(Starlette(routes=[]), health=None) as reference:
        code = main(["parity", "--requests", str(requests), "--target", target, "--reference", reference,
                     "--report", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 1
    assert (f"tokenspec: parity FAIL: 1 request of 1 failed with an error (first, only: reference: POST {reference}"
            "/v1/chat/completions answered 404: Not Found)") in out, out
    page = (tmp_path / "out" / "parity.html").read_text()
    assert "1 request of the operator&#x27;s file. 1 request of 1 failed with an error" in page, page
    assert "<h2>Disagreements</h2><p>None.</p>" in page and "answered 404" in page.split("<h2>Errors (1)</h2>")[1]


def test_hosted_api_without_token_ids_compares_what_is_exposed(tmp_path: Path) -> None:
    with running_app(canned_server("same")) as a, running_app(canned_server("same", token_ids=False)) as b:
        assert main(["parity", "--a", a, "--b", b, "--cases", "10", "--report", str(tmp_path)]) == 0
    agreement = json.loads((tmp_path / "parity.json").read_text())["agreement"]
    assert agreement["token_ids"]["not_comparable"] == 10 and agreement["content"]["agree"] == 8


def test_a_key_the_servers_echo_never_reaches_the_parity_report(tmp_path: Path, monkeypatch, capsys) -> None:
    """B answers every request 400 quoting the Authorization header it got (the key of the reference role): the
    errors are in parity.json, the key is not, and it is when redaction is taken out (the check can fail)."""
    from starlette.routing import Route as R

    secret = "sk-parity-secret-8c1f0e7d"

    async def echo(request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        return JSONResponse({"error": {"message": f"bad key {auth}", "type": "BadRequestError", "param": None,
                                       "code": 400}}, 400)

    echoing = Starlette(routes=[R("/v1/chat/completions", echo, methods=["POST"]),
                                R("/v1/completions", echo, methods=["POST"]), R("/health", echo)])
    monkeypatch.setenv("TOKENSPEC_API_KEY", secret)
    out = {}
    with running_app(canned_server("same")) as a, running_app(echoing, health=None) as b:
        for name in ("redacted", "leaky"):
            if name == "leaky":
                import tokenspec.core.transport

                monkeypatch.setattr(tokenspec.core.transport, "redact", lambda text, secrets: text)
            assert main(["parity", "--a", a, "--b", b, "--cases", "3", "--report", str(tmp_path / name)]) == 1
            out[name] = capsys.readouterr().out
    redacted = (tmp_path / "redacted" / "parity.json").read_text()
    assert "bad key Bearer $TOKENSPEC_API_KEY" in redacted and secret not in redacted
    assert "bad key Bearer $TOKENSPEC_API_KEY" in out["redacted"] and secret not in out["redacted"], \
        "the terminal names the error, redacted"
    assert secret in out["leaky"], "without redaction the terminal's error line shows the key"
    assert secret not in (tmp_path / "redacted" / "parity.html").read_text()
    assert secret in (tmp_path / "leaky" / "parity.json").read_text(), "without redaction the key shows"


def test_a_batch_file_s_bad_lines_are_named_by_number_and_skipped(tmp_path: Path) -> None:
    from tokenspec.campaigns.traffic import load_requests

    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": "Hi"}]}}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "url": "/v1/embeddings"}), "",
             json.dumps({**good, "custom_id": "b", "body": {**good["body"], "stream": True}}), json.dumps(good),
             json.dumps([1]), json.dumps({**good, "custom_id": "c", "method": "GET"})]
    path = tmp_path / "traffic.jsonl"
    path.write_text("\n".join(lines) + "\n")
    requests, bad = load_requests(path)
    assert [(r.line, r.custom_id, r.kind) for r in requests] == [(1, "a", "chat")]
    assert [b.split(":")[0] for b in bad] == ["line 2", "line 3", "line 5", "line 6", "line 7", "line 8"], bad
    assert "appears twice" in bad[3] and "stream" in bad[2]
    code = main(["parity", "--requests", str(tmp_path / "missing.jsonl"), "--target", "http://127.0.0.1:1",
                 "--reference", "http://127.0.0.1:1"])
    assert code == 2


@pytest.mark.vllm
def test_own_traffic_through_the_split_pipeline_matches_vllm_at_the_token_level(tiny_model, vllm_engine, tmp_path,
                                                                                capsys) -> None:
    """The committed sample's first requests (chat, tools, sampled, completions) plus two bad lines: the bundled
    frontend in front of vLLM's engine against vLLM's own coupled endpoint, compared on token ids."""
    from frontend_server import running_frontend

    from tokenspec.harness.frontend import FrontendConfig
    from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME

    sample = (ROOT / "reports" / "parity-traffic" / "requests.jsonl").read_text().splitlines()
    path = tmp_path / "traffic.jsonl"
    path.write_text("\n".join([*sample[:3], "oops", *sample[20:23], *sample[28:30], *sample[-2:], '{"x": 1}']) + "\n")
    config = FrontendConfig(model_dir=tiny_model.model_dir, served_model_name=DEFAULT_MODEL_NAME,
                            tool_parser="hermes", reasoning_parser="qwen3")
    with running_frontend(config) as url:
        code = main(["parity", "--requests", str(path), "--target", url, "--engine", vllm_engine.url,
                     "--reference", vllm_engine.url, "--report", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert "skipped" in printed and "line 4: not JSON" in printed and "line 12:" in printed, printed
    report = json.loads((tmp_path / "out" / "parity.json").read_text())
    assert report["modes"] == {"tokens": 10, "greedy": 0} and not report["errors"], report["results"]
    assert report["agreement"]["prompt_token_ids"]["agree"] == 10, report["agreement"]
    sampled = [r for r in report["results"] if r["request"].get("temperature") == 0.8]
    assert sampled and all("end-to-end token_ids" not in r["fields"] and r["notes"] for r in sampled)
    disagreements = {(r["id"], name) for r in report["results"] for name, f in r["fields"].items()
                     if f["agree"] is False}
    assert code == (1 if disagreements else 0), disagreements
    assert "parity.html" in {p.name for p in (tmp_path / "out").iterdir()}
