"""The Train page's charts: the live race of this session's runs (nats per character against seconds
or steps, with reference lines that compare like with like), who leads it in words, the bundled
models' long race, and how often the live chart redraws.

Nothing here computes model math: a run's events, read by ui.train.runs.RunLog, become plotly traces.
"""

import math

import numpy as np
import plotly.graph_objects as go

from lab.instruments.race import long_race_verdict, race_story, race_verdict, short_count, verdict_sentence
from lab.words import count
from ui.cell_labels import cell_colour
from ui.shared.chart_style import WHITE
from ui.shared.model_names import bundled_title
from ui.shared.shared_figures import run_key, shared_figure


def _thin(xs, *series, max_points=400):
    """Every k-th point of xs and each series, so a long run's chart stays light (the last point is
    kept): the chart is rebuilt every couple of seconds for every student watching a run."""
    k = max(1, math.ceil(len(xs) / max_points))
    if k > 1:
        xs, *series = (values[::k] + values[-1:] for values in (xs, *series))
    # numpy arrays: plotly checks a list element by element, ten times slower than the chart is to draw
    return tuple(np.asarray(values, dtype=float) for values in (xs, *series))


CHART_HEIGHT = 420
# a run's line takes its cell family's colour (every chart's); further runs of one family each get a dash of their own
DASHES = ("solid", "dot", "dashdot", "longdash", "longdashdot")
HOVER = "%{y:.3f} nats/char (%{customdata:.3f} per token)"


def legend_names(logs):
    """Each run's name on the chart: its plain title ("GRU · 256 units"), numbered where runs share one
    ("GRU · 256 units, run 2")."""
    titles = [log.title for log in logs]
    names = []
    for i, title in enumerate(titles):
        if titles.count(title) == 1:
            names.append(title)
        else:
            names.append(f"{title}, run {titles[: i + 1].count(title)}")
    return names


def legend_entry(name, log):
    """A run's legend line: its name, size and the steps it has taken (on a busy server, fewer)."""
    steps = log.last_step["step"] if log.last_step else 0
    size = f" · {short_count(log.params)} parameters" if log.params else ""
    return f"{name}{size} · {count(steps, 'step')}"


def shared_race_figure(logs, x_axis="elapsed", anchors=(), x_span=60):
    """race_figure, made once for every page showing the same runs read to the same point with the same names
    (a class watching one shared run: one figure a redraw, not thirty)."""
    names = legend_names(logs)
    runs = tuple((run_key(log.job), log.cursor, legend_entry(name, log), log.cell) for log, name in zip(logs, names))
    key = ("race", x_axis, tuple(anchors), x_span, runs)
    return shared_figure(key, lambda: race_figure(logs, x_axis, anchors, x_span))


