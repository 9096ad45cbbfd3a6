"""Which templates get content as a list of parts (RENDER-023), against vLLM 0.32's own detection.

The frontend (``chat_template.wants_content_parts``) and the suite's render oracle (``render_oracle``) each decide it
from the template's syntax tree. vLLM's decision is the outside oracle: its ``_detect_content_format`` runs in
vLLM's interpreter over every chat template llama.cpp vendors (about 70 real templates), and both must agree with
it. Gemma 4's template (``for item in message['content']``, the loop's own iterable being the content access) was
once missed by both, which rendered its system turn differently from vLLM.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tokenspec.harness.frontend.chat_template import wants_content_parts
from tokenspec.harness.implementations import vllm
from tokenspec.harness.models import sources
from tokenspec.suite.oracles.render_oracle import _loops_over_content

pytestmark = pytest.mark.vllm

#: vLLM also follows content handed to a macro parameter of another name, and ignores a loop over a bare
#: ``content`` inside a macro that no call feeds a message's content; neither rule is needed by a served family.
KNOWN_DIFFERENCES = {"Kimi-K3.jinja"}

_VLLM_DETECTION = """
import json, sys
from vllm.renderers.hf import _detect_content_format
paths = json.load(sys.stdin)
print(json.dumps({p: _detect_content_format(open(p).read(), default="string") == "openai" for p in paths}))
"""


def test_parts_format_agrees_with_vllm_on_every_vendored_template(vllm_install: vllm.VllmInstall) -> None:
    sources.ensure_sources()
    paths = sorted(str(p) for p in (sources.models_dir() / "templates").glob("*.jinja"))
    assert len(paths) >= 60
    run = subprocess.run([str(vllm_install.executable), "-c", _VLLM_DETECTION], input=json.dumps(paths),
                         capture_output=True, text=True, timeout=300, env=vllm_install.environment())
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    differ = {}
    for path in paths:
        template = open(path, encoding="utf-8").read()
        ours = (wants_content_parts(template), _loops_over_content(template))
        if ours != (theirs[path], theirs[path]):
            differ[path.rsplit("/", 1)[-1]] = (theirs[path], *ours)
    assert set(differ) == KNOWN_DIFFERENCES, differ
    assert theirs[str(sources.template_path("google-gemma-4-31B-it.jinja"))] is True
