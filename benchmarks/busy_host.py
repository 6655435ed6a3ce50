"""A busy host (issue 50, item 3) and a start that speaks (issue 51): how long `streamlit run serve.py` takes to
answer a page's address at all (the preparing notice), to be prepared, and a default run on the Train page to
reach its first loss point, with the host's cores idle and with other processes keeping every core busy
(another tenant's work, at the server's own priority).

    python -m benchmarks.busy_host [--repeats 2] [--timeout 600]

Each repeat starts a fresh server on a temporary folder and times it until it answers (its health check, once
it has prepared: serve.py); a scripted student (benchmarks.scripted_student) then opens the Train page at its
defaults and presses Start, and the server's log says when the run's first step came (lab.server.jobs logs it).
Before the fix the training process ran in SCHED_IDLE and the server waited for its warm-up: a busy host kept
the server preparing past 400 s and a 3-s run's first step 55 s away. Prints one Markdown table.
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from benchmarks.app import AppServer
from benchmarks.classroom import first_steps
from benchmarks.scripted_student import ScriptedStudent
from lab.server.spaces import new_space_key
from ui.shared.sessions import SPACE_COOKIE


def hogs(n):
    """n processes that keep a core busy each, until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def first_answer(url, deadline):
    """Seconds until `url` answers at all (the preparing notice counts), or None by `deadline`."""
    start = time.monotonic()
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return time.monotonic() - start
        except urllib.error.HTTPError:
            return time.monotonic() - start
        except OSError:
            time.sleep(0.05)
    return None


def one_server(timeout):
    """-> (seconds until the server first answers a page's address, seconds until it is prepared (its health check
    says ok), seconds from Start to the default run's first step or None)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.monotonic()
        server = AppServer(folder)
        try:
            answered = first_answer(server.url + "/", start + timeout)
            server.wait_healthy(timeout)
            opened = time.monotonic() - start
            student = ScriptedStudent(server.url, "Train", "", {SPACE_COOKIE: new_space_key(folder)})
            student.open()
            student.press("train_start")
            student.keep_open()
            deadline = time.monotonic() + timeout
            while not first_steps(server.output(None)) and time.monotonic() < deadline:
                time.sleep(1)
            student.close()
            steps = first_steps(server.output(None))
            return (answered if answered is not None else math.nan), opened, steps[0][1] if steps else None
        finally:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    rows = {}
    for state in ("idle", "busy"):
        busy = hogs(os.cpu_count() or 2) if state == "busy" else []
        try:
            rows[state] = [one_server(args.timeout) for _ in range(args.repeats)]
        finally:
            for process in busy:
                process.kill()
                process.wait()
    idle_open = statistics.median(opened for _, opened, _ in rows["idle"])
    print("| host | first answer (s) | prepared (s) | x idle | default run's first step after Start (s) |")
    print("|---|---|---|---|---|")
    for state, results in rows.items():
        answered = statistics.median(a for a, _, _ in results)
        opened = statistics.median(o for _, o, _ in results)
        firsts = [f"{f:.1f}" if f is not None else f"none in {args.timeout:.0f}" for _, _, f in results]
        print(f"| {state} | {answered:.1f} | {opened:.1f} | {opened / idle_open:.2f} | {', '.join(firsts)} |")


if __name__ == "__main__":
    main()
