"""Bad input, whatever the seed: every constraint of every request schema is violated once per run (ERROR-015).

``suite/oracles/constraints.py`` writes one mutation per constraint (type, enum, bound, item count, required key) of
a body the target accepts, the generate responses embedded in derender bodies included; each must be refused
with a 4xx (never a 2xx, never a 5xx). Random fuzzing (``test_fuzz.py``) stays on top of this for the cases
no single constraint describes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tokenspec.suite.engine.probe import OPTIONAL_FIELDS
from tokenspec.suite.oracles.builders import ENDPOINT_ROUTES, valid_body
from tokenspec.suite.oracles.constraints import violations

#: Accepted violations listed in a failure message (all are counted).
MAX_LISTED = 25


def _status(client, path: str, body: Any) -> int:
    """The status of one answer; a dropped connection is asked once more (a server may close a keep-alive
    connection after its previous answer, which is no fault of this body)."""
    try:
        return client.post(path, body, validate=False).status_code
    except AssertionError:
        return client.post(path, body, validate=False).status_code


@pytest.mark.req("ERROR-015", "ERROR-003")
@pytest.mark.parametrize("name", list(ENDPOINT_ROUTES))
def test_every_request_constraint_is_refused(request, target, codec, capabilities, name) -> None:
    fixture, path = ENDPOINT_ROUTES[name]
    client = request.getfixturevalue(fixture)
    valid = valid_body(name, target.model, codec)
    client.post_ok(path, valid)  # the starting point is accepted, so each refusal below is the mutation's
    # An optional field the target declares it does not honour is ignored like any unknown key (ERROR-011).
    ignored = set(OPTIONAL_FIELDS) - capabilities.fields if capabilities.fields is not None else set()
    cases = [c for c in violations(path, "post", valid) if not ignored & set(re.split(r"[.\[\]]", c.where))]
    assert cases, f"the request schema of POST {path} gave no constraint to violate"
    accepted, crashed = [], []
    for case in cases:
        try:  # only the status is judged here (test_fuzz.py checks the shape of every answer)
            status = _status(client, path, case.body)
        except AssertionError as exc:  # no answer at all (a reset, a timeout): worse than a 5xx
            crashed.append((case, f"no answer ({str(exc)[-80:]})"))
            continue
        if status < 300:
            accepted.append(case)
        elif status >= 500:
            crashed.append((case, status))
    if accepted or crashed:
        client.post(path, (accepted or [c for c, _ in crashed])[0].body, validate=False)  # the report's curl
    parts = []
    if accepted:
        listed = "; ".join(f"{c.where} ({c.constraint})" for c in accepted[:MAX_LISTED])
        parts.append(f"[ERROR-015] POST {path} accepted {len(accepted)} of {len(cases)} bodies that each violate one"
                     f" constraint of the request schema: {listed}{' ...' if len(accepted) > MAX_LISTED else ''};"
                     f" the first: {accepted[0].reason}")
    if crashed:
        listed = "; ".join(f"{c.where} ({c.constraint}) -> {s}" for c, s in crashed[:MAX_LISTED])
        parts.append(f"[ERROR-003] POST {path} answered 5xx or nothing to {len(crashed)} of {len(cases)} constraint"
                     f" violations: {listed}")
    assert not parts, "\n".join(parts)
