"""The Sample page's next-token bars as you type (issue 41): the server's time per key press.

    python -m benchmarks.typing_keys [--keys 40]

First the model's own part, in this process: each bundled model reads the default typed text, then one
more character per key press from the carried state (lab.instruments.prediction.TypingReader), and the
median and slowest milliseconds per press are printed. Then the whole path: `streamlit run serve.py` on
a free port, Debian's /usr/bin/chromium at 1366x768 on the Sample page, `--keys` key presses into its
typing box, one at a time, each waiting until the bars answer the text as it now is. For each press: the
server process's CPU seconds (user + system, every thread, /proc/PID/stat) over it, what the press cost
the server whatever else shared the cores, and the wall time from the press until the answer is drawn.
"""

import argparse
import statistics
import tempfile
import time

from benchmarks.app import LAPTOP, AppServer, launch_browser, open_page
from benchmarks.page_loads import server_cpu_seconds
from lab.instruments.prediction import TypingReader
from lab.training.checkpoints import list_checkpoints, load_checkpoint
from ui.sample.views import DEFAULTS

BOX = ".st-key-sample_typing_box"
ANSWERED_JS = f"""text => {{
    const root = document.querySelector('{BOX} .rnnlab-typing');
    return root && root.querySelector('textarea').value === text
        && !root.querySelector('.rnnlab-typing-bars').classList.contains('stale')
        && root.querySelector('.rnnlab-typing-note').textContent.includes('new token');
}}"""
TYPED = "and then he said that all the world is but a stage and we are players "


def model_milliseconds(keys):
    """{checkpoint name: (median, slowest) ms per key press} of each bundled model's reader."""
    figures = {}
    for info in list_checkpoints():
        checkpoint = load_checkpoint(info.path)
        reader = TypingReader(checkpoint.model, checkpoint.tokenizer)
        text = DEFAULTS["typed"]
        reader.read(text)
        times = []
        for c in (TYPED * 2)[:keys]:
            text += c
            start = time.perf_counter()
            reader.read(text)
            times.append((time.perf_counter() - start) * 1000)
        figures[info.name] = (statistics.median(times), max(times))
    return figures


def page_milliseconds(keys):
    """(server CPU ms per press, wall ms per press): lists over `keys` presses on the Sample page."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_context(viewport=LAPTOP).new_page()
        page.set_default_timeout(60_000)
        open_page(page, f"{server.url}/Sample")
        page.get_by_role("tab", name="Type and watch").click()  # the page's fourth tab
        box = page.locator(f"{BOX} textarea")
        box.scroll_into_view_if_needed()
        box.click()
        box.press("End")
        text = box.input_value()
        cpu, wall = [], []
        for c in (TYPED * 2)[:keys]:
            text += c
            before, start = server_cpu_seconds(server), time.perf_counter()
            box.press("Space" if c == " " else c)
            page.wait_for_function(ANSWERED_JS, arg=text)
            wall.append((time.perf_counter() - start) * 1000)
            page.wait_for_timeout(150)  # the server's last messages of the run, counted with it
            cpu.append((server_cpu_seconds(server) - before) * 1000)
        browser.close()
    return cpu, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=40)
    args = parser.parse_args()
    print("| model | median ms per key press | slowest |")
    print("|---|---|---|")
    for name, (median, slowest) in model_milliseconds(args.keys).items():
        print(f"| {name} | {median:.1f} | {slowest:.1f} |")
    cpu, wall = page_milliseconds(args.keys)
    print(f"\nSample page, {args.keys} key presses, the default model:")
    print(f"server CPU per press: median {statistics.median(cpu):.0f} ms, slowest {max(cpu):.0f} ms")
    print(f"press to bars drawn: median {statistics.median(wall):.0f} ms, slowest {max(wall):.0f} ms")


if __name__ == "__main__":
    main()
