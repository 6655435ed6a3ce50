"""Lowering the CPU priority of the work that trains, so that the pages come first: the one place that
knows how each platform does it.

    lower_this_process(lowest=True)   the training process (lab.server.workers), before it starts a thread
    lower_this_process()              a Ray actor (lab.server.ray_runs)
    lower_this_thread()               a run training on a thread of the server itself (lab.server.jobs)

A process is lowered through psutil, which speaks each platform's own terms: on POSIX NICENESS more
nice, on Windows a lower priority class. `lowest` asks for the lowest priority that still gets a share of a
busy machine: POSIX's nice 19 (a page's thread at nice 0 weighs 68 times as much, so the pages come first),
Windows' idle class. Not Linux's SCHED_IDLE, which runs only on cores nothing else wants: on a host busy with
other tenants' work it starved the runs and the server's warm-up for minutes (issue 50). Where a host forbids a
change, the work keeps its priority and still trains.
"""

import contextlib
import os
import sys
import threading

import psutil

NICENESS = 10  # on Linux, a page's work at nice 0 gets ~10x the CPU of a run's at nice 10
LOWEST_NICE = 19  # POSIX's lowest priority: a server already niced cannot go further


def lower_this_process(lowest=False):
    """Lower the calling process's priority: NICENESS lower on POSIX (with `lowest`, to LOWEST_NICE),
    below-normal on Windows (with `lowest` the idle class). On Linux a nice value belongs to a thread, and a
    thread starts with its creator's: call it from the thread that starts the others, before it starts them."""
    process = psutil.Process()
    with contextlib.suppress(psutil.Error, OSError):  # a host that forbids it: the work keeps its priority
        if psutil.WINDOWS:
            process.nice(psutil.IDLE_PRIORITY_CLASS if lowest else psutil.BELOW_NORMAL_PRIORITY_CLASS)
        else:  # psutil sets the process's (on Linux: the calling main thread's) nice value, not a step
            process.nice(LOWEST_NICE if lowest else min(LOWEST_NICE, process.nice() + NICENESS))


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
