"""A class of 30 on two cores, in four scenarios (issue 49): the whole class, their pages open, presses the same
button within a few seconds, as a teacher's "now press ..." makes it. For each: when each student's page shows
its first point and its verdict, how many runs were computed against how many were asked for, how much slower
the server answers another visitor, and the peak memory of the server with its training process.

    python -m benchmarks.class_scenarios --scenario memory-race [--students 30] [--spread 10] [--json]
    python -m benchmarks.class_scenarios --scenario all

Scenarios:
  memory-race  every student presses Memory race on the Train page (its verdict: a gated cell leads)
  start        every student presses Start at the defaults (first point: the first loss on the progress bar;
               verdict: the run's end, saved)
  toy-lesson   every student presses Train in lesson 10 (its verdict: a gated cell off chance)
  mixed        as start, but every third student changes one setting first (the hidden size, each to a value of
               their own): runs of their own

The students are scripted (benchmarks.scripted_student: Streamlit sessions over the websocket a browser opens,
drawing nothing), each with a space of its own, pressing within `--spread` seconds of each other. Their pages
stay open and run their timers (a live chart, the heartbeat) as open tabs do; each notes when its page first
shows the scenario's texts. Times are from each student's own press. The server's answer is a new session's
script run of Home, Train and Sample (benchmarks.class_of_30.answers): five of each idle, then one after another
throughout the class's work, from the first press until every verdict, from a process of its own (Visitor).
answer_vs_idle_max is the largest of the three views' median while the class works against its median idle,
answer_vs_idle_p90 the same of their 90th percentiles (a visit that met the worst moments: a cohort of timers
redrawing at once); answer_vs_idle_by_view each view's median and 90th percentile. Peak memory is the largest sum
of the proportional set sizes of the server and its training process, sampled every 2 s. Runs computed: the runs
whose first step the server's log names (lab.server.jobs).

With `--json` a last line holds one object for the scenario (`--scenario all`: one line per scenario): first_point_s
and verdict_s ({"median", "max"}, None where no student saw it), runs_asked, runs_computed,
answer_vs_idle_max, answer_vs_idle_p90, busy_visits, peak_memory_mb, and forecast_vs_outcome: what the memory
race forecast before Start against what then happened ({pace, call}:
benchmarks.class_scenarios.forecasts_against_outcomes; 1 is exact, within 0.5-2 the issue's 2×).
"""

import argparse
import contextlib
import json
import multiprocessing
import queue
import re
import statistics
import tempfile
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmarks import page_loads
from benchmarks.app import ROOT, AppServer
from benchmarks.class_of_30 import answers
from benchmarks.classroom import first_steps
from benchmarks.scripted_student import ScriptedStudent
from lab.experiments.probe import TOY_CELLS
from lab.server.spaces import new_space_key
from ui.shared.sessions import SPACE_COOKIE

TIMEOUT_S = 300
WATCHED = ["Home", "Train", "Sample"]
GATED = r"(GRU|LSTM)[^:;.]*"  # a gated cell's name, as the pages write it ("the GRU (z keeps)", "the LSTM")


@dataclass(frozen=True)
class Scenario:
    page: str
    button: str
    runs_per_press: int
    first: str  # what a student's page shows at its first point
    verdict: str  # what it shows once its point is made
    query: str = ""
    changed_every: int = 0  # every n-th student changes the hidden size first, each to another value (0: nobody)


SCENARIOS = {
    "memory-race": Scenario(
        "Train", "train_memory_race", len(TOY_CELLS), r"After \d+ s", rf"After [^,]+, the {GATED}leads?:"
    ),
    "start": Scenario("Train", "train_start", 1, r"train loss", r"was saved"),
    "toy-lesson": Scenario(
        "Lessons", "lessons_toy_start", len(TOY_CELLS), r"After \d+ s", rf"off chance: the {GATED}", "lesson=toy-tasks"
    ),
    "mixed": Scenario("Train", "train_start", 1, r"train loss", r"was saved", changed_every=3),
}


# what the memory race says before Start (lab.experiments.memory_race.forecast), and what then happens
FORECASTS = {
    "steps_forecast": r"should take about ([\d,]+) steps? in (\d+) s",  # to the student who starts it
    "call_forecast": r"should be called in about (\d+) s",  # to a student who joins it
    "steps_taken": r"Steps taken: ([^.]*)\.",
}


