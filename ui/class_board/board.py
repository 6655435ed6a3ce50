"""The Class page's class board (lab.server.board holds its store and its arithmetic; ui.shared.board the
runs this server posted): its chart, leaderboard at equal time and what made the difference, drawn large
for a projector, and the teacher's controls.

Every display name, run name and model name is drawn inert: escaped in HTML, in a chart's text (plotly
reads a few tags), plain in a table (lab.server.board lets through letters, digits and a few marks only).
"""

import html
import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from lab.server.board import equal_time, leaderboard
from lab.settings import server_settings
from lab.words import count
from ui.cell_labels import cell_colour, cell_label
from ui.shared.board import board_runs, store
from ui.shared.sign_in import try_teacher_key

BOARD_REFRESH_SECONDS = 5.0  # the board redraws its live runs this often
BIG = 22  # the charts' type size: read from the back of a classroom
LEADERBOARD_HEIGHT = "22rem"  # beside the chart: the leaders at a glance, the rest a scroll away
NAMED_AT_MOST = 12  # line ends named on the chart; the leaderboard names every run
NAME_BOX = (0.22, 0.08)  # a name's width and height on the chart, as shares of its seconds and its loss spans


def shown_runs(board):
    """The board's runs not hidden by the teacher and trained by this server, as rows, each read up to
    its job's latest events; and how many of the board's runs this server has no losses for."""
    runs = board_runs()
    rows, missing = [], 0
    with runs["lock"]:
        for stale in set(runs["jobs"]) - set(board.runs):  # taken off the board by their student
            del runs["jobs"][stale], runs["curves"][stale]
        for run_id, run in board.runs.items():
            if run.hidden_by_teacher:
                continue
            job = runs["jobs"].get(run_id)
            if job is None:  # started before this server did
                missing += 1
                continue
            curve = runs["curves"][run_id]
            curve.extend(job.events(curve.cursor), job.task.chars_per_token)
            rows.append({"id": run_id, "who": board.students[run.owner].name, "run": run, "curve": curve})
    return rows, missing


def table(rows, at_seconds):
    """The leaderboard at `at_seconds` as a DataFrame, best first, indexed by run id (its columns are the
    CSV's)."""
    by_id = {row["id"]: row for row in rows}
    ranked = leaderboard({row["id"]: row["curve"] for row in rows}, at_seconds)
    records = []
    for rank, (run_id, loss) in enumerate(ranked, start=1):
        row, run = by_id[run_id], by_id[run_id]["run"]
        records.append(
            {
                "rank": rank if loss is not None else None,
                "name": row["who"],
                "model": row["run"].title,
                "cell": cell_label(run.cell),
                "hidden size": run.hidden,
                "layers": run.layers,
                "learning rate": run.lr,
                "parameters": run.params,
                f"loss at {seconds_text(at_seconds)}": loss,
                "final loss": row["curve"].final_loss(),
                "seconds trained": round(row["curve"].reached(), 1),
                "run": run.run,
            }
        )
    return pd.DataFrame(records, index=[run_id for run_id, _ in ranked])


