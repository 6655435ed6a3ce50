"""A script that opens the app's pages exits with status 0 and no abort, every time (lab.server.shutdown).

The abort ("terminate called without an active exception", exit status 134) came at the interpreter's end,
from the work a page starts and nobody stopped: the server's warm-up (ui.warm_up), begun by a session's
second heartbeat, on a daemon thread still inside PyTorch, and the training process it starts, killed
under the warm-up's run (whose thread then raised an uncaught WorkerError). Opening Home twice starts
exactly that work, and the script then ends at one of the moments the abort came from: while the training
process is still starting and the warm-up waits for its two tiny steps, or once the process has trained
them and the warm-up computes a page's first charts in PyTorch. Each run is a fresh Python, since the
failure is in how a process ends; 20 in a row, because it was intermittent (5 of 6 runs of a script that
opened every page)."""

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 20
MOMENTS = ("starting", "charts")  # where the script ends: see the module's docstring

OPEN_PAGES = """
import sys, threading
from streamlit.testing.v1 import AppTest
import ui.warm_up

moment, app = sys.argv[1], sys.argv[2]
in_charts = threading.Event()  # the warm-up's two steps are done: it computes the Memory page's first charts
memory_page_defaults = ui.warm_up.memory_page_defaults

def mark_then_compute():
    in_charts.set()
    memory_page_defaults()

ui.warm_up.memory_page_defaults = mark_then_compute
home = AppTest.from_file(app, default_timeout=120)
home.run()
home.run()  # the session's second heartbeat: the warm-up starts, and the training process with it
assert not home.exception, home.exception
if moment == "charts":
    assert in_charts.wait(300), "the warm-up did not reach the Memory page's charts"
print("opened Home; ending", moment, flush=True)
"""


def open_pages_and_exit(run):
    """Run the script once, ending at the moment `run` picks -> (what failed, or "")."""
    moment = MOMENTS[run % len(MOMENTS)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", OPEN_PAGES, moment, str(ROOT / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    clean = done.returncode == 0 and f"ending {moment}" in done.stdout
    clean = clean and "terminate called" not in done.stderr and "Traceback" not in done.stderr
    return "" if clean else f"run {run + 1}, ending {moment}: exit status {done.returncode}\n{done.stderr[-3000:]}"


def test_a_script_that_opens_pages_exits_cleanly_20_times_in_a_row():
    """Two runs at a time (each is mostly one core's imports), ten in a row on each."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        failures = [failure for failure in pool.map(open_pages_and_exit, range(RUNS)) if failure]
    assert not failures, f"{len(failures)} of {RUNS} runs did not exit cleanly; the first:\n{failures[0]}"
