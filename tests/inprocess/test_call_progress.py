"""notifications/progress on a 2026-07-28 call's stream: what the stream sends for what the run
reports, read from the call's row (docs/rules.md, "Progress on the call's stream")."""

from __future__ import annotations

from tests.inprocess.driver import progress_told

STEP = ("Running roll_out", None)


def report(number: int) -> tuple[str, dict[str, float]]:
    return f"{number} of 3 regions", {"progress": number, "total": 3}


def test_the_graphs_own_progress_and_total_are_sent_as_it_gives_them():
    told = progress_told([report(1), report(2)])

    assert [(t["progress"], t.get("total")) for t in told] == [(1, 3), (2, 3)]


def test_a_step_read_before_the_graphs_first_report_leaves_the_graphs_numbers_room_to_grow():
    told = progress_told([STEP, report(1), STEP, report(2), report(3)])

    assert [(t["progress"], t.get("total")) for t in told] == [(0.5, None), (1, 3), (1.5, None), (2, 3), (3, 3)]


def test_progress_always_grows_even_when_the_graphs_numbers_do_not():
    told = progress_told([report(2), report(1), ("no numbers", None), ("again", None)])

    numbers = [t["progress"] for t in told]
    assert numbers == sorted(set(numbers)) and numbers[0] == 2
    assert [t.get("total") for t in told] == [3, None, None, None]
