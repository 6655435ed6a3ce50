"""A class of 30, measured (issue 42): 30 students train and show their runs on the class board while a
teacher projects it. How much server time does the board's redraw take, and how slow do the other pages get?

    python -m benchmarks.class_of_30 [--students 30] [--seconds 300] [--repeats 3] [--together 10]

Starts `streamlit run serve.py` (benchmarks.app.AppServer, a temporary user folder, a teacher key) and
drives Debian's chromium:

* the teacher opens the Class page with the key and keeps it open, as on a projector: its fragment redraws
  the board every BOARD_REFRESH_SECONDS;
* a visitor (a browser of its own, at the laptop's 1366x768) times warm visits of Home, Train, Sample, Gates,
  Memory and the first lesson on the idle server (benchmarks.page_loads: navigation -> the script finished;
  one cold visit each first): their idle times;
* then each student, in a browser context of their own (their own cookie: their own space, share and
  cap), opens the Train page with a model of the class's experiment in its URL (the default model with one
  of three cells and three hidden sizes, `--seconds` of training) and presses Start, `--together` students
  at a time (their pages open at once, each presses Start once it is drawn).
  That is the Train page's own path: the run is a lab.server.jobs.TrainingJob in the server's training
  process, admitted by the server's budget (the runs beyond it wait in its queue, as on a real server),
  and the page posts it to the board. Each student comes back as from an earlier lesson: with the cookie
  of a space the server issued and "show my runs on the class board" on under their name, stored as the
  switch stores it (BoardStore.set_student), which the page reads and shows; clicking the switch (tested
  in tests/test_sign_in_browser.py) would cost two more runs of the Train page per student (6-25 s
  on 2 busy cores, load average 9-16). Their pages stay open (a closed tab stops its run), so the server also
  redraws their live charts and answers their heartbeats. Real browsers, not scripted sessions: only a
  browser runs the fragments' timers and the heartbeat whose cost a page puts on the server; the students'
  and the teacher's browser runs at `--browser-nice` (10, as in benchmarks.classroom), below the server, as a
  class's browsers run on their own laptops (at 19 it starved behind the machine's other work at nice 10);
* once every student has pressed Start, the visitor times the same warm visits again (the runs training
  and waiting read from the budget line on Train before and after, with the load average).

The board's redraw is timed inside the server (benchmarks.board_redraws: its script thread's CPU seconds,
on the live jobs' real event logs), each redraw the teacher's page asked for; the figures reported are
those after every student has pressed Start. Prints one Markdown table and the facts around it.
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import board_redraws, page_loads
from benchmarks.app import LAPTOP, ROOT, SCRIPT_DONE, AppServer, launch_browser, open_page
from benchmarks.classroom import first_steps, runs_on_server
from lab.server.board import BoardStore, owner_id
from lab.server.spaces import new_space_key
from ui.lessons import LESSONS
from ui.sessions import SPACE_COOKIE
from ui.train_settings import default_backend, default_values, query_from_values

TEACHER_KEY = "class-of-30-teacher"
PROJECTOR = {"width": 1920, "height": 1080}
WATCHED = ["Home", "Train", "Sample", "Gates", "Memory", f"lesson 1 · {next(iter(LESSONS))}"]
CELLS, HIDDEN = ("rnn", "gru_torch", "lstm"), (64, 128, 256)  # the class's experiment: which matters more?
ENDED = re.compile(r"lab\.server\.jobs: The run .*?: (\w+) after", re.M)
TIMEOUT_MS = 300_000  # a student's page on a server training 30 runs on 2 cores


def student_url(server, n, seconds):
    """The Train page with student n's model in its URL: the default one with their cell and hidden size."""
    cell, hidden = CELLS[n % len(CELLS)], HIDDEN[n // len(CELLS) % len(HIDDEN)]
    values = {**default_values(), "cell": cell, "backend": default_backend(cell, "cpu"), "hidden": hidden}
    query = "&".join(f"{k}={v}" for k, v in query_from_values({**values, "seconds": seconds}).items())
    return f"{server.url}/Train?{query}"


def start_students(browser, server, user_dir, numbers, seconds):
    """Students `numbers` open Train together and each presses Start once their page is drawn: their pages,
    kept open (a page keeps its run). Each comes back with their space's cookie and their board switch on,
    as they left them on an earlier visit."""
    pages = []
    for n in numbers:
        key = new_space_key(user_dir)  # what the server gave their browser on the earlier visit
        BoardStore(user_dir).set_student(owner_id(key), f"Student {n + 1}", on=True)  # what the switch stores
        context = browser.new_context(viewport=LAPTOP)
        context.add_cookies([{"name": SPACE_COOKIE, "value": key, "url": server.url}])
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(student_url(server, n, seconds), wait_until="commit")  # the next one opens meanwhile
        pages.append(page)
    for page in pages:
        page.locator(".st-key-train_board_on input:checked").wait_for(state="attached")  # in "More settings"
        page.wait_for_selector(SCRIPT_DONE)
        page.locator(".st-key-train_start button").click()
    for page in pages:
        page.wait_for_selector(".st-key-train_stop button:enabled")  # started: training, or waiting in the queue
    return pages


def open_teachers_board(browser, server):
    """The teacher's Class page at a projector's size, opened with the teacher key."""
    page = browser.new_context(viewport=PROJECTOR).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    open_page(page, f"{server.url}/Class", timeout_ms=TIMEOUT_MS)
    page.get_by_text("For the teacher").click()
    page.locator(".st-key-class_key input").fill(TEACHER_KEY)
    page.get_by_role("button", name="Open the teacher's view").click()
    page.locator(".st-key-class_open").wait_for()
    return page


def timed_server_env(folder):
    """The server's environment for timing the board's redraws into `folder`/redraws.jsonl: a teacher key, and
    on its PYTHONPATH a folder whose sitecustomize.py imports benchmarks.board_redraws (and the repository, from
    which it imports it) -> (the environment, the log's path)."""
    site, log = Path(folder) / "site", Path(folder) / "redraws.jsonl"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import benchmarks.board_redraws  # noqa: F401\n")
    path = os.pathsep.join(filter(None, [str(site), str(ROOT), os.environ.get("PYTHONPATH")]))
    return {"RNNLAB_TEACHER_KEY": TEACHER_KEY, "PYTHONPATH": path, board_redraws.LOG_VARIABLE: str(log)}, log


def budget_state(server, page):
    """(runs training, runs waiting, one-minute load average), read on a visit of the Train page."""
    page_loads.visit(server, page, "Train")
    return (*runs_on_server(page), os.getloadavg()[0])


def class_of(students, seconds, repeats, together, browser_nice):
    """Run the class -> a dict of what was measured (see main)."""
    from playwright.sync_api import sync_playwright

    page_loads.ONLY[:] = WATCHED  # page_loads' views: these alone
    with tempfile.TemporaryDirectory() as user_dir, tempfile.TemporaryDirectory() as work:
        env, redraw_log = timed_server_env(work)
        with AppServer(user_dir, extra_env=env) as server, sync_playwright() as p:
            class_browser = launch_browser(p, niceness=browser_nice)  # the students' and the teacher's laptops
            visitor = launch_browser(p).new_context(viewport=LAPTOP).new_page()
            open_teachers_board(class_browser, server)
            for _, path in page_loads.views():  # cold: caches fill
                page_loads.visit(server, visitor, path)
            idle = page_loads.warm_visits(server, visitor, repeats)
            idle_load = os.getloadavg()[0]
            print(f"idle, load average {idle_load:.1f}: {idle}", file=sys.stderr, flush=True)  # kept if cut short
            started, pages = time.time(), []
            for first in range(0, students, together):
                numbers = range(first, min(first + together, students))
                pages += start_students(class_browser, server, user_dir, numbers, seconds)
                print(f"{len(pages)} students started, {time.time() - started:.0f} s", file=sys.stderr, flush=True)
            all_started = time.time()
            before = budget_state(server, visitor)
            busy = page_loads.warm_visits(server, visitor, repeats)
            after = budget_state(server, visitor)
            ended = time.time()
            board = BoardStore(user_dir).read()
            log = server.output(None)
        redraws = board_redraws.read(redraw_log)
    return {
        "idle": idle,
        "busy": busy,
        "idle_load": idle_load,
        "before": before,
        "after": after,
        "starting_seconds": all_started - started,
        "busy_seconds": ended - all_started,
        "board": board,
        "idle_redraws": [r for r in redraws if r["at"] < started],
        "busy_redraws": [r for r in redraws if all_started <= r["at"] <= ended],
        "first_steps": len(first_steps(log)),
        "ended": ENDED.findall(log),
    }


def spread(values, unit=" s", digits=2):
    """ "median (max)" of a list, or "none"."""
    if not values:
        return "none"
    return f"{statistics.median(values):.{digits}f}{unit} (max {max(values):.{digits}f}{unit})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--seconds", type=int, default=300, help="each student's training budget")
    parser.add_argument("--repeats", type=int, default=3, help="warm visits per page, idle and busy")
    parser.add_argument("--together", type=int, default=10, help="students who open Train and press Start together")
    parser.add_argument("--browser-nice", type=int, default=10, help="the students' and the teacher's browser's nice")
    args = parser.parse_args()
    r = class_of(args.students, args.seconds, args.repeats, args.together, args.browser_nice)
    busy_redraws, board = r["busy_redraws"], r["board"]
    ended = ", ".join(f"{r['ended'].count(status)} {status}" for status in sorted(set(r["ended"]))) or "none"
    print(
        f"{args.students} students, {args.seconds} s runs: all pressed Start in {r['starting_seconds']:.0f} s; "
        f"{len(board.runs)} runs on the board. Before the busy visits: {r['before'][0]} runs training, "
        f"{r['before'][1]} waiting, load average {r['before'][2]:.1f}; after them ({r['busy_seconds']:.0f} s later): "
        f"{r['after'][0]} training, {r['after'][1]} waiting, load average {r['after'][2]:.1f} (idle: "
        f"{r['idle_load']:.1f}). Runs that had trained a step by the end: {r['first_steps']}; ended: "
        f"{ended}."
    )
    print(
        f"Class board redraws while they trained: {len(busy_redraws)}, server CPU "
        f"{spread([x['cpu'] for x in busy_redraws])}, wall {spread([x['wall'] for x in busy_redraws])}, "
        f"with {spread([x['runs'] for x in busy_redraws], '', 0)} runs and "
        f"{spread([x['points'] for x in busy_redraws], '', 0)} loss points live; "
        f"idle (no run): CPU {spread([x['cpu'] for x in r['idle_redraws']])}"
    )
    print(f"\n| view | idle, warm (median of {args.repeats}) | {args.students} students training | × idle |")
    print("|---|---|---|---|")
    for label, (seconds, _) in r["idle"].items():
        print(f"| {label} | {seconds:.2f} s | {r['busy'][label][0]:.2f} s | {r['busy'][label][0] / seconds:.2f}× |")


if __name__ == "__main__":
    main()
