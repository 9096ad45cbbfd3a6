"""Reference CPU frontend: a second, readable implementation of vLLM's GPU-less render server.

It serves render (request -> GenerateRequest), derender (generate output -> OpenAI response, plain and
streaming), tokenize and detokenize for any Hugging Face style model folder (tokenizer.json plus
tokenizer_config.json). The public API is ``create_app`` and ``serve`` with a ``FrontendConfig``.
"""

from tokenspec.harness.frontend.app import create_app, serve
from tokenspec.harness.frontend.config import FrontendConfig

__all__ = ["FrontendConfig", "create_app", "serve"]
