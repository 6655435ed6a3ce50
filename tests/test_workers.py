"""Runs trained in the training process beside the server (lab.server.workers, TrainingJob(in_process=True)):
the same run as in a thread, events in order, stop, a failure as one line, a killed child as a clear error."""

import functools
import logging
import os
import signal
import sys
import threading
import time
import types

import pytest
import torch
from helpers import tiny_lm, tiny_train_config

from lab.data import load_bundled_corpus
from lab.instruments.sampling import SamplingConfig, sample_text
from lab.nets.models import LMConfig, build_model
from lab.server.jobs import TrainingJob
from lab.server.priority import NICENESS
from lab.server.workers import BATCH_SECONDS, WorkerError, _Batches, run_in_process
from lab.training.checkpoints import load_checkpoint
from lab.training.tasks import LMTask


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:20_000], "char")


def test_a_run_in_a_process_trains_the_same_weights_as_in_a_thread_and_saves_them(task, tmp_path):
    sampler = functools.partial(sample_text, task.tokenizer, "", SamplingConfig(max_new_tokens=5))
    jobs = [
        TrainingJob(
            f"run-{where}",
            tiny_lm(task),
            task,
            tiny_train_config(),
            checkpoint_dir=tmp_path / where,
            sampler=sampler,
            sample_every_s=0,
            in_process=where == "process",
        )
        for where in ("thread", "process")
    ]
    for job in jobs:
        assert job.start().wait(120) == "finished", job.message
    thread, process = jobs
    for (name, a), b in zip(thread.model.state_dict().items(), process.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)  # threads differ: sums in another order
    kinds = [e["type"] for e in process.events()]
    assert kinds == [e["type"] for e in thread.events()]
    assert kinds.count("step") == 8 and kinds.count("sample") == 8 and kinds[-1] == "done"
    assert [e["step"] for e in process.events() if e["type"] == "eval"] == [4, 8]
    saved = load_checkpoint(process.checkpoint_path, device="cpu")
    for a, b in zip(saved.model.state_dict().values(), process.model.state_dict().values()):
        assert torch.equal(a, b)
    assert process.result.steps == 8 and process.result.history[-1]["step"] == 8


def test_stopping_a_run_in_a_process_stops_it_between_steps_and_keeps_its_weights(task, tmp_path):
    job = TrainingJob(
        "long",
        tiny_lm(task),
        task,
        tiny_train_config(max_steps=None, max_seconds=300),
        checkpoint_dir=tmp_path,
        in_process=True,
    ).start()
    deadline = time.monotonic() + 60
    while not any(e["type"] == "step" for e in job.events()) and time.monotonic() < deadline:
        time.sleep(0.05)
    job.stop()
    assert job.wait(60) == "stopped"
    assert 0 < job.result.steps and job.checkpoint_path is not None


def _fail(emit, should_stop, message):
    emit({"type": "step", "step": 1})
    raise ValueError(message)


def _report_niceness(emit, should_stop):
    return os.nice(0)


def _report_scheduling(emit, should_stop):
    return os.sched_getscheduler(0)


def _die(emit, should_stop):
    emit({"type": "step", "step": 1})
    os.kill(os.getpid(), signal.SIGKILL)


def test_the_childs_exception_arrives_as_one_line_after_its_events():
    events = []
    with pytest.raises(WorkerError, match=r"^ValueError: corpus: too short$"):
        run_in_process(_fail, {"message": "corpus: too short"}, events.append, lambda: False)
    assert events == [{"type": "step", "step": 1}]


def _steps_then_an_evaluation(emit, should_stop, steps):
    for step in range(1, steps + 1):
        emit({"type": "step", "step": step})
        if step == steps // 2:
            emit({"type": "eval", "step": step})
    return "done"


def test_every_event_of_a_run_arrives_in_order_though_its_steps_travel_in_batches():
    events = []
    assert run_in_process(_steps_then_an_evaluation, {"steps": 2000}, events.append, lambda: False) == "done"
    expected = [{"type": "step", "step": s} for s in range(1, 2001)]
    expected.insert(1000, {"type": "eval", "step": 1000})
    assert events == expected


def test_a_runs_steps_are_sent_together_and_anything_else_at_once_with_the_steps_before_it():
    sent, now = [], [0.0]
    batches = _Batches(
        lambda number, kind, events: sent.append((number, kind, [e["step"] for e in events])), 7, lambda: now[0]
    )
    for step in range(1, 26):  # a little more than ten steps a batch's time
        batches.emit({"type": "step", "step": step})
        now[0] = step * BATCH_SECONDS / 9.5
    batches.emit({"type": "eval", "step": 25})
    batches.emit({"type": "step", "step": 26})
    batches.flush()
    # the first step at once (a student waits for the first point), then every BATCH_SECONDS; the evaluation
    # with the steps before it; what is left at the end
    assert [steps for _, _, steps in sent] == [[1], list(range(2, 12)), list(range(12, 22)), [22, 23, 24, 25, 25], [26]]
    assert {(number, kind) for number, kind, _ in sent} == {(7, "events")}