def number(text):
    return int(text.replace(",", ""))


def forecasts_against_outcomes(pressed, seconds=60):
    """{pace: the runners' steps a second as the page last showed them / the pace forecast to the first student
    (the page says it only when too few to call the race; else, what it computed on this quiet server, its
    training process alone: lab.experiments.memory_race.forecast); call: the largest verdict time / the call time
    forecast, over the students who joined (None where the page did not say)}."""
    from lab.experiments.memory_race import forecast
    from lab.server.capacity import step_lanes

    figures = {"pace": None, "call": None}
    for student, at in pressed:
        if "steps_taken" in student.said:
            steps, said_seconds = student.said.get("steps_forecast", ((None, None), None))[0]
            quiet = forecast(seconds, 0, step_lanes()).steps_each / seconds
            forecast_pace = number(steps) / number(said_seconds) if steps else quiet
            (taken,), when = student.said["steps_taken"]
            pace = statistics.median(number(n) for n in re.findall(r"\d[\d,]*", taken)) / (when - at)
            figures["pace"] = round(pace / forecast_pace, 2)
            break
    calls = [
        (student.seen["verdict"] - at) / max(number(student.said["call_forecast"][0][0]), 1)
        for student, at in pressed
        if "call_forecast" in student.said and "verdict" in student.seen
    ]
    figures["call"] = round(max(calls), 2) if calls else None
    return figures


class PeakMemory:
    """The largest sum of PSS of a process and its children, sampled every `interval` s in a thread."""

    def __init__(self, pid, interval=2.0):
        self.process, self.interval, self.peak_mb = psutil.Process(pid), interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(self.interval):
            total = 0
            for process in [self.process, *self.process.children(recursive=True)]:
                try:
                    total += process.memory_full_info().pss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak_mb


class Visitor:
    """A visitor opening the watched views one after another, each as a new session, from `start` until `stop`:
    the server's answers throughout a class's work -> {view: [seconds, ...]}. It visits from a process of its own,
    as a visitor's browser is not the class's: beside thirty scripted students in one interpreter, its visits
    waited for theirs to read their charts."""

    def __init__(self, server, key):
        context = multiprocessing.get_context("spawn")  # not a fork of a process whose students run threads
        self._stop, self._answers = context.Event(), context.Queue()
        self._process = context.Process(
            target=visit_until, args=(server.url, key, list(page_loads.ONLY), self._stop, self._answers)
        )

    def start(self):
        self._process.start()
        while True:  # ready: its imports done, its first visit next
            with contextlib.suppress(queue.Empty):
                self._answers.get(timeout=1)
                return self
            if not self._process.is_alive():
                raise RuntimeError(f"the visitor's process ended with {self._process.exitcode} before visiting")

    def stop(self):
        self._stop.set()
        seconds = self._answers.get(timeout=TIMEOUT_S)
        self._process.join()
        return seconds


def visit_until(url, key, views, stop, answered):
    """Visit the `views` one after another until `stop` is set, then put {view: [seconds, ...]} on `answered`."""
    page_loads.ONLY[:] = views
    server, seconds = types.SimpleNamespace(url=url), {}
    answered.put("ready")
    while not stop.is_set():
        for view, taken in answers(server, key, 1).items():
            seconds.setdefault(view, []).append(taken)
    answered.put(seconds)


def against_idle(busy, idle, quantile):
    """The largest over views of the `quantile` of their visits while busy against their median idle."""
    return round(max(statistics.quantiles(busy[v], n=10, method="inclusive")[quantile - 1] / idle[v] for v in idle), 2)


def open_page(server, user_dir, scenario, n):
    """Student n opens the scenario's page -> their page (a page that did not answer in TIMEOUT_S is kept with its
    error: student.errors)."""
    query = scenario.query
    if scenario.changed_every and n % scenario.changed_every == 0:
        query = "&".join(filter(None, [query, f"hidden={200 + n}"]))
    student = ScriptedStudent(server.url, scenario.page, query, {SPACE_COOKIE: new_space_key(user_dir)})
    student.watch_for(first=scenario.first, verdict=scenario.verdict, **FORECASTS)
    try:
        student.open(timeout=TIMEOUT_S)
    except (TimeoutError, OSError) as error:  # the websocket's errors are OSErrors
        student.errors.append(f"{type(error).__name__}: {error}")
    return student


