"""What every benchmark does around its measurements: the model folder, starting the reference server (always
stopped), SIGTERM as Ctrl-C, the machine's facts and the result file."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenspec.core.errors import UsageError
from tokenspec.harness.implementations.reference import ReferenceServer, default_model
from tokenspec.harness.models.tiny import DEFAULT_MODEL_NAME


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, so the ``finally`` blocks that stop the servers run."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def model_folder(args: argparse.Namespace) -> Path:
    model_dir = Path(args.model) if args.model else default_model()
    if not (model_dir / "tokenizer.json").exists():
        raise UsageError(f"--model {model_dir}: no tokenizer.json in that folder")
    return model_dir


def write_result(out_dir: Path, what: str, doc: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{what}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def machine_facts() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_at_start": load,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def start_reference(stack: contextlib.ExitStack, model_dir: Path) -> tuple[ReferenceServer, float]:
    """Start the reference server, stopped when ``stack`` closes (also on errors); returns it and its start-up s."""
    server = ReferenceServer(model_dir, DEFAULT_MODEL_NAME)
    stack.callback(server.stop)
    print("starting the reference server (vLLM engine + our frontend) ...", flush=True)
    started = time.perf_counter()
    server.start()
    return server, time.perf_counter() - started