def test_a_killed_child_is_a_clear_error_not_a_hang():
    with pytest.raises(WorkerError, match=r"ended unexpectedly \(killed by signal 9, .*out of memory\)$"):
        run_in_process(_die, {}, lambda event: None, lambda: False)


def test_the_child_runs_at_the_lowest_nice_value_and_keeps_a_share_of_a_busy_host():
    """Nice 19, not SCHED_IDLE: a page's thread at nice 0 weighs 68 times as much, and other tenants' work on a busy
    host cannot starve it to nothing (issue 50: SCHED_IDLE got 3.8 CPU-seconds in 324 s)."""
    assert run_in_process(_report_niceness, {}, lambda event: None, lambda: False) == 19
    if hasattr(os, "sched_getscheduler"):
        assert run_in_process(_report_scheduling, {}, lambda event: None, lambda: False) == os.SCHED_OTHER


def test_a_failing_run_in_a_process_reports_its_reason_without_a_traceback(task, tmp_path):
    wrong = build_model(LMConfig(vocab_size=3, embed_dim=8, hidden_size=16))  # the corpus has more characters
    job = TrainingJob("wrong", wrong, task, tiny_train_config(), checkpoint_dir=tmp_path, in_process=True).start()
    assert job.wait(120) == "failed"
    assert "Traceback" not in job.message and job.message.startswith("IndexError")
    assert [e["type"] for e in job.events()][-1] == "error"


def _step_until_the_other_has_stepped(emit, should_stop, mine, theirs):
    """Steps, saying so in `mine`, until `theirs` says the other run has stepped too (or a minute has
    passed); -> (its process id, whether the other run stepped meanwhile)."""
    deadline = time.monotonic() + 60
    while not should_stop() and time.monotonic() < deadline:
        mine.set()
        if theirs.is_set():
            break
        time.sleep(0.01)
    return os.getpid(), theirs.is_set()


def _wait_then_die(emit, should_stop, seconds):
    time.sleep(seconds)
    os.kill(os.getpid(), signal.SIGKILL)


def _count_steps(emit, should_stop, steps):
    done = 0
    while done < steps and not should_stop():
        done += 1
        time.sleep(0.01)
    return done


def _run_until_stopped(emit, should_stop):
    steps = 0
    while not should_stop():
        steps += 1
        emit({"type": "step", "step": steps})
        time.sleep(0.01)
    return steps


def _in_threads(*calls):
    """Run each (function, kwargs) with run_in_process on a thread of its own; -> their results or errors."""
    results = [None] * len(calls)

    def run(i, function, kwargs, stopped):
        try:
            results[i] = run_in_process(function, kwargs, lambda event: None, stopped)
        except WorkerError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_the_runs_share_one_training_process_and_their_steps_take_turns():
    """One process for all of them (its memory once, not once per run), beside the server's, and one
    step at a time in it: each run steps before the other has finished."""
    import multiprocessing

    manager = multiprocessing.Manager()
    a, b = manager.Event(), manager.Event()
    calls = [(_step_until_the_other_has_stepped, {"mine": x, "theirs": y}, lambda: False) for x, y in ((a, b), (b, a))]
    (pid_a, a_saw_b), (pid_b, b_saw_a) = _in_threads(*calls)
    assert pid_a == pid_b != os.getpid()
    assert a_saw_b and b_saw_a


def test_a_stop_reaches_its_own_run_only():
    stop_first = threading.Event()
    threading.Timer(0.5, stop_first.set).start()
    first, second = _in_threads(
        (_run_until_stopped, {}, stop_first.is_set),
        (_count_steps, {"steps": 100}, lambda: False),
    )
    assert isinstance(first, int) and first > 0  # stopped between steps, it returned its count
    assert second == 100  # the other ran to its end


def _doubled_if_shared(emit, should_stop, tensor):
    return tensor * 2 if tensor.is_shared() else None


def test_tensors_reach_the_training_process_in_shared_memory_and_come_back_by_value():
    """A run's corpus (35 MB of token ids for the bundled plays) is mapped by the training process, not
    copied into it once per run; what comes back (trained weights) is the server's own memory, which
    the training process's end cannot take away."""
    tensor = torch.arange(1_000_000)
    doubled = run_in_process(_doubled_if_shared, {"tensor": tensor}, lambda event: None, lambda: False)
    assert doubled is not None, "the tensor was copied into the training process, not shared with it"
    assert torch.equal(doubled, torch.arange(1_000_000) * 2) and not doubled.is_shared()
    assert torch.equal(tensor, torch.arange(1_000_000))  # the server's tensor, moved to shared memory, intact


