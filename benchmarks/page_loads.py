"""Every page and every lesson in a real browser (issue 28): the first visit after the server
starts, a warm visit, a widget change on Gates, Sample and Memory, and the server's CPU seconds
for each.

    python -m benchmarks.page_loads [--repeats 3] [--runs 5]

First a bare Streamlit page (a title and a line) is timed the same way, with the app's own settings:
the floor under every figure. Then starts `streamlit run serve.py` on a free port
(benchmarks.app.AppServer), drives Debian's /usr/bin/chromium at 1366x768 and times each view from
navigation (or the key press) until the script has finished: the app's script state "notRunning"
and Streamlit's status widget gone. Every page is visited once in the sidebar's order (the first
visits: caches empty, the first page also pays the imports), then each lesson once by its link, then
every page and lesson `repeats` times more (warm: a new session each time, the server's caches
full; the median is reported). Warm views are also timed as a student reaches them within the app,
without reloading it (`--in-app-only`: those alone): each page by its link in the sidebar, each
lesson after the first by its "Next lesson" button, from the click until what only the click's run
draws is there and the run has finished. A full load pays what this does not: the browser fetches
and compiles Streamlit's scripts again and opens a new session.
With --runs N, N more students then press Start on the Train page (the default model, each in a
browser context of its own, 15 minutes' budget; their browser runs at nice 19, as a class's students'
browsers run on their own laptops) and the warm visits and widget changes are timed again while their
runs train and their live charts are redrawn, and the bare page again, on a server of its own: what the
busy cores alone leave any page, before the app's interpreter is shared with the runs. CPU seconds
are the server process's user + system time (/proc/PID/stat) over the view, all of its threads
together: what the view cost the server, whatever else ran on the cores.
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from benchmarks.app import (
    LAPTOP,
    SCRIPT_DONE,
    AppServer,
    app_pages,
    click_start_and_time_first_point,
    launch_browser,
    open_page,
    record_script_ends,
)

STATUS_WIDGET = '[data-testid="stStatusWidget"]'
# (page path, what is changed, the element focused (CSS), the key pressed on it, a script whose value the
# change's rerun alters: Streamlit's heartbeat reruns a part of every page every few seconds, so the end
# of a run alone does not say that the change has been drawn)
WIDGET_CHANGES = [
    (
        "Gates",
        "span grown by one character (Shift and the right arrow in the text)",
        ".st-key-gates_span_text .rnnlab-span-text",
        "Shift+ArrowRight",
        """() => document.querySelectorAll('.st-key-gates_span_text span.chosen').length""",
    ),
    (
        "Sample",
        "temperature raised by 0.1",
        ".st-key-sample_temperature_T input",
        "ArrowUp",
        """() => [...document.querySelectorAll('span[title^="p = "]')].map(s => s.title + s.textContent).join()""",
    ),
    (
        "Memory",
        "longest lag down by 8",
        ".st-key-memory_max_lag input",
        "ArrowLeft",
        """() => [...document.querySelectorAll('.js-plotly-plot')]
            .map(c => JSON.stringify((c.data || []).map(t => t.x && (t.x.bdata || t.x.length)))).join()""",
    ),
]


def server_cpu_seconds(server):
    """User + system CPU seconds of the server process so far (every thread)."""
    fields = open(f"/proc/{server.process.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def settled(page, timeout_ms=120_000):
    """Wait until the script has finished and the status widget is gone."""
    page.wait_for_selector(SCRIPT_DONE, timeout=timeout_ms)
    page.wait_for_selector(STATUS_WIDGET, state="detached", timeout=timeout_ms)


def visit(server, page, path):
    """(seconds from navigation to the script finished, server CPU seconds meanwhile)."""
    cpu = server_cpu_seconds(server)
    start = time.perf_counter()
    open_page(page, f"{server.url}/{path}", timeout_ms=180_000)
    settled(page)
    seconds, cpu = time.perf_counter() - start, server_cpu_seconds(server) - cpu
    print(f"/{path}: {seconds:.2f} s, server CPU {cpu:.2f} s", file=sys.stderr, flush=True)  # progress
    return seconds, cpu


def change_widget(server, page, selector, press, drawn_js):
    """Press a key on an element: (seconds until its rerun has changed what `drawn_js` reads and the
    script has finished, server CPU seconds meanwhile)."""
    widget = page.locator(selector).last  # a slider's last thumb, a number's box, the span's text
    widget.wait_for()  # a custom component can be drawn a moment after the script's end
    widget.scroll_into_view_if_needed()
    widget.focus()
    before = page.evaluate(drawn_js)
    cpu = server_cpu_seconds(server)
    start = time.perf_counter()
    widget.press(press)
    if widget.evaluate("e => e.tagName") == "INPUT" and widget.get_attribute("type") != "range":  # a box: Enter
        widget.press("Enter")
    page.wait_for_function(f"before => ({drawn_js})() !== before", arg=before, polling=20, timeout=120_000)
    settled(page)
    return time.perf_counter() - start, server_cpu_seconds(server) - cpu


def click_and_settle(server, page, target, drawn_js, ends):
    """Click `target` (a locator): (seconds until `drawn_js` is true and the server has reported the end
    of the whole page's run the click started, in `ends` (record_script_ends); server CPU seconds
    meanwhile). Not the script state's change to "running" (a quick run's start and end reach the page
    in one redraw), nor the state alone: it read "done" once before the click's run had ended."""
    target.wait_for()
    pages_ended = ends.count("page")
    cpu = server_cpu_seconds(server)
    start = time.perf_counter()
    target.click()
    page.wait_for_function(drawn_js, polling=10, timeout=120_000)
    deadline = start + 120
    while ends.count("page") == pages_ended and time.perf_counter() < deadline:
        page.wait_for_timeout(10)  # the page's messages are read meanwhile
    settled(page)
    return time.perf_counter() - start, server_cpu_seconds(server) - cpu


