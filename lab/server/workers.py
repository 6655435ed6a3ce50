"""Train the server's runs in a process beside it, niced, their events coming back through a pipe.

Threads of one Python process share one interpreter: a server whose training runs are threads gives
the thread drawing a student's page a share of it that shrinks with every run started (BENCHMARKS.md,
the classroom runs). A run in another process takes nothing from the server's interpreter, and at a
lower scheduling priority (the lowest nice value on POSIX, the idle priority class on Windows:
lab.server.priority) it takes the cores the pages leave idle, and a share on a host busy with other work.

The server keeps RNNLAB_TRAINING_PROCESSES training processes (default 1; 0: the runs train in the
server's own threads, lab.server.jobs), each started when a run first needs it. Each trains every run
given to it on a thread of its own, their steps taking turns (lab.server.capacity.StepTurns) as they
would in the server: a process costs its memory once (PyTorch and the interpreter: ~570 MB with PyTorch's
CUDA build, README), not once per run. A run goes to the process with the fewest runs.

    result = run_in_process(train_job, {"config": ...}, on_event=log, stopped=stop_event.is_set)

`function(emit, should_stop, **kwargs)` runs in the training process. Its events reach `on_event` in the
calling thread, in order, its steps in batches (_Batches); its return value is returned here; an exception it
raises is raised here as WorkerError with its one-line message, its traceback written to the server's log. A
training process that dies (killed for memory) fails every run in it, each with the same line, and the server's
log gets that line once, with its exit code or the signal that killed it; the next run starts a fresh one. A
training process is a fresh Python (multiprocessing's "spawn", on every platform), not a fork of the
server: it imports PyTorch itself (a few seconds, at the server's warm-up: ui.app.warm_up) and shares the
libraries' files with the server, where a forkserver that had imported PyTorch held another ~285 MB
(PSS) beside it. As the server ends (lab.server.shutdown) it closes each process's pipe: the process
stops its runs, waits for them, and exits with status 0.
"""

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
import types
from multiprocessing.reduction import ForkingPickler

import torch

from lab.server import pages_first, shutdown
from lab.server.capacity import TurnTaker, server_budget, server_turns
from lab.server.lifetime import die_with, start_beside_the_server
from lab.server.priority import lower_this_process
from lab.settings import server_settings
from lab.training.process import cap_malloc_arenas, usable_cores
from lab.words import count

log = logging.getLogger(__name__)
BATCH_SECONDS = 0.1  # a run's steps reach the server at most this late (lab.server.workers._Batches)
END_SECONDS = 30.0  # how long an ending server waits for a training process to stop its runs and exit
_processes, _lock = [], threading.Lock()
_end_registered = False  # whether _end_processes will run at the server's end
# what a training process adds to the server's memory (PSS, PyTorch and the interpreter), measured at
# 396-418 MB (benchmarks/job_memory.py, BENCHMARKS.md): the server's budget holds it while the process lives
PROCESS_MB = 420
_run_numbers = itertools.count()


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


