"""The app in a real browser (issue 5): how fast the first loss point appears, how fast pages load,
how much memory the server uses while training.

    python -m benchmarks.app [--seconds 20] [--repeats 3] [--race 90]

Starts `streamlit run serve.py` (the README's command) on a free port (user checkpoints in a temporary
folder), drives Debian's /usr/bin/chromium with Playwright, and prints:

* click on Start -> first loss point in the plotly chart (target <= 2 s), for
  the default model (preset astra-alpha: char GRU, PyTorch convention, E=64,
  H=256, B=32, T=64) on the bundled corpus; the first click of a fresh server
  and later clicks (task cached) are reported apart;
* each page's warm load time: navigation -> script finished (target <= 3 s);
* the server process's peak resident memory (VmHWM) after training;
* with --race SECONDS: each page's warm load in a second browser session, idle and while the
  first session's four-way race (🏁: RNN, GRU, LSTM, scan) trains for SECONDS.

The same driver (server, browser, chart probe) serves tests/test_browser.py.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAPTOP = {"width": 1366, "height": 768}  # the classroom laptop every page must fit
SCRIPT_DONE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# number of (x, y) points in the Train page's live chart, -1 when there is none (the long race beside
# it is not counted); plotly sends numpy arrays as base64 typed arrays ({dtype: "f8", bdata}): their
# length is bytes / width
CHART_POINTS_JS = """() => {
    const chart = document.querySelector('.st-key-train_chart .js-plotly-plot');
    if (!chart || !chart.data) return -1;
    const length = x => !x ? 0 : x.bdata !== undefined ? atob(x.bdata).length / parseInt(x.dtype.slice(1))
                                                       : x.length;
    return chart.data.reduce((n, trace) => n + length(trace.x), 0);
}"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    """`streamlit run serve.py` (or another `script`) as a subprocess on a free port; a context manager.
    The server opens once it has prepared for its first visitors (serve.py): give wait_healthy time."""

    def __init__(self, user_dir, port=None, extra_env=None, script="serve.py", extra_args=(), cwd=ROOT):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        env = {**os.environ, "RNNLAB_USER_DIR": str(user_dir), **(extra_env or {})}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                script,
                "--server.port",
                str(self.port),
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
                *extra_args,  # more of Streamlit's options: e.g. --secrets.files, a test's sign-in
            ],
            cwd=cwd,  # another checkout's: the same benchmark against the code before a change
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.process.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        return self
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"streamlit was not healthy after {timeout} s:\n{self.output()}")

    def output(self, last_chars=4000):
        """The server's log so far (its end: `last_chars`; None for all of it)."""
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        return text if last_chars is None else text[-last_chars:]

    def peak_rss_mb(self):
        """VmHWM of the server process (peak resident set size), in MiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.log.close()

    def __enter__(self):
        return self.wait_healthy()

    def __exit__(self, *exc):
        self.stop()


def launch_browser(playwright, niceness=0):
    """Debian's Chromium, headless. `niceness` > 0 runs it (and every process it starts) at that lower
    CPU priority: the browsers of students whose runs load the server, which in a class are on their own
    laptops, not on the server's cores beside the page being timed. A function instead of a number is
    asked every half second: a priority that changes as a benchmark goes on."""
    if not niceness:
        return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    # Chromium sets its own processes' priorities (its browser and GPU processes to -8): every thread of
    # the browser and of every process under it (found by a mark in the browser's environment; its
    # zygote's children start with an environment of their own) is lowered, every half second
    mark = f"RNNLAB_NICED_BROWSER={os.getpid()}-{time.monotonic_ns()}"
    wrapper = Path(tempfile.mkdtemp(prefix="rnnlab-chromium-")) / "chromium"
    wrapper.write_text(f'#!/bin/sh\nexport {mark}\nexec {CHROMIUM} "$@"\n')
    wrapper.chmod(0o755)
    threading.Thread(target=_keep_niced, args=(mark.encode(), niceness), daemon=True).start()
    return playwright.chromium.launch(executable_path=str(wrapper), args=CHROMIUM_ARGS)


def _keep_niced(mark, niceness, every_seconds=0.5):
    while True:
        parents, marked = {}, []
        for process in Path("/proc").glob("[0-9]*"):
            try:
                parents[int(process.name)] = int((process / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if mark in (process / "environ").read_bytes().split(b"\0"):
                    marked.append(int(process.name))
            except (OSError, ValueError, IndexError):  # a process that has ended
                pass
        tree = set(marked)
        while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
            tree |= grown
        level = niceness() if callable(niceness) else niceness
        for pid in tree:
            try:
                for task in Path(f"/proc/{pid}/task").iterdir():
                    os.setpriority(os.PRIO_PROCESS, int(task.name), level)
            except OSError:
                pass
        time.sleep(every_seconds)


def app_pages():
    """(url path, file name) of every page app.py serves, in the sidebar's order (Home at the root)."""
    from ui.shared.common import PAGES

    return [("" if n == 0 else name, Path(path).name) for n, (name, (path, _)) in enumerate(PAGES.items())]


