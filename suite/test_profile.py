"""The target profile's declarations, each checked against what the probe saw (PROFILE-001).

A profile lets an implementer say what the target offers; a declaration the probe cannot confirm is a failure
here (and the tests of that feature run and say what is wrong), never a silent pass.
"""

from __future__ import annotations

import pytest

from tokenspec.suite.engine.gating import not_tested
from tokenspec.suite.engine.run_config import run_config


def _declarations(config: pytest.Config) -> list:
    run = run_config(config)
    path = run.profile if run is not None else None
    if not path:
        return [pytest.param(None, id="no-profile")]
    from tokenspec.suite.engine.profile import load_profile

    profile = load_profile(path)
    items = [(f, "offered" if on else "unsupported") for f, on in profile.features.items()]
    items += [(f"{kind}-parser", family) for kind, family in profile.parsers.items()]
    return [pytest.param(item, id=item[0]) for item in items] or [pytest.param(None, id="empty-profile")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "declaration" in metafunc.fixturenames:
        metafunc.parametrize("declaration", _declarations(metafunc.config))


@pytest.mark.req("PROFILE-001")
def test_declaration_is_confirmed_by_the_probe(capabilities, declaration) -> None:
    if declaration is None:
        not_tested("no --profile (or an empty one): the probe decided every capability")
    name, declared = declaration
    observed = capabilities.observed.get(name)
    assert observed is not None, f"[PROFILE-001] {name} is declared but the probe has no view of it"
    if name.endswith("-parser"):
        found = observed.evidence.removeprefix("probe found ")
        assert found == declared, f"[PROFILE-001] the profile declares {name} {declared}; the probe found {found}"
    elif declared == "offered":
        assert observed.status == "offered", (
            f"[PROFILE-001] the profile declares {name} offered; the probe found it {observed.status}:"
            f" {observed.evidence}")
