"""The lesson on the selective scan's recurrence, computed by the loop and by the parallel scan."""

import plotly.graph_objects as go
import streamlit as st

from lab.instruments.scans import race_scans
from lab.nets.cells import CELLS
from ui.common import show_table
from ui.lessons.common import background, check_yourself, notice, open_full_page

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
    return race_scans(SCAN_LENGTHS, hidden=hidden, repeats=3)


def a_recurrence_you_can_scan():
    background("scan")
    st.latex(CELLS["scan"].equations[-1])
    cols = st.columns([2, 1])
    hidden = cols[0].select_slider("Units H (the width of h)", SCAN_WIDTHS, 64, key="lessons_scan_hidden")
    if cols[1].button("Measure again", key="lessons_scan_again"):
        st.session_state.lessons_scan_measurement = st.session_state.get("lessons_scan_measurement", 0) + 1
    race = cached_race(hidden, st.session_state.get("lessons_scan_measurement", 0))
    fig = go.Figure(
        [
            go.Scatter(x=race["T"], y=race[column], mode="lines+markers", name=name)
            for column, name in (
                ("sequential_ms", "loop (scan_sequential)"),
                ("parallel_ms", "parallel scan (scan_parallel)"),
            )
        ]
    )
    fig.update_layout(
        height=320,
        margin=dict(l=60, r=10, t=10, b=40),
        legend=dict(orientation="h", y=-0.25),
        xaxis=dict(type="log", title="sequence length T", tickvals=SCAN_LENGTHS),
        yaxis=dict(type="log", title="best of 3, milliseconds", dtick=1),
    )
    st.plotly_chart(fig, key="lessons_scan_chart")
    formats = {"max_abs_diff": "{:.1e}", "sequential_ms": "{:.2f}", "parallel_ms": "{:.2f}", "speedup": "{:.2f}×"}
    show_table(race, RACE_COLUMNS, formats)
    worst = race["max_abs_diff"].max()
    wins = race.loc[race["speedup"] > 1, "T"].tolist()
    longest = race.iloc[-1]
    longest_T = int(longest["T"])
    if not wins:
        verdict = (
            f"the loop wins at every length measured: at T = {longest_T} the parallel scan takes "
            f"{1 / longest['speedup']:.1f}× as long"
        )
    elif len(wins) == len(race):
        verdict = f"the parallel scan wins at every length, {longest['speedup']:.1f}× faster at T = {longest_T}"
    else:
        verdict = (
            f"the parallel scan wins at T = {', '.join(map(str, wins))} and the loop at the other lengths "
            f"(at T = {longest_T}: {longest['speedup']:.2f}× the loop's speed)"
        )
    notice(
        f"Both ways give the same $h_t$: the largest difference over every T is **{worst:.1e}**, float32 "
        f"rounding (the lesson's bar: 1e-5). With H = {hidden} units, on this server's CPU, **{verdict}**.\n\n"
        "Why it goes both ways on a CPU: the loop pays a fixed cost for each of its T steps, and the parallel "
        "scan does log₂T rounds over the whole sequence, about log₂T times more arithmetic. With few units the "
        "fixed cost per step dominates and the scan wins; with many units, arithmetic on a few cores dominates "
        "and the loop wins. On a GPU each round spreads over thousands of cores, while the loop's T steps "
        "must wait for each other: the scan wins, which is why Mamba-style models use it. It works only "
        "because $A_t$ and $B_t$ depend on the input, never on $h$: a GRU's gates read $h_{t-1}$, so it "
        "cannot be scanned. These timings were measured on a shared machine; press *Measure again* to see "
        "how much they move."
    )
    check_yourself(
        "Why can a GRU not be computed with this parallel scan?",
        "Its gates $z_t$ and $r_t$, and its candidate, depend on $h_{t-1}$, so $h_t$ is a nonlinear "
        "function of $h_{t-1}$. The scan needs $h_t = A_t h_{t-1} + B_t$ with $A_t$ and $B_t$ known "
        "before the recurrence runs, so that steps can be combined in any grouping (the operator is "
        "associative). The selective scan's gates read only the input $e_t$.",
    )
    open_full_page(
        "Gates", "Open the Gates page on the bundled scan model (its A and B gates)", model="char-scan_latest"
    )