def press(student, scenario, start, delay):
    """The student presses the scenario's button `delay` s after `start` -> (their page, when they pressed)."""
    time.sleep(max(start + delay - time.monotonic(), 0))
    pressed = time.monotonic()
    if not student.errors:
        try:
            student.press(scenario.button, timeout=TIMEOUT_S)
            student.keep_open()
        except (TimeoutError, OSError) as error:
            student.errors.append(f"{type(error).__name__}: {error}")
    return student, pressed


def spread(values):
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2)} if values else None


def run(name, students, spread_s, wait_s, app=ROOT):
    """One scenario on a fresh server of the checkout `app` -> its figures (the JSON object)."""
    scenario = SCENARIOS[name]
    page_loads.ONLY[:] = WATCHED
    with tempfile.TemporaryDirectory() as user_dir:
        server = AppServer(user_dir, script=str(Path(app) / "serve.py"), cwd=app)
        try:
            server.wait_healthy(TIMEOUT_S)
            visitor = new_space_key(user_dir)
            answers(server, visitor, 1)  # cold: the caches fill
            idle = answers(server, visitor, 5)
            memory = PeakMemory(server.process.pid)
            delays = [spread_s * n / max(students - 1, 1) for n in range(students)]
            with ThreadPoolExecutor(students) as class_:  # the class has the page open; then the teacher says "press"
                opened = list(class_.map(lambda n: open_page(server, user_dir, scenario, n), range(students)))
                busy, start = Visitor(server, visitor).start(), time.monotonic()
                pressed = list(class_.map(lambda n: press(opened[n], scenario, start, delays[n]), range(students)))
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not all("verdict" in s.seen for s, _ in pressed):
                time.sleep(1)
            busy, peak = busy.stop(), memory.stop()
            for student, _ in pressed:
                student.close()
            log = server.output(None)
        finally:
            server.stop()
    return {
        "scenario": name,
        "students": students,
        "first_point_s": spread([s.seen["first"] - at for s, at in pressed if "first" in s.seen]),
        "verdict_s": spread([s.seen["verdict"] - at for s, at in pressed if "verdict" in s.seen]),
        "saw_verdict": sum("verdict" in s.seen for s, _ in pressed),
        "runs_asked": students * scenario.runs_per_press,
        "runs_computed": len(first_steps(log)),
        "answer_vs_idle_max": against_idle(busy, idle, 5),
        "answer_vs_idle_p90": against_idle(busy, idle, 9),
        "answer_vs_idle_by_view": {v: [against_idle(busy, {v: idle[v]}, q) for q in (5, 9)] for v in idle},
        "busy_visits": sum(map(len, busy.values())),
        "peak_memory_mb": round(peak),
        "forecast_vs_outcome": forecasts_against_outcomes(pressed) if name == "memory-race" else None,
        "errors": sorted({error for s, _ in pressed for error in s.errors}),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--spread", type=float, default=10.0, help="seconds between the first and the last press")
    parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for every verdict after the presses")
    parser.add_argument("--json", action="store_true", help="also print one JSON object per scenario")
    parser.add_argument(
        "--app", default=str(ROOT), help="the checkout whose serve.py is served (another commit: the figures before)"
    )
    args = parser.parse_args()
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    print(
        "| scenario | first point (median, max) | verdict (median, max) | saw it | runs computed / asked | "
        "answer × idle (median, 90%) | peak MB |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    for name in names:  # each printed as it ends: a class is minutes of the cores
        r = run(name, args.students, args.spread, args.wait, args.app)
        print(
            f"| {r['scenario']} | {shown(r['first_point_s'])} | {shown(r['verdict_s'])} | {r['saw_verdict']} of "
            f"{r['students']} | {r['runs_computed']} / {r['runs_asked']} | "
            f"{r['answer_vs_idle_max']:.2f}, {r['answer_vs_idle_p90']:.2f} | "
            f"{r['peak_memory_mb']:,} |",
            flush=True,
        )
        if args.json:
            print(json.dumps(r), flush=True)


def shown(figure):
    return f"{figure['median']:.1f} s, {figure['max']:.1f} s" if figure else "none"


if __name__ == "__main__":
    main()
