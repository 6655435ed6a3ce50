"""The toy tasks of lab.experiments.probe: each generator's answers checked by reading its sequences as a
student would, hand-checked small cases, a tiny run on an easy setting beats chance, and the
runner's bookkeeping (sizes, skipping, the results table)."""

import pickle
import time

import numpy as np
import pytest
import torch
from helpers import TINY_PROBE, TINY_STUDY

from lab.experiments.probe import (
    IGNORE,
    TOY_CELLS,
    TOY_TASKS,
    ProbeConfig,
    ProbeTask,
    hidden_size_for_budget,
    probe_run,
    results_table,
    run_memory_probe,
)
from lab.training.train import TrainConfig, train


def batch(task, distance, n=64, seed=0):
    x, answers = TOY_TASKS[task].make(n, distance, torch.Generator().manual_seed(seed))
    return x, answers, [TOY_TASKS[task].show(row).split() for row in x.tolist()]


@pytest.mark.parametrize("task", list(TOY_TASKS))
@pytest.mark.parametrize("distance", [2, 3, 7, 40])
def test_every_sequence_ends_in_a_question_the_answer_is_due_at(task, distance):
    x, answers, shown = batch(task, distance)
    assert x.shape == (64, distance + 1) and answers.shape == (64,)
    assert all(tokens[-1] == "?" and "?" not in tokens[:-1] for tokens in shown)
    assert 0 <= answers.min() and answers.max() < len(TOY_TASKS[task].answers) <= TOY_TASKS[task].vocab_size
    y = ProbeTask(task, distance).batch(8, torch.Generator().manual_seed(0))[1]
    assert (y[:, :-1] == IGNORE).all() and (y[:, -1] != IGNORE).all()


@pytest.mark.parametrize("distance", [1, 2, 9, 50])
def test_recall_answers_the_first_symbol(distance):
    _, answers, shown = batch("recall", distance)
    assert [TOY_TASKS["recall"].answers[a] for a in answers] == [tokens[0] for tokens in shown]


@pytest.mark.parametrize("distance", [1, 2, 4, 9, 50])
def test_brackets_answers_the_depth_at_the_question(distance):
    _, answers, shown = batch("brackets", distance, n=256)
    for tokens, answer in zip(shown, answers.tolist()):
        depth, brackets = 0, 0
        for token in tokens[:-1]:
            if token in "()":
                depth, brackets = depth + (1 if token == "(" else -1), brackets + 1
                assert depth >= 0  # never closes a bracket that is not open
        assert answer == depth and brackets <= 4
    firsts = {tokens[0] for tokens in shown}
    assert firsts == {"(", "·"}  # the first token counts: it may open a bracket, or not
    assert len(set(answers.tolist())) >= (3 if distance >= 4 else 2)


@pytest.mark.parametrize("distance", [2, 3, 9, 50])
def test_adding_answers_the_sum_of_the_two_marked_digits(distance):
    _, answers, shown = batch("adding", distance)
    for tokens, answer in zip(shown, answers.tolist()):
        marked = [int(t.strip("[]")) for t in tokens if t.startswith("[")]
        assert len(marked) == 2 and tokens[0].startswith("[") and answer == sum(marked)


@pytest.mark.parametrize("distance", [1, 2, 9, 50])
def test_parity_answers_whether_the_ones_are_odd(distance):
    _, answers, shown = batch("parity", distance)
    assert [TOY_TASKS["parity"].answers[a] for a in answers] == [
        "odd" if tokens[:-1].count("1") % 2 else "even" for tokens in shown
    ]


def test_hand_checked_cases_read_as_a_student_reads_them():
    recall, brackets, adding, parity = (TOY_TASKS[t] for t in ("recall", "brackets", "adding", "parity"))
    assert recall.show([2, 0, 7, 8]) == "C A H ?"
    assert brackets.show([0, 2, 0, 1, 2, 3]) == "( · ( ) · ?"  # depth 1
    assert adding.show([14, 1, 17, 9, 20]) == "[4] 1 [7] 9 ?"  # 4 + 7 = 11
    assert parity.show([1, 0, 1, 1, 2]) == "1 0 1 1 ?"  # three 1s: odd
    example = brackets.example(6, seed=3)
    tokens, answer = example.split(" → ")
    depth = tokens.count("(") - tokens.count(")")
    assert answer == str(depth) and tokens.endswith("?")
    long = recall.example(200)
    assert " … " in long and len(long.split()) < 30 and long.split(" → ")[1] == long.split()[0]


def test_chance_is_the_commonest_answers_share():
    assert ProbeTask("recall", 10).chance == pytest.approx(1 / 8, abs=0.01)
    assert ProbeTask("parity", 10).chance == pytest.approx(1 / 2, abs=0.01)
    assert ProbeTask("adding", 10).chance == pytest.approx(10 / 100, abs=0.01)  # 9 = 0+9, 1+8, ..., 9+0
    assert 0.3 < ProbeTask("brackets", 10).chance < 0.5


def test_a_tiny_run_on_an_easy_setting_beats_chance():
    config = ProbeConfig(
        tasks=("brackets",), distances=(3,), steps=150, param_budget=2000, eval_sequences=256, eval_every=50, lr=1e-2
    )
    table = run_memory_probe(config)
    assert list(table.cell) == list(TOY_CELLS) and not table.skipped.any()
    assert (table.accuracy > table.chance + 0.3).all(), table[["cell", "accuracy", "chance"]]


def test_a_run_is_trained_by_lab_train_and_survives_a_trip_to_another_process():
    config = ProbeConfig(tasks=("recall",), distances=(2,), steps=60, eval_every=30, lr=1e-2)
    model, task, train_config = probe_run(config, "recall", "lstm", 2)
    assert isinstance(train_config, TrainConfig) and task.sequence_length(train_config) == 3
    events = []
    result = train(model, pickle.loads(pickle.dumps(task)), train_config, events.append)
    assert result.steps == 60 and [e["step"] for e in events if e["type"] == "eval"] == [30, 60]
    assert events[-2]["val_accuracy"] > task.chance + 0.2
    live = ProbeConfig(tasks=("recall",), distances=(2,), seconds=1.5)
    _, _, timed = probe_run(live, "recall", "rnn", 2)
    assert timed.max_steps is None and timed.max_seconds == 1.5


def test_models_are_sized_to_the_budget():
    config = ProbeConfig(param_budget=3000)
    for task in TOY_TASKS:
        for cell in config.cells:
            hidden, params = hidden_size_for_budget(config, task, cell)
            assert abs(params - 3000) < 0.1 * 3000, (task, cell)
            model, _, _ = probe_run(config, task, cell, 5)
            assert sum(p.numel() for p in model.parameters()) == params


def test_a_cell_at_chance_twice_in_a_row_skips_the_longer_distances():
    # one step on the parity of 20 or more bits: nothing learned, the answers at chance (2048 sequences: +-1%)
    config = ProbeConfig(
        tasks=("parity",), cells=("rnn",), distances=(40, 20, 30), steps=1, eval_every=1, eval_sequences=2048
    )
    table = run_memory_probe(config)
    assert table.distance.tolist() == [20, 30, 40]  # shortest first
    assert table.skipped.tolist() == [False, False, True] and np.isnan(table.accuracy[2]) and table.steps[2] == 0
    shown = results_table(table)
    assert list(shown.columns) == ["params", "hidden size", "k = 20", "k = 30", "k = 40"]
    assert np.isnan(shown.loc["rnn", "k = 40"]) and shown.loc["rnn", "params"] == table.params[0]
    every = run_memory_probe(
        ProbeConfig(
            tasks=("parity",),
            cells=("rnn",),
            distances=(20, 30, 40),
            steps=1,
            eval_every=1,
            eval_sequences=2048,
            give_up_after=0,
        )
    )
    assert not every.skipped.any()


@pytest.mark.parametrize(
    "field, value",
    [
        ("cells", ("transformer",)),
        ("tasks", ("sorting",)),
        ("distances", (0,)),
        ("distances", (1,)),
        ("steps", 0),
        ("solved", 1.5),
        ("give_up_after", -1),
    ],
)
def test_bad_probe_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ProbeConfig(**{"tasks": ("adding",), field: value})  # adding needs k >= 2


def test_a_bad_task_or_distance_is_refused():
    with pytest.raises(ValueError, match="valid tasks"):
        ProbeTask("sorting", 5)
    with pytest.raises(ValueError, match="distance"):
        ProbeTask("adding", 1)


def test_the_probe_and_the_live_ablation_wait_in_the_budgets_queue_while_it_is_full():
    """Every path that trains goes through one admission door: with the budget full, both queue; once
    it frees, both run (and the probe's steps take turns)."""
    from lab.experiments.ablation import AblationConfig
    from lab.experiments.ablation.runner import AblationJob
    from lab.experiments.probe import ProbeJob
    from lab.server.capacity import Budget, StepTurns

    budget, turns = Budget(capacity=1000.0, owner_share=1.0), StepTurns(1)
    full = budget.request(1000.0, "someone else", "a big run")
    probe = ProbeJob(
        ProbeConfig(**TINY_PROBE, give_up_after=0),
        owner="student",
        budget=budget,
        turns=turns,
    )
    ablation = AblationJob(
        AblationConfig(**TINY_STUDY),
        owner="student",
        budget=budget,
    )
    assert probe.cost_mb > 0 and ablation.cost_mb > 0
    probe.start(), ablation.start()
    time.sleep(1.0)
    assert probe.status == "queued" and ablation.status == "queued"
    assert budget.snapshot()[3] == 2  # both counted as waiting
    full.release()
    assert probe.wait(120) == "finished" and len(probe.table) == 1
    assert ablation.wait(300) == "finished", ablation.message
