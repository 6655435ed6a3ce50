"""A busy host neither starves nor leaks the training process (issue 50, items 3 and 4).

- The server opens without waiting for the training process's warm-up (work at the lowest priority).
- The unattended reaper ends no run that has not computed yet: its time counts from its first event.
- Killed with -9 while its run trains, with every core kept busy by other work, a server leaves no training
  process behind within 5 s (a parent-death signal on Linux, a watching thread everywhere).
The run's share of a busy host is measured in BENCHMARKS.md (`python -m benchmarks.busy_host`).
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import ui.app.warm_up
from ui.shared.sessions import stop_unattended_jobs

ROOT = Path(__file__).resolve().parent.parent


class FakeJob:
    def __init__(self, first_event_at=None, running=True):
        self.first_event_at, self.running, self.stopped = first_event_at, running, False

    def stop(self):
        self.stopped = True


def registry(**sessions):
    return {"lock": threading.Lock(), "sessions": sessions}


def test_the_reaper_ends_a_silent_sessions_runs_only_once_they_have_computed_for_the_unattended_time():
    starved = FakeJob(first_event_at=None)  # queued, or starved by a busy host: never computed
    late = FakeJob(first_event_at=990.0)  # first computed 10 s ago, long after its tab closed
    long_running = FakeJob(first_event_at=100.0)
    ended = FakeJob(first_event_at=100.0, running=False)
    jobs = registry(
        silent={"seen": 0.0, "jobs": [starved, late, long_running, ended]},
        open={"seen": 999.0, "jobs": [FakeJob(first_event_at=0.0)]},
    )
    stopped = stop_unattended_jobs(jobs, now=1000.0, unattended=150.0)
    assert long_running in stopped and ended in stopped
    assert not starved.stopped and not late.stopped
    assert jobs["sessions"]["silent"]["jobs"] == [starved, late]  # kept until they have had their time
    assert not jobs["sessions"]["open"]["jobs"][0].stopped
    stop_unattended_jobs(jobs, now=1200.0, unattended=150.0)  # 210 s after late's first event
    assert late.stopped and not starved.stopped
    starved.first_event_at, starved.running = 1300.0, True
    stop_unattended_jobs(jobs, now=1451.0, unattended=150.0)
    assert starved.stopped and "silent" not in jobs["sessions"]


def test_the_server_opens_without_waiting_for_the_training_processs_warm_up(monkeypatch):
    """The pages' defaults are computed while the training process's two steps still wait (as on a busy host)."""
    released, pages = threading.Event(), []
    monkeypatch.setattr(ui.app.warm_up, "_train_two_steps", lambda: released.wait(60))
    for part in ("memory_page_defaults", "sample_page_defaults", "gates_page_defaults"):
        monkeypatch.setattr(ui.app.warm_up, part, lambda part=part: pages.append(part))
    done = threading.Thread(target=ui.app.warm_up.warm_up.__wrapped__)
    done.start()
    done.join(30)
    try:
        assert not done.is_alive() and len(pages) == 3, "the warm-up waited for the training process"
    finally:
        released.set()


SERVER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{root!r}, {root!r} + "/tests"]
    from helpers import train_until_stopped
    from lab.server.workers import run_in_process

    run_in_process(train_until_stopped, {{}}, lambda event: print(event["pid"], flush=True), lambda: False)
    """
)


def ended(process):
    """Whether `process` has ended: gone, or a zombie (it holds no memory and computes nothing; a container's
    first process may never reap what a killed server leaves it)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def hog(seconds):
    """A process that keeps a core busy for `seconds`: another tenant of the host."""
    return subprocess.Popen(
        [sys.executable, "-c", f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"]
    )


@pytest.mark.skipif(sys.platform == "win32", reason="kill -9 is POSIX's")
def test_a_server_killed_while_its_run_trains_on_a_busy_host_leaves_no_training_process():
    hogs = [hog(120) for _ in range(os.cpu_count() or 2)]
    try:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        training = psutil.Process(int(server.stdout.readline()))  # its run has taken a step
        assert training.ppid() == server.pid and training.nice() == 19
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        deadline = time.monotonic() + 5
        while ended(training) is False and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ended(training), "the training process outlived its server by 5 s"
    finally:
        for process in hogs:
            process.kill()
            process.wait()