def _serve(commands, messages, threads, server_pid, pages_drawn):
    """The training process: ("start", number, pickled (function, kwargs)) trains a run on a thread of its
    own, ("stop", number) asks it to stop; every message back is (number, kind, payload). When the
    server closes its end of the pipe (or dies), every run is stopped and waited for, and the process
    exits with status 0. `pages_drawn`: the server's count of the pages it is drawing (lab.server.pages_first)."""
    # Ctrl-C in the server's terminal reaches this process too: the server decides when it ends, and
    # ends it by closing the pipe, not with a KeyboardInterrupt's traceback in the middle of a step
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(server_pid)  # killed with the server, however it ends (lab.server.lifetime)
    # before any thread starts (on Linux each thread inherits its creator's priority): at the lowest nice
    # value, not in SCHED_IDLE, which a busy host's other tenants starved (3.8 CPU-seconds in 324 s: the
    # server's warm-up and a 3-s run's first step waited minutes); lab.server.priority says why
    lower_this_process(lowest=True)
    torch.set_num_threads(threads)
    pages_first.use_count(pages_drawn)  # its runs step aside while the server draws a page
    cap_malloc_arenas(usable_cores())  # its runs are threads: one arena each would each keep what it freed
    sending, stops, runs = threading.Lock(), {}, []

    def send(number, kind, payload):
        with sending, contextlib.suppress(OSError):  # the runs' threads share one pipe; OSError: the server is gone
            _send(messages, (number, kind, payload))

    send(None, "ready", None)  # started: from now on the server waits for it to end in order

    while True:
        try:
            command, number, payload = pickle.loads(commands.recv_bytes())
        except (EOFError, OSError):  # the server is ending, or has gone
            break
        if command == "start":
            stops[number] = threading.Event()
            runs[:] = [run for run in runs if run.is_alive()]  # a process trains thousands of runs in a class
            runs.append(threading.Thread(target=_train_one, args=(send, number, stops, payload), daemon=True))
            runs[-1].start()
        elif (stop := stops.get(number)) is not None:  # a run that has ended already has nothing to stop
            stop.set()
    # every run stops between two steps; joined, none is left inside PyTorch as the interpreter ends
    for stop in list(stops.values()):
        stop.set()
    for run in runs:
        run.join()


class _Batches:
    """A run's events sent in batches: its steps together every BATCH_SECONDS, anything else (its first event, an
    evaluation, a sample, its end) at once with the steps before it. A message per step was a thousand a second
    from a class's race, each read, unpickled and handed between two of the server's threads: 7% of the server's
    interpreter while its pages waited."""

    def __init__(self, send, number, clock=time.monotonic):
        self.send, self.number, self.clock, self.pending, self.sent_at = send, number, clock, [], None

    def emit(self, event):
        self.pending.append(event)
        now = self.clock()
        if event.get("type") != "step" or self.sent_at is None or now - self.sent_at >= BATCH_SECONDS:
            self.flush(now)

    def flush(self, now=None):
        if self.pending:
            self.send(self.number, "events", self.pending)
            self.pending, self.sent_at = [], now or self.clock()


def _train_one(send, number, stops, payload):
    stop = stops[number]
    turns = TurnTaker(server_turns(), stop.is_set)  # this process's turns, shared by the runs in it
    batches = _Batches(send, number)
    try:
        function, kwargs = pickle.loads(payload)
        result = function(emit=batches.emit, should_stop=turns, **kwargs)
        batches.flush()
        send(number, "result", result)
    except BaseException as e:  # noqa: BLE001 - reported to the server: one line, and the traceback for its log
        batches.flush()
        send(number, "error", (f"{type(e).__name__}: {e}", traceback.format_exc()))
    finally:
        turns.release()
        stops.pop(number)


# the server's side


