"""Charts and cached `lab` calls for the Sample, Gates and Memory pages.

Presentation only: the numbers come from lab.instruments (sampling, introspect, units, prediction,
memory) and lab.experiments.probe; this module turns them into Plotly figures (text coloured
token by token is ui.coloured_text's), and caches the heavy calls with `st.cache_data` keyed on hashable values
(checkpoint path, its mtime, the text, the settings). The loaded model itself
comes from `ui.common.cached_checkpoint` (one shared copy per process).

Glossary: T time (tokens), H hidden units, K lags.
"""

import copy
import html
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from lab.data import load_bundled_corpus
from lab.instruments.features import feature_values
from lab.instruments.introspect import GATE_KINDS, SATURATION, trace_text
from lab.instruments.memory import (
    MAX_RETENTION_LAG,
    MEMORY_SPANS,
    constant_gate_retention,
    gradient_through_time,
    retention,
)
from lab.instruments.prediction import input_influence
from lab.instruments.sampling import SamplingConfig, generate
from lab.instruments.units import unit_correlations, unit_order
from lab.nets.cells import CELLS
from lab.nets.models import build_model, to_reference
from lab.training.checkpoints import BUNDLED_DIR
from ui.coloured_text import chart_piece, gate_range
from ui.common import cached_checkpoint

PROBE_RESULTS = BUNDLED_DIR / "memory_probe.csv"  # written by scripts/build_probe_results.py

# one colour per cell family, the same on every chart
CELL_COLOURS = {"rnn": "#7f7f7f", "gru_seed": "#1f77b4", "gru_torch": "#17becf", "lstm": "#d62728", "scan": "#2ca02c"}
CELL_NAMES = {
    "rnn": "vanilla RNN",
    "gru_seed": "GRU (z overwrites)",
    "gru_torch": "GRU (PyTorch convention)",
    "lstm": "LSTM",
    "scan": "selective scan",
}


def equations_latex(cell):
    """One aligned LaTeX block of a cell's equations (for st.latex)."""
    lines = [equation.replace(" = ", " &= ", 1) for equation in CELLS[cell].equations]
    return r"\begin{aligned}" + r"\\".join(lines) + r"\end{aligned}"


CELL_NOTES = {
    "rnn": "No gate: every step squashes the whole state through tanh.",
    "gru_seed": "The Scribe models' convention: **z overwrites**, z → 0 keeps "
    "the memory; the reset gate acts before U_h. The candidate h̃ is the trace's gate n.",
    "gru_torch": "PyTorch convention (torch.nn.GRU, and the Ablation page's study): **z keeps**, z → 1 keeps the "
    "memory; the reset gate multiplies W_hn h + b_hn.",
    "lstm": "The standard LSTM: **f keeps** the cell state c; f = 1 holds it untouched, which no GRU can.",
    "scan": "A Mamba-style selective scan: the gates read the input only, never h, so the recurrence is an "
    "associative scan; **A keeps**.",
}


STRATEGY_TITLES = {"greedy": "Greedy", "temperature": "Temperature", "top_k": "Top-k", "top_p": "Top-p (nucleus)"}


def cell_label(cell):
    return CELL_NAMES.get(cell, cell)


def checkpoint_key(checkpoint):
    """(path, mtime): the hashable identity of a loaded checkpoint for st.cache_data."""
    path = Path(checkpoint.path)
    return str(path), path.stat().st_mtime


def checkpoint_cell(checkpoint):
    return checkpoint.config.cell


def latest_val_loss(checkpoint):
    """The last evaluation in the checkpoint's history, or None."""
    evals = [e for e in checkpoint.metrics.get("history", []) if "val_loss" in e]
    return evals[-1] if evals else None


# ---------------------------------------------------------------------------
# cached lab calls: hashable keys in, plain results out


@st.cache_data(max_entries=128, show_spinner="Generating…")
def cached_generation(path, mtime, prompt, config_items):
    """lab.instruments.sampling.generate for one SamplingConfig given as a tuple of (field, value) pairs,
    so that changing one strategy's settings regenerates that strategy only."""
    checkpoint = cached_checkpoint(path, mtime)
    return generate(checkpoint.model, checkpoint.tokenizer, prompt, SamplingConfig(**dict(config_items)))


@st.cache_resource(max_entries=8, show_spinner=False)
def reference_model(path, mtime):
    """A checkpoint's model computed by the reference cells (lab.nets.models.to_reference), made once per
    process: tracing a fast or fused model would otherwise copy it and rebuild its layers every time."""
    return to_reference(cached_checkpoint(path, mtime).model)


