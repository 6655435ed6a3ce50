"""lab.server.capacity: the server's training budget admits jobs by cost, queues the rest in order,
caps each owner's share, and refuses a job that could never fit with a message."""

import copy
import math
import threading

import pytest

from lab.server.capacity import Budget, CapacityError


def admitted(tickets):
    return [t.admitted for t in tickets]


def test_many_small_jobs_run_at_once_and_a_large_one_waits_its_turn():
    budget = Budget(capacity=100, owner_share=1.0)
    small = [budget.request(10, owner=f"student-{n}") for n in range(8)]
    assert all(admitted(small))  # 80 of 100
    large = budget.request(50, owner="teacher")
    later = budget.request(5, owner="student-9")
    assert not large.admitted and large.position == 1
    assert not later.admitted and later.position == 2  # first come, first served: no overtaking
    small[0].release()  # 70 used: the large job still does not fit, so nobody overtakes it
    assert not large.admitted and not later.admitted
    for ticket in small[1:4]:
        ticket.release()  # 40 used: the large job fits now, and the small one after it
    assert large.admitted and later.admitted
    assert budget.snapshot() == (95, 100, 6, 0)


def test_one_owner_may_hold_only_its_share_and_does_not_block_the_others():
    budget = Budget(capacity=100, owner_share=0.3)
    first, second = budget.request(20, "alice"), budget.request(20, "alice")
    other = budget.request(20, "bob")
    assert first.admitted and not second.admitted  # alice would hold 40 > 30
    assert other.admitted  # bob is not held up behind alice's queued job
    first.release()
    assert second.admitted


@pytest.mark.parametrize("cost", [31, math.nan, math.inf])
def test_a_job_that_could_never_fit_is_refused_at_once(cost):
    budget = Budget(capacity=100, owner_share=0.3)
    with pytest.raises(CapacityError, match="more than one session may use on this server"):
        budget.request(cost, "alice", what="This run")
    assert budget.snapshot() == (0, 100, 0, 0)


def test_wait_blocks_until_admitted_and_a_stop_leaves_the_queue():
    budget = Budget(capacity=10, owner_share=1.0)
    holder = budget.request(10, "a")
    waiting, stopped = budget.request(4, "b"), budget.request(4, "c")
    stop = threading.Event()
    results = {}
    threads = [
        threading.Thread(target=lambda: results.update(waiting=waiting.wait(poll_seconds=0.01))),
        threading.Thread(target=lambda: results.update(stopped=stopped.wait(stop.is_set, 0.01))),
    ]
    for thread in threads:
        thread.start()
    stop.set()
    threads[1].join(10)
    assert results == {"stopped": False} and stopped.position == 0 and waiting.position == 1
    holder.release()
    threads[0].join(10)
    assert results["waiting"] is True and budget.snapshot()[2:] == (1, 0)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        Budget(capacity=0)
    with pytest.raises(ValueError):
        Budget(capacity=10, owner_share=1.5)


def test_step_turns_let_only_so_many_steps_compute_at_once():
    from lab.server.capacity import StepTurns

    turns = StepTurns(concurrent=1)
    assert turns.take()
    stop = threading.Event()
    result = {}
    waiter = threading.Thread(target=lambda: result.update(got=turns.take(stop.is_set, 0.01)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # the one turn is taken: the second job waits
    stop.set()
    waiter.join(10)
    assert result == {"got": False}  # a stopped job gives up waiting
    turns.give_back()
    assert turns.take(stop.is_set) is True
    with pytest.raises(ValueError):
        StepTurns(0)


def test_step_turns_go_round_in_order_and_a_first_step_goes_first():
    from lab.server.capacity import StepTurns

    turns, order = StepTurns(concurrent=1), []
    assert turns.take()  # a run is stepping; two runs already training wait, then a new one asks

    def job(name, first, queued):
        def still_wanted():  # take() asks this while the job waits in the queue
            queued.set()
            return False

        assert turns.take(should_stop=still_wanted, poll_seconds=0.01, first=first)
        order.append(name)
        turns.give_back()

    waiting = []
    for name, first in [("old-1", False), ("old-2", False), ("new", True)]:
        queued = threading.Event()
        waiting.append(threading.Thread(target=job, args=(name, first, queued)))
        waiting[-1].start()
        assert queued.wait(10)  # queued in this order
    turns.give_back()
    for thread in waiting:
        thread.join(10)
    assert order == ["new", "old-1", "old-2"]


def test_one_session_may_hold_only_so_many_runs_at_once():
    budget = Budget(capacity=1000.0, owner_share=1.0, owner_jobs=3)
    tickets = [budget.request(1.0, "student") for _ in range(3)]
    with pytest.raises(CapacityError, match=r"^runs: this session already has 3 runs training or waiting"):
        budget.request(1.0, "student")
    budget.request(1.0, "classmate")  # another session is not held back
    tickets[0].release()
    budget.request(1.0, "student")  # one ended: one more may start


def test_a_run_in_the_training_process_is_charged_as_in_a_thread_and_its_corpus_until_that_is_shared():
    """The training process is held in the budget once, whatever the number of runs in it (lab.server.workers);
    a run's corpus travels there in shared memory, a copy the first run on it pays for."""
    from lab.data import CharTokenizer
    from lab.nets.models import LMConfig, build_model
    from lab.server.jobs import TrainingJob
    from lab.training.tasks import LMTask
    from lab.training.train import TrainConfig

    task = LMTask("abcabcabc" * 20, "abcabc" * 20, CharTokenizer.from_text("abc"))
    model = build_model(LMConfig(vocab_size=3, embed_dim=4, hidden_size=8))
    config = TrainConfig(max_steps=1, batch_size=2, block_size=4)
    in_thread = TrainingJob("t", model, task, config)
    corpus_mb = (task.train_ids.nbytes + task.val_ids.nbytes) / 2**20
    first = TrainingJob("p", model, task, config, in_process=True)
    assert first.cost_mb == pytest.approx(in_thread.cost_mb + corpus_mb) and in_thread.cost_mb > 0
    assert task.train_ids.is_shared() and task.val_ids.is_shared()  # moved once, for every run after it
    assert TrainingJob("q", model, copy.copy(task), config, in_process=True).cost_mb == in_thread.cost_mb


def test_the_budgets_sentence_names_what_the_server_holds_apart_from_the_runs():
    budget = Budget(1024, 0.5)
    budget.hold(420, "the training process")
    assert budget.sentence() == (
        "This server's training budget (all users): 420 of 1,024 MB in use (the training process 420 MB, 0 runs), "
        "0 waiting."
    )
    ticket = budget.request(100, "a", "a run")
    assert "520 of 1,024 MB in use (the training process 420 MB, 1 run), 0 waiting" in budget.sentence()
    ticket.release()
