"""The bundled reference server: the CPU frontend in front of a real vLLM engine.

``ReferenceServer`` starts both as child processes in their own process groups (vLLM forks workers) and
stops both on exit, on Ctrl-C and on SIGTERM, so no process outlives it. The frontend serves render,
derender and the utilities itself and sends generation to the engine (gateway routes); the engine also
exposes vLLM's standard coupled endpoints, which serve as the parity reference.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tokenspec.core.progress import step
from tokenspec.core.version import __version__
from tokenspec.harness.implementations import vllm
from tokenspec.harness.implementations.base import REPORTS_DIR, Configuration, Deployment, started
from tokenspec.harness.implementations.vllm import Vllm
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME, build
from tokenspec.harness.processes import ServerProcess

TOOL_PARSER = "hermes"
REASONING_PARSER = "qwen3"
MAX_MODEL_LEN = 2048  # the engine's and the frontend's context length must agree
MAX_NUM_SEQS = 128  # the engine's largest batch (vLLM's CPU default), which the frontend states in /openapi.json


def frontend_process(model_dir: Path, served_model_name: str, engine_url: str | None, port: int = 0, *,
                     tool_parser: str | None = TOOL_PARSER, reasoning_parser: str | None = REASONING_PARSER,
                     text_filter: str = "pass-through", api_key_env: str | None = None,
                     max_model_len: int = MAX_MODEL_LEN, max_concurrency: int | None = None,
                     max_num_seqs: int | None = None, api_generation: str | None = None,
                     host: str | None = None) -> ServerProcess:
    """The CPU frontend as a child process (``python -m tokenspec serve frontend``)."""
    cmd = [sys.executable, "-m", "tokenspec", "serve", "frontend", "--model", str(model_dir),
           "--served-model-name", served_model_name, "--port", "{port}",
           "--tool-parser", tool_parser or "none", "--reasoning-parser", reasoning_parser or "none",
           "--max-model-len", str(max_model_len)]
    if engine_url:
        cmd += ["--engine", engine_url]
    if text_filter != "pass-through":
        cmd += ["--text-filter", text_filter]
    if api_key_env:
        cmd += ["--api-key-env", api_key_env]  # the child reads the key from the environment it inherits
    if max_concurrency is not None:
        cmd += ["--max-concurrency", str(max_concurrency)]
    if max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(max_num_seqs)]
    if api_generation:
        cmd += ["--api-generation", api_generation]
    if host:
        cmd += ["--host", host]
    return ServerProcess("tokenspec frontend", cmd, port=port, startup_timeout=60.0)


@dataclass
class ReferenceServer:
    """The frontend in front of a vLLM engine, both with the same parsers (the family's) and context length."""

    model_dir: Path
    served_model_name: str = DEFAULT_MODEL_NAME
    port: int = 0
    flavour: str = "auto"
    text_filter: str = "pass-through"
    tool_parser: str | None = TOOL_PARSER
    reasoning_parser: str | None = REASONING_PARSER
    #: The frontend's /v1 and /inference routes need the key in this environment variable (the engine stays open).
    api_key_env: str | None = None
    max_model_len: int = MAX_MODEL_LEN
    max_concurrency: int | None = None
    max_num_seqs: int = MAX_NUM_SEQS
    api_generation: str | None = None
    #: The engine's port (0: a free one) and the frontend's address.
    engine_port: int = 0
    host: str | None = None
    engine: vllm.VllmServer | None = field(default=None, init=False)
    frontend: ServerProcess | None = field(default=None, init=False)

    def start(self) -> ReferenceServer:
        install = vllm.find_vllm(self.flavour)  # type: ignore[arg-type]
        extra = [*vllm.parser_args(self.tool_parser, self.reasoning_parser), *vllm.engine_args(self.max_model_len),
                 "--max-num-seqs", str(self.max_num_seqs)]
        self.engine = vllm.VllmServer(install, "engine", self.model_dir, self.served_model_name,
                                      port=self.engine_port, extra_args=extra)
        try:
            self.engine.start()
            self.frontend = frontend_process(self.model_dir, self.served_model_name, self.engine.url, self.port,
                                             tool_parser=self.tool_parser, reasoning_parser=self.reasoning_parser,
                                             text_filter=self.text_filter, api_key_env=self.api_key_env,
                                             max_model_len=self.max_model_len,
                                             max_concurrency=self.max_concurrency,
                                             max_num_seqs=self.max_num_seqs,
                                             api_generation=self.api_generation, host=self.host)
            self.frontend.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.frontend is not None:
            self.frontend.stop()
        if self.engine is not None:
            self.engine.stop()

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_model(work: Path | None = None) -> Path:
    """Build (deterministically, in well under a second) the embedded tiny model and return its folder."""
    target = (work or vllm.cache_dir() / "embedded") / "tiny-model"
    with step(f"building the tiny model in {target}"):
        return build(target).model_dir


def reference_server(args: argparse.Namespace, model_dir: Path) -> ReferenceServer:
    """The reference server ``tokenspec serve`` flags describe: each flag reaches the part it configures (the
    parsers and the context length both, the concurrency limit and API generation the frontend)."""
    return ReferenceServer(model_dir, args.served_model_name, args.port, args.flavour,
                           text_filter=getattr(args, "text_filter", "pass-through"), api_key_env=args.api_key_env,
                           tool_parser=None if args.tool_parser == "none" else args.tool_parser,
                           reasoning_parser=None if args.reasoning_parser == "none" else args.reasoning_parser,
                           max_model_len=args.max_model_len, max_concurrency=args.max_concurrency,
                           max_num_seqs=args.max_num_seqs or MAX_NUM_SEQS, api_generation=args.api_generation,
                           engine_port=args.engine_port,
                           host=None if args.host == "127.0.0.1" else args.host)


def serve_reference(args: argparse.Namespace) -> int:
    """``tokenspec serve``: run until Ctrl-C or SIGTERM, then stop everything that was started."""
    model_dir = Path(args.model) if args.model else default_model()
    if args.api_key_env:
        from tokenspec.harness.frontend.auth import digests_from_env

        digests_from_env(args.api_key_env)  # an unset variable stops here, before the engine starts
    server = reference_server(args, model_dir)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        with server:
            assert server.frontend is not None and server.engine is not None
            print(f"frontend (render, derender, gateway): {server.frontend.url}", flush=True)
            print(f"engine (vLLM, generate + coupled reference): {server.engine.url}", flush=True)
            print(f"model {server.served_model_name} from {model_dir}; Ctrl-C stops both", flush=True)
            while server.frontend.running() and server.engine.running():
                time.sleep(0.5)
            print("a server process exited; stopping", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0


PROFILE = REPORTS_DIR / "profiles" / "reference-server.yaml"


def reference_profile(tool_parser: str | None, reasoning_parser: str | None) -> Path:
    """The reference server's profile for a parser configuration: the committed one (hermes + qwen3), or a copy
    in the cache declaring the other parsers and what follows from them (no tool parser: the frontend refuses
    tools; no reasoning parser: no reasoning), so a family's campaign or matrix cell is held to its parsers
    instead of leaving them to the probe."""
    tool = None if tool_parser in (None, "none") else tool_parser
    reasoning = None if reasoning_parser in (None, "none") else reasoning_parser
    if (tool, reasoning) == (TOOL_PARSER, REASONING_PARSER):
        return PROFILE
    import yaml

    from tokenspec.core.yaml_files import load_yaml

    profile = load_yaml(PROFILE.read_text(encoding="utf-8"))
    profile["parsers"] = {"reasoning": reasoning or "none", "tool": tool or "none"}
    profile["features"].update({"tools": tool is not None, "tool-parsing": tool is not None,
                                "reasoning": reasoning is not None})
    out = vllm.cache_dir() / "profiles" / f"reference-server-{reasoning or 'none'}+{tool or 'none'}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# Generated from {PROFILE.name} for these parsers (harness/implementations/reference.py)\n"
                   + yaml.safe_dump(profile, sort_keys=False), encoding="utf-8")
    return out


class Reference:
    """tokenspec's own reference server as a matrix entry: the frontend is the target (render, derender,
    utilities and the checked generate route); the vLLM engine behind it is the parity reference."""

    name = "reference"
    title = "tokenspec reference server"

    def installed(self) -> bool:
        return Vllm().installed()

    def install(self) -> None:
        Vllm().install()

    def version(self) -> str:
        return __version__

    def deploy(self, config: Configuration) -> Deployment:
        install = vllm.find_vllm()
        engine = vllm.VllmServer(install, "engine", config.model_dir, config.served_model_name, port=vllm.free_port(),
                                 extra_args=vllm.parser_args(config.tool_parser, config.reasoning_parser)
                                 + vllm.engine_args(MAX_MODEL_LEN))
        frontend = frontend_process(config.model_dir, config.served_model_name, engine.url, vllm.free_port(),
                                    tool_parser=config.tool_parser, reasoning_parser=config.reasoning_parser)
        deployment = Deployment(self.name, __version__, "cpu", target=frontend.url, engine=None,
                                reference=engine.url,
                                profile=reference_profile(config.tool_parser, config.reasoning_parser),
                                roles=f"tokenspec frontend (render, derender, gateway) as target; the vLLM"
                                      f" {install.version()} engine behind it as parity reference")
        return started(deployment, engine, frontend)
