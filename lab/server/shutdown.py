"""A process that trains ends in order: its threads stopped and joined, then its training processes
ended, before the interpreter tears down.

At exit Python joins its non-daemon threads, runs its atexit hooks (the last registered first), then
tears down. A daemon thread still inside PyTorch or Ray at that point is ended inside C++ code that
cannot be unwound, and the whole process aborts ("terminate called without an active exception", exit
status 134). So this module's hook, registered after multiprocessing's and Ray's own (they would end the
training processes and the Ray connection under their runs), ends the work first:

    1. ENDING is set: the warm-up (ui.app.warm_up) and the loops that wait on Ray see it and return; every
       `first` given to `close_at_exit` runs (a training process still starting is stopped);
    2. every thread given to `join_at_exit` is asked to stop, then joined: the jobs, the warm-up;
    3. every `close` given to `close_at_exit` runs, the last given first: the training processes
       (lab.server.workers) are told to end, and their pipes' threads joined.

Something whose own atexit hook must run after this one (ray.init) calls `register` once it has
started, which moves this hook back in front.
"""

import atexit
import logging
import threading
import time

log = logging.getLogger(__name__)
ENDING = threading.Event()  # set as the process ends: long work polls it and returns
# how long the end waits for all threads together: a run finishes its step and saves its checkpoint
JOIN_SECONDS = 60.0
_threads, _closers, _lock = {}, [], threading.Lock()  # _threads: thread -> its stop function (or None)
_firsts = []  # what runs as soon as the end begins


def join_at_exit(thread, stop=None):
    """At exit, call `stop()` and join `thread` (a started one) before anything is closed."""
    with _lock:
        for ended in [t for t in _threads if not t.is_alive()]:  # a server starts thousands of jobs
            del _threads[ended]
        _threads[thread] = stop
    register()


def close_at_exit(close, first=None):
    """At exit, call `first()` as the end begins (it must not wait), and `close()` once every thread is
    joined (the last given, first)."""
    with _lock:
        _closers.append(close)
        if first is not None:
            _firsts.append(first)
    register()


def register():
    """Register the hook, or move it in front of every atexit hook registered so far."""
    atexit.unregister(end)
    atexit.register(end)


def end():
    """The process's orderly end (see the module's docstring); the atexit hook, and callable before it."""
    ENDING.set()
    with _lock:
        threads, firsts, closers = list(_threads.items()), list(_firsts), _closers[::-1]
        _threads.clear()
        _firsts.clear()
        _closers.clear()
    _call_each(firsts + [stop for _, stop in threads if stop is not None])
    deadline = time.monotonic() + JOIN_SECONDS
    for thread, _ in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            log.warning("%s had not ended %.0f s after the process began to end", thread.name, JOIN_SECONDS)
    _call_each(closers)


def _call_each(functions):
    for function in functions:
        try:
            function()
        except Exception:  # one failed step must not keep the others from ending what they started
            log.exception("ending the process: a step failed")