# one shared copy per (model, text), never written into: st.cache_data would copy up to ~50 MB
# out of the cache on every run of every page that shows it
@st.cache_resource(max_entries=8, show_spinner="Tracing the gates…")
def cached_trace(path, mtime, text):
    """lab.instruments.introspect.trace_text of a checkpoint over a text (read-only: shared by every session)."""
    return trace_text(reference_model(path, mtime), cached_checkpoint(path, mtime).tokenizer, text)


@st.cache_data(max_entries=64, show_spinner="Reading a longer passage…")
def cached_passage_unit(path, mtime, first_line, chars, layer, gate, unit):
    """One unit over `chars` characters of the bundled corpus from the line `first_line` on ->
    (token texts (T,), values (T,)): only what the page shows, not the whole trace, is copied
    out of the cache on every run. ValueError when the line is not in the corpus or the model
    cannot read the passage."""
    corpus = load_bundled_corpus()
    start = corpus.find(first_line)
    if start < 0:
        raise ValueError(f"passage: {first_line!r} is not in the bundled corpus")
    trace = cached_trace(path, mtime, corpus[start : start + chars])
    return trace.token_texts, trace.gate(layer, gate)[:, unit]


@st.cache_data(max_entries=16, show_spinner="Finding what the units track…")
def cached_unit_correlations(path, mtime, text):
    """lab.instruments.units.unit_correlations of a checkpoint over a text: every unit against every feature."""
    return unit_correlations(cached_trace(path, mtime, text))


@st.cache_data(max_entries=64, show_spinner="Ordering the units…")
def cached_unit_order(path, mtime, text, layer, gate, order, feature):
    """lab.instruments.units.unit_order of one gate's units; `feature` (None for the other orders) orders them when
    order is "feature"."""
    trace = cached_trace(path, mtime, text)
    signal = None if feature is None else feature_values(trace.token_texts, feature)
    return unit_order(trace.gate(layer, gate), order, signal)


@st.cache_data(max_entries=64, show_spinner="Back-propagating to every earlier character…")
def cached_influence(path, mtime, token_ids, target):
    """lab.instruments.prediction.input_influence of a checkpoint: token_ids a tuple, target an index into it."""
    checkpoint = cached_checkpoint(path, mtime)
    return input_influence(checkpoint.model, list(token_ids), target)


@st.cache_data(max_entries=32, show_spinner="Measuring retention…")
def cached_retention(path, mtime, text):
    """lab.instruments.memory.retention of every layer of a checkpoint, up to MAX_RETENTION_LAG -> list of
    Retention (one per layer); `.up_to(k)` of one is the chart of a shorter lag, without measuring again."""
    trace = trace_text(reference_model(path, mtime), cached_checkpoint(path, mtime).tokenizer, text)
    return [retention(trace, layer, max_lag=MAX_RETENTION_LAG) for layer in range(len(trace.layers))]


@st.cache_data(max_entries=32, show_spinner="Back-propagating through time…")
def cached_gradient(path, mtime, text, fresh_seed=None):
    """lab.instruments.memory.gradient_through_time of a checkpoint (fresh_seed None) or of a freshly
    initialised model of the same config (torch seed `fresh_seed`) -> (T,) norms."""
    checkpoint = cached_checkpoint(path, mtime)
    if fresh_seed is None:
        # a private copy: the gradient hooks the model, which other sessions share
        model = copy.deepcopy(checkpoint.model)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(fresh_seed)
            model = build_model(checkpoint.config)
    return gradient_through_time(model, text, checkpoint.tokenizer)


def load_probe_results(path=PROBE_RESULTS):
    """The shipped memory-probe table, or None when the file is missing."""
    path = Path(path)
    return pd.read_csv(path) if path.is_file() else None


def mean(values):
    return float(np.mean(values)) if len(values) else float("nan")


def repetition_markdown(report):
    """lab.instruments.sampling.repetition_report as a few Markdown lines."""

    def quoted(text, limit=60):
        text = text if len(text) <= limit else text[:limit] + "…"
        return "`" + text.replace("`", "'").replace("\n", "↵") + "`"

    lines = []
    if report["ends_in_cycle"]:
        lines.append(
            f"- **ends in a loop**: a period of {report['cycle_period']} characters, repeated "
            f"{report['cycle_repeats']:.1f}× at the end: {quoted(report['cycle'])}"
        )
    else:
        lines.append("- does not end in a loop")
    if report["top_line_count"] > 1:
        lines.append(f"- most repeated line ({report['top_line_count']}×): {quoted(report['top_line'])}")
    lines.append(f"- longest repeated passage: {report['longest_repeat_chars']} characters")
    lines.append(f"- {report['repeat_share']:.0%} of the words sit in a 4-word sequence that occurs twice or more")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# gate charts


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