def record_script_ends(page):
    """The end of every script run the server reports to this page, in order, from the app's own
    messages: "page" when the whole page ran, "fragment" when one part of it ran alone, "cut short" when a
    newer run stopped it (the sidebar's heartbeat can be running when the student acts)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    kinds = {
        ForwardMsg.FINISHED_SUCCESSFULLY: "page",
        ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY: "fragment",
        ForwardMsg.FINISHED_EARLY_FOR_RERUN: "cut short",
    }
    ends = []

    def read(payload):
        if isinstance(payload, bytes):
            message = ForwardMsg.FromString(payload)
            if message.WhichOneof("type") == "script_finished":
                ends.append(kinds.get(message.script_finished, "other"))

    page.on("websocket", lambda socket: socket.on("framereceived", read))
    return ends


def open_page(page, url, timeout_ms=60_000):
    """Navigate and wait until the page's script has run to the end; returns the seconds it took."""
    start = time.perf_counter()
    page.goto(url, timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)
    page.wait_for_selector(SCRIPT_DONE, timeout=timeout_ms)
    return time.perf_counter() - start


def page_load(page, url, repeats=3):
    """The median of `repeats` loads of `url` (warm, if the caller loaded it once before)."""
    return statistics.median(open_page(page, url) for _ in range(repeats))


def chart_points(page):
    return page.evaluate(CHART_POINTS_JS)


def click_start_and_time_first_point(page, timeout_ms=60_000):
    """Click Start, wait until the loss chart has a point: the seconds in between."""
    button = page.locator(".st-key-train_start button")
    button.wait_for()
    start = time.perf_counter()
    button.click()
    page.wait_for_function(f"({CHART_POINTS_JS})() > 0", polling=25, timeout=timeout_ms)
    return time.perf_counter() - start


def stop_training(page, timeout_ms=30_000):
    page.locator(".st-key-train_stop button").click()
    page.wait_for_selector('[data-testid="stAlertContentSuccess"]', timeout=timeout_ms)
    page.wait_for_selector(SCRIPT_DONE, timeout=timeout_ms)


# how many traces of the live chart have points: the runs drawn on the race chart
CHART_CURVES_JS = CHART_POINTS_JS.replace(
    "return chart.data.reduce((n, trace) => n + length(trace.x), 0);",
    "return chart.data.filter(trace => length(trace.x) > 0).length;",
)


def race_page_loads(browser, server, seconds, repeats):
    """{page: (idle load, load during a four-way race)} from a second session, and the curves drawn."""
    viewport = {"width": 1400, "height": 1000}
    racer, visitor = (browser.new_context(viewport=viewport).new_page() for _ in range(2))
    idle = {}
    for path, name in app_pages():
        open_page(visitor, f"{server.url}/{path}")  # cold: caches fill
        idle[name] = page_load(visitor, f"{server.url}/{path}", repeats)
    open_page(racer, f"{server.url}/Train?seconds={seconds}")
    racer.get_by_role("button", name="🏁 Race").click()
    racer.wait_for_function(f"({CHART_CURVES_JS})() >= 4", polling=250, timeout=60_000)
    during = {name: page_load(visitor, f"{server.url}/{path}", repeats) for path, name in app_pages()}
    curves = racer.evaluate(f"({CHART_CURVES_JS})()")
    still_racing = racer.locator(".st-key-train_stop button").is_enabled()
    return {name: (idle[name], during[name]) for name in idle}, curves, still_racing


def main():
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20, help="training budget of each benchmark run")
    parser.add_argument("--repeats", type=int, default=3, help="Start clicks to time (and page loads per page)")
    parser.add_argument(
        "--race",
        type=int,
        metavar="SECONDS",
        help="only the page loads during a four-way race of SECONDS (long enough to outlast them)",
    )
    args = parser.parse_args()
    if args.race:
        with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
            loads, curves, still_racing = race_page_loads(launch_browser(p), server, args.race, args.repeats)
        print(
            f"warm page loads in a second session, median of {args.repeats}: idle, then during a four-way race "
            f"({curves} traces with points on the racer's chart, a training and a validation curve per run; "
            f"still racing at the end: {still_racing})"
        )
        for name, (idle, during) in loads.items():
            print(f"  {name:28s} {idle:5.2f} s -> {during:5.2f} s ({during / idle:.1f}x)")
        return
    with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        train_url = f"{server.url}/Train?seconds={args.seconds}"
        latencies = []
        for i in range(args.repeats):
            open_page(page, train_url)
            latencies.append(click_start_and_time_first_point(page))
            if i == 0:  # the first run trains to the end of its budget: memory peaks meanwhile
                page.wait_for_selector('[data-testid="stAlertContentSuccess"]', timeout=(args.seconds + 120) * 1000)
                rss = server.peak_rss_mb()
            else:
                stop_training(page)
        print(
            f"click Start -> first loss point (default model astra-alpha, {args.seconds} s budget): "
            f"first click of a fresh server {latencies[0]:.2f} s; later clicks "
            + ", ".join(f"{t:.2f}" for t in latencies[1:])
            + " s (target <= 2 s)"
        )
        print("warm page loads (navigation -> script done), median of", args.repeats, "(target <= 3 s):")
        for path, name in app_pages():
            open_page(page, f"{server.url}/{path}")  # cold: caches fill
            times = [open_page(page, f"{server.url}/{path}") for _ in range(args.repeats)]
            print(f"  {name:28s} {statistics.median(times):5.2f} s  (max {max(times):.2f} s)")
        print(
            f"server peak RSS (VmHWM): {rss:.0f} MiB after training the default model for {args.seconds} s; "
            f"{server.peak_rss_mb():.0f} MiB at the end (all pages visited)"
        )
        browser.close()


if __name__ == "__main__":
    main()
