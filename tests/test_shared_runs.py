"""Identical experiments computed once (issue 49, item 2): a second student asking for a run equal to one training
here joins it; one student's Stop leaves the other's running; the budget is charged once; each keeps a copy in
their own space; another seed, or a run on a student's own text, is a run of one's own; the page says so."""

import time

import pytest
from helpers import tiny_train_config
from hypothesis import given
from hypothesis import strategies as st

from lab.data import load_bundled_corpus
from lab.experiments.ablation import AblationConfig
from lab.experiments.probe import ProbeConfig, ProbeJob
from lab.nets.models import LMConfig, build_model
from lab.runs import live_ablation, memory_probe
from lab.server.capacity import Budget
from lab.server.jobs import BackgroundJob, TrainingJob
from lab.server.shared_runs import SharedRuns, experiment_key
from lab.training.checkpoints import load_checkpoint
from lab.training.tasks import LMTask
from ui.shared.joined import shared_run_text


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:20_000], "char")


@pytest.fixture
def budget():
    return Budget(10_000)


def ask(task, budget, folder, name, seed=1337, seconds=600.0, steps=None, owner="a"):
    """The request a student's Start makes: a job built from the settings (not started) and their own name."""
    config = tiny_train_config(seed=seed, max_seconds=seconds, max_steps=steps, eval_interval=5)
    model = build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=8, hidden_size=16), seed=seed)
    job = TrainingJob(name, model, task, config, checkpoint_dir=folder, owner=owner, budget=budget)
    return job, name, folder, None


def test_a_second_asker_joins_the_first_run_and_the_budget_is_charged_once(task, budget, tmp_path):
    runs = SharedRuns()
    (first,) = runs.start([ask(task, budget, tmp_path / "a", "mine")], "a")
    (second,) = runs.start([ask(task, budget, tmp_path / "b", "yours", owner="b")], "b")
    try:
        assert second.job is first.job and second.joined and not first.joined
        assert budget.snapshot()[2] + budget.snapshot()[3] == 1  # one run training or queued, not two
        assert runs.computing() == 1 and first.classmates == second.classmates == 1
        assert second.name == "yours" and first.name == "mine"
        assert first.events() is not None and second.events() == first.events()  # the same curve
    finally:
        first.stop()
        second.stop()


def test_one_students_stop_leaves_the_run_training_for_the_other(task, budget, tmp_path):
    runs = SharedRuns()
    (first,) = runs.start([ask(task, budget, tmp_path / "a", "mine")], "a")
    (second,) = runs.start([ask(task, budget, tmp_path / "b", "yours", owner="b")], "b")
    first.stop()
    time.sleep(0.5)
    assert second.running and second.classmates == 0
    second.stop()
    assert second.job.wait(60) in ("stopped", "finished")
    # left by everyone: a new asker trains it afresh rather than joining a run that is stopping
    (third,) = runs.start([ask(task, budget, tmp_path / "c", "theirs", owner="c")], "c")
    assert third.job is not first.job and not third.joined
    third.stop()