def in_app_visits(server, page, repeats):
    """{label: medians of `repeats` visits within the app}: a new session on Home, then each page by its
    sidebar link, then on the Lessons page each following lesson by its "Next lesson" button."""
    from ui.lessons import LESSONS

    pages, lessons = app_pages(), list(LESSONS)
    runs, ends = {}, record_script_ends(page)
    for _ in range(repeats):
        visit(server, page, "")
        for path, _ in pages[1:] + pages[:1]:  # Home last, reached from the last page
            link = page.locator(f'[data-testid="stSidebar"] [data-testid="stPageLink"] a[href="{path}"]')
            heading = page.locator('[data-testid="stMain"] h1').first.text_content()
            title = f"document.querySelector('[data-testid=stMain] h1')?.textContent !== {heading!r}"
            runs.setdefault(path or "Home", []).append(
                click_and_settle(server, page, link.first, f"() => {title}", ends)
            )
        visit(server, page, "Lessons")  # a new session: the first lesson
        for number, slug in enumerate(lessons[1:], 2):
            shown = f"document.querySelector('.st-key-lessons_lesson input')?.value.startsWith('{number} · ')"
            button = page.locator(".st-key-lessons_next button")
            runs.setdefault(f"lesson {number} · {slug}", []).append(
                click_and_settle(server, page, button, f"() => {shown}", ends)
            )
    return {label: median_run(r) for label, r in runs.items() if not ONLY or label in ONLY}


ONLY = []  # --only: the labels of the views to time (all when empty)


BARE_PAGE = 'import streamlit as st\n\nst.title("A bare page")\nst.write("One line.")\n'


def bare_page_floor(playwright, repeats):
    """(seconds, server CPU) of a warm visit to a bare Streamlit page, a title and a line, served with
    the app's own settings: what any page costs in this harness, the floor under every figure."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bare.py"
        script.write_text(BARE_PAGE)
        with AppServer(folder, script=str(script)) as server:
            browser = launch_browser(playwright)
            page = browser.new_context(viewport=LAPTOP).new_page()
            visit(server, page, "")
            floor = median_run([visit(server, page, "") for _ in range(repeats)])
            browser.close()
    return floor


def views():
    """(label, url path) of every page, then every lesson by its link (those named by --only)."""
    from ui.lessons import LESSONS

    pages = [(path or "Home", path) for path, _ in app_pages()]
    lessons = [(f"lesson {n} · {slug}", f"Lessons?lesson={slug}") for n, slug in enumerate(LESSONS, 1)]
    return [(label, path) for label, path in pages + lessons if not ONLY or label in ONLY]


def median_run(runs):
    """(median seconds, median CPU seconds) of (seconds, CPU seconds) pairs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def page_visits(server, page, repeats):
    """{label: ((seconds, CPU) of the first visit, the medians of `repeats` warm visits)}."""
    first = {label: visit(server, page, path) for label, path in views()}
    return {
        label: (first[label], median_run([visit(server, page, path) for _ in range(repeats)]))
        for label, path in views()
    }


def widget_changes(server, page, repeats):
    """{what: medians of `repeats` changes}, each on the page just opened (warm if the caller visited it)."""
    changes = {}
    for path, what, selector, press, drawn_js in WIDGET_CHANGES:
        try:  # each change on a page freshly opened (warm): one press, as a student's first
            changes[f"{path}: {what}"] = median_run(
                [
                    visit(server, page, path) and change_widget(server, page, selector, press, drawn_js)
                    for _ in range(repeats)
                ]
            )
        except PlaywrightTimeout as e:  # one change not drawn: say so, keep the other figures
            print(f"{path}: {what}: not drawn ({str(e).splitlines()[0]})", file=sys.stderr)
            changes[f"{path}: {what}"] = (math.nan, math.nan)
    return changes


