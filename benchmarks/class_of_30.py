"""A class of 30, measured (issue 42): 30 students train and show their runs on the class board while a
teacher projects it. How much server time does the board's redraw take, and how slow do the other pages get?

    python -m benchmarks.class_of_30 [--students 30] [--seconds 300] [--repeats 5] [--training-paused] [--together 10]

Starts `streamlit run serve.py` (benchmarks.app.AppServer, a temporary user folder, a teacher key), two
Debian chromiums (the teacher's and a visitor's) and the scripted students:

* the teacher opens the Class page with the key and keeps it open, as on a projector: its fragment redraws
  the board every BOARD_REFRESH_SECONDS;
* a visitor (a browser of its own, at the laptop's 1366x768) times warm visits of Home, Train, Sample, Gates,
  Memory and the first lesson on the idle server (benchmarks.page_loads: navigation -> the script finished;
  one cold visit each first): their idle times. A scripted visitor (as the students below) then times the
  server's answer alone: a new session asks for each view and reads its messages to its script's end, drawing
  nothing, as a browser on a laptop of its own (the visitor's Chromium draws on the server's 2 cores);
* then each student opens the Train page with a model of the class's experiment in its URL (the default
  model with one of three cells and three hidden sizes, `--seconds` of training) and presses Start,
  `--together` students at a time. A student is scripted (benchmarks.scripted_student): a Streamlit session
  over the websocket a browser opens, which asks for the page's script runs, presses Start by its key and
  runs the page's timed fragments (the live chart, the heartbeat) as an open tab does, drawing nothing. So
  the server carries 30 open pages, and the 2 cores it is measured on do not also carry 30 Chromiums (31
  browsers there made the load average 46-53, most of it theirs, and starved their own timers). It is the
  Train page's own path: the run is a lab.server.jobs.TrainingJob in the server's training process,
  admitted by the server's budget (the runs beyond it wait in its queue, as on a real server), and the page
  posts it to the board. Each student comes back as from an earlier lesson: with the cookie of a space the
  server issued and "show my runs on the class board" on under their name, stored as the switch stores it
  (BoardStore.set_student), which the page reads (clicking the switch is tested in
  tests/test_sign_in_browser.py). Their pages stay open (a closed tab stops its run); how often they ran
  their fragments is printed;
* once every student has pressed Start, both visitors time the same views again (the runs training and
  waiting read from the budget line on Train before and after, with the load average); with
  `--training-paused` the server's training processes are stopped meanwhile, as if on cores of their own;
* at the end the teacher's board, the whole class on it, is photographed at the projector's size and the
  laptop's (test-artifacts/screenshots/Class-board-30-*.png).

The board's redraw is timed inside the server (benchmarks.board_redraws: its script thread's CPU seconds,
on the live jobs' real event logs), each redraw the teacher's page asked for; the figures reported are
those during the busy visits, after every student has pressed Start. Prints one Markdown table and the
facts around it. tests/test_browser.py drives one scripted student through its run; a class is not run
in the suite (a server and two browsers for a benchmark's plumbing)."""

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from benchmarks import board_redraws, page_loads
from benchmarks.app import LAPTOP, ROOT, AppServer, launch_browser, open_page
from benchmarks.classroom import first_steps, runs_on_server
from benchmarks.scripted_student import ScriptedStudent
from lab.server.board import BoardStore, owner_id
from lab.server.spaces import new_space_key
from ui.lessons import LESSONS
from ui.shared.live_refresh import live_refresh_seconds
from ui.shared.sessions import HEARTBEAT_SECONDS, SPACE_COOKIE
from ui.train.settings import default_backend, default_values, query_from_values

TEACHER_KEY = "class-of-30-teacher"
PROJECTOR = {"width": 1920, "height": 1080}
WATCHED = ["Home", "Train", "Sample", "Gates", "Memory", f"lesson 1 · {next(iter(LESSONS))}"]
CELLS, HIDDEN = ("rnn", "gru_torch", "lstm"), (64, 128, 256)  # the class's experiment: which matters more?
ENDED = re.compile(r"lab\.server\.jobs: The run .*?: (\w+) after", re.M)
LEADERBOARD = '[data-testid="stMain"] table'  # on the Class page: the board's only table
TIMEOUT_S = 300  # a student's page on a server training 30 runs on 2 cores
SHOTS = ROOT / "test-artifacts" / "screenshots"  # the board with the class on it (photograph)


