"""What a page costs the server and what it sends the browser, without a browser: each page run in
Streamlit's AppTest (the server's own Python), once cold and then warm, with the size of the charts
it sends.

    python -m benchmarks.page_weight [--root DIR] [--runs 3] [PAGE ...]
    py-spy record --format raw -o gates.txt -- python -m benchmarks.page_weight Gates   # where the time goes

For every page (Home and the sidebar's pages, or those named): the first run's seconds (imports and
caches filling), the median of `--runs` warm runs in fresh sessions, how many Plotly charts it draws
and their JSON in kB (what the browser parses and draws: issue 28 found Gates' weight there), and
how many elements it renders. `--root` points at another checkout of the app (e.g. a `git worktree`
of an older commit) to measure the same pages before a change; this script imports nothing of the
app itself, so the checkout's own `lab` and `ui` are the ones measured.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

PAGES = ["Home", "Train", "Sample", "Gates", "Memory", "Checkpoints", "Ablation", "Lessons"]


def page_script(root, name):
    if name == "Home":
        return None
    return next(str(p.relative_to(root)) for p in sorted((root / "pages").glob("*.py")) if p.stem.endswith(name))


def elements(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from elements(child)


def run(root, script):
    """(seconds, Plotly charts, their JSON bytes, elements) of one run of `script` in a new session."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(root / "app.py"), default_timeout=300)
    if script:
        at.switch_page(script)
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"{script or 'Home'}: {at.exception[0].value}")
    nodes = list(elements(at.main))
    charts = [n for n in nodes if getattr(n, "type", None) == "plotly_chart"]
    return seconds, len(charts), sum(len(c.proto.spec) for c in charts), len(nodes)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", default=PAGES, help=f"pages to measure (default: {' '.join(PAGES)})")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the app's checkout")
    parser.add_argument("--runs", type=int, default=3, help="warm runs per page (median)")
    args = parser.parse_args()
    root = args.root.resolve()
    os.chdir(root)
    sys.path.insert(0, str(root))
    print("| page | first run | warm run (median) | Plotly charts | their JSON | elements |")
    print("|---|---|---|---|---|---|")
    for name in args.pages:
        script = page_script(root, name)
        first = run(root, script)
        warm = [run(root, script) for _ in range(args.runs)]
        seconds = statistics.median(w[0] for w in warm)
        _, charts, spec_bytes, count = warm[-1]
        print(f"| {name} | {first[0]:.2f} s | {seconds:.2f} s | {charts} | {spec_bytes / 1000:,.0f} kB | {count} |")


if __name__ == "__main__":
    main()
