"""Train the server's runs in a process beside it, niced, their events coming back through a pipe.

Threads of one Python process share one interpreter: a server whose training runs are threads gives
the thread drawing a student's page a share of it that shrinks with every run started (BENCHMARKS.md,
the classroom runs). A run in another process takes nothing from the server's interpreter, and at a
lower scheduling priority (SCHED_IDLE, `_lower_priority`) it takes the cores only when the pages leave
them idle.

The server keeps RNNLAB_TRAINING_PROCESSES training processes (default 1; 0: the runs train in the
server's own threads, lab.server.jobs), each started when a run first needs it. Each trains every run
given to it on a thread of its own, their steps taking turns (lab.server.capacity.StepTurns) as they
would in the server: a process costs its memory once (PyTorch and the interpreter: ~570 MB with PyTorch's
CUDA build, README), not once per run. A run goes to the process with the fewest runs.

    result = run_in_process(train_job, {"config": ...}, on_event=log, stopped=stop_event.is_set)

`function(emit, should_stop, **kwargs)` runs in the training process. Its events reach `on_event` in the
calling thread, in order; its return value is returned here; an exception it raises is raised here as
WorkerError with its one-line message, its traceback written to the server's log. A training process
that dies (killed for memory) fails every run in it, each with the same line; the next run starts a
fresh one.
A training process is a fresh Python (multiprocessing's "spawn"), not a fork of the server: it imports
PyTorch itself (a few seconds, at the server's warm-up: ui.warm_up) and shares the libraries' files with
the server, where a forkserver that had imported PyTorch held another ~285 MB (PSS) beside it.
"""

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import queue
import sys
import threading
import traceback
import types
from multiprocessing.reduction import ForkingPickler

import torch

from lab.server.capacity import SERVER_BUDGET, SERVER_TURNS, TurnTaker, setting

log = logging.getLogger(__name__)
NICENESS = 10  # on Linux, a page's work at nice 0 gets ~10x the CPU of a run's at nice 10
TRAINING_PROCESSES = setting("RNNLAB_TRAINING_PROCESSES", "1", at_least=0)
_processes, _lock = [], threading.Lock()
# what a training process adds to the server's memory (PSS, PyTorch and the interpreter), measured at
# 396-418 MB (benchmarks/job_memory.py, BENCHMARKS.md): the server's budget holds it while the process lives
PROCESS_MB = 420
_run_numbers = itertools.count()


def nice_this_thread():
    """Lower the calling thread's CPU priority by NICENESS, as a training process is lowered: on Linux a
    thread's nice value is its own, so a run computing on a thread of the server (and the threads PyTorch
    starts from it) yields the cores to the threads that draw pages. Elsewhere nothing changes."""
    if sys.platform.startswith("linux"):
        thread = threading.get_native_id()
        with contextlib.suppress(OSError):  # a host that forbids it: the run keeps the server's priority
            os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + NICENESS))


class WorkerError(RuntimeError):
    """The run's exception, or its training process's unexpected end, as one line."""


