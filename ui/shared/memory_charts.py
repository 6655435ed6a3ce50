"""The Memory page's charts (Plotly), shared with the memory lessons: how many units keep more than half
after k steps, one layer's retention as a band over its units, g**k for a constant keep gate, the
gradient through time, the memory probe's accuracy against distance. The numbers come from
lab.instruments.memory and lab.experiments.probe; the sentences that read them from lab.lessons.memory."""

import html
import math

import numpy as np
import plotly.graph_objects as go

from lab.instruments.memory import MEMORY_SPANS, constant_gate_retention
from lab.lessons.memory import CHART_FLOOR
from lab.lessons.toys import chance_words
from lab.words import count, listing
from ui.cell_labels import cell_colour, cell_label
from ui.shared.chart_style import LEGEND_ABOVE, LEGEND_BELOW


def memory_spread_figure(curves, spans=MEMORY_SPANS):
    """The share of units that still keep more than half after k steps, against k (log-log), one line
    per layer: where a line ends, no unit keeps half that long. curves: list of (name, cell, Retention)."""
    fig = go.Figure()
    for n, (name, cell, r) in enumerate(curves):
        deeper = n > 0 and curves[n - 1][1] == cell  # a second layer of the same model: dashed
        share = (r.unit_half_lives[None, :] > r.lags[:, None]).mean(1)  # (K,)
        fig.add_trace(
            go.Scatter(
                x=r.lags,
                y=np.where(share > 0, share, np.nan),  # a log axis has no 0: the line ends there
                mode="lines",
                name=name,
                line=dict(color=cell_colour(cell), width=2.5, dash="dash" if deeper else None),
                hovertemplate="after %{x} steps: %{y:.1%} of the units<extra>" + html.escape(name) + "</extra>",
            )
        )
    guides(fig, spans, log_x=True)
    fig.update_layout(
        height=380,
        margin=dict(l=60, r=10, t=30, b=40),
        xaxis=dict(type="log", title="k: units still keeping more than half of what they held after k tokens"),
        yaxis=dict(type="log", title="share of the units", tickformat=".1%"),
        legend=LEGEND_BELOW,  # the guides' labels are above the plot
    )
    return fig


def guides(fig, spans, log_x, unit="token"):
    """A dotted line at each k of `spans`, labelled at its top in `unit`s. Plotly places a shape at its data
    value on a log axis too, but an annotation there in log10 units: each is given what it reads."""
    for k in spans:
        fig.add_vline(x=k, line=dict(color="#999", dash="dot", width=1))
        fig.add_annotation(
            x=math.log10(k) if log_x else k,
            y=1,
            yref="paper",
            yanchor="bottom",
            text=count(k, unit),
            showarrow=False,
            font=dict(color="#666", size=12),
        )


REACH_FLOOR = 1e-4  # the chart's bottom: a change kept below this share has, for the eye, gone


def reach_unit(curves):
    """What the reach chart's k counts, from its curves' units (lab.instruments.reach.ChangeReach.unit):
    (the unit of them all, or "token" where they mix, and the axis title that says so)."""
    units = list(dict.fromkeys(reach.unit for _, _, reach in curves))
    if len(units) == 1:
        return units[0], f"k: {units[0]}s after the change"
    each = listing(f"a {unit} for a {unit} model" for unit in units)
    return "token", f"k: tokens after the change (each model's own: {each})"


def reach_figure(curves, spans=MEMORY_SPANS):
    """How much of a one-token change still shows in the state k tokens later, one line per
    model (lab.instruments.reach), a log scale for the share; k in each model's own unit, which the
    axis names. curves: list of (name, cell, ChangeReach)."""
    fig = go.Figure()
    for name, cell, reach in curves:
        fig.add_trace(
            go.Scatter(
                x=reach.lags,
                y=np.where(reach.kept >= REACH_FLOOR, reach.kept, np.nan),  # below the floor: the line ends
                mode="lines",
                name=name,
                line=dict(color=cell_colour(cell), width=3),
                hovertemplate=f"after %{{x}} {reach.unit}s: %{{y:.2%}} of the change<extra>"
                + html.escape(name)
                + "</extra>",
            )
        )
    unit, title = reach_unit(curves)
    guides(fig, [k for k in spans if k <= max(len(r.lags) for _, _, r in curves)], log_x=False, unit=unit)
    fig.update_layout(
        height=360,
        margin=dict(l=60, r=10, t=30, b=40),
        xaxis=dict(title=title, rangemode="tozero"),
        yaxis=dict(
            type="log", range=[math.log10(REACH_FLOOR), 0.05], title="share of the change still there", tickformat=".2%"
        ),
        legend=LEGEND_BELOW,  # the guides' labels are above the plot
    )
    return fig


