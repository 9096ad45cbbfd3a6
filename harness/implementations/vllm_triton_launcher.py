"""Run vLLM's own CLI (``vllm launch render ...``) with Triton declared present: vLLM 0.34's CPU start-up check.

vLLM 0.34's CPU platform raises "vLLM on x86 CPUs requires Triton (triton-cpu)" at config time, even for the
GPU-less render server, which runs no kernel (0.33 only warned; triton-cpu is not published). Setting
``vllm.triton_utils.HAS_TRITON = True`` before the CLI runs passes that check and changes nothing else: the check
reads the attribute when it runs, and the render path never calls Triton. A deployment that uses this launcher says
so in its roles sentence (a vLLM packaging deviation, not vLLM's behaviour under test).

How it is run, and why: the release's virtualenv has no tokenspec in it, so ``python -m tokenspec...`` cannot import
this module there; the plug-in runs this file by path with that virtualenv's python and ``-P``. ``-P`` matters: a
script's folder is normally put first on ``sys.path``, and this folder holds tokenspec's own ``vllm.py``, which would
shadow the real ``vllm`` package. (``python -c`` with the source would work too, but leaves a command line nobody can
read in the server's log.) This file imports nothing but the standard library and vLLM.

Usage: ``<release venv>/bin/python -P vllm_triton_launcher.py launch render --model DIR ...`` (the arguments of the
``vllm`` command).
"""

from __future__ import annotations

import sys


def main() -> None:
    import vllm.triton_utils

    vllm.triton_utils.HAS_TRITON = True
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
