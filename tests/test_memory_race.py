"""The races' verdicts in words, read from crafted curves for each branch (lab.experiments.memory_race and
lab.instruments.race.race_story); the forecast that says before Start when the server is too busy; and two
memory races at once, of two sessions, through the job path the Train page takes, whose verdicts put a
gated cell ahead of the RNN."""

import os
import time

import pytest

from lab.experiments.memory_race import (
    LANE_STEPS_PER_SECOND,
    MEMORY_RACE,
    STEPS_TO_CALL,
    forecast,
    long_runs_sentence,
    memory_verdict,
    race_curves,
    toy_race_jobs,
)
from lab.experiments.probe import TOY_CELLS
from lab.instruments.race import race_story, race_verdict
from lab.server.capacity import Budget, StepTurns, lane_share, step_lanes
from lab.server.jobs import start_together
from lab.settings import ServerSettings

CHANCE = 0.13
SHIPPED = {"rnn": (0.13, 1500), "gru_torch": (1.0, 400), "lstm": (1.0, 600), "scan": (0.15, 1500)}


def curves(**final):
    """Four runners' accuracy curves over 0-40 s, each rising linearly from chance to its `final` accuracy."""
    return {cell: ([0, 20, 40], [CHANCE, (CHANCE + acc) / 2, acc]) for cell, acc in final.items()}


# ---------------------------------------------------------------------------
# the memory race's verdict, branch by branch


def test_a_gated_leader_is_named_with_every_runners_accuracy_and_why_the_others_cannot_keep_the_symbol():
    said = memory_verdict(curves(rnn=0.12, gru_torch=0.95, lstm=0.6, scan=0.14), CHANCE, shipped=SHIPPED)
    assert said.startswith(
        "After 40 s, the GRU (z keeps) leads: the GRU (z keeps) 95%, the LSTM 60%, the selective scan 14%, "
        "the vanilla RNN 12%"
    )
    assert "against 13% for always giving the commonest answer" in said
    # the LSTM, gated too, trails: the leader is named, never "the gated cells pull ahead" (issue 51)
    assert "The GRU (z keeps) pulls ahead once it learns to keep the first symbol" in said
    assert "gated cells pull ahead" not in said
    assert "The LSTM has such gates too but has not learned to use them yet." in said
    assert "through the 19 after it" in said  # k = 20: the 19 symbols between the first and the "?"
    assert "the vanilla RNN rewrites its whole state" in said and "selective scan has gates that read only" in said
    assert (
        "the GRU (z keeps) solved it in 400 steps, the LSTM solved it in 600 steps" in said
    )  # where the long runs end
    assert said.endswith("the vanilla RNN and the selective scan stayed at chance.")


def test_cells_behind_for_the_same_reason_are_explained_once_together():
    said = memory_verdict(curves(lstm=0.9, scan=0.14, min_gru=0.13, min_lstm=0.12), CHANCE)
    assert (
        "The others cannot: the selective scan, the minGRU and the minLSTM each has gates that read only the "
        "current symbol, which looks to them like any other." in said
    )
    assert said.count("read only the current symbol") == 1


def test_gated_cells_level_at_the_front_lead_together_and_only_the_cells_behind_are_explained():
    said = memory_verdict(curves(gru_torch=0.82, lstm=0.80, rnn=0.13), CHANCE, x="step")
    assert said.startswith("After 40 steps, the GRU (z keeps) and the LSTM lead")
    assert "The gated cells pull ahead once they learn" in said  # every gated runner leads: true of them all
    assert "The others cannot: the vanilla RNN rewrites" in said and "selective scan" not in said
    assert "longer runs" not in said  # none shipped


def test_nobody_off_chance_yet_says_so_instead_of_crowning_a_leader():
    said = memory_verdict(curves(rnn=0.16, gru_torch=0.14, lstm=0.12, scan=0.13), CHANCE)
    assert "no cell answers better than chance yet" in said and "leads" not in said
    assert "a few hundred steps" in said


def test_runners_off_chance_and_level_are_too_close_to_call():
    said = memory_verdict(curves(rnn=0.5, gru_torch=0.52, lstm=0.49, scan=0.51), CHANCE)
    assert "all 4 runners are level" in said and "too close to call" in said


def test_an_ungated_leader_is_not_explained_as_memory_and_the_gated_cell_is_expected_to_pass_it():
    said = memory_verdict(curves(rnn=0.4, gru_torch=0.2, lstm=0.2, scan=0.13), CHANCE, shipped=SHIPPED)
    assert said.startswith("After 40 s, the vanilla RNN leads") and "A lead this early can change" in said
    assert "gated cells pull ahead" not in said


def test_gated_cells_only_are_told_apart_by_who_learns_sooner():
    said = memory_verdict(curves(gru_torch=0.9, lstm=0.4), CHANCE)
    assert "the GRU (z keeps) leads" in said and "Every cell here has gates that read its state" in said


def test_too_few_points_is_too_early_and_still_says_where_the_long_runs_end():
    said = memory_verdict({"rnn": ([10], [0.1]), "gru_torch": ([10], [0.2])}, CHANCE, shipped=SHIPPED)
    assert said.startswith("Too early to call") and "longer runs" in said


def test_the_long_runs_sentence_says_solved_reached_and_stayed_at_chance():
    said = long_runs_sentence({"gru_torch": (0.99, 400), "lstm": (0.5, 1500), "rnn": (0.12, 1500)}, CHANCE)
    assert said == (
        "In this lab's longer runs (up to 1,500 steps each), the GRU (z keeps) solved it in 400 steps, the LSTM "
        "reached 50% and the vanilla RNN stayed at chance."
    )


# ---------------------------------------------------------------------------
# the text race's story: who leads, why, and where the long race ends


FAMILIES = {"RNN": "rnn", "GRU": "gru_torch", "LSTM": "lstm", "selective scan": "scan"}
LONG = race_verdict(
    {"LSTM": ([0, 30], [3, 1.40]), "GRU (z keeps)": ([0, 30], [3, 1.45]), "vanilla RNN": ([0, 30], [3, 1.60])}
)


def text_verdict(**final):
    return race_verdict({name.replace("_", " "): ([0, 60], [4.0, loss]) for name, loss in final.items()})


def test_an_early_rnn_lead_is_explained_as_the_simpler_cell_and_the_long_race_says_it_is_early():
    verdict = text_verdict(RNN=2.4, GRU=2.6, LSTM=2.7)
    said = race_story(verdict, "60 s", FAMILIES, {"RNN": 40, "GRU": 38, "LSTM": 36}, LONG, "30 minutes")
    assert said.startswith("After 60 s, the RNN leads by 0.20 nats/char over the GRU")
    assert "the simpler cell often leads: it has fewer things to learn" in said
    assert "cheaper step" not in said  # it took about as many steps as the others
    assert said.endswith("with the LSTM ahead and the vanilla RNN last: this lead is an early one.")


def test_a_leader_that_took_many_more_steps_in_the_same_seconds_is_said_to_have_led_on_speed():
    verdict = text_verdict(selective_scan=2.3, GRU=2.6, LSTM=2.7)
    steps = {"selective scan": 90, "GRU": 40, "LSTM": 35}
    said = race_story(verdict, "60 s", FAMILIES, steps, LONG, "30 minutes")
    assert "The selective scan took 90 steps in that time to the LSTM's 35: a cheaper step" in said
    assert race_story(verdict, "60 steps", FAMILIES, None, LONG, "30 minutes").count("cheaper step") == 0  # by steps


def test_a_gated_leader_is_explained_by_what_its_gates_keep_and_matches_the_long_race():
    said = race_story(text_verdict(LSTM=2.2, GRU=2.5, RNN=2.6), "60 s", FAMILIES, None, LONG, "30 minutes")
    # the GRU, gated too, trails the LSTM: the leader is named, not "the gated cells" (issue 51)
    assert "The LSTM pulls ahead once its gates learn what to keep" in said and "gated cells pull" not in said
    assert "The GRU has such gates too but trails here." in said
    assert said.endswith("the same leader as here.")
    together = race_story(text_verdict(LSTM=2.2, GRU=2.21, RNN=2.6), "60 s", FAMILIES, None, LONG, "30 minutes")
    assert "The gated cells pull ahead once their gates learn" in together  # both lead: true of them all


@pytest.mark.parametrize(
    "final",
    [
        dict(rnn=0.12, gru_torch=0.95, lstm=0.6, scan=0.14),
        dict(rnn=0.12, gru_torch=0.95, lstm=0.93, scan=0.14, min_gru=0.5),
        dict(rnn=0.12, gru_torch=0.3, lstm=0.95, scan=0.14),
        dict(rnn=0.2, gru_torch=0.9, lstm=0.12, scan=0.9),
    ],
)
def test_the_memory_verdict_says_the_gated_cells_pull_ahead_only_when_none_of_them_trails(final):
    """Issue 51: the memory race once said "the gated cells pull ahead" while one gated cell was last."""
    from lab.nets.families import keeps_with_gates

    said = memory_verdict(curves(**final), CHANCE)
    gated = [cell for cell in final if keeps_with_gates(cell)]
    best = max(final.values())
    level = [cell for cell, acc in final.items() if best - acc <= 0.05]
    if "gated cells pull ahead" in said:
        assert set(gated) <= set(level), said
    for cell in gated:
        if cell not in level and "pull" in said:
            assert "such gates too but" in said, said


def test_the_memory_races_line_names_its_runners_rather_than_counting_them_against_another_list():
    """Issue 51: the Train page said "the same 6 cells" right after listing the text race's 4."""
    from lab.nets.families import name
    from lab.words import a_or_an
    from ui.train.memory_race import what_it_does

    line, _ = what_it_does(60)
    assert "the same" not in line
    assert all(a_or_an(name(cell)) in line for cell in TOY_CELLS)


def test_level_runs_and_no_long_race_and_no_verdict_each_read_right():
    level = race_story(text_verdict(RNN=2.50, GRU=2.51), "60 s", FAMILIES, None, LONG, "30 minutes")
    assert "too close to call" in level and "their curves lie together" in level
    assert level.endswith("with the LSTM ahead and the vanilla RNN last.")
    alone = race_story(text_verdict(RNN=2.4, GRU=2.6), "60 s", FAMILIES)
    assert "long race" not in alone and "simpler cell" in alone
    assert race_story(None, None, FAMILIES, None, LONG, "30 minutes").startswith("Too early to call the race")


# ---------------------------------------------------------------------------
# the forecast: said before Start


def test_the_forecast_says_a_quiet_server_can_call_the_race_and_a_busy_one_cannot():
    quiet = forecast(60, runs_training=0, lanes=1)
    assert quiet.steps_each == pytest.approx(LANE_STEPS_PER_SECOND * 60 / len(TOY_CELLS), abs=1) and quiet.enough
    assert quiet.sentence.startswith("The memory race: each runner should take about")
    busy = forecast(60, runs_training=24, lanes=1)
    busy_each = LANE_STEPS_PER_SECOND * 60 / (24 + len(TOY_CELLS))
    assert busy.steps_each == pytest.approx(busy_each, abs=1) and busy.steps_each < STEPS_TO_CALL and not busy.enough
    assert (
        busy.sentence.startswith("Too busy to call the memory race in 60 s") and "24 runs training now" in busy.sentence
    )
    longer = int(busy.sentence.split("Give it about ")[1].split(" s")[0])
    assert forecast(longer, runs_training=24, lanes=1).enough  # the time it suggests is enough
    assert forecast(60, runs_training=24, lanes=4).steps_each == pytest.approx(4 * busy.steps_each, abs=4)  # more lanes
    assert forecast(60, 0, lanes=8).steps_each == LANE_STEPS_PER_SECOND * 60  # a runner never beats a lane alone
    loaded = forecast(60, runs_training=0, lanes=1, share=0.2)  # other programs keep the cores busy
    assert loaded.steps_each == pytest.approx(quiet.steps_each / 5, abs=1) and not loaded.enough
    assert "beside other work on its processors" in loaded.sentence and loaded.sentence.startswith("Too busy")
    short = forecast(5, runs_training=0, lanes=1)  # a quiet server, but too little time
    assert not short.enough and short.sentence.startswith("5 s is too short for the memory race")
    assert "less busy" not in short.sentence


def test_a_lanes_share_is_what_the_other_work_on_the_cores_and_the_pages_leave_it():
    assert lane_share(1, 0, load=0.3, cores=2, aside=0.0) == 1.0  # a quiet machine
    assert lane_share(1, 4, load=1.0, cores=2, aside=0.0) == 1.0  # the load is this server's own runs
    assert lane_share(1, 0, load=11.0, cores=2, aside=0.0) == pytest.approx(2 / 12)  # ten other programs want the cores
    assert lane_share(1, 0, load=3.0, cores=2, aside=0.0) > lane_share(1, 0, load=5.0, cores=2, aside=0.0)
    assert lane_share(1, 0, load=0.3, cores=2, aside=0.25) == 0.75  # a class's pages drawn a quarter of the time


def test_the_servers_lanes_are_its_training_processes_or_concurrent_steps_never_more_than_its_cores():
    assert step_lanes(ServerSettings(training_processes=1)) == 1
    assert step_lanes(ServerSettings(training_processes=0, concurrent_steps=1)) == 1
    cores = len(os.sched_getaffinity(0))
    assert step_lanes(ServerSettings(training_processes=256)) == min(256, cores)
    assert step_lanes(ServerSettings(training_processes=0, concurrent_steps=2)) == min(2, cores)


# ---------------------------------------------------------------------------
# two races at once


RACE_STEPS = (
    STEPS_TO_CALL  # a step budget: the same race on any machine, however busy (a time budget gives it fewer steps)
)


def test_two_memory_races_at_once_each_put_a_gated_cell_ahead_of_the_rnn():
    """Two sessions' memory races, eight runs taking turns on this machine's cores through the budget and the
    step turns every job takes (lab.server.jobs), each race's verdict read as the Train page reads it."""
    budget, turns = Budget(capacity=1024), StepTurns(1)
    races = [
        toy_race_jobs(*MEMORY_RACE, steps=RACE_STEPS, seed=seed, owner=owner, budget=budget, turns=turns)
        for seed, owner in ((0, "alice"), (1, "bob"))
    ]
    for jobs in races:
        start_together(jobs.values(), "the memory race")
    for jobs in races:
        assert [job.wait(timeout=800) for job in jobs.values()] == ["finished"] * len(TOY_CELLS)
    for jobs in races:
        chance = jobs["rnn"].task.chance
        said = memory_verdict(race_curves(jobs, "step"), chance, x="step")
        assert said.startswith(f"After {RACE_STEPS} steps, the GRU") or said.startswith(
            f"After {RACE_STEPS} steps, the LSTM"
        ), said
        assert "ahead once" in said and "the vanilla RNN rewrites its whole state" in said, said


@pytest.mark.parametrize(
    "steps, elapsed, seconds, enough, said",
    [
        (0, 0.0, 60, True, "it is taking its first steps"),
        (
            100,
            10.0,
            60,
            True,
            "each runner has taken 100 of the ~400 steps that decide it, 10.0 a second, so it "
            "should be called in about 30 s",
        ),
        (450, 30.0, 60, True, "each runner has taken 450 steps, enough to call it"),
        (
            50,
            20.0,
            60,
            False,
            "each runner ends at about 150 steps, short of the ~400 that decide it. Give it about 160 s",
        ),
    ],
)
def test_a_student_who_joins_a_classmates_race_is_told_its_measured_pace(steps, elapsed, seconds, enough, said):
    """Issue 49: 30 pressing the memory race made the forecast count 180 runners where 6 trained, 7x too
    pessimistic; a race that is joined is forecast from its own pace."""
    outlook = forecast(seconds, runs_training=6, lanes=1, in_progress=(steps, elapsed))
    assert outlook.enough is enough and said in outlook.sentence
    assert "you join it" in outlook.sentence


def test_the_identical_race_in_progress_is_found_by_its_settings_and_not_another():
    from lab.experiments.memory_race import race_in_progress, start_toy_race
    from lab.server.capacity import Budget

    assert race_in_progress("recall", 20, 30) is None
    budget = Budget(10_000)
    runs = start_toy_race("recall", 20, 30, "a", "the race", budget=budget)
    try:
        deadline = time.monotonic() + 120
        while race_in_progress("recall", 20, 30) in (None, (0, 0.0)) and time.monotonic() < deadline:
            time.sleep(0.2)
        steps, elapsed = race_in_progress("recall", 20, 30)
        assert steps > 0 and elapsed > 0
        assert race_in_progress("recall", 20, 45) is None  # another budget: a race of one's own
    finally:
        for run in runs.values():
            run.stop()


def test_a_classmate_pressing_for_the_race_training_joins_it_without_building_its_models(monkeypatch):
    """Thirty students pressing the same race: the first builds and starts it, the others join it and build
    nothing (its models were most of a press)."""
    import lab.experiments.memory_race as memory_race
    from lab.server.capacity import Budget

    first = memory_race.start_toy_race("brackets", 5, 30, "a", "the race", budget=Budget(10_000))
    try:

        def built(*args, **kwargs):
            raise AssertionError("a joined race built its models")

        monkeypatch.setattr(memory_race, "toy_race_jobs", built)
        second = memory_race.start_toy_race("brackets", 5, 30, "b", "the race")
        assert list(second) == list(first) == list(TOY_CELLS)
        assert all(second[cell].job is first[cell].job and second[cell].joined for cell in TOY_CELLS)
        assert [run.name for run in second.values()] == [run.name for run in first.values()]
        leader = TOY_CELLS[0]
        second[leader].stop()  # b leaves: a's run goes on
        assert first[leader].job.running
    finally:
        for run in first.values():
            run.stop()
