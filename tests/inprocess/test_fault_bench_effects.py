"""How bench/faults.py counts side effects: a second effect is one too many unless the first was
already under way when its worker host was stopped (found the lease held before the SIGSTOP, made
after the SIGCONT), or was made just before a fault cut its worker off from PostgreSQL (a worker
host killed or stopped, PostgreSQL restarting) so that its step's checkpoint could not be written:
the two cases docs/guarantees.md says no fence can undo."""

from bench.faults import WRITE_AFTER_EFFECT, Effects

STOP = (100.0, 120.0)  # SIGSTOP sent at 100 s, SIGCONT at 120 s
CUT = (200.0, 203.0)  # PostgreSQL restarting from 200 s to 203 s


def effects(tmp_path, *lines: str) -> Effects:
    (tmp_path / "effects").write_text("".join(f"{line}\n" for line in lines))
    return Effects.read(tmp_path / "effects", [STOP], [CUT])


def test_an_effect_made_once_is_neither_twice_nor_missing(tmp_path):
    made = effects(tmp_path, "a 99.0 99.1")
    assert not made.twice("a") and not made.again_after_a_stop("a") and not made.missing("a")


def test_an_effect_made_by_two_runs_outside_any_stop_is_twice(tmp_path):
    made = effects(tmp_path, "a 99.0 99.1", "a 110.0 110.1")
    assert made.twice("a") and not made.again_after_a_stop("a")


def test_an_effect_under_way_at_the_stop_and_made_again_by_the_new_holder_is_reported_apart(tmp_path):
    made = effects(tmp_path, "a 110.0 110.1", "a 99.9 120.5")
    assert not made.twice("a") and made.again_after_a_stop("a")


def test_an_effect_whose_lease_was_found_held_after_the_continue_is_no_excuse(tmp_path):
    made = effects(tmp_path, "a 110.0 110.1", "a 120.1 120.2")
    assert made.twice("a")


def test_three_effects_are_twice_even_when_one_was_under_way_at_the_stop(tmp_path):
    made = effects(tmp_path, "a 110.0 110.1", "a 99.9 120.5", "a 121.0 121.1")
    assert made.twice("a")


def test_an_effect_never_recorded_is_missing(tmp_path):
    assert effects(tmp_path).missing("a")


def test_an_effect_made_just_before_a_cut_and_made_again_by_the_retry_is_reported_apart(tmp_path):
    just_before = 200.0 - WRITE_AFTER_EFFECT / 2
    made = effects(tmp_path, f"a {just_before - 0.01} {just_before}", "a 204.0 204.1")
    assert not made.twice("a") and made.again_after_a_cut("a") and not made.again_after_a_stop("a")


def test_an_effect_made_during_a_cut_and_made_again_by_the_retry_is_reported_apart(tmp_path):
    made = effects(tmp_path, "a 200.9 201.0", "a 204.0 204.1")
    assert not made.twice("a") and made.again_after_a_cut("a")


def test_an_effect_whose_step_had_time_to_be_written_before_the_cut_is_no_excuse(tmp_path):
    long_before = 200.0 - 2 * WRITE_AFTER_EFFECT
    made = effects(tmp_path, f"a {long_before - 0.01} {long_before}", "a 204.0 204.1")
    assert made.twice("a") and not made.again_after_a_cut("a")


def test_an_effect_made_twice_after_the_cut_is_twice(tmp_path):
    made = effects(tmp_path, "a 204.0 204.1", "a 205.0 205.1")
    assert made.twice("a") and not made.again_after_a_cut("a")


def test_an_effect_made_just_before_its_host_was_stopped_and_made_again_by_the_new_holder_is_reported_apart(
    tmp_path,
):
    just_before = 100.0 - WRITE_AFTER_EFFECT / 2
    made = effects(tmp_path, f"a {just_before - 0.01} {just_before}", "a 110.0 110.1")
    assert not made.twice("a") and made.again_after_a_cut("a")


def test_an_effect_made_during_a_stop_by_the_other_host_and_again_after_it_is_twice(tmp_path):
    made = effects(tmp_path, "a 109.9 110.0", "a 121.0 121.1")
    assert made.twice("a")