def _big(figure, height):
    figure.update_layout(
        height=height,
        font={"size": BIG},
        margin={"l": 80, "r": 40, "t": 50, "b": 70},
        legend={"font": {"size": BIG}, "orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        plot_bgcolor="white",
    )
    figure.update_xaxes(gridcolor="#e5e5e5", title_font={"size": BIG}, tickfont={"size": BIG - 2})
    figure.update_yaxes(gridcolor="#e5e5e5", title_font={"size": BIG}, tickfont={"size": BIG - 2})
    return figure


def by_family(rows):
    """The rows grouped by cell family, in a steady order: a chart draws one trace per family (plotly
    builds and checks every trace in Python, and 30 traces of their own took a second of the server's)."""
    families = {}
    for row in rows:
        families.setdefault(row["run"].cell, []).append(row)
    return sorted(families.items())


def spaced_names(ends, x_span, y_span, box=NAME_BOX):
    """Which line ends get their student's name: `ends` maps a run to where its line ends (seconds, loss),
    best run first. A name is written where its box (`box`: shares of the chart's spans) overlaps none
    written before it, up to NAMED_AT_MOST: the leaders are named, and lines ending together get one
    name, not a smudge of them."""
    width, height = box[0] * (x_span or 1.0), box[1] * (y_span or 1.0)
    named = []
    for run_id, (x, y) in ends.items():
        if len(named) == NAMED_AT_MOST:
            break
        if all(abs(x - ends[other][0]) >= width or abs(y - ends[other][1]) >= height for other in named):
            named.append(run_id)
    return named


def loss_chart(rows, at_seconds, ranked):
    """Every run's loss over its seconds of training, one colour per cell family, the lines of the best runs
    in `ranked` order ending in their student's name where it has room (spaced_names); a dashed line where
    the leaderboard compares them."""
    figure = go.Figure()
    ys_shown = []
    for cell, family in by_family(rows):
        xs, ys, texts = [], [], []
        for row in family:  # one trace for the family: its runs' lines apart, with a gap (NaN) between
            x, y = row["curve"].points()
            xs += [*x, math.nan]
            ys += [*y, math.nan]
            ys_shown += y
            texts += [html.escape(f"{row['who']} · {row['run'].title}")] * (len(x) + 1)
        figure.add_trace(
            go.Scatter(  # arrays, which plotly takes whole, where it checks a list's values one by one
                x=np.array(xs),
                y=np.array(ys),
                mode="lines",
                line={"color": cell_colour(cell), "width": 3},
                name=cell_label(cell),
                hovertext=np.array(texts, dtype=object),
                hoverinfo="text+y",
            )
        )
    by_id = {row["id"]: row for row in rows}
    ends = {
        run_id: (by_id[run_id]["curve"].reached(), by_id[run_id]["curve"].final_loss())
        for run_id in ranked
        if by_id[run_id]["curve"].elapsed
    }
    x_span = max((x for x, _ in ends.values()), default=0.0)
    y_span = max(ys_shown, default=0.0) - min(ys_shown, default=0.0)
    for run_id in spaced_names(ends, x_span, y_span):
        x, y = ends[run_id]
        text = html.escape(by_id[run_id]["who"])
        figure.add_annotation(x=x, y=y, text=text, showarrow=False, xanchor="left", xshift=6)
    if at_seconds:
        figure.add_vline(x=at_seconds, line={"dash": "dash", "color": "#555555", "width": 2})
    figure.update_xaxes(title="seconds of training", rangemode="tozero")
    figure.update_yaxes(title="loss (nats per character)")
    figure.update_layout(showlegend=True)  # plotly hides the legend of one trace: one family's colour is named too
    return _big(figure, 440)


def difference_chart(rows):
    """Final loss against hidden size, cell and learning rate: one dot per run, coloured by its cell."""
    figure = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=("hidden size", "cell", "learning rate"))
    for cell, family in by_family(rows):
        ended = [(row, row["curve"].final_loss()) for row in family]
        ended = [(row, loss) for row, loss in ended if loss is not None]
        texts = [html.escape(f"{row['who']} · {row['run'].title}") for row, _ in ended]
        for col, read in ((1, lambda run: run.hidden), (2, lambda run: cell_label(run.cell)), (3, lambda run: run.lr)):
            figure.add_trace(
                go.Scatter(
                    x=[read(row["run"]) for row, _ in ended],
                    y=[loss for _, loss in ended],
                    mode="markers",
                    marker={"color": cell_colour(cell), "size": 18, "line": {"width": 1}},
                    hovertext=texts,
                    hoverinfo="text+y",
                    showlegend=False,
                ),
                row=1,
                col=col,
            )
    figure.update_xaxes(type="log", row=1, col=1)
    figure.update_xaxes(type="log", row=1, col=3)
    figure.update_yaxes(title="final loss", row=1, col=1)
    figure.update_annotations(font={"size": BIG})
    return _big(figure, 380)


