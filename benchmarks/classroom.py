"""A class on one server: N students press Start at once, in N browser contexts of one chromium, and
another student watches the server's pages from a browser of their own.

    python -m benchmarks.classroom [--sessions 10] [--seconds 120] [--unattended 20] [--browser-nice 10]

Starts `streamlit run serve.py` on a free port of this machine (user files in a temporary folder,
every request to 127.0.0.1 only), opens N contexts (each its own cookie, so its own session and
folder; every thread of the students' chromium at nice 10, as if each student's browser ran on their
own machine) on /Train with the default model (preset astra-alpha) and a `--seconds` budget, clicks
Start in each as fast as Playwright can, and prints:

* what each student sees: the time from its click to its first loss point, or the queue message;
* how many runs train at once, read from the server's budget line on a watcher's page, and that
  watcher's page load (/Sample, navigation -> script done) on an idle server and `--watch-after`
  seconds after the last Start, while the runs train (target <= 2x idle);
* the memory idle, at its peak while training, and after the runs end: the server process's RSS,
  and the PSS of the server with the processes its runs train in;
* the seconds from closing every tab to the server counting no run (the server is started with
  RNNLAB_UNATTENDED_SECONDS=--unattended; a run stops within that plus the reaper's 2 s);
* what each student's run got: its steps and steps per second, read from the checkpoint every run
  saves when it ends (`--processes N`: RNNLAB_TRAINING_PROCESSES, the training processes; 0: the server's threads).

`--warm-up`: one student trains a 5-second run first, untimed, so that the students meet a server
already in use (imports done; on Ray, the connection open and the lab shipped to the cluster).

Bounded: N contexts, one Start each, every wait capped; the server and browser stop at the end.
"""

import argparse
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from benchmarks.app import (
    CHART_POINTS_JS,
    AppServer,
    click_start_and_time_first_point,
    launch_browser,
    open_page,
    page_load,
)

BUDGET_LINE = "This server's training budget"
FIRST_STEP_LINE = re.compile(r"^(\S+ \S+) INFO lab\.server\.jobs: The run .*: first step ([\d.]+) s after Start", re.M)


def first_steps(server_log):
    """(wall-clock time, seconds after its job's start()) of every run's first step, from the server's log."""
    from datetime import datetime

    return [
        (datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp(), float(after))
        for stamp, after in FIRST_STEP_LINE.findall(server_log)
    ]


def saved_runs(user_dir, since=0.0):
    """(steps, seconds trained) of every run saved under the server's user folder (after `since`, a time)."""
    from lab.training.checkpoints import load_checkpoint

    paths = [  # each run once, not its _latest too
        path for path in Path(user_dir).rglob("*_v*.safetensors") if path.stat().st_mtime > since
    ]
    metrics = [load_checkpoint(path, "cpu").metrics for path in paths]
    return [(m["steps"], m["elapsed"]) for m in metrics if m.get("elapsed")]


def _descendants(pid):
    """pid and every process below it (the runs train in children of the server's forkserver)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += parents.get(found[-1], [])
    return found


def memory_mb(server):
    """The server process's resident memory, and the proportional set size (shared pages counted
    once, split between their sharers) of the server with all its children: what the machine holds."""
    rss = pss = 0
    for pid in _descendants(server.process.pid):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        kb = {key: int(re.search(rf"^{key}:\s+(\d+) kB", rollup, re.M).group(1)) for key in ("Rss", "Pss")}
        rss = kb["Rss"] if pid == server.process.pid else rss
        pss += kb["Pss"]
    return rss / 1024, pss / 1024


class PeakMemory(threading.Thread):
    """memory_mb sampled every half second: the peak of each figure."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server, self.peak, self.done = server, (0.0, 0.0), threading.Event()

    def run(self):
        while not self.done.wait(0.5):
            self.peak = tuple(map(max, self.peak, memory_mb(self.server)))


