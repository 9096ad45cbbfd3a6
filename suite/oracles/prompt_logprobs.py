"""What generate's prompt_logprobs must hold (GENERATE-033), shared by the whole and the streamed answer (STREAM-031).

The oracle is the request itself: the prompt ids and k. Entry i scores prompt token i given the tokens before it, so
the first entry has nothing to be scored by and is null; the others hold token i with its rank and the k most
likely ids at that position, ranks 1..k, which is k keys when token i is among them and k + 1 when it is not.
"""

from __future__ import annotations

import math
from typing import Any

#: How far a logprob of a better rank may sit below a worse one's (float noise of one softmax).
TOLERANCE = 1e-4


def prompt_logprobs_problem(entries: Any, prompt: list[int], k: int) -> str | None:
    """What is wrong with ``entries`` as the prompt_logprobs of ``prompt`` asked with k >= 0, or None."""
    if not isinstance(entries, list):
        return f"prompt_logprobs {entries!r:.200} where prompt_logprobs {k} was asked"
    if len(entries) != len(prompt):
        return f"{len(entries)} prompt_logprobs entries for {len(prompt)} prompt tokens"
    if entries[0] is not None:
        return f"the first prompt token has nothing before it to be scored by, yet entry 0 is {entries[0]!r:.200}"
    for i, entry in enumerate(entries[1:], start=1):
        if not isinstance(entry, dict):
            return f"entry {i}: {entry!r:.200}"
        scored = {int(key): value for key, value in entry.items()}
        if prompt[i] not in scored:
            return f"entry {i} does not score prompt token {prompt[i]}: its keys are {sorted(scored)}"
        ranks = {token: value.get("rank") for token, value in scored.items()}
        if not all(isinstance(r, int) and r >= 1 for r in ranks.values()):
            return f"entry {i}: ranks {ranks}"
        top = sorted(r for token, r in ranks.items() if token != prompt[i] or r <= k)
        if top != list(range(1, k + 1)):
            return f"entry {i}: the top {k} hold ranks {top} (keys {sorted(scored)})"
        if len(scored) != k + (ranks[prompt[i]] > k):
            return f"entry {i}: {len(scored)} keys for prompt_logprobs {k} (token {prompt[i]} ranks {ranks[prompt[i]]})"
        by_rank = sorted(scored.values(), key=lambda v: v["rank"])
        values = [v.get("logprob") for v in by_rank]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            return f"entry {i}: logprobs {values}"
        if any(a < b - TOLERANCE for a, b in zip(values, values[1:], strict=False)):
            return f"entry {i}: logprobs rise with rank: {[(v['rank'], v['logprob']) for v in by_rank]}"
    return None