def start_runs(server, browser, n):
    """N students each press Start on /Train: their pages (kept open: a closed tab stops its run).
    `browser` is theirs, niced (benchmarks.app.launch_browser): what is timed is the server's answer
    while their runs train and their charts are redrawn, not six browsers drawing on the same 2 cores."""
    students = []
    for _ in range(n):
        student = browser.new_context(viewport=LAPTOP).new_page()
        open_page(student, f"{server.url}/Train?seconds=900", timeout_ms=180_000)
        click_start_and_time_first_point(student, timeout_ms=180_000)
        students.append(student)
    return students


def warm_visits(server, page, repeats):
    return {label: median_run([visit(server, page, path) for _ in range(repeats)]) for label, path in views()}


def main():
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="warm visits (and widget changes) per view")
    parser.add_argument("--widgets-only", action="store_true", help="only the widget changes")
    parser.add_argument("--in-app-only", action="store_true", help="only the views reached within the app")
    parser.add_argument("--runs", type=int, default=0, help="then time again with this many runs training")
    parser.add_argument("--only", nargs="+", default=[], help="time only these views (labels as printed)")
    args = parser.parse_args()
    ONLY[:] = args.only
    busy, busy_changes, busy_in_app = {}, {}, {}
    with sync_playwright() as p:
        floor = bare_page_floor(p, args.repeats)
    print(f"A bare Streamlit page (a title and a line): {floor[0]:.2f} s warm, server CPU {floor[1]:.2f} s\n")
    with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_context(viewport=LAPTOP).new_page()
        loads, in_app_only = not (args.widgets_only or args.in_app_only), args.in_app_only
        if in_app_only:
            for _, path in views():  # the first visits, untimed: the views below are warm
                visit(server, page, path)
        visits = page_visits(server, page, args.repeats) if loads else {}
        in_app = {} if args.widgets_only else in_app_visits(server, page, args.repeats)
        changes = {} if in_app_only else widget_changes(server, page, args.repeats)
        if args.runs:
            students = start_runs(server, launch_browser(p, niceness=19), args.runs)
            busy_floor = bare_page_floor(p, args.repeats)  # its own server: the cores' share, not the app's
            print(
                f"A bare Streamlit page, served by a server of its own, with {args.runs} runs training in the app: "
                f"{busy_floor[0]:.2f} s warm ({busy_floor[0] / floor[0]:.1f}× idle), server CPU {busy_floor[1]:.2f} s\n"
            )
            busy = warm_visits(server, page, args.repeats) if loads else {}
            busy_in_app = {} if args.widgets_only else in_app_visits(server, page, args.repeats)
            busy_changes = {} if in_app_only else widget_changes(server, page, args.repeats)
            still = sum(s.locator(".st-key-train_stop button").is_enabled() for s in students)
            print(f"runs still training at the end: {still} of {args.runs}", file=sys.stderr)
        browser.close()
    with_runs = f"warm, {args.runs} runs training" if args.runs else None
    if visits:
        extra = f" {with_runs} (× warm) |" if with_runs else ""
        print(
            f"| view | first visit | warm visit (median of {args.repeats}) |{extra} "
            "server CPU, first | server CPU, warm |"
        )
        print("|---|---|---|---|---|" + ("---|" if with_runs else ""))
        for label, ((t1, c1), (t2, c2)) in visits.items():
            cell = f" {busy[label][0]:.2f} s ({busy[label][0] / t2:.1f}×) |" if with_runs else ""
            print(f"| {label} | {t1:.2f} s | {t2:.2f} s |{cell} {c1:.2f} s | {c2:.2f} s |")
    print_timings("reached within the app", in_app, busy_in_app, args.repeats, with_runs, ratio=True)
    print_timings("widget change", changes, busy_changes, args.repeats, with_runs, ratio=False)


def print_timings(what, idle, busy, repeats, with_runs, ratio):
    """A table of {label: (seconds, CPU)} medians, with the same views' seconds with runs training
    (`busy`, when `with_runs` names them), and their ratio to idle if `ratio`."""
    if not idle:
        return
    extra = f" {with_runs}{' (× idle)' if ratio else ''} |" if with_runs else ""
    print(f"\n| {what} | seconds (median of {repeats}) |{extra} server CPU |")
    print("|---|---|---|" + ("---|" if with_runs else ""))
    for label, (seconds, cpu) in idle.items():
        cell = ""
        if with_runs:
            times = f" ({busy[label][0] / seconds:.1f}×)" if ratio else ""
            cell = f" {busy[label][0]:.2f} s{times} |"
        print(f"| {label} | {seconds:.2f} s |{cell} {cpu:.2f} s |")


if __name__ == "__main__":
    main()