def leaderboard_html(frame, at_column):
    """The leaderboard as large type for a projector, one row per run: its rank, its student's name and the
    model in smaller type (beneath the name where the column is narrow), its loss; the learning rate is in
    the CSV and the chart below. Every value is escaped, so a name is only its text. It fits the column the
    board leaves it on a laptop, every loss in view, and scrolls past LEADERBOARD_HEIGHT under its heading."""
    cell = "padding:0.3rem 1rem 0.3rem 0;text-align:left;vertical-align:baseline"
    heading = f"{cell};white-space:nowrap;position:sticky;top:0;background:white"
    head = "".join(f"<th style='{heading}'>{c}</th>" for c in ("rank", "student", "loss"))
    body = []
    for _, row in frame.iterrows():
        loss = row[at_column]
        rank = "" if pd.isna(row["rank"]) else f"{int(row['rank'])}"
        who = (  # the model as one block: beside the name, or whole on the line below
            f"{html.escape(row['name'])} <span style='display:inline-block;font-size:0.75em;opacity:0.7'>"
            f"{html.escape(row['model'])}</span>"
        )
        score = "not there yet" if pd.isna(loss) else f"{loss:.3f}"
        body.append(
            f"<tr><td style='{cell}'>{rank}</td><td style='{cell};overflow-wrap:anywhere'>{who}</td>"
            f"<td style='{cell}'>{score}</td></tr>"
        )
    return (
        f"<div style='overflow:auto;max-height:{LEADERBOARD_HEIGHT}'>"
        "<table style='font-size:1.3rem;border-collapse:collapse'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


class Redraw(NamedTuple):
    at: float  # the seconds of training the leaderboard compares at
    table: pd.DataFrame  # the leaderboard, best first (the CSV)
    chart: go.Figure  # every run's loss over its seconds
    leaderboard: str  # the leaderboard's HTML
    difference: go.Figure  # final loss against hidden size, cell and learning rate


def redraw(rows, at_seconds):
    """What one redraw of the board computes from its runs' rows (live_board lays it out;
    benchmarks.class_board times it). `at_seconds`: 0 for the time every run has reached."""
    at = at_seconds or equal_time([row["curve"] for row in rows]) or 0.0
    frame = table(rows, at)
    chart = loss_chart(rows, at, list(frame.index))  # the names go to the best runs first
    return Redraw(at, frame, chart, leaderboard_html(frame, frame.columns[8]), difference_chart(rows))


def live_board(at_seconds, teacher):
    """The board itself: the chart, the leaderboard at equal time and what made the difference (every
    visitor who may see it sees the same), and for the `teacher` the table as a CSV file. `at_seconds`:
    0 for the time every run has reached."""
    board = store().read()
    rows, missing = shown_runs(board)
    if missing:
        st.caption(f"{missing} of the runs shown before this server last started have no losses here.")
    if not rows:
        st.info(
            "No runs on the board yet: students turn on “Show my runs on the class board” on the Train page, "
            "then press Start."
        )
        return None
    drawn = redraw(rows, at_seconds)
    chart_column, board_column = st.columns([3, 2], gap="medium")  # both on one projected screen
    chart_column.plotly_chart(drawn.chart, key="class_chart", width="stretch")
    with board_column:
        which = "the time every run shown has reached" if not at_seconds else "the time chosen above"
        st.subheader(f"Leaderboard at {seconds_text(drawn.at)} of training")
        runs = len(drawn.table)
        st.caption(
            f"Each run's loss after the same seconds of training ({which}): the fair race on a shared server. "
            f"{count(runs, 'run')}{', the best first' if runs > 1 else ''}."
        )
        st.html(drawn.leaderboard)
        if teacher:
            st.download_button(
                "Download the table (CSV)",
                drawn.table.to_csv(index=False).encode(),
                file_name="class-board.csv",
                mime="text/csv",
                key="class_csv",
                on_click="ignore",
            )
    st.subheader("What made the difference?")
    st.caption("Each run's final loss (its last tenth of training) against its hidden size, cell and learning rate.")
    st.plotly_chart(drawn.difference, key="class_difference", width="stretch")


def seconds_text(seconds):
    """12 s, 2.3 s: whole seconds once there are ten of them."""
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def teacher_controls(board):
    """The teacher's view: open the board to the class, hide runs from it. Each widget writes the board's
    file only when the teacher changes it, so two teachers' pages never undo each other's choices."""
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    left.toggle(
        "Open the board to the class",
        value=board.open,
        key="class_open",
        on_change=lambda: store().set_open(st.session_state.class_open),
        help="Students then see this board on their Class page, read-only: no hiding, no download.",
    )
    names = {run_id: f"{board.students[run.owner].name} · {run.run}" for run_id, run in board.runs.items()}
    right.multiselect(
        "Hidden runs",
        list(names),
        default=[run_id for run_id, run in board.runs.items() if run.hidden_by_teacher],
        format_func=names.get,
        key="class_hidden",
        on_change=_save_hidden,
        placeholder="none: every run shown is on the board",
    )


def _save_hidden():
    chosen, runs = set(st.session_state.class_hidden), store().read().runs
    for run_id, run in runs.items():
        if run.hidden_by_teacher != (run_id in chosen):
            store().hide(run_id, run_id in chosen)


def teacher_key_set():
    return server_settings().teacher_key is not None


def teacher_key_box():
    """For whoever is no teacher yet, where a teacher key is set: the box to type it in."""
    with st.expander("For the teacher"), st.form("class_key_form", border=False):
        typed = st.text_input("Teacher key", type="password", max_chars=128, key="class_key")
        if st.form_submit_button("Open the teacher's view"):
            if try_teacher_key(typed):
                st.rerun()
            st.error("That is not this server's teacher key.")
