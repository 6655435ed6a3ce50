"""Several runs started by one button (the Train page's race, the lessons' four toy cells) start all or
none: lab.server.capacity.Budget.request_all refuses, queues and admits them as one, so a session's cap on
runs or a full budget never leaves half a race training while the page says it did not start."""

import random
import re
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import lab.server.jobs
import ui.shared.sessions
from lab.data import CharTokenizer
from lab.nets.models import LMConfig, build_model
from lab.server.capacity import Budget, CapacityError
from lab.server.jobs import TrainingJob, start_together
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig


def test_a_group_that_would_pass_the_cap_on_runs_is_refused_whole_in_one_line():
    budget = Budget(capacity=1000.0, owner_share=1.0, owner_jobs=3)
    with pytest.raises(CapacityError) as refused:
        budget.request_all([10.0] * 4, "student", ["run"] * 4, "the race")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("runs: the race would make 4 runs") and "3 is the most" in line
    assert budget.snapshot() == (0, 1000.0, 0, 0)  # nothing admitted, nothing queued
    one = budget.request(10.0, "student")
    with pytest.raises(CapacityError, match="would make 4 runs"):  # 1 held + 3 more: still too many
        budget.request_all([10.0] * 3, "student", ["run"] * 3, "the race")
    assert budget.snapshot() == (10.0, 1000.0, 1, 0)
    one.release()
    assert all(t.admitted for t in budget.request_all([10.0] * 3, "student", ["run"] * 3))


def test_a_group_that_fits_only_in_part_starts_none_until_all_of_it_fits():
    budget = Budget(capacity=100.0, owner_share=1.0)
    holder = budget.request(25.0, "classmate")  # room for 3 of the 4
    race = budget.request_all([25.0] * 4, "student", ["run"] * 4)
    assert [t.admitted for t in race] == [False] * 4 and budget.snapshot() == (25.0, 100.0, 1, 4)
    holder.release()
    assert [t.admitted for t in race] == [True] * 4


def test_a_group_over_one_sessions_share_is_refused_at_once():
    budget = Budget(capacity=100.0, owner_share=0.5)
    with pytest.raises(CapacityError, match=r"^the race \(4 runs\) needs about 60 MB"):
        budget.request_all([15.0] * 4, "student", ["run"] * 4, "the race")
    assert budget.snapshot() == (0, 100.0, 0, 0)


def test_a_run_of_a_queued_group_that_is_stopped_lets_the_rest_start_together():
    budget = Budget(capacity=100.0, owner_share=1.0)
    holder = budget.request(50.0, "classmate")
    race = budget.request_all([20.0] * 3, "student", ["run"] * 3)
    race[0].release()  # stopped while waiting: the other two fit now
    assert [t.admitted for t in race[1:]] == [True, True]
    holder.release()


def test_concurrent_groups_and_releases_never_interleave_into_half_a_group():
    budget = Budget(capacity=100.0, owner_share=1.0, owner_jobs=100)
    halves, stop = [], threading.Event()

    def check():  # every group, seen under the budget's lock: all admitted or none
        with budget._changed:
            for ticket in budget._queue + budget._running:
                members = [t for t in ticket.group if not t.released]
                if len({t.admitted for t in members}) > 1:
                    halves.append([t.admitted for t in members])

    def student(n):
        rng = random.Random(n)
        for _ in range(60):
            tickets = budget.request_all([rng.choice([5.0, 10.0, 20.0])] * 4, f"s{n}", ["run"] * 4)
            check()
            for ticket in rng.sample(tickets, len(tickets)):
                ticket.release()
                check()

    def watcher():
        while not stop.is_set():
            check()

    threads = [threading.Thread(target=student, args=(n,)) for n in range(6)]
    observer = threading.Thread(target=watcher)
    observer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stop.set()
    observer.join(10)
    assert not halves, halves[:3]
    assert budget.snapshot() == (0, 100.0, 0, 0)  # every ticket given back


def tiny_jobs(n, budget, owner="student"):
    task = LMTask("abcabcabc" * 20, "abcabc" * 20, CharTokenizer.from_text("abc"))
    config = TrainConfig(max_steps=1, batch_size=2, block_size=4)
    return [
        TrainingJob(
            f"r{i}",
            build_model(LMConfig(vocab_size=3, embed_dim=4, hidden_size=8)),
            task,
            config,
            cost_mb=10.0,
            owner=owner,
            budget=budget,
            ray_address=None,
        )
        for i in range(n)
    ]


def test_start_together_starts_no_job_when_the_budget_refuses_the_group():
    budget = Budget(capacity=1000.0, owner_share=1.0, owner_jobs=3)
    jobs = tiny_jobs(4, budget)
    with pytest.raises(CapacityError, match="the race would make 4 runs"):
        start_together(jobs, "the race")
    assert [job.status for job in jobs] == ["ready"] * 4 and budget.snapshot()[2:] == (0, 0)
    started = start_together(jobs[:3], "the race")
    assert [job.wait(30) for job in started] == ["finished"] * 3


APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_the_race_button_with_the_cap_at_three_starts_no_run_and_says_why_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "user_checkpoints"))
    budget = Budget(capacity=1024, owner_share=0.5, owner_jobs=3)
    monkeypatch.setattr(lab.server.jobs, "server_budget", lambda: budget)
    registry = ui.shared.sessions.job_registry()

    def registered():  # every session's, earlier tests' included: the race must add none
        with registry["lock"]:
            return {id(job) for entry in registry["sessions"].values() for job in entry["jobs"]}

    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("pages/1_Train.py")
    at.run()
    before = registered()
    at.button(key="train_race").click().run()
    assert not at.exception
    errors = [re.sub(r"\\(.)", r"\1", str(e.value)) for e in at.error]  # plain()'s escapes read
    assert len(errors) == 1 and errors[0].startswith("Starting the race did not work: runs: the race would make 4")
    assert "\n" not in errors[0]
    assert "train_logs" not in at.session_state or not at.session_state["train_logs"]
    assert not registered() - before
    assert budget.snapshot()[2:] == (0, 0)
