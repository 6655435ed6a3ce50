"""Lowering the CPU priority of the work that trains, so that the pages come first: the one place that
knows how each platform does it.

    lower_this_process(idle=True)   the training process (lab.server.workers), before it starts a thread
    lower_this_process()            a Ray actor (lab.server.ray_runs)
    lower_this_thread()             a run training on a thread of the server itself (lab.server.jobs)

A process is lowered through psutil, which speaks each platform's own terms: on POSIX NICENESS more
nice, on Windows a lower priority class. `idle` asks for the lowest class there is, for work that should
run only on cores nothing else wants: Linux's SCHED_IDLE, Windows' idle priority class. Where a host
forbids a change, the work keeps its priority and still trains.
"""

import contextlib
import os
import sys
import threading

import psutil

NICENESS = 10  # on Linux, a page's work at nice 0 gets ~10x the CPU of a run's at nice 10
LOWEST_NICE = 19  # POSIX's lowest priority: a server already niced cannot go further


def lower_this_process(idle=False):
    """Lower the calling process's priority: NICENESS lower on POSIX (with `idle` also SCHED_IDLE, where
    Linux allows it), below-normal on Windows (with `idle` the idle class). On Linux a nice value and a
    scheduling class belong to a thread, and a thread starts with its creator's: call it from the
    thread that starts the others, before it starts them."""
    process = psutil.Process()
    with contextlib.suppress(psutil.Error, OSError):  # a host that forbids it: the work keeps its priority
        if psutil.WINDOWS:
            process.nice(psutil.IDLE_PRIORITY_CLASS if idle else psutil.BELOW_NORMAL_PRIORITY_CLASS)
        else:  # psutil sets the process's (on Linux: the calling main thread's) nice value, not a step
            process.nice(min(LOWEST_NICE, process.nice() + NICENESS))
    if idle and hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):  # a host that forbids it: niced alone
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def lower_this_thread():
    """Lower the calling thread's priority by NICENESS, as a training process is lowered: on Linux a
    thread's nice value is its own, so a run computing on a thread of the server (and the threads PyTorch
    starts from it) yields the cores to the threads that draw pages. Elsewhere (macOS, Windows) a nice
    value or a priority class belongs to the whole process, the pages' threads included: nothing changes."""
    if sys.platform.startswith("linux") and hasattr(os, "setpriority"):
        thread = threading.get_native_id()
        with contextlib.suppress(OSError):  # a host that forbids it: the run keeps the server's priority
            niceness = min(LOWEST_NICE, os.getpriority(os.PRIO_PROCESS, thread) + NICENESS)
            os.setpriority(os.PRIO_PROCESS, thread, niceness)
