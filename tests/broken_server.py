"""TEST DOUBLE: the reference frontend with ONE deliberately planted defect, served over real HTTP.

Not a test module and not a server anyone should run for real. It exists to check the checker: the
conformance suite is run against a server that breaks exactly one requirement, and the suite must report
the test aimed at that requirement as failed ("a test asserts something that can fail").

The defects are the shipped catalogue of ``tokenspec mutants`` (``harness/mutants/defects.py``), planted by
its proxy in front of the real, in-process frontend; everything passes through uvicorn on loopback, so the
suite sees the defect exactly as it would see a buggy implementation. With ``defect=None`` the proxy is a
faithful pass-through, which is what the control runs use, so the proxy itself cannot make a test fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from frontend_server import running_frontend

from tokenspec.harness.frontend import FrontendConfig
from tokenspec.harness.loopback import running_app
from tokenspec.harness.mutants.defects import DEFECTS
from tokenspec.harness.mutants.proxy import MutantProxy


def frontend_config(model_dir: Path, served_model_name: str, **overrides: Any) -> FrontendConfig:
    """The frontend as the suite expects the reference to be configured: hermes tools, qwen3 reasoning."""
    return FrontendConfig(model_dir, served_model_name, **{"tool_parser": "hermes", "reasoning_parser": "qwen3",
                                                           **overrides})


@contextmanager
def running_broken_server(defect: str | None, config: FrontendConfig, timeout: float = 20.0) -> Iterator[str]:
    """Serve the frontend behind ``defect`` (a catalogue name, or None for none) on loopback; yields the URL."""
    with running_frontend(config, timeout) as upstream, \
            running_app(MutantProxy(upstream, DEFECTS[defect] if defect else None), timeout) as url:
        yield url
