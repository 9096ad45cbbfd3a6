"""``tokenspec parity --a URL --b URL``: the same cases through two OpenAI-compatible servers, compared.

Cases are generated from a seed (so a report can be reproduced) and are greedy, so two correct servers on
the same model and engine agree token for token. Each answer is reduced to the fields the parity
requirements name (``tokenspec.core.compare``); a field is "n/a" for a case when either server does not expose it
(hosted APIs have no ``token_ids``), so the report compares what is there and says what was not.

Writes ``parity.json`` (machine) and ``parity.html`` (one self-contained page: agreement per field, then a
side-by-side diff of every disagreement).
"""

from __future__ import annotations

import argparse
import difflib
import html
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tokenspec.core.compare import chat_view, completion_view
from tokenspec.core.errors import UsageError, one_line, writable_folder
from tokenspec.core.target import check_access, check_reachable, normalise_url, served_model
from tokenspec.core.transport import Transport
from tokenspec.specs.samples import WEATHER_TOOL as TOOL

FIELDS = ("token_ids", "content", "reasoning", "tool_calls", "text", "finish_reason", "usage", "logprobs")

PHRASES = [
    "What is the capital of France?", "Écris une phrase en français, s'il te plaît.", "東京の天気はどうですか？",
    "Tell me a joke 😀", "List three prime numbers.", "def add(a, b): return a + b  # explain",
    '{"key": "value", "n": 3}', "Summarise: the quick brown fox jumps over the lazy dog.", "¿Qué hora es?",
    "Name a colour 🎨 and a fruit 🍓.",
]
@dataclass
class Case:
    id: str
    kind: str  # "chat" or "completions"
    request: dict[str, Any]


