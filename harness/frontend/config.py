"""The frontend's settings, mirroring the vLLM render-server flags that change observable behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class FrontendConfig:
    """What one frontend serves and the bounds it enforces.

    ``max_n`` plays the part of vLLM's VLLM_MAX_N_SEQUENCES; ``max_body_bytes`` has no vLLM counterpart:
    it stops an oversized body before any JSON parsing (answered with 413).
    """

    model_dir: Path
    served_model_name: str | None = None
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    max_model_len: int = 2048
    max_logprobs: int = 20
    max_n: int = 16384
    max_body_bytes: int = 8 * 1024 * 1024
    engine_url: str | None = None  # where the /v1/* gateway sends generate requests
    engine_timeout: float = 120.0
    max_concurrency: int | None = None  # gateway requests in flight before answering 503
    #: The engine's max_num_seqs (its largest n), stated in /openapi.json; None: not known, not stated.
    max_num_seqs: int | None = None
    #: The vLLM API generation whose wire the frontend speaks where generations differ (the streaming state's window,
    #: streamed output_mode derender): 0.34, the newest, or 0.33.
    api_generation: str = "0.34"
    text_filter: str = "pass-through"  # safety hook: a built-in name or module:attribute (frontend/safety.py)
    #: SHA-256 digests of the API keys that open /v1 and /inference (harness/frontend/auth.py); empty: open.
    api_key_digests: tuple[bytes, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        from tokenspec.core.errors import UsageError
        from tokenspec.harness.frontend.parsers import REASONING_PARSERS, TOOL_PARSERS

        for kind, name, known in (("tool", self.tool_parser, TOOL_PARSERS), ("reasoning", self.reasoning_parser,
                                                                             REASONING_PARSERS)):
            if name is not None and name not in known:
                raise UsageError(f"unknown {kind} parser {name!r}; known: {', '.join(sorted(known))}")
        from tokenspec.harness.frontend.safety import load_text_filter

        load_text_filter(self.text_filter)  # a filter that cannot load stops start-up, not the first request
        if self.api_generation not in ("0.33", "0.34"):
            raise UsageError(f"--api-generation must be 0.33 or 0.34, got {self.api_generation!r}")
        if self.max_model_len < 1:
            raise UsageError(f"--max-model-len must be positive, got {self.max_model_len}")

    @property
    def model_name(self) -> str:
        """The name clients must use: the served name, else the folder path as given (vLLM's default)."""
        return self.served_model_name or str(self.model_dir)