@contextlib.contextmanager
def _bare_main_module():
    """A bare module as __main__ while a child starts. A spawned child first imports its parent's __main__
    from that module's file, and Streamlit runs each page as the module __main__, its file the page's
    script: the training process would run the page that started it again, Streamlit calls and all
    (seconds of imports, and the server's log filled with warnings). Nothing a child runs lives there: it
    is pickled by reference to the modules that define it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _send(connection, message):
    # plain pickle: tensors travel by value. What the training process sends back (trained weights) must
    # not live in its shared memory: a training process that dies would take them with it. (A run's
    # arguments go the other way in shared memory: _TrainingProcess.start pickles them itself)
    connection.send_bytes(pickle.dumps(message))


# the training process's side


def _serve(commands, messages, threads):
    """The training process: ("start", number, pickled (function, kwargs)) trains a run on a thread of its
    own, ("stop", number) asks it to stop; every message back is (number, kind, payload)."""
    _lower_priority()  # before any thread starts: on Linux each thread inherits its creator's priority
    torch.set_num_threads(threads)
    sending, stops = threading.Lock(), {}

    def send(number, kind, payload):
        with sending:  # the runs' threads share one pipe
            _send(messages, (number, kind, payload))

    while True:
        try:
            command, number, payload = pickle.loads(commands.recv_bytes())
        except EOFError:  # the server has gone
            return
        if command == "start":
            stops[number] = threading.Event()
            threading.Thread(target=_train_one, args=(send, number, stops, payload), daemon=True).start()
        elif (stop := stops.get(number)) is not None:  # a run that has ended already has nothing to stop
            stop.set()


def _lower_priority():
    """Nice NICENESS, and on Linux the SCHED_IDLE class: work that runs on a core nothing else wants, and
    that a page's thread preempts as soon as it wakes. Niced alone, the runs still took a share of the
    core a page wanted, and a page's many wake-ups each waited behind them (BENCHMARKS.md: with ten
    runs, another student's page 2.5x its idle time niced, 1.8x in SCHED_IDLE, and the runs took more
    steps). No such inversion in the server's own threads, which hold its interpreter's lock: they keep
    their nice value alone (nice_this_thread)."""
    os.nice(NICENESS)
    if hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):  # a host that forbids it: nice alone
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _train_one(send, number, stops, payload):
    stop = stops[number]
    turns = TurnTaker(SERVER_TURNS, stop.is_set)  # this process's turns, shared by the runs in it
    try:
        function, kwargs = pickle.loads(payload)
        result = function(emit=lambda event: send(number, "event", event), should_stop=turns, **kwargs)
        send(number, "result", result)
    except BaseException as e:  # noqa: BLE001 - reported to the server: one line, and the traceback for its log
        send(number, "error", (f"{type(e).__name__}: {e}", traceback.format_exc()))
    finally:
        turns.release()
        stops.pop(number)


# the server's side


class _TrainingProcess:
    """One training process and, for each run in it, a queue of the messages that came back for that run.
    A thread reads the process's pipe and sorts its messages into the queues; when the pipe ends (the
    process died) every run still in it is told so."""

    def __init__(self, context, threads):
        receiver, child_sender = context.Pipe(duplex=False)
        child_receiver, self._commands = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_serve, daemon=True, name="lab-training", args=(child_receiver, child_sender, threads)
        )
        with _bare_main_module():
            self.process.start()
        self._charge = SERVER_BUDGET.hold(PROCESS_MB, "the training process")  # given back when it ends
        child_receiver.close()
        child_sender.close()  # the child holds the only writing end: its exit ends the pipe
        self.ended, self._runs, self._lock = "", {}, threading.Lock()  # ended: why, once it has
        threading.Thread(target=self._sort_messages, args=(receiver,), daemon=True, name="lab-training-pipe").start()

    @property
    def alive(self):
        return not self.ended

    @property
    def runs(self):
        return len(self._runs)

    def start(self, function, kwargs):
        """-> (the run's number, the queue of its messages)."""
        # multiprocessing's pickler hands tensors over in shared memory (PyTorch's reductions, and a thread
        # here that passes the file descriptors): every run on the same corpus maps its one copy, where
        # plain pickle gave each run its own (35 MB for the bundled plays). Here: an argument that cannot
        # travel fails this run only
        payload = bytes(ForkingPickler.dumps((function, kwargs)))
        number, inbox = next(_run_numbers), queue.SimpleQueue()
        with self._lock:
            if self.ended:  # it died after it was chosen: its pipe would never answer
                raise WorkerError(self.ended)
            self._runs[number] = inbox
            self._command("start", number, payload)
        return number, inbox

    def stop(self, number):
        with self._lock:
            self._command("stop", number, None)

    def forget(self, number):
        """Drop the run's queue, and stop it if it still runs (its caller gave up on it)."""
        with self._lock:
            if self._runs.pop(number, None) is not None:
                self._command("stop", number, None)

    def _command(self, *command):
        with contextlib.suppress(OSError):  # a dead process: its runs hear of it from _sort_messages
            _send(self._commands, command)

    def _sort_messages(self, receiver):
        while True:
            try:
                number, kind, payload = pickle.loads(receiver.recv_bytes())
            except (EOFError, OSError):
                break
            with self._lock:
                inbox = self._runs.get(number)
            if inbox is not None:
                inbox.put((kind, payload))
        self.process.join()
        line = (
            f"the process computing it ended unexpectedly (exit code {self.process.exitcode}; "
            "a negative code is the signal that ended it, -9 often means out of memory)"
        )
        with self._lock:
            # with no run in it, the server is ending (or a host reclaimed an idle process): nothing is lost
            report = log.error if self._runs else log.info
            report("the training process ended with %d runs in it: %s", len(self._runs), line)
            self.ended = line
            for inbox in self._runs.values():
                inbox.put(("died", line))
            self._commands.close()
        receiver.close()
        self._charge.release()


def _start_run(function, kwargs):
    """Start a run in the live training process with the fewest runs, or in a new one while there are
    fewer than TRAINING_PROCESSES with a run in each. -> (the process, the run's number, its queue)."""
    with _lock:
        _processes[:] = [p for p in _processes if p.alive]
        idle = [p for p in _processes if not p.runs]
        if not idle and len(_processes) < max(1, TRAINING_PROCESSES):
            threads = max(1, (torch.get_num_threads() - 1) // max(1, TRAINING_PROCESSES))  # a core for the pages
            _processes.append(_TrainingProcess(multiprocessing.get_context("spawn"), threads))
        process = min(_processes, key=lambda p: p.runs)
        return process, *process.start(function, kwargs)


def run_in_process(function, kwargs, on_event, stopped, poll_seconds=0.2):
    """Run `function(emit=..., should_stop=..., **kwargs)` in a training process (see the module's
    docstring); `stopped()` is polled here and passed on to the run's should_stop."""
    process, number, inbox = _start_run(function, kwargs)
    stop_sent = False
    try:
        while True:
            if stopped() and not stop_sent:
                process.stop(number)
                stop_sent = True
            try:
                kind, payload = inbox.get(timeout=poll_seconds)
            except queue.Empty:
                continue
            if kind == "event":
                on_event(payload)
            elif kind == "result":
                return payload
            elif kind == "died":
                raise WorkerError(payload)
            else:
                line, trace = payload
                log.error("a run in the training process failed:\n%s", trace)
                raise WorkerError(line)
    finally:
        process.forget(number)