def generate_cases(model: str, count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        kind = "completions" if i % 5 == 4 else "chat"
        common: dict[str, Any] = {"model": model, "max_tokens": rng.randint(4, 24), "temperature": 0}
        if rng.random() < 0.3:
            common["stop"] = [rng.choice(["\n", "e", "the", "。"])]
        if rng.random() < 0.3:
            common["logprobs"] = True if kind == "chat" else 2
            if kind == "chat":
                common["top_logprobs"] = rng.randint(0, 3)
        if kind == "completions":
            request = {**common, "prompt": rng.choice(PHRASES)}
        else:
            messages: list[dict[str, Any]] = []
            if rng.random() < 0.4:
                messages.append({"role": "system", "content": "You are terse."})
            messages.append({"role": "user", "content": rng.choice(PHRASES)})
            if rng.random() < 0.3:
                messages += [{"role": "assistant", "content": rng.choice(PHRASES)},
                             {"role": "user", "content": rng.choice(PHRASES)}]
            request = {**common, "messages": messages}
            if rng.random() < 0.3:
                request["tools"] = [TOOL]
        cases.append(Case(f"case-{i:03d}", kind, request))
    return cases


@dataclass
class FieldResult:
    agree: bool | None  # None: not comparable (a server does not expose the field, or errored)
    a: Any = None
    b: Any = None


@dataclass
class CaseResult:
    case: Case
    fields: dict[str, FieldResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class Server:
    """One side of the comparison; remembers whether it accepts vLLM's ``return_token_ids``."""

    def __init__(self, url: str, transport: Transport, role: str) -> None:
        self.url = url
        self.client = transport.client(role, url)
        self.token_ids = True

    def ask(self, case: Case) -> dict[str, Any]:
        path = "/v1/chat/completions" if case.kind == "chat" else "/v1/completions"
        request = {**case.request, "return_token_ids": True} if self.token_ids else case.request
        resp = self.client.post(path, json=request)
        if resp.status_code == 400 and self.token_ids and "return_token_ids" in resp.text:
            self.token_ids = False  # a hosted API without the extension: compare what is exposed
            return self.ask(case)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json()


def _view(kind: str, answer: dict[str, Any]) -> dict[str, Any]:
    choice = (answer.get("choices") or [{}])[0]
    view: dict[str, Any] = (chat_view if kind == "chat" else completion_view)(choice, answer.get("usage"))
    view["token_ids"] = choice.get("token_ids")
    logprobs = choice.get("logprobs")
    if kind == "chat":
        content = (logprobs or {}).get("content")
        view["logprobs"] = [e.get("token") for e in content] if content else None
    else:
        view["logprobs"] = (logprobs or {}).get("tokens")
    return view


def compare_case(case: Case, a: Server, b: Server) -> CaseResult:
    result = CaseResult(case)
    answers: dict[str, dict[str, Any]] = {}
    for name, server in (("a", a), ("b", b)):
        try:
            answers[name] = _view(case.kind, server.ask(case))
        except (httpx.HTTPError, RuntimeError, ValueError) as exc:
            result.errors[name] = str(exc)
    for name in FIELDS:
        if len(answers) < 2:
            result.fields[name] = FieldResult(None)
            continue
        va, vb = answers["a"].get(name, None), answers["b"].get(name, None)
        exposed = name in answers["a"] and name in answers["b"]
        if not exposed or (name in ("token_ids", "logprobs") and (va is None or vb is None)):
            result.fields[name] = FieldResult(None, va, vb)
        else:
            result.fields[name] = FieldResult(va == vb, va, vb)
    return result


def agreement(results: list[CaseResult]) -> dict[str, dict[str, Any]]:
    table = {}
    for name in FIELDS:
        verdicts = [r.fields[name].agree for r in results if name in r.fields]
        agree, disagree = verdicts.count(True), verdicts.count(False)
        compared = agree + disagree
        table[name] = {"agree": agree, "disagree": disagree, "not_comparable": verdicts.count(None),
                       "rate": round(agree / compared, 4) if compared else None}
    return table


def to_json(a: str, b: str, model: str, seed: int, results: list[CaseResult]) -> dict[str, Any]:
    return {
        "a": a, "b": b, "model": model, "seed": seed, "cases": len(results),
        "errors": sum(1 for r in results if r.errors),
        "agreement": agreement(results),
        "results": [
            {"id": r.case.id, "kind": r.case.kind, "request": r.case.request, "errors": r.errors,
             "fields": {k: {"agree": v.agree, "a": v.a, "b": v.b} for k, v in r.fields.items()}}
            for r in results
        ],
    }


STYLE = (
    "body{font-family:sans-serif;margin:2em} table{border-collapse:collapse} td,th{border:1px solid #ccc;"
    "padding:2px 6px} .diff_add{background:#aaffaa} .diff_chg{background:#ffff77} .diff_sub{background:#ffaaaa}"
    " pre{background:#f6f6f6}"
)


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _unit(report: dict[str, Any]) -> str:
    """What one row of the report is: a generated case (--a/--b) or a request of the operator's file."""
    return "request" if "modes" in report else "case"


def _provenance(report: dict[str, Any]) -> str:
    """Where the cases came from, a whole sentence for any count (no empty list after a colon)."""
    counted = _count(report["cases"], _unit(report))
    if "modes" not in report:
        return f"{counted} generated from seed {report['seed']}"
    modes = [f"{n} compared at the {mode} level" for mode, n in report["modes"].items() if n]
    return f"{counted} of the operator's file" + (f" ({', '.join(modes)})" if modes else "")


def _errors_sentence(report: dict[str, Any]) -> str:
    if not report["errors"]:
        return "No errors."
    return (f"{_count(report['errors'], _unit(report))} of {report['cases']} failed with an error"
            " (listed under Errors, apart from disagreements).")


def _disagreements(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Each (case id, field) the two sides answered differently."""
    return [(r["id"], name) for r in report["results"] for name, v in r["fields"].items() if v["agree"] is False]


def verdict(report: dict[str, Any]) -> tuple[int, str]:
    """The exit code and the one terminal line that names its cause: which fields disagree, which case errored."""
    parts = []
    if disagreements := _disagreements(report):
        fields = ", ".join(f"{name} {v['disagree']}" for name, v in report["agreement"].items() if v["disagree"])
        parts.append(f"{_count(len(disagreements), 'disagreement')} ({fields})")
    if report["errors"]:
        first = next(r for r in report["results"] if r["errors"])
        side, message = next(iter(first["errors"].items()))
        message = one_line(message)
        parts.append(f"{_count(report['errors'], _unit(report))} of {report['cases']} failed with an error"
                     f" (first, {first['id']}: {side}: {message[:200]}{'...' if len(message) > 200 else ''})")
    if parts:
        return 1, "tokenspec: parity FAIL: " + "; ".join(parts)
    return 0, f"tokenspec: parity PASS: {_count(report['cases'], _unit(report))}, no disagreement and no error"


def _skipped(report: dict[str, Any]) -> str:
    lines = report.get("skipped_lines") or []
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<h2>Skipped lines ({len(lines)})</h2><ul>{items}</ul>" if lines else ""


def _agreement_table(report: dict[str, Any]) -> str:
    if not report["agreement"]:
        return "<p>No field was compared.</p>"
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{v['agree']}</td><td>{v['disagree']}</td><td>{v['not_comparable']}"
        f"</td><td>{_rate(v['rate'])}</td></tr>"
        for name, v in report["agreement"].items()
    )
    return ("<table><tr><th>field</th><th>agree</th><th>disagree</th><th>not comparable</th><th>rate</th></tr>"
            f"{rows}</table>")


def _request(r: dict[str, Any]) -> str:
    body = html.escape(json.dumps(r["request"], ensure_ascii=False, indent=1))
    return f"<details><summary>request</summary><pre>{body}</pre></details>"


def _diffs(report: dict[str, Any]) -> str:
    esc = html.escape
    differ = difflib.HtmlDiff(wrapcolumn=70)
    diffs = []
    for r in report["results"]:
        for name, v in r["fields"].items():
            if v["agree"] is False:
                left = json.dumps(v["a"], ensure_ascii=False, indent=1).splitlines()
                right = json.dumps(v["b"], ensure_ascii=False, indent=1).splitlines()
                table = differ.make_table(left, right, "A", "B", context=True, numlines=2)
                notes = "".join(f"<p>{esc(note)}</p>" for note in r.get("notes") or [])
                diffs.append(f"<h3>{esc(r['id'])}: {esc(name)}</h3>{notes}{_request(r)}{table}")
    return (f"<h2>Disagreements ({len(diffs)})</h2>" + "".join(diffs)) if diffs else \
        "<h2>Disagreements</h2><p>None.</p>"


def _errors(report: dict[str, Any]) -> str:
    esc = html.escape
    items = [f"<h3>{esc(r['id'])}</h3><ul>"
             + "".join(f"<li>{esc(side)}: <code>{esc(message)}</code></li>" for side, message in r["errors"].items())
             + f"</ul>{_request(r)}"
             for r in report["results"] if r["errors"]]
    return f"<h2>Errors ({len(items)})</h2>" + "".join(items) if items else ""


def to_html(report: dict[str, Any]) -> str:
    esc = html.escape
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>tokenspec parity</title>
<style>{STYLE}</style></head><body><h1>tokenspec parity report</h1>
<p>A: <code>{esc(report['a'])}</code><br>B: <code>{esc(report['b'])}</code></p>
<p>Model <code>{esc(report['model'])}</code>, {esc(_provenance(report))}. {_errors_sentence(report)}</p>
{_skipped(report)}<h2>Agreement per field</h2>{_agreement_table(report)}{_diffs(report)}{_errors(report)}</body></html>
"""


def run_parity(a_url: str, b_url: str, model: str | None, cases: int, seed: int,
               transport: Transport | None = None) -> dict[str, Any]:
    """A is sent with the target role's credentials, B with the reference role's (``--api-key-env reference=``)."""
    transport = transport or Transport()
    a_url, b_url = normalise_url(a_url), normalise_url(b_url)
    for url, role in ((a_url, "target"), (b_url, "reference")):
        check_reachable(url, transport, role)
        check_access(url, transport, role)
    model = model or served_model(a_url, transport)
    a, b = Server(a_url, transport, "target"), Server(b_url, transport, "reference")
    results = [compare_case(case, a, b) for case in generate_cases(model, cases, seed)]
    return to_json(a_url, b_url, model, seed, results)


def parity_from_args(args: argparse.Namespace) -> int:
    if args.cases < 1:
        raise UsageError("--cases must be at least 1")
    transport = Transport.from_args(args, timeout=[str(args.timeout)])
    if args.report:
        writable_folder(args.report, "--report")
    if args.requests:
        report = _traffic_report(args, transport)
    elif args.a and args.b:
        report = run_parity(args.a, args.b, args.model, args.cases, args.seed, transport)
    else:
        raise UsageError("give --a URL and --b URL, or --requests FILE with --target URL and --reference URL")
    report = json.loads(transport.redact(json.dumps(report)))
    for name, v in report["agreement"].items():
        print(f"{name:14} agree {v['agree']:3}  disagree {v['disagree']:3}  n/a {v['not_comparable']:3}"
              f"  {_rate(v['rate'])}")
    code, line = verdict(report)
    print(line)
    if args.report:
        out = Path(args.report)
        (out / "parity.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        (out / "parity.html").write_text(to_html(report))
        print(f"parity report in {out}")
    return code


def _traffic_report(args: argparse.Namespace, transport: Transport) -> dict[str, Any]:
    from tokenspec.campaigns.traffic import load_requests, run_traffic, to_report

    if args.a or args.b or not (args.target and args.reference):
        raise UsageError("--requests compares the split pipeline (--target, --engine) with --reference; not --a/--b")
    urls = {"target": normalise_url(args.target), "engine": normalise_url(args.engine or args.target),
            "reference": normalise_url(args.reference)}
    requests, bad = load_requests(Path(args.requests))
    for line in bad:
        print(f"tokenspec: skipped {args.requests} {line}")
    if not requests:
        raise UsageError(f"--requests {args.requests}: no request to compare ({len(bad)} line(s) skipped)")
    for role, url in urls.items():
        check_reachable(url, transport, role)
        check_access(url, transport, role)
    model = args.model or served_model(urls["target"], transport)
    return to_report(run_traffic(requests, urls["target"], urls["engine"], urls["reference"], model, transport),
                     bad, urls, model)
