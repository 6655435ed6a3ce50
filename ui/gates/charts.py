"""The Gates page's charts (Plotly): one gate as a heatmap of tokens against units, a sigmoid gate's
saturation, one unit's value over the text; the tokens along the time axis read like the text."""

import html
import math

import numpy as np
import plotly.graph_objects as go

from lab.instruments.introspect import SATURATION
from ui.shared.coloured_text import chart_piece, gate_range


def _token_axis(pieces, max_labels=70, max_lines=14):
    """Tick positions and labels for T tokens along a time axis.

    Few tokens: every token, labelled with its piece. Many: one tick per line
    of the text, labelled with the line's first characters, so the axis reads
    like the text (evenly thinned when there are many lines).
    """
    if len(pieces) <= max_labels:
        return list(range(len(pieces))), [chart_piece(p) for p in pieces]
    starts = [0] + [t + 1 for t, p in enumerate(pieces[:-1]) if p.endswith("\n")]
    min_gap = math.ceil(len(pieces) / max_lines)  # keep labels about one label-width apart
    kept = []
    for t in starts:
        if not pieces[t].endswith("\n") and (not kept or t - kept[-1] >= min_gap):  # no blank lines
            kept.append(t)
    starts = kept or [0]
    labels = []
    for t in starts:
        line = ""
        for piece in pieces[t:]:
            if piece.endswith("\n") or len(line) > 10:
                break
            line += piece.replace("▁", " ")
        line = line.strip()
        labels.append(html.escape(line if len(line) <= 10 else line[:9] + "…"))
    return starts, labels


def _token_xaxis(pieces):
    """A time axis labelled by _token_axis, slanted when its labels are many."""
    ticks, labels = _token_axis(pieces)
    return dict(
        tickmode="array",
        tickvals=ticks,
        ticktext=labels,
        tickangle=-30 if len(ticks) > 12 else 0,
        tickfont=dict(size=11, family="monospace"),
    )


def gate_heatmap(values, pieces, gate, units, kind=""):
    """Heatmap of one gate (T, H): tokens along x (labelled with pieces), the given units along y, top
    to bottom in the order given (lab.instruments.units.unit_order)."""
    shown = values[:, units].T  # (U, T)
    vmin, vmax, diverging = gate_range(gate, values)
    hover = np.array([chart_piece(p) for p in pieces])[None, :].repeat(shown.shape[0], 0)
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=list(range(len(pieces))),
            y=[f"u{u}" for u in units],
            zmin=vmin,
            zmax=vmax,
            colorscale="RdBu_r" if diverging else "Viridis",
            customdata=hover,
            hovertemplate="token %{x} '%{customdata}'<br>%{y}<br>" + gate + " = %{z:.3f}<extra></extra>",
            colorbar=dict(thickness=10, len=0.9),
        )
    )
    fig.update_layout(
        title=dict(text=f"{gate} · {kind}", font=dict(size=14)),
        height=96 + int(min(max(2.5 * len(units), 184), 640)),  # 64 units in 280 px; more units, taller rows
        margin=dict(l=50, r=10, t=36, b=60),
        xaxis=_token_xaxis(pieces),
        yaxis=dict(title="unit", autorange="reversed", type="category", tickfont=dict(size=9)),
    )
    return fig


def saturation_histogram(values, gate):
    """Histogram of a sigmoid gate's values with the saturated regions (< 0.1, > 0.9) shaded."""
    low, high = SATURATION
    flat = values.ravel()
    share_low, share_high = float((flat < low).mean()), float((flat > high).mean())
    fig = go.Figure(
        go.Histogram(
            x=flat,
            xbins=dict(start=0, end=1, size=0.02),
            marker_color="#6a1b9a",
            histnorm="percent",
            hovertemplate="%{x}: %{y:.1f}%<extra></extra>",
        )
    )
    fig.add_vrect(x0=0, x1=low, fillcolor="#1f77b4", opacity=0.12, line_width=0)
    fig.add_vrect(x0=high, x1=1, fillcolor="#d62728", opacity=0.12, line_width=0)
    fig.update_layout(
        title=dict(
            text=f"{gate}: {share_low:.0%} shut (< {low}) · {share_high:.0%} open (> {high})", font=dict(size=13)
        ),
        height=230,
        margin=dict(l=40, r=10, t=40, b=30),
        xaxis=dict(range=[0, 1], title=f"{gate} value"),
        yaxis=dict(title="% of values"),
        bargap=0.05,
    )
    return fig


def unit_trace_figure(values, pieces, gate, unit):
    """One unit's value over the text, as a line under the coloured text."""
    fig = go.Figure(
        go.Scatter(
            y=values,
            mode="lines+markers",
            marker=dict(size=3),
            line=dict(color="#6a1b9a"),
            customdata=[chart_piece(p) for p in pieces],
            hovertemplate="token %{x} '%{customdata}': %{y:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=230,
        margin=dict(l=40, r=10, t=30, b=60),
        title=dict(text=f"unit {unit} of {gate}", font=dict(size=13)),
        xaxis=_token_xaxis(pieces),
    )
    return fig
