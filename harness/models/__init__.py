"""Model folders of real model families (Qwen3, Llama 3.1, DeepSeek-R1 distill), built offline.

Real tokenizers (vocabulary and merges from llama.cpp's vocab-only GGUF files), real chat templates (llama.cpp's
vendored copies), the real special tokens, tokenizer settings and generation defaults of each model, with random
tiny weights at the real vocabulary size. ``sources`` fetches the files, ``families`` states the facts per family,
``build`` writes the folder (``tokenspec model build DIR --family NAME``).
"""

from tokenspec.harness.models.build import build, build_family
from tokenspec.harness.models.families import (
    FAMILIES,
    FAMILY_NAMES,
    FAMILY_PARSERS,
    AddedTokenSpec,
    FamilySpec,
    family,
)

__all__ = ["FAMILIES", "FAMILY_NAMES", "FAMILY_PARSERS", "AddedTokenSpec", "FamilySpec", "build", "build_family",
           "family"]