def longest_memory_layer(layers):
    """(layer, Retention) of the layer with the most long memories among a model's Retentions: the
    largest share of units keeping more than half after the first span, then the longest unit."""
    return max(
        enumerate(layers), key=lambda lr: (lr[1].share_longer_than(MEMORY_SPANS[0]) or 0, lr[1].unit_half_lives.max())
    )


def retention_band_figure(r, name, reference=None):
    """One layer's retention against the lag, as a distribution over its units: the median unit, the
    band of the middle 80% (10th to 90th percentile) and the unit that keeps most at the longest lag;
    `reference` (label, values (K,)) a dotted line. Log y: a constant keep gate g is a straight line."""
    low, median, high = np.quantile(r.per_unit, [0.1, 0.5, 0.9], axis=1)  # (K,) each
    longest = r.per_unit[:, r.longest_units(1)[0]]
    colour = cell_colour(r.cell)
    floor = CHART_FLOOR
    fig = go.Figure(
        [
            go.Scatter(x=r.lags, y=np.maximum(high, floor), mode="lines", line=dict(width=0), showlegend=False),
            go.Scatter(
                x=r.lags,
                y=np.maximum(low, floor),
                mode="lines",
                line=dict(width=0),
                fill="tonexty",
                fillcolor="rgba(120, 120, 120, 0.25)",
                name="10th to 90th percentile of the units",
            ),
            go.Scatter(
                x=r.lags, y=np.maximum(median, floor), mode="lines", name="median unit", line=dict(color=colour)
            ),
            go.Scatter(
                x=r.lags,
                y=np.maximum(longest, floor),
                mode="lines",
                name="the unit that keeps most",
                line=dict(color=colour, width=3, dash="dash"),
            ),
        ]
    )
    if reference is not None:
        label, values = reference
        fig.add_trace(go.Scatter(x=r.lags, y=values, mode="lines", name=label, line=dict(color="#999", dash="dot")))
    fig.update_layout(
        height=360,
        margin=dict(l=60, r=10, t=30, b=40),
        title=dict(text=html.escape(name), font=dict(size=13)),
        xaxis_title="lag k (tokens)",
        yaxis=dict(type="log", range=[-6, 0.05], exponentformat="power", title="share of the memory kept"),
        legend=LEGEND_BELOW,  # the title is above the plot
    )
    return fig


def analytic_figure(chosen, others, max_lag):
    """g**k for a chosen constant keep gate (bold) and a few others (faint), log-scaled lags."""
    lags = np.unique(np.logspace(0, math.log10(max_lag), 200).astype(int))
    fig = go.Figure()
    # the others first, so that the chosen one is drawn over them
    for g, line, digits in [
        *((g, dict(width=1, color="#bbb"), 4) for g in others),
        (chosen, dict(width=3, color="#d62728"), 5),
    ]:
        fig.add_trace(
            go.Scatter(
                x=lags,
                y=constant_gate_retention(g, lags),
                mode="lines",
                name=f"g = {g:g}",
                line=line,
                hovertemplate=f"k=%{{x}}: %{{y:.{digits}f}}",
            )
        )
    if max_lag >= 100:
        fig.add_trace(
            go.Scatter(
                x=[100],
                y=constant_gate_retention(0.99999, [100]),
                mode="markers+text",
                text=["0.99999¹⁰⁰ = 0.99900"],
                textposition="bottom left",
                name="a nearly shut GRU update gate",
                marker=dict(size=9, color="#1f77b4"),
                showlegend=False,
            )
        )
    fig.update_layout(
        height=330,
        margin=dict(l=50, r=10, t=20, b=40),
        xaxis=dict(type="log", title="steps k"),
        yaxis=dict(title="retention g^k", range=[0, 1.05]),
        legend=LEGEND_ABOVE,
    )
    return fig