def student_query(n, seconds):
    """The Train page's query string with student n's model: the default one with their cell and hidden size."""
    cell, hidden = CELLS[n % len(CELLS)], HIDDEN[n // len(CELLS) % len(HIDDEN)]
    values = {**default_values(), "cell": cell, "backend": default_backend(cell, "cpu"), "hidden": hidden}
    return urllib.parse.urlencode(query_from_values({**values, "seconds": seconds}))


def start_student(server, user_dir, n, seconds):
    """Student n opens Train and presses Start -> their page, kept open (a page keeps its run). They come
    back with their space's cookie and their board switch on, as they left them on an earlier visit."""
    key = new_space_key(user_dir)  # what the server gave their browser on the earlier visit
    BoardStore(user_dir).set_student(owner_id(key), f"Student {n + 1}", on=True)  # what the switch stores
    student = ScriptedStudent(server.url, "Train", student_query(n, seconds), {SPACE_COOKIE: key})
    student.open(timeout=TIMEOUT_S)
    student.press("train_start", timeout=TIMEOUT_S)
    student.keep_open()
    return student


def open_teachers_board(browser, server):
    """The teacher's Class page at a projector's size, opened with the teacher key."""
    page = browser.new_context(viewport=PROJECTOR).new_page()
    page.set_default_timeout(TIMEOUT_S * 1000)
    open_page(page, f"{server.url}/Class", timeout_ms=TIMEOUT_S * 1000)
    page.get_by_text("For the teacher").click()
    page.locator(".st-key-class_key input").fill(TEACHER_KEY)
    page.get_by_role("button", name="Open the teacher's view").click()
    page.locator(".st-key-class_open").wait_for()
    return page


def photograph(teacher):
    """The teacher's board with the whole class on it, at the projector's size and the laptop's, to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for name, size in (("projector", PROJECTOR), ("laptop", LAPTOP)):
        teacher.set_viewport_size(size)
        teacher.wait_for_timeout(3000)  # the charts redraw at the new width
        teacher.screenshot(path=str(SHOTS / f"Class-board-30-{name}.png"), full_page=True)


def timed_server_env(folder):
    """The server's environment for timing the board's redraws into `folder`/redraws.jsonl: a teacher key, and
    on its PYTHONPATH a folder whose sitecustomize.py imports benchmarks.board_redraws (and the repository, from
    which it imports it) -> (the environment, the log's path)."""
    site, log = Path(folder) / "site", Path(folder) / "redraws.jsonl"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import benchmarks.board_redraws  # noqa: F401\n")
    path = os.pathsep.join(filter(None, [str(site), str(ROOT), os.environ.get("PYTHONPATH")]))
    return {"RNNLAB_TEACHER_KEY": TEACHER_KEY, "PYTHONPATH": path, board_redraws.LOG_VARIABLE: str(log)}, log


def answers(server, key, repeats):
    """{view: the median seconds the server took to answer a visit}: a scripted browser (a new session, as a
    navigation opens) asks for the page and reads its every message to its script's end, drawing nothing. A
    class's browsers draw on laptops of their own; the visitor's Chromium draws on the server's 2 cores."""
    seconds = {}
    for label, path in page_loads.views():
        page, _, query = path.partition("?")
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            ScriptedStudent(server.url, page, query, {SPACE_COOKIE: key}).open(timeout=TIMEOUT_S).close()
            times.append(time.perf_counter() - start)
        seconds[label] = statistics.median(times)
    return seconds


@contextlib.contextmanager
def paused(server_pid):
    """The server's training processes stopped meanwhile (SIGSTOP): as if they trained on cores of their own, so
    that what remains is what the class's open pages cost the server (on 2 cores, a run at the lowest priority
    still slows the pages)."""
    processes = psutil.Process(server_pid).children(recursive=True)
    for process in processes:
        process.suspend()
    try:
        yield
    finally:
        for process in processes:
            process.resume()


def budget_state(server, page):
    """(runs training, runs waiting, one-minute load average), read on a visit of the Train page."""
    page_loads.visit(server, page, "Train")
    return (*runs_on_server(page), os.getloadavg()[0])


def class_of(students, seconds, repeats, together=10, teacher_nice=10, watched=WATCHED, training_paused=False):
    """Run the class -> a dict of what was measured (see main); `watched`: the views timed (page_loads' labels)."""
    from playwright.sync_api import sync_playwright

    page_loads.ONLY[:] = watched  # page_loads' views: these alone
    with tempfile.TemporaryDirectory() as user_dir, tempfile.TemporaryDirectory() as work:
        env, redraw_log = timed_server_env(work)
        with AppServer(user_dir, extra_env=env) as server, sync_playwright() as p:
            visitor = launch_browser(p).new_context(viewport=LAPTOP).new_page()
            teacher = open_teachers_board(launch_browser(p, niceness=teacher_nice), server)
            for _, path in page_loads.views():  # cold: caches fill
                page_loads.visit(server, visitor, path)
            idle = page_loads.warm_visits(server, visitor, repeats)
            visitor_key = new_space_key(user_dir)
            idle_answers = answers(server, visitor_key, repeats)
            idle_load = os.getloadavg()[0]
            print(f"idle, load average {idle_load:.1f}: {idle}", file=sys.stderr, flush=True)  # kept if cut short
            started, pages = time.time(), []
            with ThreadPoolExecutor(together) as class_:  # `together` students open Train and press Start at once
                for student in class_.map(lambda n: start_student(server, user_dir, n, seconds), range(students)):
                    pages.append(student)
                    print(f"{len(pages)} students started, {time.time() - started:.0f} s", file=sys.stderr)
            all_started = time.time()
            fragments = sum(student.ends.count("fragment") for student in pages)
            before = budget_state(server, visitor)
            with paused(server.process.pid) if training_paused else contextlib.nullcontext():
                busy = page_loads.warm_visits(server, visitor, repeats)
                busy_answers = answers(server, visitor_key, repeats)
            after = budget_state(server, visitor)
            ended = time.time()
            fragments = sum(student.ends.count("fragment") for student in pages) - fragments
            board, shown = BoardStore(user_dir).read(), teacher.inner_text(LEADERBOARD)
            photograph(teacher)
            for student in pages:
                student.close()
            log = server.output(None)
        redraws = board_redraws.read(redraw_log)
    return {
        "idle": idle,
        "busy": busy,
        "idle_answers": idle_answers,
        "busy_answers": busy_answers,
        "idle_load": idle_load,
        "before": before,
        "after": after,
        "started": started,
        "all_started": all_started,
        "ended": ended,
        "board": board,
        "shown": shown,
        "redraws": redraws,
        "student_fragments": fragments,  # the students' pages' fragment runs (live chart, heartbeat) meanwhile
        "errors": [error for student in pages for error in student.errors],
        "first_steps": len(first_steps(log)),
        "endings": ENDED.findall(log),
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
    parser.add_argument("--repeats", type=int, default=5, help="warm visits per page, idle and busy")
    parser.add_argument("--together", type=int, default=10, help="students who open Train and press Start together")
    parser.add_argument("--teacher-nice", type=int, default=10, help="the teacher's browser's nice: a laptop's own")
    parser.add_argument(
        "--training-paused", action="store_true", help="pause the training processes during the busy visits"
    )
    args = parser.parse_args()
    r = class_of(
        args.students, args.seconds, args.repeats, args.together, args.teacher_nice, WATCHED, args.training_paused
    )
    busy = [x for x in r["redraws"] if r["all_started"] <= x["at"] <= r["ended"]]
    idle = [x for x in r["redraws"] if x["at"] < r["started"]]
    (training, waiting, load), (training_after, waiting_after, load_after) = r["before"], r["after"]
    starting = r["all_started"] - r["started"]
    endings = ", ".join(f"{r['endings'].count(end)} {end}" for end in sorted(set(r["endings"]))) or "none"
    print(
        f"{args.students} students, {args.seconds} s runs: all pressed Start in {starting:.0f} s, {args.together} at "
        f"a time; {len(r['board'].runs)} runs on the board, "
        f"{r['shown'].count('Student ')} rows on the teacher's leaderboard at the end. Before the busy visits: "
        f"{training} runs training, {waiting} waiting, load average {load:.1f}; after them "
        f"({r['ended'] - r['all_started']:.0f} s later): {training_after} training, {waiting_after} waiting, load "
        f"average {load_after:.1f} (idle visits: {r['idle_load']:.1f}). Runs that trained a step: "
        f"{r['first_steps']}; ended by the end: {endings}. The students' pages ran "
        f"{60 * r['student_fragments'] / args.students / (r['ended'] - r['all_started']):.1f} fragments a minute each "
        f"meanwhile (a heartbeat asks for {60 / HEARTBEAT_SECONDS:.0f}, a live chart for "
        f"{60 / live_refresh_seconds(args.students, False):.0f} with {args.students} watching, or 30 while its run "
        f"trains toward its first point; training paused during the busy visits: {args.training_paused}). "
        f"Errors on their pages: {r['errors'] or 'none'}."
    )
    print(
        f"Class board redraws while they trained: {len(busy)}, server CPU {spread([x['cpu'] for x in busy])}, "
        f"wall {spread([x['wall'] for x in busy])}, with {spread([x['runs'] for x in busy], '', 0)} runs and "
        f"{spread([x['points'] for x in busy], '', 0)} loss points live; idle (no run): CPU "
        f"{spread([x['cpu'] for x in idle])}"
    )
    print(
        f"\n| view | idle, warm (median of {args.repeats}) | {args.students} students training | × idle "
        "| the server's answer, idle | with the class | × idle |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, (seconds, _) in r["idle"].items():
        busy_seconds, answer, busy_answer = r["busy"][label][0], r["idle_answers"][label], r["busy_answers"][label]
        print(
            f"| {label} | {seconds:.2f} s | {busy_seconds:.2f} s | {busy_seconds / seconds:.2f}× | {answer:.2f} s "
            f"| {busy_answer:.2f} s | {busy_answer / answer:.2f}× |"
        )


if __name__ == "__main__":
    main()