def race_figure(logs, x_axis="elapsed", anchors=(), x_span=60):
    """All runs on one chart, in nats per character: train loss (thin line) and validation loss
    (dashed, markers) per run, one legend entry per run; the loss per token is in the hover.

    x_axis: "elapsed" (seconds, a fair race) or "step". anchors: (y, label) lines to draw.
    x_span: the axis' length before the first point arrives (it then follows the data from 0).
    """
    fig = go.Figure()
    runs_of = {}  # family -> runs drawn so far
    for log, name in zip(logs, legend_names(logs)):
        family = log.cell.split("/")[0]  # "gru_torch/fast" -> "gru_torch"
        nth = runs_of[family] = runs_of.get(family, -1) + 1
        color = cell_colour(family)
        train = dict(
            mode="lines" if len(log.steps[x_axis]) > 20 else "lines+markers",  # a lone point shows
            name=legend_entry(name, log),
            line=dict(color=color, width=1.5, dash=DASHES[nth % len(DASHES)]),
            marker=dict(size=4),
            opacity=0.6,
        )
        held_out = dict(
            mode="lines+markers",
            name=f"{name}, held-out text",
            showlegend=False,  # one entry per run: the caption says which line is which
            line=dict(color=color, width=2.5, dash="dash"),
            marker=dict(size=7),
        )
        for series, style in ((log.steps, train), (log.evals, held_out)):
            x, y, per_token = _thin(series[x_axis], series["nats_per_char"], series["loss"])
            fig.add_trace(go.Scatter(x=x, y=y, customdata=per_token, hovertemplate=HOVER, legendgroup=name, **style))
    # the reference lines as plain shapes: add_hline compares them with every trace's data (seconds per
    # redraw once several runs have thousands of points)
    shapes = [
        dict(type="line", xref="paper", x0=0, x1=1, y0=y, y1=y, line=dict(color="grey", width=1, dash="dot"))
        for y, _ in anchors
    ]
    notes = [
        dict(
            xref="paper", x=1, y=y, text=label, showarrow=False, xanchor="right", yanchor="top", font=dict(color="grey")
        )
        for y, label in anchors
    ]
    fig.update_layout(
        height=CHART_HEIGHT,
        margin=dict(l=10, r=10, t=40, b=10),
        showlegend=bool(logs),
        shapes=shapes,
        annotations=notes,
        # tight rows: the legend sits above the curves on a laptop's first screen
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font=dict(size=11), tracegroupgap=0),
        xaxis_title="seconds" if x_axis == "elapsed" else "step",
        yaxis_title="nats per character",
        hovermode="x unified",
        template=WHITE,
    )
    if any(log.steps[x_axis] for log in logs):
        fig.update_xaxes(rangemode="tozero")
        fig.update_yaxes(rangemode="tozero")
    else:  # plotly would draw empty axes from -1, and the anchors off the top
        fig.update_xaxes(range=[0, x_span])
        fig.update_yaxes(range=[0, 1.1 * max([y for y, _ in anchors], default=4.0)])
    return fig


def verdict_names(logs):
    """The runs as the verdict names them: their cell ("GRU") where that tells them apart."""
    cells = [log.title.split(" · ")[0] for log in logs]
    return cells if len(set(cells)) == len(cells) else legend_names(logs)


def live_verdict(logs, x_axis, long_curves=()):
    """Who leads the race on the chart and why, read from the runs' validation curves (the held-out text) on
    the chart's x axis, and where the bundled models' long race (`long_curves`) ends; None for a chart of
    fewer than two runs (no race)."""
    if len(logs) < 2:
        return None
    names = verdict_names(logs)
    curves = {name: (log.evals[x_axis], log.evals["nats_per_char"]) for name, log in zip(names, logs)}
    verdict = race_verdict(curves)
    when = (
        None if verdict is None else f"{verdict.at:.0f} s" if x_axis == "elapsed" else count(round(verdict.at), "step")
    )
    steps = (
        {name: log.last_step["step"] if log.last_step else 0 for name, log in zip(names, logs)}
        if x_axis == "elapsed"
        else None
    )
    long_verdict = long_race_verdict(long_curves) if long_curves else None
    long_when = count(round(long_verdict.at), "minute") if long_verdict else ""
    families = {name: log.cell.split("/")[0] for name, log in zip(names, logs)}  # "gru_torch/fast" -> "gru_torch"
    return race_story(verdict, when, families, steps, long_verdict, long_when)


def steps_sentence(logs):
    """How many steps each run took, and on a busy server why that is fewer than it would take alone."""
    started = [(name, log) for name, log in zip(verdict_names(logs), logs) if log.last_step]
    if not started:
        return ""
    took = ", ".join(f"the {name} {log.last_step['step']:,}" for name, log in started)
    sentence = f"Steps taken: {took}."
    others = max(log.other_runs for log in logs)
    if others:
        sentence += (
            f" Your runs shared this server's processors with up to {count(others, 'run')} of other people, "
            "so each took fewer steps than it would have alone."
        )
    elif len(logs) > 1:
        sentence += " Your runs share this server's processors, so each takes fewer steps than it would alone."
    return sentence