def gradient_figure(curves, title, y_range=None):
    """||dL_T/dh_t|| vs distance T - t on a log y axis. curves: list of (name, cell, norms (T,))."""
    fig = go.Figure()
    for name, cell, norms in curves:
        norms = np.asarray(norms, dtype=float)
        distance = np.arange(len(norms))[::-1]  # index 0 is the step farthest from the loss
        fig.add_trace(
            go.Scatter(
                x=distance,
                y=np.maximum(norms, 1e-30),
                mode="lines",
                name=name,
                line=dict(color=cell_colour(cell), width=2),
            )
        )
    fig.update_layout(
        height=380,
        margin=dict(l=60, r=10, t=40, b=40),
        title=dict(text=title, font=dict(size=14)),
        xaxis_title="distance T − t (steps back from the loss)",
        yaxis=dict(type="log", title="‖∂L_T / ∂h_t‖", range=y_range, exponentformat="power"),
        legend=LEGEND_BELOW,  # the title is above the plot
    )
    return fig


def log_range(*arrays):
    """A shared [log10 min, log10 max] for several curves, so side-by-side charts compare."""
    values = np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays if len(a)])
    values = values[np.isfinite(values) & (values > 0)]
    if not len(values):
        return None
    return [math.floor(np.log10(values.min())) - 0.2, math.ceil(np.log10(values.max())) + 0.2]


def probe_figure(results, live=None, marked=None):
    """Toy-task accuracy against the distance k, one line per cell, with chance (lab.experiments.probe's rows of one
    task); `live` (a DataFrame of the same columns) as diamonds on top; `marked` a distance to mark."""
    fig = go.Figure()
    frames = [f for f in (results, live) if f is not None and len(f)]
    for frame, is_live in ((results, False), (live, True)):
        if frame is None:
            continue
        for cell, rows in frame[~frame.get("skipped", False)].groupby("cell", sort=False):
            rows = rows.sort_values("distance")
            label = cell_label(cell)
            name = f"{label}: your live run" if is_live else f"{label} ({int(rows['params'].iloc[0]):,} parameters)"
            fig.add_trace(
                go.Scatter(
                    x=rows["distance"],
                    y=rows["accuracy"],
                    mode="lines+markers" if not is_live else "markers",
                    name=name,
                    line=dict(color=cell_colour(cell), width=2.5),
                    marker=dict(symbol="diamond", size=12) if is_live else None,
                    customdata=rows["steps"],
                    hovertemplate="k = %{x}: %{y:.2f} after %{customdata} steps<extra></extra>",
                )
            )
    if frames:
        # chance is measured at each distance (the commonest answer of its test sequences): drawn there, and
        # labelled as the sentences beside the chart say it (lab.lessons.toys.chance_words)
        chance = frames[0].groupby("distance")["chance"].max().sort_index()
        fig.add_trace(
            go.Scatter(
                x=chance.index,
                y=chance.values,
                mode="lines",
                name="chance (always the commonest answer)",
                line=dict(color="#999", dash="dot"),
                hovertemplate="k = %{x}: chance %{customdata}<extra></extra>",
                customdata=[chance_words(c) for c in chance.values],
            )
        )
        at = marked if marked in chance.index else chance.index[-1]
        fig.add_annotation(
            x=math.log10(at),  # a log axis: an annotation is placed in log10 units
            y=chance[at],
            text=f"chance {chance_words(chance[at])}",
            showarrow=False,
            yanchor="bottom",
            font=dict(color="#666"),
        )
    if marked is not None:
        fig.add_vline(x=marked, line=dict(color="#bbb", width=1))
    distances = sorted(set().union(*[set(int(k) for k in f["distance"]) for f in frames])) if frames else []
    fig.update_layout(
        height=380,
        margin=dict(l=50, r=10, t=20, b=40),
        xaxis=dict(type="log", title="distance k (steps the memory must span)", tickvals=distances),
        yaxis=dict(title="accuracy at the “?” on fresh sequences", range=[0, 1.03]),
        legend=LEGEND_ABOVE,
    )
    return fig
