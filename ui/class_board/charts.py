"""The class board's figures, drawn large for a projector: every run's loss over its seconds, what made the
difference, and the leaderboard as large type (ui.class_board.board computes them once for every page).

Every display name, run name and model name is drawn inert: escaped in HTML and in a chart's text (plotly
reads a few tags); lab.server.board lets through letters, digits and a few marks only.
"""

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.cell_labels import cell_colour, cell_label

BIG = 22  # the charts' type size: read from the back of a classroom
LEADERBOARD_HEIGHT = "22rem"  # beside the chart: the leaders at a glance, the rest a scroll away
NAMED_AT_MOST = 12  # line ends named on the chart; the leaderboard names every run
NAME_BOX = (0.22, 0.08)  # a name's width and height on the chart, as shares of its seconds and its loss spans


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
