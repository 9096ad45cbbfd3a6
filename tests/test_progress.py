"""Long steps say what they do and how long it took; a test run shows live counts (tokenspec.core.progress)."""

from __future__ import annotations

import pytest

from tokenspec.core import progress


def test_a_step_announces_itself_then_its_time(capsys) -> None:
    with progress.step("building things", expect="about 1 s"):
        pass
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "tokenspec: building things (about 1 s) ..."
    assert lines[1].startswith("tokenspec: building things: done in ") and lines[1].endswith(" s")


def test_a_failed_step_says_so_and_the_error_goes_on(capsys) -> None:
    with pytest.raises(RuntimeError), progress.step("starting a server"):
        raise RuntimeError("no")
    assert "tokenspec: starting a server: failed after " in capsys.readouterr().err


def test_live_counts_are_sparse_and_always_end_with_the_total() -> None:
    lines: list[str] = []
    counter = progress.Counter(total=50, interval=3600, emit=lines.append)
    for i in range(50):
        counter.add("passed" if i % 10 else "not_tested")
    # Added within microseconds: only the last one is printed (no line closer than MIN_GAP to the last).
    assert len(lines) == 1 and lines[0].startswith("[50/50] 5 not tested, 45 passed (")


def test_live_counts_name_each_area_failing_areas_first() -> None:
    lines: list[str] = []
    counter = progress.Counter(total=4, interval=3600, emit=lines.append)
    counter.add("passed", ["RENDER", "RENDER"])
    counter.add("xfailed", ["DERENDER"])
    counter.add("failed", ["STREAM", "DERENDER"])
    counter.add("passed", ["RENDER"])
    assert lines[-1].endswith("; by area: DERENDER 2 (1 failed, 1 known), STREAM 1 (1 failed), RENDER 2"), lines


@pytest.mark.parametrize(("value", "text"), [(4.24, "4.2 s"), (185, "3 min 05 s")])
def test_seconds_are_written_as_the_readme_writes_them(value: float, text: str) -> None:
    assert progress.seconds(value) == text
