"""A script that opens the app's pages exits with status 0 and no abort, every time (lab.server.shutdown).

The abort ("terminate called without an active exception", exit status 134) came at the interpreter's end,
from the work a page starts and nobody stopped: the server's warm-up (ui.app.warm_up), begun by a session's
second heartbeat, on a daemon thread still inside PyTorch, and the training process it starts, killed
under the warm-up's run (whose thread then raised an uncaught WorkerError). Opening Home twice starts
exactly that work, and the script then ends at one of the moments the abort came from: while the training
process is still starting and the warm-up waits for its two tiny steps, or once the process has trained
them and the warm-up computes a page's first charts in PyTorch. 6 in a row, three at each moment, because it
was intermittent: 5 of 6 runs of a script that opened every page aborted, so six clean runs in a row would
come by chance once in 47,000.

Each run is a process of its own that ends as a program ends (its interpreter's finalization: atexit,
threads joined, modules torn down), since the failure is in how a process ends. To spend the test's time
on the endings rather than on imports, the runs are forked from one parent that imported Streamlit,
PyTorch and the pages' modules and started nothing: each child opens Home, ends at its moment, and falls
off the end of the script as a fresh Python would (the training process it starts is spawned fresh)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = 6
MOMENTS = ("starting", "charts")  # where a run's script ends: see the module's docstring

OPEN_PAGES_IN_A_ROW = """
import os, sys, threading, time
from streamlit.testing.v1 import AppTest
import ui.app.warm_up  # the pages' imports, made once: no thread, no process started by them

app, runs, moments = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
assert threading.active_count() == 1, threading.enumerate()

def open_home_and_end_at(moment):
    in_charts = threading.Event()  # the warm-up's two steps are done: it computes the Memory page's first charts
    memory_page_defaults = ui.app.warm_up.memory_page_defaults

    def mark_then_compute():
        in_charts.set()
        memory_page_defaults()

    ui.app.warm_up.memory_page_defaults = mark_then_compute
    home = AppTest.from_file(app, default_timeout=120)
    home.run()
    home.run()  # the session's second heartbeat: the warm-up starts, and the training process with it
    assert not home.exception, home.exception
    if moment == "charts":
        assert in_charts.wait(300), "the warm-up did not reach the Memory page's charts"
    print("opened Home; ending", moment, flush=True)

running = {}  # child -> (run, moment, started): two at a time, three in a row on each

def reap_one():
    child, status = os.wait()
    run, moment, started = running.pop(child)
    code = os.waitstatus_to_exitcode(status)
    print(f"run {run + 1}, ending {moment}: exit status {code} after {time.monotonic() - started:.0f} s", flush=True)

for run in range(runs):
    if len(running) == 2:
        reap_one()
    moment = moments[run % len(moments)]
    child = os.fork()
    if child == 0:
        running.clear()
        open_home_and_end_at(moment)
        break  # the child ends here, at the script's end, as a program does
    running[child] = (run, moment, time.monotonic())
else:
    while running:
        reap_one()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the runs are forked from one parent (POSIX)")
def test_a_script_that_opens_pages_exits_cleanly_6_times_in_a_row():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", OPEN_PAGES_IN_A_ROW, str(ROOT / "app.py"), str(RUNS), ",".join(MOMENTS)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    ended = [line for line in done.stdout.splitlines() if line.startswith("run ")]
    assert len(ended) == RUNS, done.stdout + done.stderr[-3000:]
    unclean = [line for line in ended if "exit status 0 " not in line]
    assert not unclean, f"{len(unclean)} of {RUNS} runs did not exit cleanly: {unclean}\n{done.stderr[-3000:]}"
    assert done.stdout.count("opened Home; ending") == RUNS
    assert "terminate called" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
