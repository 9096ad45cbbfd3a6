"""The statistics behind ``tokenspec bench``: percentiles, ratios, target verdicts and payload sizes.

No servers here: the benchmarks themselves are run by hand (``tokenspec bench ...``), never timed in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tokenspec import benchmarks
from tokenspec.benchmarks import gateway, payloads, scale, statistics, suite, token_loop
from tokenspec.cli import build_parser
from tokenspec.core import phases
from tokenspec.core.errors import UsageError
from tokenspec.harness.implementations import Deployment
from tokenspec.harness.models.tiny import BuildResult


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert statistics.percentile(values, 0) == 1.0
    assert statistics.percentile(values, 100) == 4.0
    assert statistics.percentile(values, 50) == pytest.approx(2.5)
    assert statistics.percentile(values, 95) == pytest.approx(3.85)  # numpy's linear method gives the same


def test_percentile_of_one_value_and_bad_input() -> None:
    assert statistics.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        statistics.percentile([], 50)
    with pytest.raises(ValueError):
        statistics.percentile([1.0], 101)


def test_summarize_reports_the_usual_figures() -> None:
    s = statistics.summarize([float(i) for i in range(1, 101)])
    assert s["n"] == 100 and s["min"] == 1.0 and s["max"] == 100.0
    assert s["p50"] == pytest.approx(50.5) and s["p99"] == pytest.approx(99.01)
    assert s["mean"] == pytest.approx(50.5)


def test_ratio_refuses_a_zero_baseline() -> None:
    assert statistics.ratio(1.0, 4.0) == 0.25
    with pytest.raises(ValueError):
        statistics.ratio(1.0, 0.0)


@pytest.mark.parametrize(("measured", "limit", "verdict"), [(0.49, 0.5, "PASS"), (0.5, 0.5, "PASS"),
                                                            (0.51, 0.5, "MISS"), (math.inf, 3.0, "MISS")])
def test_target_verdict(measured: float, limit: float, verdict: str) -> None:
    target = statistics.Target("x", measured, limit)
    assert target.to_dict()["verdict"] == verdict
    assert target.line().startswith(verdict)


def test_a_target_line_tells_a_near_miss_from_a_pass() -> None:
    assert "0.0696x" in statistics.Target("x", 0.0696, 0.07).line()
    assert "0.073x" in statistics.Target("x", 0.073, 0.07).line()


def test_table_aligns_columns() -> None:
    lines = statistics.table(["what", "ms"], [["a", 1.0], ["longer", 12.345]]).splitlines()
    assert lines[0].startswith("what") and set(lines[1]) <= {"-", " "}
    assert lines[3].endswith("12.35") and len({len(line) for line in lines}) == 1


def test_rss_of_this_process_and_of_none() -> None:
    import os

    kib = gateway.rss_kib(os.getpid())
    assert kib is not None and kib > 1000
    assert gateway.rss_kib(2**22 + 12345) is None  # above Linux's pid_max default


def test_payloads_have_the_requested_size(tiny_model: BuildResult) -> None:
    tok = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))
    assert len(payloads.output_ids(tok, 300)) == 300
    messages = payloads.conversation(tok, 240)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    content = sum(len(tok.encode(m["content"]).ids) for m in messages[1:])
    assert 200 <= content <= 280  # re-encoding decoded text may merge or split a few tokens


def test_scale_payloads_are_reasoning_of_the_requested_size(tiny_model: BuildResult) -> None:
    tok = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    assert "<|im_end|>" in "\n".join(payloads.mixed_text()) and not any(a in scale._plain_text(tok) for a in added)
    ids = scale._reasoning_ids(tok, 2_000)
    text = tok.decode(ids, skip_special_tokens=False)
    assert len(ids) == 2_000 and text.startswith("<think>") and text.count("</think>") == 1
    prompt = len(tok.encode(scale._prompt_text(tok, 8_000)).ids)
    assert 7_900 <= prompt <= 8_100


def test_scale_estimates_the_stream_it_did_not_run_from_its_per_chunk_costs() -> None:
    """Past the measured part, the total grows by the trapezoid of the per-chunk p50s, one chunk per ``chunk`` tokens:
    from 1k to 4k at 10 -> 40 ms a chunk of 1 token, 3,000 chunks at 25 ms on average = 75 s more."""
    points = {at: {"vllm": {"p50": at / 100}} for at in scale.STREAM_AT}
    doc = {"stream": {1: points}, "stream_total_s": {1: {"vllm": {1_000: 5.0}}}}
    scale._estimate_beyond(doc, 1)
    estimated = doc["stream_total_s"][1]["vllm_estimated"]
    assert estimated[4_000] == pytest.approx(5.0 + 75.0)
    assert estimated[16_000] == pytest.approx(80.0 + (40 + 160) / 2 * 12_000 / 1000)
    assert 1_000 not in estimated


def test_bench_arguments_and_bad_values(tmp_path) -> None:
    args = build_parser().parse_args(["bench", "gateway", "--duration", "5", "--clients", "4",
                                      "--out", str(tmp_path)])
    assert (args.what, args.duration, args.clients, args.strict) == ("gateway", 5.0, 4, False)
    bad = argparse.Namespace(**{**vars(args), "requests": 0})
    with pytest.raises(UsageError):
        benchmarks.bench_from_args(bad)


def test_strict_exit_code_follows_the_verdicts(tmp_path, monkeypatch) -> None:
    """--strict turns a MISS into exit code 1; without it a MISS is a figure, not a failure."""
    doc = {"targets": [statistics.Target("t", 2.0, 1.0).to_dict()]}
    monkeypatch.setitem(benchmarks.BENCHMARKS, "suite", lambda args: doc)
    for strict, code in ((False, 0), (True, 1)):
        args = build_parser().parse_args(["bench", "suite", "--out", str(tmp_path)] + (["--strict"] if strict else []))
        assert benchmarks.bench_from_args(args) == code
    assert json.loads((tmp_path / "suite.json").read_text()) == doc


def test_token_loop_records_decode_to_their_text_and_back(tiny_model: BuildResult) -> None:
    """The token loop's store holds ids encoded once at write time, so the text loop's decode -> encode of a
    record is the record: both loops then run the same prompt and the comparison is of one workload."""
    tok = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))
    records = token_loop.stored_records(tok, 5, 50)
    assert len(records) == 5 and all(abs(len(r) - 50) <= 5 for r in records)
    for ids in records:
        assert tok.encode(tok.decode(ids), add_special_tokens=False).ids == ids


class _FakePlugin:
    """Stands in for an implementation plug-in (test double): the suite benchmark only reads the deployment's URLs."""

    title = "fake"

    def __init__(self, target: str, engine: str) -> None:
        self.target, self.engine = target, engine

    def installed(self) -> bool:
        return True

    def deploy(self, config: object) -> Deployment:
        return Deployment("fake", "0", "cpu", target=self.target, engine=self.engine, reference=self.engine,
                          roles="a fake deployment")


def test_suite_benchmark_times_tokenspec_run_as_a_child_process(tiny_model: BuildResult, monkeypatch) -> None:
    """``bench suite`` runs ``python -m tokenspec run`` with flags the CLI accepts, and reads its report.json;
    ``--profile`` adds a second run with the phase clock switched on in its environment."""
    seen: list[tuple[list[str], dict | None]] = []

    def call(command: list[str], env: dict | None = None) -> int:
        seen.append((command, env))
        report_dir = command[command.index("--report") + 1]
        (Path(report_dir) / "report.json").write_text(json.dumps({"summary": {"passed": 3, "failed": 1, "total": 4}}))
        if env:
            folder = Path(env[phases.ENV])
            (folder / "phases-1.json").write_text(json.dumps({
                "suite/test_a.py::t1": {"wall": 2.0, "http": 1.5, "validation": 0.1}, phases.SESSION: {"probe": 3.0}}))
            (folder / "phases-2.json").write_text(json.dumps({"suite/test_a.py::t2": {"wall": 1.0, "shrinking": 0.5}}))
        return 1

    monkeypatch.setattr(suite, "implementation", lambda name: _FakePlugin("http://f", "http://e"))
    monkeypatch.setattr(suite.subprocess, "call", call)
    args = build_parser().parse_args(["bench", "suite", "--model", str(tiny_model.model_dir), "--profile"])
    doc = suite.bench_suite(args)
    (command, env), (_, profiled_env) = seen
    assert env is None and profiled_env is not None
    assert command[:4] == [sys.executable, "-m", "tokenspec", "run"]
    run_args = build_parser().parse_args(command[3:])
    assert (run_args.target, run_args.engine, run_args.reference, run_args.tokenizer) == (
        "http://f", "http://e", "http://e", str(tiny_model.model_dir))
    assert doc["exit_code"] == 1 and doc["summary"]["total"] == 4
    assert doc["targets"][0]["name"] == "suite wall time / 90 s"
    row = doc["phases"]["files"]["test_a.py"]
    assert (row["tests"], row["wall"], row["http"], row["shrinking"]) == (2, 3.0, 1.5, 0.5)
    assert math.isclose(row["other"], 3.0 - 1.5 - 0.1)
    assert doc["phases"]["session"]["probe"] == 3.0


def test_suite_benchmark_stops_when_the_suite_could_not_run(tiny_model: BuildResult, monkeypatch) -> None:
    """A real child process against a closed port: ``tokenspec run`` exits 2 (unreachable), and the benchmark
    stops with a one-line error instead of timing nothing."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setattr(suite, "implementation", lambda name: _FakePlugin(closed, closed))
    args = build_parser().parse_args(["bench", "suite", "--model", str(tiny_model.model_dir)])
    with pytest.raises(UsageError, match="exit code 2"):
        suite.bench_suite(args)


@pytest.mark.vllm
def test_bench_target_measures_a_key_protected_target_against_the_bundled_frontend(
        tiny_model: BuildResult, vllm_engine, monkeypatch, capsys) -> None:
    """``bench target`` on a real frontend behind an API key (the key from the environment, never printed): both
    sides give the same answers, every ratio is measured, and ``--engine`` times the whole split path."""
    from broken_server import frontend_config
    from frontend_server import running_frontend

    from tokenspec.benchmarks import target as target_bench
    from tokenspec.harness.frontend.auth import digest

    key = "bench-target-secret-key"
    monkeypatch.setenv("BENCH_TARGET_KEY", key)
    config = frontend_config(tiny_model.model_dir, "tokenspec-tiny", api_key_digests=(digest(key),))
    with running_frontend(config) as url:
        args = build_parser().parse_args(["bench", "target", "--target", url, "--engine", vllm_engine.url,
                                          "--model", str(tiny_model.model_dir), "--requests", "4",
                                          "--api-key-env", "target=BENCH_TARGET_KEY", "--api-key-env", "engine="])
        doc = target_bench.bench_target(args)
    printed = capsys.readouterr()
    assert key not in printed.out + printed.err
    assert doc["same_render_token_ids"] and doc["same_derender_message"]
    assert (doc["subject"], doc["baseline"]) == ("target", "tokenspec")
    for endpoint in ("render", "derender"):
        assert set(doc["ratios"][endpoint]) == {"p50", "p99", "c1", "c16"}
        assert all(value > 0 for value in doc["ratios"][endpoint].values())
    assert doc["split_path"]["ratio_p50"] > 0 and doc["split_path"]["latency_ms"]["target"]["n"] >= 10


def test_bench_target_without_the_key_is_a_one_line_error(tiny_model: BuildResult, monkeypatch) -> None:
    """A target that refuses the benchmark's requests (401: no key given) stops it with the status, no traceback."""
    from broken_server import frontend_config
    from frontend_server import running_frontend

    from tokenspec.benchmarks import target as target_bench
    from tokenspec.harness.frontend.auth import digest

    monkeypatch.delenv("TOKENSPEC_API_KEY", raising=False)
    config = frontend_config(tiny_model.model_dir, "tokenspec-tiny", api_key_digests=(digest("k"),))
    with running_frontend(config) as url:
        args = build_parser().parse_args(["bench", "target", "--target", url, "--model", str(tiny_model.model_dir),
                                          "--requests", "2"])
        with pytest.raises(UsageError, match="401"):
            target_bench.bench_target(args)


SELECTION = "(test_fuzz_operation and chat/completions/render) or test_chat_render_is_deterministic"


def test_a_profiled_run_says_where_its_time_went(tiny_model: BuildResult, tmp_path) -> None:
    """A real ``tokenspec run`` with the phase clock on (two workers and the controller): every process writes its
    totals, the probe and the report are timed, and each test's HTTP, validation and hypothesis generation lie
    within its wall time."""
    from broken_server import frontend_config
    from frontend_server import running_frontend

    folder = tmp_path / "phases"
    config = frontend_config(tiny_model.model_dir, "tokenspec-tiny")
    with running_frontend(config) as url:
        done = subprocess.run([sys.executable, "-m", "tokenspec", "run", "--target", url, "--tokenizer",
                               str(tiny_model.model_dir), "--report", str(tmp_path / "report"), "--seed", "3",
                               "-n", "2", "-k", SELECTION],
                              capture_output=True, text=True, timeout=300, env={**os.environ, phases.ENV: str(folder)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(list(folder.glob("phases-*.json"))) == 3
    totals = phases.merged(folder)
    assert totals[phases.SESSION]["probe"] > 0 and totals[phases.SESSION]["report"] > 0
    tests = {name: t for name, t in totals.items() if name != phases.SESSION}
    assert tests and all(t["wall"] >= t.get("http", 0) + t.get("validation", 0) for t in tests.values())
    assert all(t["http"] > 0 and t["generation"] > 0 and t["validation"] > 0 for t in tests.values())
    render = [t for name, t in totals.items() if "test_render.py" in name]
    assert render and any(t.get("generation", 0) > 0 for t in render), "@given tests report their generation"


async def _closing_app(scope, receive, send) -> None:
    """A labelled test double: answers every request with ``Connection: close``, counting the connections."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    _CLOSING_SEEN.add(scope["client"][1])
    body = b'{"ok":true}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


_CLOSING_SEEN: set[int] = set()


def test_the_timing_client_reconnects_when_a_server_closes_each_connection() -> None:
    """A server may close a keep-alive connection after answering: both timing clients open a new one (its cost
    counted) instead of failing or reading a closed socket."""
    from tokenspec.benchmarks.clients import TimedConnection, interleaved_throughput
    from tokenspec.harness.loopback import running_app

    with running_app(_closing_app, health=None) as url:
        conn = TimedConnection(url)
        answers = [conn.send("POST", "/x", b"{}") for _ in range(5)]
        assert [status for status, _, _ in answers] == [200] * 5 and answers[0][1] == b'{"ok":true}'
        rates = interleaved_throughput({"a": conn, "b": TimedConnection(url)}, "/x", b"{}", 16, 4)
        conn.close()
    assert set(rates) == {"a", "b"} and all(rate > 0 for rate in rates.values())
    assert len(_CLOSING_SEEN) >= 5 + 16, "every answer closed its connection, so each request came on a new one"


def test_the_render_floor_server_renders_the_frontends_prompt_and_takes_its_turn(tiny_model: BuildResult) -> None:
    """``bench frontend``'s render floor (floor_server.py, started as the benchmark starts it) answers the frontend's
    very prompt ids, and ``measure_pair`` times it in the render blocks only."""
    from broken_server import frontend_config
    from frontend_server import running_frontend

    from tokenspec.benchmarks.clients import TimedConnection
    from tokenspec.benchmarks.floor_server import floor_process
    from tokenspec.benchmarks.frontend import FLOOR_SERVER, measure_pair

    floor = floor_process(tiny_model.model_dir)
    tokenizer = Tokenizer.from_file(str(tiny_model.model_dir / "tokenizer.json"))
    with floor, running_frontend(frontend_config(tiny_model.model_dir, "tokenspec-tiny")) as url:
        conns = {"a": TimedConnection(url), "b": TimedConnection(url)}
        doc = measure_pair(conns, "tokenspec-tiny", tokenizer, 4, subject="a", baseline="b", floor_side="a",
                           floor_server=TimedConnection(floor.url))
    assert set(doc["latency_ms"][FLOOR_SERVER]) == {"render"} and doc["latency_ms"][FLOOR_SERVER]["render"]["n"] == 4
    assert doc["floor_ms"]["render_server_p50"] == doc["latency_ms"][FLOOR_SERVER]["render"]["p50"] > 0