def budget_line(page):
    """(MB in use, MB in all, runs training, runs waiting) from the budget line of the Train page shown."""
    text = page.get_by_text(BUDGET_LINE).inner_text()
    used, capacity = (float(x.replace(",", "")) for x in re.search(r"([\d,]+) of ([\d,]+) MB", text).groups())
    runs = re.search(r"([\d,]+) runs?\), ([\d,]+) waiting", text).groups()  # lab.server.capacity.Budget.sentence
    training, waiting = (int(x.replace(",", "")) for x in runs)
    return used, capacity, training, waiting


def runs_on_server(page):
    """(training, waiting) from the budget line of a Train page."""
    return budget_line(page)[2:]


def main(before_class=None):
    """`before_class()`, if given, is called once the server has served its first page, before the
    students open theirs (benchmarks.ray_classroom waits there for the warm Ray actors)."""
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10, help="students pressing Start at once (1-30)")
    parser.add_argument(
        "--seconds",
        type=int,
        default=120,
        help="each run's training budget (long enough to be running when the tabs close)",
    )
    parser.add_argument("--unattended", type=int, default=20, help="the server's RNNLAB_UNATTENDED_SECONDS")
    parser.add_argument("--browser-nice", type=int, default=10, help="the students' browser's niceness (0-19)")
    parser.add_argument("--processes", type=int, default=1, help="training processes (0: the server's threads)")
    parser.add_argument(
        "--watch-after", type=float, default=20, help="seconds after the last Start at which the watcher reads"
    )
    parser.add_argument(
        "--warm-up", action="store_true", help="one student's short run first, untimed: a server already in use"
    )
    args = parser.parse_args()
    if not 1 <= args.sessions <= 30:
        parser.error("--sessions must be in 1..30")
    env = {"RNNLAB_UNATTENDED_SECONDS": str(args.unattended), "RNNLAB_TRAINING_PROCESSES": str(args.processes)}
    with (
        tempfile.TemporaryDirectory() as user_dir,
        AppServer(user_dir, extra_env=env) as server,
        sync_playwright() as p,
    ):
        browser = launch_browser(p, niceness=args.browser_nice)  # the students'
        viewport = {"width": 1400, "height": 1000}
        # the watcher's own browser, at the server's priority: its page loads are a student's on a laptop
        watcher = launch_browser(p).new_context(viewport=viewport).new_page()
        open_page(watcher, f"{server.url}/Sample")  # cold: caches fill
        idle_load = page_load(watcher, f"{server.url}/Sample")
        idle_rss, idle_pss = memory_mb(server)
        peak = PeakMemory(server)
        peak.start()
        warm_until = 0.0
        if args.warm_up:  # a class that has already trained once: imports done, the Ray connection open
            early = browser.new_context(viewport=viewport).new_page()
            open_page(early, f"{server.url}/Train?seconds=5")
            click_start_and_time_first_point(early, timeout_ms=300_000)
            early.wait_for_selector('[data-testid="stAlertContentSuccess"]', timeout=120_000)
            early.context.close()
            warm_until = time.time()

        if before_class is not None:
            before_class()
        students = [browser.new_context(viewport=viewport).new_page() for _ in range(args.sessions)]
        for page in students:
            open_page(page, f"{server.url}/Train?seconds={args.seconds}")
        for page in students:  # the widgets can arrive a moment after the script's end
            page.locator(".st-key-train_start button").wait_for(timeout=120_000)
        clicked, clicked_at = [], []
        for page in students:  # as close to "at once" as one driver gets
            page.locator(".st-key-train_start button").click(no_wait_after=True)
            clicked.append(time.perf_counter())
            clicked_at.append(time.time())
        first_point = [None] * args.sessions
        deadline = time.perf_counter() + args.seconds + 120
        busy_load = at_once = None
        while (None in first_point or busy_load is None) and time.perf_counter() < deadline:
            for n, page in enumerate(students):
                if first_point[n] is None and page.evaluate(f"({CHART_POINTS_JS})()") > 0:
                    first_point[n] = time.perf_counter() - clicked[n]
            if busy_load is None and time.perf_counter() - clicked[-1] >= args.watch_after:
                # the watcher reads its pages at a fixed time after the last Start, while the runs train
                # (their budget is --seconds), not once every student's page has been read
                open_page(watcher, f"{server.url}/Train")
                at_once = runs_on_server(watcher)
                busy_load = page_load(watcher, f"{server.url}/Sample")
            time.sleep(0.1)
        seen = []
        for page in students:  # a student's page busy redrawing on two loaded cores can take a while to answer
            try:
                text = page.locator('[data-testid="stMain"]').inner_text(timeout=120_000)
            except PlaywrightTimeout:
                seen.append("its page did not answer within 120 s")
                continue
            queue = re.search(r"number \d+ in the queue", text)
            error = page.locator('[data-testid="stAlertContentError"]')
            seen.append(error.first.inner_text() if error.count() else queue.group(0) if queue else "training")

        for page in students:
            page.context.close()
        closed = time.perf_counter()
        open_page(watcher, f"{server.url}/Train")
        while runs_on_server(watcher) != (0, 0) and time.perf_counter() - closed < args.unattended + 60:
            watcher.wait_for_timeout(1000)
            open_page(watcher, f"{server.url}/Train")
        stopped_after = time.perf_counter() - closed
        after_rss, after_pss = memory_mb(server)
        peak.done.set()
        (peak_rss, peak_pss) = peak.peak
        browser.close()
        server_side = [(at, a) for at, a in first_steps(server.output(last_chars=None)) if at > warm_until]
        runs = saved_runs(user_dir, since=warm_until)

    times = [t for t in first_point if t is not None]
    print(f"{args.sessions} students press Start at once (default model astra-alpha, {args.seconds} s budget):")
    for n, (t, what) in enumerate(zip(first_point, seen)):
        print(f"  student {n + 1:2d}: first loss point {'never' if t is None else f'{t:5.2f} s'} · sees: {what}")
    if times:
        print(
            f"  first loss point: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
            f"({len(times)} of {args.sessions} started; target: every run within 10 s)"
        )
    if server_side:  # which line is whose is not known, but no run started before the first click
        latest = max(at for at, _ in server_side)
        print(
            f"  on the server (its log): {len(server_side)} runs took their first step, the last "
            f"{latest - min(clicked_at):.2f} s after the first click and {latest - max(clicked_at):.2f} s after "
            f"the last; from each run's start to its first step: median "
            f"{statistics.median(after for _, after in server_side):.2f} s, max "
            f"{max(after for _, after in server_side):.2f} s. The rest of a student's wait is the page drawing "
            "the point, in a browser that here shares the server's cores"
        )
    print(f"  runs training {args.watch_after:.0f} s after the last Start: {at_once[0]} (waiting: {at_once[1]})")
    print(
        f"another student's /Sample load: idle {idle_load:.2f} s, {args.watch_after:.0f} s after the last Start "
        f"{busy_load:.2f} s ({busy_load / idle_load:.1f}x; target <= 2x)"
    )
    print(
        f"server process RSS: idle {idle_rss:.0f} MiB, peak while training {peak_rss:.0f} MiB, after the "
        f"runs {after_rss:.0f} MiB"
    )
    print(
        f"server and its run processes, PSS: idle {idle_pss:.0f} MiB, peak while training {peak_pss:.0f} MiB, "
        f"after the runs {after_pss:.0f} MiB"
    )
    if runs:
        rates = [steps / elapsed for steps, elapsed in runs]
        print(
            f"each run's steps (from its saved checkpoint): {sorted(steps for steps, _ in runs)}; steps per "
            f"second: median {statistics.median(rates):.2f}, min {min(rates):.2f}, max {max(rates):.2f}, "
            f"all runs together {sum(rates):.1f}"
        )
    print(
        f"closing every tab -> no run on the server: {stopped_after:.1f} s "
        f"(RNNLAB_UNATTENDED_SECONDS={args.unattended})"
    )


if __name__ == "__main__":
    main()
