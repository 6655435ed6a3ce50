"""A training process never outlives its server (issue 50, item 4): on a busy host a server killed with -9 left
its training process (~0.7 GB) running for up to 19 minutes, noticing only through its pipe, between two steps
it was starved of.

    start_beside_the_server(process)   the server: start a multiprocessing.Process from one long-lived thread
    die_with(server_pid)               the training process, first thing: end the moment its server ends

On Linux the kernel kills the process when its parent ends (a parent-death signal, PR_SET_PDEATHSIG). That
signal follows the *thread* that started the process, so the server starts every training process from one
thread that lives as long as it does. Everywhere, a thread of the process also checks twice a second that its
server still runs, and ends the process at once when it does not (macOS, Windows).
"""

import ctypes
import os
import queue
import signal
import sys
import threading

import psutil

WATCH_SECONDS = 0.5
PR_SET_PDEATHSIG = 1  # linux/prctl.h

_starts = queue.SimpleQueue()
_starter = None
_starter_lock = threading.Lock()


def start_beside_the_server(process):
    """process.start() on the server's one starting thread (made at the first call; it lives as long as the
    server): the thread a Linux parent-death signal follows. Raises what start() raised."""
    global _starter
    with _starter_lock:
        if _starter is None:
            _starter = threading.Thread(target=_start_each, daemon=True, name="lab-training-starter")
            _starter.start()
    done, failed = threading.Event(), []
    _starts.put((process, done, failed))
    done.wait()
    if failed:
        raise failed[0]


def _start_each():
    while True:
        process, done, failed = _starts.get()
        try:
            process.start()
        except BaseException as error:  # handed to the caller's thread, which raises it
            failed.append(error)
        done.set()


def die_with(server_pid):
    """End this process (os._exit) as soon as the process `server_pid` ends: a parent-death signal on Linux, and
    a watching thread everywhere. A server that ended before this call ends it at once."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        server = psutil.Process(server_pid)
    except psutil.NoSuchProcess:
        os._exit(0)
    threading.Thread(target=_watch, args=(server,), daemon=True, name="lab-server-watch").start()


def _watch(server):
    while _runs(server):
        threading.Event().wait(WATCH_SECONDS)
    os._exit(0)


def _runs(server):
    """Whether `server` still runs: not ended, not a zombie waiting for its parent, and not another process that
    took its pid (is_running compares start times)."""
    try:
        return server.is_running() and server.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
