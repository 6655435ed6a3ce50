"""The lesson on the selective scan's recurrence, computed by the loop and by the parallel scan."""

import plotly.graph_objects as go
import streamlit as st

from lab.instruments.scans import race_scans
from lab.lessons.stepping import race_sentences
from lab.nets.families import FAMILIES
from ui.lessons.common import background, check_yourself, notice, open_full_page
from ui.shared.chart_style import LEGEND_ABOVE
from ui.shared.common import show_table

SCAN_LENGTHS = [16, 64, 256, 1024, 2048]
SCAN_WIDTHS = [8, 64, 512, 2048]
# lab.instruments.scans.race_scans' columns -> what a student reads
RACE_COLUMNS = {
    "T": "length T",
    "max_abs_diff": "largest difference",
    "sequential_ms": "loop (ms)",
    "parallel_ms": "parallel scan (ms)",
    "speedup": "speed-up of the scan",
}


@st.cache_data(max_entries=16, show_spinner="Timing both scans on this machine…")
def cached_race(hidden, measurement):
    """lab.instruments.scans.race_scans at one width; `measurement` counts the student's re-measurements."""
    return race_scans(SCAN_LENGTHS, hidden=hidden, repeats=3, device="cpu")  # the lesson explains a CPU's race


def a_recurrence_you_can_scan():
    background("scan")
    st.latex(FAMILIES["scan"].latex[-1])
    cols = st.columns([2, 1])
    hidden = cols[0].select_slider("Units H (the width of h)", SCAN_WIDTHS, 64, key="lessons_scan_hidden")
    if cols[1].button("Measure again", key="lessons_scan_again"):
        st.session_state.lessons_scan_measurement = st.session_state.get("lessons_scan_measurement", 0) + 1
    race = cached_race(hidden, st.session_state.get("lessons_scan_measurement", 0))
    fig = go.Figure(
        [
            go.Scatter(x=race["T"], y=race[column], mode="lines+markers", name=name)
            for column, name in (
                ("sequential_ms", "loop"),
                ("parallel_ms", "parallel scan"),
            )
        ]
    )
    fig.update_layout(
        height=320,
        margin=dict(l=60, r=10, t=10, b=40),
        legend=LEGEND_ABOVE,
        xaxis=dict(type="log", title="sequence length T", tickvals=SCAN_LENGTHS),
        yaxis=dict(type="log", title="best of 3, milliseconds", dtick=1),
    )
    st.plotly_chart(fig, key="lessons_scan_chart")
    formats = {"max_abs_diff": "{:.1e}", "sequential_ms": "{:.2f}", "parallel_ms": "{:.2f}", "speedup": "{:.2f}×"}
    show_table(race, RACE_COLUMNS, formats)
    raced = st.session_state.setdefault("lessons_scan_raced", {})  # {H: speed-up at the longest T}, this session's
    raced[hidden] = float(race["speedup"].iloc[-1])
    notice(
        race_sentences(
            race["T"].tolist(),
            race["max_abs_diff"].tolist(),
            race["speedup"].tolist(),
            hidden,
            "this server's CPU",
            dict(raced),
        )
    )
    check_yourself(
        "Why can a GRU not be computed with this parallel scan?",
        "Its gates $z_t$ and $r_t$, and its candidate, depend on $h_{t-1}$, so $h_t$ is a nonlinear "
        "function of $h_{t-1}$. The scan needs $h_t = A_t \\odot h_{t-1} + b_t$, with $A_t$ and the written "
        "term $b_t = B_t \\odot e_t$ known before the recurrence runs, so that steps can be combined in any "
        "grouping (the operator is associative). The selective scan's gates $A_t$ and $B_t$ read only the "
        "input $e_t$.",
    )
    open_full_page(
        "Gates", "Open the Gates page on the bundled scan model (its A and B gates)", model="char-scan_latest"
    )
