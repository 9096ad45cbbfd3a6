"""report.html as a person sees it (headless Chromium), and the failure evidence behind it.

- A report written by the real writers from results with every outcome is opened in Chromium: the verdict,
  the area chart, a failure's highlighted difference, escaping, collapsed known failures, and no request
  to anything but the file itself. Screenshots go to out/screenshots/.
- The suite's plugin, run with two xdist workers on a tiny failing suite, records each failure's expected and
  actual operands, the request, its body byte for byte under bodies/ (the page's curl replays it from the
  report folder), and the replay command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from broken_server import frontend_config
from frontend_server import running_frontend

from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.specs.catalogue import load_catalogue
from tokenspec.suite.engine.results import TestResult
from tokenspec.suite.reporting.report import RunInfo, write_reports
from tokenspec.suite.reporting.report_html import (
    diff_columns,
    failure_anchor,
    replay_curl,
    replay_keyword,
    replay_test_command,
)

ROOT = Path(__file__).resolve().parents[1]
#: A body no text field can carry: valid UTF-8, then two bytes that are not.
BODY = b'{"model": "m", "prompt": "caf\xc3\xa9 \xff\xfe <b>"}'
FAILING = "test_render.py::test_chat_render_tokens[plain-<b>x</b>]"
KNOWN = "test_derender.py::test_finish_reason[length]"
COMMAND = "tokenspec run --target http://127.0.0.1:8000 --seed 7 --level may --max-examples 25"


def constructed_results(report_dir: Path) -> list[TestResult]:
    """Every outcome, a failing comparison in a MUST test, markup in a message, a body that is not UTF-8."""
    (report_dir / "bodies").mkdir(parents=True)
    body_file = "bodies/failing.bin"
    (report_dir / body_file).write_bytes(BODY)
    expected = json.dumps({"token_ids": [1, 2, 3], "finish_reason": "stop", "usage": {"prompt_tokens": 3}}, indent=2)
    r = TestResult
    return [
        r(FAILING, ["RENDER-001", "SCHEMA-001"], "MUST", "failed", 0.2,
          message="AssertionError: [RENDER-001] tokens differ <script>alert(1)</script>",
          failed_requirements=["RENDER-001"], expected=expected,
          actual=expected.replace('"stop"', '"length"'), comparison="==",
          request_method="POST", request_url="http://127.0.0.1:8000/v1/chat/completions/render",
          request_content_type="application/json", request_file=body_file, reproduce="curl -sS http://x"),
        r("test_derender.py::test_usage", ["DERENDER-002"], "SHOULD", "failed", 0.1,
          message="AssertionError: [DERENDER-002] no usage", failed_requirements=["DERENDER-002"]),
        r(KNOWN, ["DERENDER-001"], "MUST", "xfailed", 0.1, message="known failure (x); observed: boom",
          failed_requirements=["DERENDER-001"], expectation="DERENDER-001 ~ boom",
          expected='"length"', actual='"stop"', comparison="=="),
        r("test_render.py::test_ok", ["RENDER-002"], "MUST", "passed", 0.1),
        r("test_generate.py::test_ok", ["GENERATE-001"], "MUST", "passed", 0.1),
        r("test_generate.py::test_logprobs", ["GENERATE-002"], "MUST", "unsupported", 0.0,
          message="unsupported: logprobs: the target declares it unsupported"),
        r("test_stream_generate.py::test_x", ["STREAM-001"], "MUST", "not_tested", 0.0,
          message="not tested: generate: not hosted by the target"),
    ]


@pytest.fixture
def constructed_report(tmp_path: Path) -> Path:
    out = tmp_path / "report"
    info = RunInfo("http://127.0.0.1:8000", None, None, "m", 7, "2026-01-01T00:00:00+00:00", 12.5, command=COMMAND)
    write_reports(out, info, constructed_results(out))
    return out


def test_report_html_in_chromium(chromium_page, constructed_report: Path) -> None:
    page = chromium_page.page
    chromium_page.open(constructed_report / "report.html")

    verdict = page.locator("#verdict .word")
    assert verdict.is_visible() and verdict.inner_text() == "FAIL", "a MUST failure is a FAIL, in big letters"
    headline = page.locator("#verdict").inner_text()
    assert "2 unique causes of 2 unexpected failures: RENDER-001" in headline, "the causes, linked"
    assert "MUST never judged: " in page.locator("#verdict .blind").inner_text(), "the blind spots, in the banner"
    page.locator("#verdict details summary").click()
    headline = page.locator("#verdict").inner_text()
    assert "not tested: generate: not hosted by the target" in headline, "what was not judged, and why"
    assert "unsupported: logprobs" in headline
    page.locator("#verdict .causes a").first.click()
    assert page.locator("#cause-RENDER-001").is_visible() and page.evaluate("window.scrollY") > 0
    page.locator("#req-RENDER-001 a").click()
    assert page.evaluate("location.hash") == "#cause-RENDER-001", "a FAILING requirement links to its cause"

    chart = page.locator("#area-chart")
    box = chart.bounding_box()
    assert chart.is_visible() and box and box["width"] > 100 and box["height"] > 50, box
    areas = chart.locator("g.bar")
    assert sorted(areas.evaluate_all("gs => gs.map(g => g.dataset.area)")) == [
        "DERENDER", "GENERATE", "RENDER", "SCHEMA", "STREAM"]
    bars = chart.locator("rect.seg")
    assert bars.count() >= 6 and all((bars.nth(i).bounding_box() or {}).get("width", 0) > 0
                                     for i in range(bars.count()))
    assert chart.locator("rect.seg-failed").count() == 3, "RENDER, SCHEMA (the same test) and DERENDER"

    failure = page.locator(f"#{failure_anchor(FAILING)}")
    assert failure.is_visible()
    inserted = failure.locator(".diff ins.diff-ins")
    deleted = failure.locator(".diff del.diff-del")
    assert inserted.first.is_visible() and "length" in inserted.first.inner_text(), \
        "the actual side highlights the differing token"
    assert deleted.first.is_visible() and "stop" in deleted.first.inner_text(), \
        "the expected side highlights the differing token"
    assert inserted.count() == 1, "only the differing token is marked, not its line's neighbours"
    assert "tokens differ <script>alert(1)</script>" in failure.locator("pre.message").inner_text()
    assert page.locator("script").count() == 0, "a message's markup is text, never markup"
    assert "\\xff\\xfe <b>" in failure.locator("pre.body").inner_text(), "undecodable bytes shown, not dropped"
    curl = failure.locator("pre.curl").inner_text()
    assert "--data-binary @bodies/failing.bin" in curl and "http://127.0.0.1:8000/v1/chat/completions/render" in curl
    assert failure.locator("pre.replay").inner_text() == f"{COMMAND} -k 'test_render.py and test_chat_render_tokens'"
    sentence = load_catalogue()["RENDER-001"].statement
    assert f"RENDER-001 ({load_catalogue()['RENDER-001'].level}): {sentence}" in failure.inner_text()

    known = page.locator(f"#{failure_anchor(KNOWN)}")
    assert known.evaluate("e => e.tagName") == "DETAILS" and not known.locator(".diff").is_visible(), \
        "known failures are collapsed"
    chromium_page.screenshot("report-html-full")
    chromium_page.screenshot("report-html-failure", failure)
    known.locator("summary").click()
    assert known.locator(".diff ins.diff-ins").is_visible()

    page.goto(f"{(constructed_report / 'report.html').resolve().as_uri()}#{failure_anchor(FAILING)}")
    top = failure.bounding_box()
    assert page.evaluate("window.scrollY") > 0 and top is not None and -2 < top["y"] < 900, \
        "report.html#<anchor> scrolls to the failure"
    assert chromium_page.external_requests() == [], "a self-contained page requests nothing from the network"
    assert chromium_page.requests, "the page itself was requested"


def test_the_diff_marks_only_what_differs() -> None:
    left, right = diff_columns('{\n  "a": 1,\n  "b": "x y z"\n}', '{\n  "a": 1,\n  "b": "x Y z",\n  "c": 2\n}')
    assert '<del class="diff-del">y</del>' in left and '<ins class="diff-ins">Y</ins>' in right
    assert '<ins class="diff-ins">  &quot;c&quot;: 2</ins>' in right
    assert "diff-" not in left.split("&quot;b&quot;")[0], "equal lines are not marked"
    many = "\n".join(str(i) for i in range(100))
    left, _ = diff_columns(many, many.replace("\n50\n", "\n5O\n"))
    assert "equal lines" in left and left.count('class="line"') == 6, "long equal runs fold to 3 lines of context"


def test_the_replay_command_selects_one_test() -> None:
    assert replay_keyword("test_render.py::test_a[x-1]") == "test_render.py and test_a[x-1]"
    assert replay_keyword("test_render.py::test_a[two words]") == "test_render.py and test_a", \
        "a parameter -k cannot express falls back to the function"
    assert replay_keyword("sub/test_e.py::TestC::test_b") == "test_e.py and test_b"
    assert replay_test_command("tokenspec run --target http://t --seed 1 -k test_derender --level may",
                               "test_derender.py::test_x") == \
        "tokenspec run --target http://t --seed 1 --level may -k 'test_derender.py and test_x'", \
        "the run's own -k gives way to the test's"


SUITE = r'''
import pytest

BODY = b'{"model": "m", "prompt": "caf\xc3\xa9 \xff\xfe <b>"}'


@pytest.mark.req("RENDER-001")
def test_answer_differs(api):
    resp = api.request("POST", "/v1/completions/render", content=BODY, content_type="application/json",
                       validate=False)
    assert resp.status_code == resp.status_code
    actual = {"status": resp.status_code, "finish_reason": "stop", "token_ids": [1, 2, 3]}
    assert actual == {"status": resp.status_code, "finish_reason": "length", "token_ids": [1, 2, 3]}


@pytest.mark.req("RENDER-001")
def test_fails_without_a_comparison(api):
    assert api.get("/health", validate=False).status_code == 200
    pytest.fail("[RENDER-001] broke without comparing anything")


@pytest.mark.req("RENDER-001")
def test_passes(api):
    assert api.get("/health", validate=False).status_code == 200
'''


class _Capture(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.bodies.append(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def plugin_report(tiny_model, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The plugin's own report of a tiny failing suite, run with two xdist workers against the frontend."""
    tmp = tmp_path_factory.mktemp("plugin-report")
    suite = tmp / "mysuite"
    suite.mkdir()
    (suite / "test_evidence.py").write_text(SUITE)
    (suite / "pytest.ini").write_text((ROOT / "suite" / "pytest.ini").read_text())
    report_dir = tmp / "report"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPYCACHEPREFIX": str(tmp / "pyc")}
    with running_frontend(frontend_config(tiny_model.model_dir, DEFAULT_MODEL_NAME)) as url:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite),
             "-p", "tokenspec.suite.plugin", "-p", "xdist.plugin", "-p", "no:cacheprovider", "-n", "2",
             "--tokenspec-target", url, "--tokenspec-report", str(report_dir), "--tokenspec-suite-dir", str(suite),
             "--tokenspec-seed", "1"],
            capture_output=True, text=True, timeout=300, env=env)
    assert (report_dir / "report.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((report_dir / "report.json").read_text())
    return report_dir, report


def by_name(report: dict) -> dict[str, dict]:
    return {t["nodeid"].split("::")[-1]: t for t in report["tests"]}


def test_plugin_records_failure_evidence_across_workers(plugin_report: tuple[Path, dict]) -> None:
    report_dir, report = plugin_report
    tests = by_name(report)
    assert report["command"].startswith("tokenspec run --target http://127.0.0.1:")
    differs = tests["test_answer_differs"]
    assert differs["outcome"] == "failed" and differs["comparison"] == "=="
    assert json.loads(differs["expected"])["finish_reason"] == "length", "the right operand is the expected one"
    assert json.loads(differs["actual"])["finish_reason"] == "stop"
    assert differs["request_method"] == "POST" and differs["request_url"].endswith("/v1/completions/render")
    assert differs["request_file"].startswith("bodies/") and differs["request_file"].endswith(".bin")
    assert (report_dir / differs["request_file"]).read_bytes() == BODY, \
        "the body is saved byte for byte, invalid UTF-8 included"

    bare = tests["test_fails_without_a_comparison"]
    assert bare["outcome"] == "failed" and bare["expected"] == bare["actual"] == "" and bare["comparison"] == "", \
        "a passing comparison before the failure is no evidence"
    assert bare["request_url"].endswith("/health") and bare["request_file"] == "", "a GET has no body"
    assert tests["test_passes"]["outcome"] == "passed" and tests["test_passes"]["actual"] == ""
    assert sorted(p.name for p in (report_dir / "bodies").iterdir()) == [Path(differs["request_file"]).name]

    # The page's curl replays the request from the report folder, byte for byte (to a server that records it).
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        curl = replay_curl(differs).replace(differs["request_url"].rsplit("/v1/", 1)[0],
                                            f"http://127.0.0.1:{server.server_port}")
        done = subprocess.run(["bash", "-c", curl], cwd=report_dir, capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
    assert _Capture.bodies == [(report_dir / differs["request_file"]).read_bytes()]


def test_plugin_report_html_in_chromium(chromium_page, plugin_report: tuple[Path, dict]) -> None:
    report_dir, report = plugin_report
    tests = by_name(report)
    chromium_page.open(report_dir / "report.html")
    page = chromium_page.page
    assert page.locator("#verdict .word").inner_text() == "FAIL"
    failure = page.locator(f"#{failure_anchor(tests['test_answer_differs']['nodeid'])}")
    inserted = failure.locator(".diff .diff-ins")
    assert inserted.first.is_visible() and inserted.first.inner_text() == "stop", \
        "the plugin's failing comparison is shown with the differing token highlighted"
    assert failure.locator(".diff .diff-del").first.inner_text() == "length"
    assert "-k 'test_evidence.py and test_answer_differs'" in failure.locator("pre.replay").inner_text()
    assert "@bodies/" in failure.locator("pre.curl").inner_text()
    chromium_page.screenshot("report-html-plugin")
    assert chromium_page.external_requests() == []


def one_cause_results(report_dir: Path, failures: int = 89, passes: int = 700) -> list[TestResult]:
    """A run as a render that drops the system message leaves it: many tests, one cause, ids decoded."""
    system, user = [712, 311, 317, 198], [992, 515, 198, 15, 993]
    out = [TestResult(f"test_golden.py::test_golden_case[chat-{i:03d}]", ["RENDER-005"], "MUST", "failed", 0.1,
                      message=f"AssertionError: [RENDER-005] render differs from transformers: first difference at"
                              f" index 1: got {user[:3]}, expected {system[:3]} ({5 + i} vs {9 + i} ids)",
                      failed_requirements=["RENDER-005"], expected=json.dumps(system + user + [i]),
                      actual=json.dumps(user + [i]), comparison="==",
                      expected_text=f"<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nq{i}",
                      actual_text=f"<|im_start|>user\nq{i}", reproduce="curl -sS http://x")
           for i in range(failures)]
    out += [TestResult(f"test_render.py::test_ok[{i}]", ["RENDER-002"], "MUST", "passed", 0.1) for i in range(passes)]
    out += [TestResult(f"test_generate.py::test_x[{i}]", ["GENERATE-001"], "MUST", "not_tested", 0.0,
                       message="not tested: generate: not hosted: POST /inference/v1/generate answered 404; pass"
                               " --engine URL (a server hosting /inference/v1/generate)") for i in range(20)]
    return out


def test_the_first_screen_of_a_run_with_one_cause(chromium_page, tmp_path: Path) -> None:
    out = tmp_path / "report"
    info = RunInfo("http://127.0.0.1:8000", None, None, "m", 7, "2026-01-01T00:00:00+00:00", 12.5, command=COMMAND)
    write_reports(out, info, one_cause_results(out))
    size = (out / "report.html").stat().st_size
    assert size < 400_000, f"report.html of ~800 tests with one cause is {size} bytes"
    page = chromium_page.page
    page.set_viewport_size({"width": 1280, "height": 900})
    chromium_page.open(out / "report.html")
    first_screen = [("verdict", page.locator("#verdict .word")), ("causes", page.locator("#verdict .causes")),
                    ("blind spots", page.locator("#verdict .blind")), ("cause card", page.locator(".cause h3").first),
                    ("decoded difference", page.locator(".cause .first-difference").first)]
    for name, locator in first_screen:
        box = locator.bounding_box()
        assert locator.is_visible() and box is not None and box["y"] + box["height"] <= 900, \
            f"the {name} is not on the first screen: {box}"
    assert page.locator("#verdict .causes").inner_text().startswith("1 unique cause of 89 unexpected failures")
    assert "generate: not hosted (pass --engine URL)" in page.locator("#verdict .blind").inner_text()
    difference = page.locator(".cause .first-difference").first.inner_text()
    assert "expected `<|im_start|>system\\nYou are helpful" in difference and "got `<|im_start|>user" in difference
    assert page.locator(".cause .others summary").inner_text() == "88 other tests with this cause"
    assert not page.locator(".cause .others li").first.is_visible(), "the other tests are collapsed"
    height = page.evaluate("document.body.scrollHeight")
    assert height < 20_000, f"the page is {height} px tall"
    chromium_page.screenshot("report-html-one-cause-first-screen", page.locator("main"))

