"""What one Streamlit element adds to a page opened by its link, in a real browser: a bare page (a title
and a line) with each element alone, served with the app's settings, timed from navigation until the
script has finished (benchmarks.page_loads' visit), warm, median of `--repeats`.

    python -m benchmarks.element_costs [--repeats 5] [NAME ...]

A full load fetches and compiles each element's script anew (Streamlit loads them when a page first
draws such an element); issue 28 found the code block's syntax highlighter and the data grid among the
costly ones, which is why text that is not a program is a plain fixed-width block
(ui.shared.plain_text.preformatted) and a few rows a static table.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.app import LAPTOP, AppServer, launch_browser
from benchmarks.page_loads import BARE_PAGE, visit

TABLE = "import pandas as pd\nrows = pd.DataFrame({'a': [1.0, 2.0, 3.0], 'b': ['x', 'y', 'z']})\n"
ELEMENTS = {  # name -> the lines added to the bare page
    "bare": "",
    "code block": "st.code('python -m lab ablation --dataset digits', language='bash')\n",
    "code fence in Markdown": "st.markdown('```\\npython -m lab ablation\\n```')\n",
    "inline code in Markdown": "st.markdown('`python -m lab ablation --dataset digits`')\n",
    "HTML pre": "st.html('<pre>python -m lab ablation</pre>')\n",
    "data grid (st.dataframe)": TABLE + "st.dataframe(rows)\n",
    "static table (st.table)": TABLE + "st.table(rows)\n",
    "data grid in a closed expander": TABLE + "with st.expander('numbers'):\n    st.dataframe(rows)\n",
    "Markdown table": "st.markdown('| a | b |\\n|---|---|\\n| 1 | x |\\n| 2 | y |')\n",
    "plotly chart": "import plotly.graph_objects as go\nst.plotly_chart(go.Figure(go.Scatter(y=[1, 3, 2])))\n",
    "formula (st.latex)": "st.latex(r'h_t = \\tanh(W x_t + U h_{t-1})')\n",
    "multiselect": "st.multiselect('m', ['a', 'b', 'c'], default=['a'])\n",
}


def element_cost(browser, lines, repeats):
    """Median seconds of `repeats` warm visits to the bare page with `lines` added."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "page.py"
        script.write_text(BARE_PAGE + lines)
        with AppServer(folder, script=str(script)) as server:
            page = browser.new_context(viewport=LAPTOP).new_page()
            visit(server, page, "")  # the first visit: the browser's cache filled
            return statistics.median(visit(server, page, "")[0] for _ in range(repeats))


def main():
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="warm visits per element")
    parser.add_argument("names", nargs="*", help="the elements to time (all when none)")
    args = parser.parse_args()
    names = dict.fromkeys(["bare", *(args.names or ELEMENTS)])  # the bare page first, once
    with sync_playwright() as p:
        browser = launch_browser(p)
        seconds = {name: element_cost(browser, ELEMENTS[name], args.repeats) for name in names}
    print(f"| element | warm full load (median of {args.repeats}) | over the bare page |")
    print("|---|---|---|")
    for name, s in seconds.items():
        print(f"| {name} | {s:.2f} s | {s - seconds['bare']:+.2f} s |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