def test_a_killed_training_process_fails_every_run_in_it_with_one_line_and_the_next_run_gets_a_fresh_one():
    killer, victim = _in_threads(
        (_wait_then_die, {"seconds": 1.0}, lambda: False),
        (_run_until_stopped, {}, lambda: False),
    )
    for error in (killer, victim):
        assert isinstance(error, WorkerError) and "\n" not in str(error)
        assert "ended unexpectedly (killed by signal 9" in str(error)
    assert run_in_process(_report_niceness, {}, lambda event: None, lambda: False) == 19  # a fresh process


def test_a_childs_traceback_reaches_the_server_log_while_the_error_is_one_line(caplog):
    with (
        caplog.at_level(logging.ERROR, logger="lab.server.workers"),
        pytest.raises(WorkerError, match=r"^ValueError: corpus: too short$"),
    ):
        run_in_process(_fail, {"message": "corpus: too short"}, lambda event: None, lambda: False)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback (most recent call last)" in logged and "_fail" in logged  # where it was raised


def test_a_jobs_internal_error_is_one_line_on_the_page_and_a_traceback_in_the_log(task, tmp_path, caplog):
    wrong = build_model(LMConfig(vocab_size=3, embed_dim=8, hidden_size=16))  # the corpus has more characters
    with caplog.at_level(logging.ERROR, logger="lab.server.jobs"):
        job = TrainingJob("wrong", wrong, task, tiny_train_config(), checkpoint_dir=tmp_path).start()
        assert job.wait(120) == "failed"
    assert "\n" not in job.message and job.message.startswith("IndexError")
    (record,) = [r for r in caplog.records if r.name == "lab.server.jobs" and r.levelno == logging.ERROR]
    assert record.exc_info and "Traceback" in caplog.text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_a_run_on_a_thread_of_the_server_trains_at_a_lower_priority_than_the_pages(task, tmp_path):
    """Its thread alone is lowered: the thread that started it (here the test's, in a server a page's) is not."""
    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    job = TrainingJob("niced", tiny_lm(task), task, tiny_train_config(max_steps=10_000), checkpoint_dir=tmp_path)
    job.start()
    try:
        deadline = time.monotonic() + 60
        while not any(event["type"] == "step" for event in job.events()) and time.monotonic() < deadline:
            time.sleep(0.05)
        (thread,) = [t for t in threading.enumerate() if t.name == job.what]
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == min(here + NICENESS, 19)
    finally:
        job.stop()
        job.wait(30)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == here


def test_a_child_does_not_run_the_page_that_started_it(tmp_path, monkeypatch):
    """Streamlit runs each page as the module __main__, its file the page's script; a forkserver's child
    imports its parent's __main__ from that file before anything else, which would run the page again in
    every run's process (Streamlit calls and all)."""
    ran = tmp_path / "ran"
    page = tmp_path / "page.py"
    page.write_text(f"open({str(ran)!r}, 'w').close()\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert run_in_process(_report_niceness, {}, lambda event: None, lambda: False) == 19  # a fresh process
    assert not ran.exists()
    assert sys.modules["__main__"] is main  # the page's module is back for the page


def test_a_training_process_that_dies_in_the_warm_up_leaves_one_log_line_with_its_signal(monkeypatch, caplog):
    """The warm-up's two steps in a training process that is killed: the warm-up goes on to its next part (it
    raises nothing, so no thread's traceback), and the log says once how the process ended."""
    import ui.app.warm_up

    monkeypatch.setenv("RNNLAB_TRAINING_PROCESSES", "1")
    monkeypatch.setattr(ui.app.warm_up, "train_two_tiny_steps", _die)
    with caplog.at_level(logging.INFO):
        ui.app.warm_up._train_two_steps()
    lines = [r.getMessage() for r in caplog.records if r.name in ("lab.server.workers", "ui.app.warm_up")]
    assert len(lines) == 1, lines
    assert "ended unexpectedly (killed by signal 9" in lines[0] and "None" not in lines[0]


def _die_when_stopped(emit, should_stop):
    emit({"type": "step", "step": 1})
    while not should_stop():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)


ENDING_SERVER = """
import logging, time
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
from lab.server.jobs import BackgroundJob
from test_workers import _die_when_stopped

class Doomed(BackgroundJob):
    what = "The doomed run"

    def _work(self):
        self._compute(_die_when_stopped)
        return "finished"

job = Doomed(in_process=True).start()
while not job.events():
    time.sleep(0.05)
print("training; the script ends here", flush=True)
"""


def test_a_training_process_that_dies_as_the_server_ends_leaves_one_log_line_and_a_clean_exit():
    """A script that exits while a job trains in the training process: its end stops the job, and the run's
    process dies as it stops. The script still exits with status 0, without a traceback, and the log says
    once how the process ended (its signal, never "exit code None")."""
    import subprocess
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", ENDING_SERVER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "training" in done.stdout, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "terminate called" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if " lab.server.workers: " in line]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("ERROR") and "1 run in it" in lines[0] and "killed by signal 9" in lines[0]
