"""Run a job's computation in a process of its own, niced, reporting events through a pipe.

Threads of one Python process share one interpreter: a server whose training runs
are threads gives the thread drawing a student's page a share of it that shrinks
with every run started (BENCHMARKS.md, the classroom runs). A run in its own
process takes nothing from the server's interpreter, and at a lower scheduling
priority (`os.nice`) it takes the cores only when the pages leave them idle.

    result = run_in_process(train_job, {"config": ...}, on_event=log, stopped=stop_event.is_set)

`function(emit, should_stop, **kwargs)` runs in the child. Its events reach
`on_event` in the calling thread, in order; its return value is returned here;
an exception it raises is raised here as WorkerError with its one-line message, its
traceback written to the server's log.
The children are forked from a server process started once, which has imported
lab.server.jobs (and so PyTorch) already: a new run starts in milliseconds and shares
that memory with the others instead of loading PyTorch again.
"""

import contextlib
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import traceback
import types

import torch

log = logging.getLogger(__name__)
NICENESS = 10
# what a run's own process costs beyond its training memory: its share of PyTorch and the interpreter,
# measured as resident memory per running child (README, RNNLAB_TRAIN_IN_PROCESS: ~400 MB); the budget
# charges it, so eight tiny runs are not counted at a few MB while their processes hold gigabytes
PROCESS_MB = 400  # on Linux, a page's work at nice 0 gets ~10x the CPU of a run's at nice 10
_context, _running, _lock = None, None, threading.Lock()


def nice_this_thread():
    """Lower the calling thread's CPU priority by NICENESS, as a run's own process is lowered: on Linux a
    thread's nice value is its own, so a run computing on a thread of the server (and the threads PyTorch
    starts from it) yields the cores to the threads that draw pages. Elsewhere nothing changes."""
    if sys.platform.startswith("linux"):
        thread = threading.get_native_id()
        with contextlib.suppress(OSError):  # a host that forbids it: the run keeps the server's priority
            os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + NICENESS))


class WorkerError(RuntimeError):
    """The child's exception, or its unexpected end, as one line."""


def _shared():
    """The forkserver context and the count of running children, made on first use. The parent
    counts its children (a killed child cannot count itself out); each child reads the count."""
    global _context, _running
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["lab.server.jobs"])
            _context, _running = context, context.Value("i", 0)
    return _context, _running


@contextlib.contextmanager
def _bare_main_module():
    """A bare module as __main__ while a child starts. A forkserver's child first imports its parent's
    __main__ from that module's file, and Streamlit runs each page as the module __main__, its file the
    page's script: every run's process would run the page that started it again, Streamlit calls and all
    (seconds of imports per run, and the server's log filled with warnings). Nothing a child runs lives
    there: it is pickled by reference to the modules that define it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _send(connection, message):
    # plain pickle: tensors travel by value. multiprocessing's own pickler would hand them over in
    # shared memory through a helper thread of the sender, and a child that has sent its result
    # and exited takes that memory with it
    connection.send_bytes(pickle.dumps(message))


def _child(connection, stop, running, threads, function, kwargs):
    kwargs = pickle.loads(kwargs)
    os.nice(NICENESS)
    shared_threads = [0]

    def should_stop():
        # the runs share the cores: with two runs on two cores each takes one, so none waits on
        # threads the others have descheduled (PyTorch's threads spin while they wait)
        wanted = max(1, threads // max(1, running.value))
        if wanted != shared_threads[0]:
            torch.set_num_threads(wanted)
            shared_threads[0] = wanted
        return stop.is_set()

    try:
        result = function(emit=lambda event: _send(connection, ("event", event)), should_stop=should_stop, **kwargs)
        _send(connection, ("result", result))
    except BaseException as e:  # noqa: BLE001 - reported to the parent: one line, and the traceback for its log
        _send(connection, ("error", (f"{type(e).__name__}: {e}", traceback.format_exc())))
    finally:
        connection.close()


def run_in_process(function, kwargs, on_event, stopped, poll_seconds=0.2):
    """Run `function(emit=..., should_stop=..., **kwargs)` in a child process (see the module's
    docstring); `stopped()` is polled here and passed on to the child's should_stop."""
    context, running = _shared()
    receiver, sender = context.Pipe(duplex=False)
    stop = context.Event()
    process = context.Process(
        target=_child,
        daemon=True,
        name="lab-worker",
        args=(sender, stop, running, torch.get_num_threads(), function, pickle.dumps(kwargs)),
    )
    with _lock, _bare_main_module():
        process.start()
    with running.get_lock():
        running.value += 1
    sender.close()  # the child holds the only writing end: its exit ends the pipe (EOFError below)
    try:
        while True:
            if stopped():
                stop.set()
            if not receiver.poll(poll_seconds):
                continue
            try:
                kind, payload = pickle.loads(receiver.recv_bytes())
            except EOFError:
                process.join()
                raise WorkerError(
                    f"the process computing it ended unexpectedly (exit code {process.exitcode}; "
                    "a negative code is the signal that ended it, -9 often means out of memory)"
                )
            if kind == "event":
                on_event(payload)
            elif kind == "result":
                return payload
            else:
                line, trace = payload
                log.error("a run's process failed:\n%s", trace)
                raise WorkerError(line)
    finally:
        receiver.close()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join()
        with running.get_lock():
            running.value -= 1
