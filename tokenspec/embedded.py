"""The main job on the embedded default: tiny model -> reference server + vLLM -> suite -> report.

This is what the README's first command runs. It needs no URL: it builds the tiny model, starts the
bundled reference server (CPU frontend in front of a real vLLM engine, the frontend behind an API key), and
runs the whole conformance suite against it, with the engine's standard coupled endpoints as the parity
reference.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

from tokenspec.core.config import RunConfig
from tokenspec.core.transport import Transport
from tokenspec.harness.implementations.reference import PROFILE, ReferenceServer, default_model
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME
from tokenspec.runner import run

#: The environment variable holding the key the embedded reference server is started with (a fresh one per run).
EMBEDDED_KEY_ENV = "TOKENSPEC_EMBEDDED_API_KEY"


def run_embedded(args: argparse.Namespace) -> int:
    model_dir = default_model(Path(args.work) if args.work else None)
    print(f"tiny model: {model_dir}", flush=True)
    # The frontend runs behind an API key, as shared deployments do, so the AUTH requirements are judged too; the
    # key lives only in this process's environment (the frontend inherits it) and reports show its variable.
    os.environ.setdefault(EMBEDDED_KEY_ENV, secrets.token_urlsafe(24))
    with ReferenceServer(model_dir, DEFAULT_MODEL_NAME, api_key_env=EMBEDDED_KEY_ENV) as server:
        assert server.frontend is not None and server.engine is not None
        print(f"reference server: frontend {server.frontend.url}, vLLM engine {server.engine.url}", flush=True)
        return run(RunConfig(
            target=server.frontend.url,  # render, derender, utilities and the checked generate route
            reference=server.engine.url,  # vLLM's standard coupled endpoints
            tokenizer=str(model_dir),
            model=DEFAULT_MODEL_NAME,
            report=args.report,
            workers=str(args.workers),
            max_examples=args.max_examples,
            seed=args.seed,
            # What the reference server declares (from a source checkout); PROFILE-001 checks each claim.
            profile=str(PROFILE) if PROFILE.is_file() else None,
            transport=Transport.from_flags(api_key_env=[EMBEDDED_KEY_ENV]),
        )).exit_code
