"""tokenspec: conformance suite and reference harness for token-in/token-out LLM serving APIs.

The pipeline under test is ``request --render--> token_ids --generate--> token_ids --derender--> response``.
As a library::

    import tokenspec

    result = tokenspec.run(tokenspec.RunConfig(target="http://127.0.0.1:8000", tokenizer="/models/qwen3"))
    result.exit_code, result.headline, result.report_dir

``run`` does what ``tokenspec run`` does (checks, the suite, the reports, the verdict printed); a bad
configuration raises :class:`UsageError`. The names load on first use, so ``import tokenspec`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tokenspec.core.version import __version__

if TYPE_CHECKING:
    from tokenspec.core.config import RunConfig
    from tokenspec.core.errors import UsageError
    from tokenspec.core.transport import Transport
    from tokenspec.runner import RunResult, run

__all__ = ["RunConfig", "RunResult", "Transport", "UsageError", "__version__", "run"]

_HOMES = {"RunConfig": "tokenspec.core.config", "Transport": "tokenspec.core.transport",
          "UsageError": "tokenspec.core.errors", "RunResult": "tokenspec.runner", "run": "tokenspec.runner"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tokenspec' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