class _TrainingProcess:
    """One training process and, for each run in it, a queue of the messages that came back for that run.
    A thread reads the process's pipe and sorts its messages into the queues; when the pipe ends (the
    process ended) it waits for the process, and tells every run still in it how it ended."""

    def __init__(self, context, threads):
        receiver, child_sender = context.Pipe(duplex=False)
        child_receiver, self._commands = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_serve,
            daemon=True,
            name="lab-training",
            args=(child_receiver, child_sender, threads, os.getpid(), pages_first.shared_count()),
        )
        with _bare_main_module():
            start_beside_the_server(self.process)
        self._charge = server_budget().hold(PROCESS_MB, "the training process")  # given back when it ends
        child_receiver.close()
        child_sender.close()  # the child holds the only writing end: its exit ends the pipe
        self.ended, self._runs, self._lock = "", {}, threading.Lock()  # ended: why, once it has
        self._ready = False  # it has started (imported PyTorch): it ends in order
        self._ending = False  # the server asked it to end: its end is no news
        self._reader = threading.Thread(
            target=self._sort_messages, args=(receiver,), daemon=True, name="lab-training-pipe"
        )
        self._reader.start()

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
            if self.ended or self._ending:  # it died (or is ending) after it was chosen: it would never answer
                raise WorkerError(self.ended or "the server is ending")
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

    def stop_if_starting(self):
        """Stop the process at once if it has not started yet (importing PyTorch: seconds, more on busy
        cores): no run has begun in it, so nothing is lost, and an ending server need not wait for it."""
        with self._lock:
            if self._ready or self.ended:
                return
            self._ending = True
        self.process.terminate()

    def ask_to_end(self):
        """Close the pipe of commands: the process stops its runs, waits for them, and exits."""
        with self._lock:
            self._ending = True
            self._commands.close()

    def wait_until_ended(self, timeout):
        """Wait for the process to end, and for its pipe's thread to say how; a process still running after
        `timeout` seconds is terminated, then killed."""
        self._reader.join(timeout)
        for force in (self.process.terminate, self.process.kill):
            if not self._reader.is_alive():
                return
            log.warning("the training process did not end within %.0f s of the server's end: it is stopped", timeout)
            force()
            self._reader.join(timeout)

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
                if number is None:  # (None, "ready", None)
                    self._ready = True
                inbox = self._runs.get(number)
            if inbox is not None:
                inbox.put((kind, payload))
        receiver.close()
        self._charge.release()
        exitcode = _exit_code(self.process)
        with self._lock:
            if self._ending and (exitcode == 0 or not self._ready):  # ended in order, or stopped as it started
                line = "the server is ending"
                log.info("the training process ended with the server (%s)", _how_it_ended(exitcode))
            else:  # with no run in it, nothing is lost (a host reclaimed an idle process): worth a line, no more
                line = f"the process computing it ended unexpectedly ({_how_it_ended(exitcode)})"
                report = log.error if self._runs else log.warning
                report("the training process ended with %s in it: %s", count(len(self._runs), "run"), line)
            self.ended = line
            for inbox in self._runs.values():
                inbox.put(("died", line))
            self._commands.close()


def _exit_code(process, seconds=10.0):
    """The ended process's exit code, waiting for it: while another thread reaps the same process (a
    start's sweep of ended children, multiprocessing's own at exit), one join can return before the code
    is known. None only if it is still unknown after `seconds`."""
    deadline = time.monotonic() + seconds
    process.join(seconds)
    while process.exitcode is None and time.monotonic() < deadline:
        process.join(0.05)
    return process.exitcode


def _how_it_ended(exitcode):
    """An exit code in words: multiprocessing gives a process killed by signal N the code -N (POSIX)."""
    if exitcode is None:
        return "its exit code could not be read"
    if exitcode >= 0:
        return f"exit code {exitcode}"
    words = f"killed by signal {-exitcode}"
    if getattr(signal, "SIGKILL", None) == -exitcode:  # the kernel's answer to a machine out of memory
        words += ", which often means the machine ran out of memory"
    return words


def _stop_starting_processes():
    """The server begins to end (lab.server.shutdown): a training process still starting is stopped."""
    with _lock:
        starting = list(_processes)
    for process in starting:
        process.stop_if_starting()


def _end_processes():
    """The server is ending (lab.server.shutdown): every training process stops its runs and exits."""
    with _lock:
        ending = list(_processes)
        _processes.clear()
    for process in ending:
        process.ask_to_end()
    for process in ending:
        process.wait_until_ended(END_SECONDS)


def _start_run(function, kwargs):
    """Start a run in the live training process with the fewest runs, or in a new one while there are
    fewer than RNNLAB_TRAINING_PROCESSES with a run in each. -> (the process, the run's number, its queue)."""
    global _end_registered
    with _lock:
        if shutdown.ENDING.is_set():  # the server is ending: no new process, no new run
            raise WorkerError("the server is ending")
        _processes[:] = [p for p in _processes if p.alive]
        idle = [p for p in _processes if not p.runs]
        wanted = max(1, server_settings().training_processes)
        if not idle and len(_processes) < wanted:
            threads = max(1, (torch.get_num_threads() - 1) // wanted)  # a core for the pages
            _processes.append(_TrainingProcess(multiprocessing.get_context("spawn"), threads))
            if not _end_registered:  # after multiprocessing's own hook, which would kill them under their runs
                shutdown.close_at_exit(_end_processes, first=_stop_starting_processes)
                _end_registered = True
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
            if kind == "events":
                for event in payload:
                    on_event(event)
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
