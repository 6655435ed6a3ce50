"""Six students press the heaviest buttons of the app at once (issue 26): two run the Memory page's
probe, two the toy-tasks lesson, two the Ablation page's live study. Does the server's budget count
every run, and does a seventh student's page stay within 2x its idle load?

    python -m benchmarks.six_students [--repeats 3]

Starts `streamlit run serve.py` on a free port (user files in a temporary folder). The six students'
browsers run at nice 10 (in a class each runs on its own machine). A watcher, in a context of its
own, loads Home and Sample idle (after one cold visit each), then the six press their buttons one
after the other as fast as Playwright clicks, and the watcher reads the budget line on its Train
page (runs counted, MB in use, runs waiting) and loads Home and Sample again while they train.
Prints one Markdown table; every wait is capped and the server and browser stop at the end.
"""

import argparse
import sys
import tempfile
import time

from benchmarks.app import LAPTOP, AppServer, launch_browser, open_page, page_load
from benchmarks.classroom import budget_line

# (what a student does, the page, the button): two of each
BUTTONS = [
    ("Memory probe", "Memory", ".st-key-memory_probe_run button"),
    ("toy tasks lesson", "Lessons?lesson=toy-tasks", ".st-key-lessons_toy_start button"),
    ("live ablation", "Ablation", "button:has-text('Train both arms')"),
] * 2


def budget(page, url):
    """(MB in use, MB in all, runs training, runs waiting), read on the Train page."""
    open_page(page, f"{url}/Train")
    return budget_line(page)


def main():
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="loads of each page, idle and during (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
        watcher = launch_browser(p).new_context(viewport=LAPTOP).new_page()
        idle = {}
        for name in ("", "Sample"):
            open_page(watcher, f"{server.url}/{name}")  # cold: the caches fill
            idle[name or "Home"] = page_load(watcher, f"{server.url}/{name}", args.repeats)
        students = launch_browser(p, niceness=10)
        opened = []
        for what, path, button in BUTTONS:  # every page open first, so that the six presses come together
            student = students.new_context(viewport=LAPTOP).new_page()
            student.set_default_timeout(180_000)
            open_page(student, f"{server.url}/{path}", timeout_ms=180_000)
            opened.append((what, student.locator(button).first))
        for what, button in opened:
            button.click()
            print(f"{what}: pressed", file=sys.stderr, flush=True)
        time.sleep(3)  # the last presses reach the server
        counted = budget(watcher, server.url)
        during = {name or "Home": page_load(watcher, f"{server.url}/{name}", args.repeats) for name in ("", "Sample")}
        after = budget(watcher, server.url)
        students.close()
    used, capacity, training, waiting = counted
    print(
        f"Budget with the six pressed: {used:,.0f} of {capacity:,.0f} MB, {training} runs training, {waiting} waiting"
    )
    print(f"Budget after the watcher's loads: {after[0]:,.0f} MB, {after[2]} runs training, {after[3]} waiting\n")
    print(f"| watcher's page | idle (median of {args.repeats}) | six students' runs | × idle |")
    print("|---|---|---|---|")
    for name, seconds in idle.items():
        print(f"| {name} | {seconds:.2f} s | {during[name]:.2f} s | {during[name] / seconds:.1f}× |")


if __name__ == "__main__":
    main()