def gate_heatmap(values, pieces, gate, units):
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
    ticks, labels = _token_axis(pieces)
    fig.update_layout(
        title=dict(text=f"{gate} · {GATE_KINDS.get(gate, '')}", font=dict(size=14)),
        height=96 + int(min(max(2.5 * len(units), 184), 640)),  # 64 units in 280 px; more units, taller rows
        margin=dict(l=50, r=10, t=36, b=60),
        xaxis=dict(
            tickmode="array",
            tickvals=ticks,
            ticktext=labels,
            tickangle=-30 if len(ticks) > 12 else 0,
            tickfont=dict(size=11, family="monospace"),
        ),
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


def next_token_figure(top):
    """Horizontal bars of the most likely next tokens (lab.instruments.prediction.next_tokens), the likeliest on top."""
    labels = [f"{chart_piece(p)} " for p in top["piece"]]
    fig = go.Figure(
        go.Bar(
            x=top["probability"],
            y=labels,
            orientation="h",
            marker_color="#2e7d32",
            text=[f"{p:.1%}" for p in top["probability"]],
            textposition="outside",
            hovertemplate="'%{y}': %{x:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=60 + 34 * len(top),
        margin=dict(l=10, r=40, t=10, b=30),
        xaxis=dict(range=[0, 1.1], title="probability of the next token", tickformat=".0%"),
        yaxis=dict(autorange="reversed", type="category", tickfont=dict(size=15, family="monospace")),
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
    ticks, labels = _token_axis(pieces)
    fig.update_layout(
        height=230,
        margin=dict(l=40, r=10, t=30, b=60),
        title=dict(text=f"unit {unit} of {gate}", font=dict(size=13)),
        xaxis=dict(
            tickmode="array",
            tickvals=ticks,
            ticktext=labels,
            tickangle=-30 if len(ticks) > 12 else 0,
            tickfont=dict(size=11, family="monospace"),
        ),
    )
    return fig


# ---------------------------------------------------------------------------
# memory charts


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
                line=dict(color=CELL_COLOURS.get(cell), width=2.5, dash="dash" if deeper else None),
                hovertemplate="after %{x} steps: %{y:.1%} of the units<extra>" + html.escape(name) + "</extra>",
            )
        )
    for k in spans:  # a shape on a log axis is placed in log10 units
        fig.add_vline(x=math.log10(k), line=dict(color="#999", dash="dot", width=1), annotation_text=f"{k} tokens")
    fig.update_layout(
        height=380,
        margin=dict(l=60, r=10, t=30, b=40),
        xaxis=dict(type="log", title="k: units still keeping more than half of what they held after k tokens"),
        yaxis=dict(type="log", title="share of the units", tickformat=".1%"),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def longest_memory_layer(layers):
    """(layer, Retention) of the layer with the most long memories among a model's Retentions: the
    largest share of units keeping more than half after the first span, then the longest unit."""
    return max(
        enumerate(layers), key=lambda lr: (lr[1].share_longer_than(MEMORY_SPANS[0]) or 0, lr[1].unit_half_lives.max())
    )


def half_life_words(half_life, lags):
    """A half-life in words: "3 tokens", or "more than 128 tokens" for one longer than every lag measured."""
    if math.isinf(half_life):
        return f"more than {lags} tokens"
    return f"{half_life:.0f} token{'s' if half_life != 1 else ''}"


def memory_spread_sentence(spread):
    """What lab.instruments.memory.memory_spread's table says, in a student's words: computed from the table, so
    that it says what the chart drawn from the same retention shows."""
    spans = [int(c.removeprefix("longer_than_")) for c in spread.columns if c.startswith("longer_than_")]
    typical = spread.loc[spread["median_half_life"].idxmax()]
    where = "in every layer shown, the median unit" if len(spread) > 1 else "the median unit"
    sentences = [
        f"The typical unit forgets fast: {where} has lost half of what it held within "
        f"{half_life_words(typical['median_half_life'], typical['lags'])}."
    ]
    by_memory = [f"longer_than_{k}" for k in reversed(spans)] + ["longest_half_life"]
    best = spread.sort_values(by_memory, ascending=False, na_position="last").iloc[0]
    first = best[f"longer_than_{spans[0]}"]
    if not first > 0:  # none, or NaN: the text is shorter than the first span
        sentences.append(f"On this text no unit keeps more than half of what it held for {spans[0]} tokens.")
        return " ".join(sentences)
    later = []
    for k in spans[1:]:
        share = best[f"longer_than_{k}"]
        if share != share:  # NaN: fewer than k lags measured
            later.append(f"(the text is too short to measure {k} tokens)")
        else:
            later.append(f"{round(share * best['units'])} ({share:.1%}) after {k}" if share > 0 else f"none after {k}")
    sentences.append(
        f"Long memories live in a few units: in {best['name']}, layer {best['layer']}, "
        f"{round(first * best['units'])} of its {best['units']} units ({first:.1%}) still keep more than half "
        f"of what they held after {spans[0]} tokens"
        + "".join(f", {c}" for c in later)
        + f". Its longest-memory unit keeps half for {half_life_words(best['longest_half_life'], best['lags'])}."
    )
    return " ".join(sentences)


def retention_band_figure(r, name, reference=None):
    """One layer's retention against the lag, as a distribution over its units: the median unit, the
    band of the middle 80% (10th to 90th percentile) and the unit that keeps most at the longest lag;
    `reference` (label, values (K,)) a dotted line. Log y: a constant keep gate g is a straight line."""
    low, median, high = np.quantile(r.per_unit, [0.1, 0.5, 0.9], axis=1)  # (K,) each
    longest = r.per_unit[:, r.longest_units(1)[0]]
    colour = CELL_COLOURS.get(r.cell, "#555")
    floor = 1e-6  # float64 products underflow far below what a chart can show
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
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def analytic_figure(chosen, others, max_lag):
    """g**k for a chosen constant keep gate (bold) and a few others (faint), log-scaled lags."""
    lags = np.unique(np.logspace(0, math.log10(max_lag), 200).astype(int))
    fig = go.Figure()
    for g in others:
        fig.add_trace(
            go.Scatter(
                x=lags,
                y=constant_gate_retention(g, lags),
                mode="lines",
                name=f"g = {g:g}",
                line=dict(width=1, color="#bbb"),
                hovertemplate="k=%{x}: %{y:.4f}",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=lags,
            y=constant_gate_retention(chosen, lags),
            mode="lines",
            name=f"g = {chosen:g}",
            line=dict(width=3, color="#d62728"),
            hovertemplate="k=%{x}: %{y:.5f}",
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
        legend=dict(orientation="h", y=-0.25),
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
                line=dict(color=CELL_COLOURS.get(cell), width=2),
            )
        )
    fig.update_layout(
        height=380,
        margin=dict(l=60, r=10, t=40, b=40),
        title=dict(text=title, font=dict(size=14)),
        xaxis_title="distance T − t (steps back from the loss)",
        yaxis=dict(type="log", title="‖∂L_T / ∂h_t‖", range=y_range, exponentformat="power"),
        legend=dict(orientation="h", y=-0.2),
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
            name = f"{cell}: your live run" if is_live else f"{cell} ({int(rows['params'].iloc[0]):,} params)"
            fig.add_trace(
                go.Scatter(
                    x=rows["distance"],
                    y=rows["accuracy"],
                    mode="lines+markers" if not is_live else "markers",
                    name=name,
                    line=dict(color=CELL_COLOURS.get(cell), width=2.5),
                    marker=dict(symbol="diamond", size=12) if is_live else None,
                    customdata=rows["steps"],
                    hovertemplate="k = %{x}: %{y:.2f} after %{customdata} steps<extra></extra>",
                )
            )
    if frames:
        chance = float(frames[0]["chance"].max())
        fig.add_hline(
            y=chance,
            line=dict(color="#999", dash="dot"),
            annotation_text=f"chance {chance:.2f}",
            annotation_position="bottom right",
        )
    if marked is not None:
        fig.add_vline(x=marked, line=dict(color="#bbb", width=1))
    distances = sorted(set().union(*[set(int(k) for k in f["distance"]) for f in frames])) if frames else []
    fig.update_layout(
        height=380,
        margin=dict(l=50, r=10, t=20, b=40),
        xaxis=dict(type="log", title="distance k (steps the memory must span)", tickvals=distances),
        yaxis=dict(title="accuracy at the “?” on fresh sequences", range=[0, 1.03]),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig
