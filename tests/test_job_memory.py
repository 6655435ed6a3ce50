"""The server's budget charges what jobs cost: for every kind of job, its estimate is at least half the
peak memory it adds to the processes it runs in (the server and its training process, summed as PSS),
measured on a small case of each (benchmarks/job_memory.py); and the default budget still admits a
default Train run and a default race of four beside the training process it holds."""

import subprocess
import sys

import pytest

from benchmarks.job_memory import KINDS, measure_in_fresh_process, train_jobs
from lab.server.capacity import Budget
from lab.server.workers import PROCESS_MB
from lab.settings import server_settings


def test_every_kind_of_job_is_charged_at_least_half_the_memory_it_adds():
    rows = measure_in_fresh_process(list(KINDS), small=True)
    assert [row["kind"] for row in rows] == list(KINDS)
    assert all(row["added_mb"] > 0 for row in rows), rows  # each was measured doing something
    undercharged = [row for row in rows if row["estimate_mb"] < 0.5 * row["added_mb"]]
    assert not undercharged, undercharged


@pytest.mark.parametrize("race", [False, True])
def test_the_default_budget_admits_a_default_run_and_a_default_race_beside_the_training_process(monkeypatch, race):
    for name in ("RNNLAB_TRAINING_BUDGET_MB", "RNNLAB_SESSION_SHARE", "RNNLAB_SESSION_RUNS"):
        monkeypatch.delenv(name, raising=False)
    settings = server_settings()  # the defaults: a fresh budget, not this process's shared one
    budget = Budget(settings.training_budget_mb, settings.session_share, settings.session_runs)
    budget.hold(PROCESS_MB, "the training process")
    jobs = train_jobs(small=False, race=race)
    assert len(jobs) == (4 if race else 1)
    tickets = budget.request_all([job.cost_mb for job in jobs], "student", [job.what for job in jobs], "the race")
    assert all(ticket.admitted for ticket in tickets)  # started at once, not queued


def test_the_training_process_is_held_in_the_servers_budget_while_it_lives():
    from lab.server import workers
    from lab.server.capacity import server_budget
    from lab.training.process import train_two_tiny_steps

    workers.run_in_process(train_two_tiny_steps, {}, on_event=lambda event: None, stopped=lambda: False)
    live = [p for p in workers._processes if p.alive]
    held = [t for t in server_budget()._running if t.held and t.cost == PROCESS_MB]
    assert live and len(held) == len(live)  # once per process, whatever the runs in it
    used, _, jobs, _ = server_budget().snapshot()
    assert used >= PROCESS_MB * len(live) and jobs == 0  # held, but not a run of anyone's


def test_the_training_process_loads_no_table_library_for_a_lesson_run_or_a_probe():
    """What a lesson's run (sampling as it trains) and a probe import where they train: pandas there
    was 37-40 MB more, for tables the server builds."""
    modules = "lab.instruments.sampling, lab.instruments.learning, lab.experiments.probe"
    code = f"import sys, {modules}; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip() == "False"