def test_each_student_keeps_a_copy_in_their_own_space_under_their_own_name(task, budget, tmp_path):
    runs = SharedRuns()
    (first,) = runs.start([ask(task, budget, tmp_path / "a", "mine", seconds=None, steps=6)], "a")
    assert first.job.wait(120) == "finished"
    (late,) = runs.start([ask(task, budget, tmp_path / "b", "yours", seconds=None, steps=6, owner="b")], "b")
    assert late.joined and late.joined_ended and late.trained_at is not None  # shown whole at once
    assert [e["step"] for e in late.events() if e["type"] == "eval"] == [5, 6]
    mine, yours = first.checkpoint_path, late.checkpoint_path
    assert mine.parent == tmp_path / "a" and yours.parent == tmp_path / "b" and yours.name.startswith("yours")
    a, b = load_checkpoint(mine, "cpu"), load_checkpoint(yours, "cpu")
    assert all((x == y).all() for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert "same experiment" in shared_run_text(late) and "shown whole at once" in shared_run_text(late)


def test_another_seed_or_a_students_own_text_is_a_run_of_ones_own(task, budget, tmp_path):
    runs = SharedRuns()
    (first,) = runs.start([ask(task, budget, tmp_path / "a", "mine")], "a")
    (other_seed,) = runs.start([ask(task, budget, tmp_path / "b", "yours", seed=7, owner="b")], "b")
    (own_text,) = runs.start([ask(task, budget, tmp_path / "c", "a", owner="c")], "c", private=True)
    (own_text_again,) = runs.start([ask(task, budget, tmp_path / "d", "b", owner="d")], "d", private=True)
    try:
        jobs = {id(run.job) for run in (first, other_seed, own_text, own_text_again)}
        assert len(jobs) == 4 and not any(run.joined for run in (other_seed, own_text, own_text_again))
    finally:
        for run in (first, other_seed, own_text, own_text_again):
            run.stop()


def test_the_key_is_the_settings_seed_and_data_not_the_name_or_the_folder(task, budget, tmp_path):
    a, b = ask(task, budget, tmp_path / "a", "x")[0], ask(task, budget, tmp_path / "b", "y", owner="b")[0]
    assert experiment_key(a) == experiment_key(b)
    assert experiment_key(a) != experiment_key(ask(task, budget, tmp_path, "x", seed=2)[0])
    other_text = LMTask.from_text(load_bundled_corpus()[20_000:40_000], "char")
    config, model = a.config, build_model(a.model.config, seed=1337)
    assert experiment_key(TrainingJob("x", model, other_text, config)) != experiment_key(a)
    assert experiment_key(a, private_to="a") != experiment_key(a, private_to="b")


@pytest.mark.parametrize(
    "classmates, expected",
    [
        (11, "The same experiment as 11 classmates: trained once, shown to each."),
        (1, "The same experiment as a classmate: trained once, shown to each."),
        (0, ""),
    ],
)
def test_the_page_says_in_plain_words_that_a_run_is_shared(classmates, expected):
    class Run:
        joined = joined_ended = False

    run = Run()
    run.classmates = classmates
    assert shared_run_text(run) == expected


def probe_settings(seed=0):
    return ProbeConfig(tasks=("recall",), cells=("gru_torch",), distances=(2,), steps=20, eval_every=10, seed=seed)


def ablation_settings(seed=0):
    return AblationConfig(
        dataset="digits", size=8, epochs=1, seeds=(seed,), limit_train=16, limit_test=10, batch_size=8, device="cpu"
    )


@pytest.mark.parametrize(
    ("start_run", "settings"),
    [(memory_probe, probe_settings), (live_ablation, ablation_settings)],
    ids=["probe", "ablation"],
)
def test_the_probe_and_the_live_ablation_are_started_by_the_runner_and_joined_like_any_run(start_run, settings):
    first = start_run(settings(), owner="a")
    second = start_run(settings(), owner="b")
    other = start_run(settings(seed=1), owner="c")
    try:
        assert second.job is first.job and second.joined and first.classmates == 1
        assert other.job is not first.job and not other.joined
        assert "same experiment as a classmate" in shared_run_text(second)
        first.stop()  # leaves: the classmate's run goes on
        time.sleep(0.3)
        assert second.job.status != "stopped"
    finally:
        for run in (first, second, other):
            run.stop()
        for run in (first, other):
            run.job.wait(60)


def test_the_probe_is_a_function_of_its_settings():
    """Two probes of the same settings (seed included), one after the other: the same results, number for number."""
    tables = []
    for owner in ("a", "b"):
        job = ProbeJob(probe_settings(), owner=owner).start()
        assert job.wait(120) == "finished", job.message
        tables.append(job.table[["cell", "distance", "accuracy"]].to_dict("records"))
    assert tables[0] == tables[1]


@given(st.lists(st.sampled_from(["step", "eval", "sample", "done"]), max_size=40))
def test_a_jobs_events_of_one_kind_and_its_latest_are_those_its_log_holds(kinds):
    """What a class's live views redraw from (their latest step and evaluation, their evaluations) read without
    copying every event: the same events, in the same order, as filtering the whole log."""
    job = BackgroundJob(budget=Budget(10_000))
    for n, kind in enumerate(kinds):
        job._log({"type": kind, "step": n})
    for kind in ("step", "eval", "sample", "done", "error"):
        of_kind = [e for e in job.events() if e["type"] == kind]
        assert job.events(kind=kind) == of_kind and job.events(2, kind=kind) == of_kind[2:]
        assert job.latest(kind) == (of_kind[-1] if of_kind else None)


def test_a_running_jobs_settled_events_are_those_before_this_second_and_all_once_it_ends(monkeypatch):
    """Every page redrawn within one second reads a running job to the same point (and so shares one chart); what
    came in this second shows from the next, and everything shows once the job has ended."""
    import types

    import lab.server.jobs as jobs

    now = [100.2]
    monkeypatch.setattr(jobs, "time", types.SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    job = BackgroundJob(budget=Budget(10_000))
    job.status = "running"
    job._log({"type": "step", "step": 1})
    job._log({"type": "eval", "step": 1})
    now[0] = 101.3  # the next second
    job._log({"type": "step", "step": 2})
    job._log({"type": "eval", "step": 2})
    assert [e["step"] for e in job.events(settled=True)] == [1, 1]
    assert [e["step"] for e in job.events(kind="eval", settled=True)] == [1]
    assert job.latest("step", settled=True)["step"] == 1 and job.latest("step")["step"] == 2
    assert len(job.events()) == 4  # unsettled: everything so far
    now[0] = 102.0  # a second without events: the last one's events have settled
    assert [e["step"] for e in job.events(kind="step", settled=True)] == [1, 2]
    now[0] = 101.5
    job.status = "finished"  # ended: nothing is held back
    assert job.latest("eval", settled=True)["step"] == 2 and len(job.events(settled=True)) == 4