def long_race_caption(curves):
    """What the long race shows, computed from its curves."""
    if not curves:
        return "The bundled models are missing, so the long race cannot be drawn."
    minutes = max(curve.minutes[-1] for curve in curves)
    sizes = [curve.parameters for curve in curves]
    caption = (
        f"**The long race**: the bundled models, each trained about {count(round(minutes), 'minute')} on one GPU, "
        f"scored on four plays they never train on. They are not the same size ({short_count(min(sizes))} to "
        f"{short_count(max(sizes))} parameters), so this ranks these models more than their cells."
    )
    verdict = long_race_verdict(curves)
    if verdict is not None:
        caption += " " + verdict_sentence(verdict, count(round(verdict.at), "minute"))
    return caption


def long_race_figure(curves):
    """The bundled models' validation curves (lab.instruments.race.long_race) against minutes of training."""
    fig = go.Figure()
    for curve in curves:
        title = bundled_title(curve.checkpoint) if curve.checkpoint else curve.title  # as every page names it
        fig.add_trace(
            go.Scatter(
                x=curve.minutes,
                y=curve.nats_per_char,
                customdata=curve.step,
                hovertemplate=f"{title}: %{{y:.3f}} nats/char at step %{{customdata:,}}<extra></extra>",
                mode="lines+markers",
                name=f"{title} · {short_count(curve.parameters)} parameters · {count(curve.steps, 'step')}",
                line=dict(color=cell_colour(curve.cell), width=2),
                marker=dict(size=4),
            )
        )
    fig.update_layout(
        height=CHART_HEIGHT,
        margin=dict(l=10, r=10, t=40, b=10),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font=dict(size=11)),
        xaxis_title="minutes of training on one GPU",
        yaxis_title="nats per character, held-out plays",
        hovermode="x unified",
        template=WHITE,
    )
    return fig


NANOGPT_ANCHORS = [(1.88, "nanoGPT char, CPU 1.88"), (1.47, "nanoGPT char, GPU 1.47")]  # on Tiny Shakespeare


def bundled_anchors(infos):
    """The best bundled character model's score on the bundled corpus's held-out plays, as a chart
    line: the yardstick a run on the same corpus is compared with."""
    scored = [
        i
        for i in infos
        if i.bundled
        and i.metrics.get("corpus") == "bundled"
        and i.family == "lm"
        and i.config.get("vocab_size", 0) < 256
        and "val_nats_per_char" in i.metrics
    ]
    if not scored:
        return []
    best = min(scored, key=lambda i: i.metrics["val_nats_per_char"])
    value = best.metrics["val_nats_per_char"]
    return [(value, f"the bundled {bundled_title(best.name)}, trained for minutes on a GPU {value:.2f}")]


def char_anchors(kinds, bundled=()):
    """Reference lines in nats per character, drawn only where they compare like with like.
    kinds: {(tokenizer kind, vocabulary size, corpus)} of the runs on the chart. nanoGPT's published
    character-level results hold for Tiny Shakespeare's validation text, so for runs on it alone;
    `bundled` (figure, label) lines, the bundled models' scores on the bundled corpus's held-out
    plays, for runs on that corpus alone (the chart is per character, whatever the tokenizer). The
    uniform guess ln V holds for character runs of one vocabulary."""
    anchors = []
    if len(kinds) == 1:
        ((kind, vocab, _),) = kinds
        if kind == "char" and vocab:
            anchors.append((math.log(vocab), f"uniform guess ln {vocab} = {math.log(vocab):.2f}"))
    corpora = {corpus for _, _, corpus in kinds}
    if corpora == {"tiny-shakespeare"}:
        anchors += NANOGPT_ANCHORS
    elif corpora == {"bundled"}:
        anchors += list(bundled)
    return anchors
