"""The statistics behind ``tokenspec bench``: percentiles, ratios, target verdicts and payload sizes.

No servers here: the benchmarks themselves are run by hand (``tokenspec bench ...``), never timed in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tokenspec.cli import build_parser
from tokenspec.errors import UsageError
from tokenspec.harness import benchmarks
from tokenspec.harness.benchmarks import gateway, payloads, statistics, suite, token_loop
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


class _FakeServer:
    """Stands in for the reference server: the suite benchmark only reads its URLs."""

    def __init__(self, frontend_url: str, engine_url: str) -> None:
        self.frontend = argparse.Namespace(url=frontend_url)
        self.engine = argparse.Namespace(url=engine_url)


def test_suite_benchmark_times_tokenspec_run_as_a_child_process(tiny_model: BuildResult, monkeypatch) -> None:
    """``bench suite`` runs ``python -m tokenspec run`` with flags the CLI accepts, and reads its report.json."""
    seen: list[list[str]] = []

    def call(command: list[str]) -> int:
        seen.append(command)
        report_dir = command[command.index("--report") + 1]
        (Path(report_dir) / "report.json").write_text(json.dumps({"summary": {"passed": 3, "failed": 1, "total": 4}}))
        return 1

    monkeypatch.setattr(suite, "start_reference", lambda stack, model_dir: (_FakeServer("http://f", "http://e"), 2.5))
    monkeypatch.setattr(suite.subprocess, "call", call)
    args = build_parser().parse_args(["bench", "suite", "--model", str(tiny_model.model_dir)])
    doc = suite.bench_suite(args)
    (command,) = seen
    assert command[:4] == [sys.executable, "-m", "tokenspec", "run"]
    run_args = build_parser().parse_args(command[3:])
    assert (run_args.target, run_args.reference, run_args.tokenizer) == ("http://f", "http://e",
                                                                         str(tiny_model.model_dir))
    assert doc["exit_code"] == 1 and doc["startup_s"] == 2.5 and doc["summary"]["total"] == 4
    assert doc["targets"][0]["name"] == "suite wall time / 120 s"


def test_suite_benchmark_stops_when_the_suite_could_not_run(tiny_model: BuildResult, monkeypatch) -> None:
    """A real child process against a closed port: ``tokenspec run`` exits 2 (unreachable), and the benchmark
    stops with a one-line error instead of timing nothing."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setattr(suite, "start_reference", lambda stack, model_dir: (_FakeServer(closed, closed), 0.0))
    args = build_parser().parse_args(["bench", "suite", "--model", str(tiny_model.model_dir)])
    with pytest.raises(UsageError, match="exit code 2"):
        suite.bench_suite(args)
