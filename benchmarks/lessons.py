"""Each lesson's load time in a real browser (issue 16): first visit and warm (second and later) visits.

    python -m benchmarks.lessons [--repeats 3]

Starts `streamlit run serve.py` on a free port and drives Debian's /usr/bin/chromium
(benchmarks.app's server and browser). For every lesson of ui.lessons.LESSONS it
opens /Lessons?lesson=<slug> once on a fresh server (cold: models load, caches
fill, the scan lesson times its scans) and then `--repeats` more times in new
browser sessions (warm: cached results), each timed from navigation to the
script's end, and prints the cold time and the warm median and maximum; then
Home's warm time, the same measure of a light page under the same load.
"""

import argparse
import statistics
import tempfile

from benchmarks.app import AppServer, launch_browser, open_page
from ui.lessons import LESSONS


def main():
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="warm visits per lesson")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as user_dir, AppServer(user_dir) as server, sync_playwright() as p:
        browser = launch_browser(p)

        def visit(url):
            """Load `url` in a new browser session (a new page: its own Streamlit session), then close it."""
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            try:
                return open_page(page, url, timeout_ms=120_000)
            finally:
                page.close()

        visit(server.url)  # the server's one-off start-up, counted for no lesson
        print(f"lesson load times (navigation -> script done); warm: median of {args.repeats} (target <= 3 s)")
        for slug in LESSONS:
            url = f"{server.url}/Lessons?lesson={slug}"
            cold = visit(url)
            warm = [visit(url) for _ in range(args.repeats)]
            print(f"  {slug:20s} first {cold:5.2f} s   warm {statistics.median(warm):5.2f} s  (max {max(warm):.2f} s)")
        home = [visit(server.url) for _ in range(args.repeats)]  # the same measure of a light page, same load
        print(
            f"  {'(Home, for scale)':20s}                warm {statistics.median(home):5.2f} s  (max {max(home):.2f} s)"
        )
        browser.close()


if __name__ == "__main__":
    main()
