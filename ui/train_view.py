"""What the Train page needs besides widgets: its settings (with their URL form),
the configs they make, run logs read from a job's events, and the race chart.

Nothing here computes model math: settings become `lab` configs, and the
events of `lab.server.jobs.TrainingJob` become plotly traces, progress bars and a table.

Settings live in one flat dict of plain values, keyed by the short names used
in the URL (`?preset=astra-beta&hidden=128&seconds=30`). Only values that
differ from the chosen preset's defaults are written to the URL, so a link
stays short and still opens with the same settings.
"""

import dataclasses
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.data import TOKENIZERS, SentencePieceTokenizer
from lab.instruments.race import CELL_NAMES, long_race_verdict, race_verdict, short_count, verdict_sentence
from lab.nets.backends import BACKENDS, FUSED_MODULES, default_backend, default_scan_mode
from lab.nets.cells import CELLS
from lab.training.checkpoints import why_not_resumable
from lab.training.presets import PRESETS
from lab.training.train import TrainConfig, resolve_device
from ui.links import Field, parse_query
from ui.plain_text import plain, user_errors
from ui.sessions import register_job

DEFAULT_PRESET = "astra-alpha"
RACE_CELLS = ("rnn", "gru_torch", "lstm", "scan")  # the four families of the Race button
CORPUS_CHOICES = {
    "bundled": "Bundled Shakespeare (35 plays, 4.6 MB, offline)",
    "tiny-shakespeare": "Tiny Shakespeare (download, 1.1 MB)",
    "upload": "Upload a .txt file",
}
# presets that train on text (the sequence classifier has its own page)
TEXT_PRESETS = [name for name, p in PRESETS.items() if p.model.family in ("lm", "scan_markov")]


FIELDS = {
    "preset": Field("choice", "Preset (model family)", choices=tuple(TEXT_PRESETS)),
    "cell": Field("choice", "Cell", choices=tuple(CELLS)),
    "backend": Field("choice", "Backend", choices=tuple(BACKENDS)),
    "emb": Field("int", "Embedding width E", 1, 2048),  # not "embed": Streamlit reserves ?embed=
    "hidden": Field("int", "Hidden units H", 1, 4096),
    "layers": Field("int", "Layers", 1, 8),
    "dropout": Field("float", "Dropout", 0.0, 0.9),
    "corpus": Field("choice", "Corpus", choices=tuple(CORPUS_CHOICES)),
    "tokenizer": Field("choice", "Tokenizer", choices=tuple(TOKENIZERS)),
    "vocab": Field("int", "SentencePiece vocabulary size", SentencePieceTokenizer.MIN_VOCAB, 16000),
    "lr": Field("float", "Learning rate", 1e-6, 1.0),
    "wd": Field("float", "Weight decay", 0.0, 1.0),
    "batch": Field("int", "Batch size B", 1, 1024),
    "block": Field("int", "Block size T", 1, 2048),
    "smoothing": Field("float", "Label smoothing", 0.0, 0.5),
    "clip": Field("float", "Gradient clip", 0.01, 100.0),
    "seconds": Field("int", "Time budget (s)", 1, 3600),
    "stateful": Field("bool", "Stateful (truncated BPTT)"),
    "eval_every": Field("int", "Validate every", 1, 100000),
    "name": Field("text", "Run name (checkpoint name)"),
    "x": Field("choice", "Chart x axis", choices=("elapsed", "step")),
}
CELL_LABELS = {
    "rnn": "rnn: vanilla RNN",
    "gru_seed": "gru_seed: GRU, the Scribe models' convention (z overwrites)",
    "gru_torch": "gru_torch: GRU, PyTorch convention (z keeps)",
    "lstm": "lstm: LSTM",
    "scan": "scan: selective scan (Mamba-style)",
}


def key(name):
    """The widget key of a setting (prefixed by page)."""
    return f"train_{name}"


def preset_values(name):
    """The settings a preset stands for (model, tokenizer and training recipe)."""
    preset = PRESETS[name]
    model, recipe = preset.model, preset.train_config()
    return {
        "preset": name,
        "cell": model.cell,
        "backend": default_backend(model.cell, resolve_device()),
        "emb": model.embed_dim,
        "hidden": getattr(model, "hidden_size", model.embed_dim),
        "layers": getattr(model, "num_layers", 1),
        "dropout": float(model.dropout),
        "tokenizer": preset.tokenizer or "char",
        "vocab": preset.tokenizer_options.get("vocab_size", 1000),
        "lr": recipe.lr,
        "wd": recipe.weight_decay,
        "batch": recipe.batch_size,
        "block": recipe.block_size,
        "smoothing": recipe.label_smoothing,
        "clip": recipe.grad_clip,
    }


def default_values(preset=DEFAULT_PRESET):
    return {
        **preset_values(preset),
        "corpus": "bundled",
        "seconds": 60,
        "stateful": False,
        "eval_every": TrainConfig().eval_interval,
        "name": "",
        "x": "elapsed",
    }


def values_from_query(query):
    """URL query -> (complete settings, warnings). Unknown keys and bad values are ignored with a
    warning each; the preset is applied first, then the other values override it."""
    parsed, warnings = parse_query(query, FIELDS)
    values = default_values(parsed.get("preset", DEFAULT_PRESET))
    values.update(parsed)
    return values, warnings


def query_from_values(values):
    """Settings -> URL query: the preset, and every value that differs from the preset's defaults."""
    defaults = default_values(values["preset"])
    query = {"preset": values["preset"]} if values["preset"] != DEFAULT_PRESET else {}
    for name, value in values.items():
        if name != "preset" and value != defaults.get(name):
            query[name] = FIELDS[name].format(value)
    return query


def is_scan_markov(values):
    return PRESETS[values["preset"]].model.family == "scan_markov"


def fused_problem(values):
    """Why the fused backend cannot be used with these settings, or None."""
    if values["backend"] != "fused" or is_scan_markov(values) or values["cell"] in FUSED_MODULES:
        return None
    why = {
        "gru_seed": "torch.nn.GRU computes PyTorch's convention (z keeps), not this cell's (z overwrites)",
        "scan": "torch.nn has no selective scan",
    }.get(values["cell"], "torch.nn has no such layer")
    return (
        f"The fused backend exists only for {', '.join(sorted(FUSED_MODULES))}: {why}. "
        "Choose the fast or reference backend for this cell."
    )


def model_config(values, vocab_size):
    """Settings -> the lab model config (ValueError names a bad field)."""
    preset = PRESETS[values["preset"]]
    if is_scan_markov(values):  # seed 004's architecture is fixed but for its width and dropout
        return dataclasses.replace(
            preset.model, vocab_size=vocab_size, embed_dim=values["emb"], dropout=values["dropout"]
        )
    return dataclasses.replace(
        preset.model,
        vocab_size=vocab_size,
        cell=values["cell"],
        backend=values["backend"],
        embed_dim=values["emb"],
        hidden_size=values["hidden"],
        num_layers=values["layers"],
        dropout=values["dropout"],
        scan_mode=default_scan_mode(resolve_device()),
    )  # the scan's faster form here


EVAL_SECONDS = 10.0  # a validation point at least this often, whatever the model's speed


def train_config(values):
    """Settings -> lab.training.train.TrainConfig with a wall-clock budget (ValueError names a bad field)."""
    return TrainConfig(
        lr=values["lr"],
        min_lr=min(PRESETS[values["preset"]].train.get("min_lr", 0.0), values["lr"]),
        weight_decay=values["wd"],
        batch_size=values["batch"],
        block_size=values["block"],
        max_steps=None,
        max_seconds=float(values["seconds"]),
        grad_clip=values["clip"],
        label_smoothing=values["smoothing"],
        stateful=values["stateful"],
        eval_interval=values["eval_every"],
        eval_seconds=EVAL_SECONDS,
    )


def widget_values(saved):
    """The settings as the widgets hold them now (`saved` for a widget not drawn in this run)."""
    return {name: st.session_state.get(key(name), saved[name]) for name in FIELDS}


def default_run_name(values):
    if is_scan_markov(values):
        return f"{values['preset']}-e{values['emb']}"
    return f"{values['cell']}-e{values['emb']}-h{values['hidden']}x{values['layers']}"


# ---------------------------------------------------------------------------
# run logs: a job's events, read incrementally


BUSY_SERVER_RUNS = 6  # from this many runs on the server, the watching students' charts redraw less often


def live_refresh_seconds(runs_on_server, waiting_for_first_point):
    """How often a student's live chart redraws: every 2 s, or every 5 s once this student's runs
    have drawn their first points while the server trains BUSY_SERVER_RUNS runs or more. Each
    redraw takes some tens of milliseconds of the server's one interpreter, which every student
    shares: with ten students watching, fewer redraws leave more of it for another student's page."""
    return 5.0 if runs_on_server >= BUSY_SERVER_RUNS and not waiting_for_first_point else 2.0


class RunLog:
    """What the page shows of one TrainingJob, updated from `job.events(since)`.

    Losses are kept per token (what the model minimises) and per character: a subword run's
    token carries several characters, so only nats per character compare it with a character run."""

    def __init__(self, job, label, params, cell, tokenizer, vocab, title=None):
        self.job, self.label, self.params, self.cell = job, label, params, cell
        self.title = title or label  # what the chart's legend calls it: "GRU · 256 units"
        self.other_runs = 0  # the most runs of other sessions seen training beside it (a busy server)
        self.tokenizer, self.vocab = tokenizer, vocab  # tokenizer kind and vocabulary size
        self.chars_per_token = job.task.chars_per_token
        self.cursor = 0
        self.steps = {"step": [], "elapsed": [], "loss": [], "nats_per_char": []}  # one entry per training step
        self.evals = {"step": [], "elapsed": [], "loss": [], "nats_per_char": []}
        self.last_step, self.error, self.done = None, None, None
        self.first_sample = self.sample = None  # {"step", "text"} events: how it wrote then and now

    def update(self):
        events = self.job.events(self.cursor)
        self.cursor += len(events)
        for e in events:
            if e["type"] == "step":
                self.last_step = e
                for k, v in (
                    ("step", e["step"]),
                    ("elapsed", e["elapsed"]),
                    ("loss", e["train_loss"]),
                    ("nats_per_char", e["train_loss"] / self.chars_per_token),
                ):
                    self.steps[k].append(v)
            elif e["type"] == "eval":
                for k, v in (
                    ("step", e["step"]),
                    ("elapsed", e["elapsed"]),
                    ("loss", e["val_loss"]),
                    ("nats_per_char", e.get("val_nats_per_char", math.nan)),
                ):
                    self.evals[k].append(v)
            elif e["type"] == "sample":
                self.first_sample, self.sample = self.first_sample or e, e
            elif e["type"] == "error":
                self.error = e["message"]
            elif e["type"] == "done":
                self.done = e
        return self

    def row(self):
        """One line of the runs table."""
        job, last = self.job, self.last_step or {}
        pending = "…" if job.running else "–"  # a validation point comes within EVAL_SECONDS of the start

        def latest(values):
            return f"{values[-1]:.3f}" if values else pending

        return {
            "run": self.label,
            "cell": self.cell,
            "params": self.params,
            "status": job.status,
            "steps": last.get("step", 0),
            "seconds": round(last.get("elapsed", 0.0), 1),
            "train nats/char": latest(self.steps["nats_per_char"]),
            "val nats/char": latest(self.evals["nats_per_char"]),
            "val loss/token": latest(self.evals["loss"]),
            # the file's name only: its folder's path holds the session's secret key
            "checkpoint": job.checkpoint_path.stem if job.checkpoint_path else "",
        }


def _thin(xs, *series, max_points=400):
    """Every k-th point of xs and each series, so a long run's chart stays light (the last point is
    kept): the chart is rebuilt every couple of seconds for every student watching a run."""
    k = max(1, math.ceil(len(xs) / max_points))
    if k > 1:
        xs, *series = (values[::k] + values[-1:] for values in (xs, *series))
    # numpy arrays: plotly checks a list element by element, ten times slower than the chart is to draw
    return tuple(np.asarray(values, dtype=float) for values in (xs, *series))


CHART_HEIGHT = 420
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
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
    return f"{name}{size} · {steps:,} steps"


def race_figure(logs, x_axis="elapsed", anchors=(), x_span=60):
    """All runs on one chart, in nats per character: train loss (thin line) and validation loss
    (dashed, markers) per run, one legend entry per run; the loss per token is in the hover.

    x_axis: "elapsed" (seconds, a fair race) or "step". anchors: (y, label) lines to draw.
    x_span: the axis' length before the first point arrives (it then follows the data from 0).
    """
    fig = go.Figure()
    for i, (log, name) in enumerate(zip(logs, legend_names(logs))):
        color = COLORS[i % len(COLORS)]
        x, y, per_token = _thin(log.steps[x_axis], log.steps["nats_per_char"], log.steps["loss"])
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                customdata=per_token,
                hovertemplate=HOVER,
                mode="lines" if len(x) > 20 else "lines+markers",  # a lone point shows
                name=legend_entry(name, log),
                legendgroup=name,
                line=dict(color=color, width=1.5),
                marker=dict(size=4),
                opacity=0.6,
            )
        )
        x, y, per_token = _thin(log.evals[x_axis], log.evals["nats_per_char"], log.evals["loss"])
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                customdata=per_token,
                hovertemplate=HOVER,
                mode="lines+markers",
                name=f"{name}, held-out text",
                legendgroup=name,
                showlegend=False,  # one entry per run: the caption says which line is which
                line=dict(color=color, width=2.5, dash="dash"),
                marker=dict(size=7),
            )
        )
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
        template="plotly_white",
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


def live_verdict(logs, x_axis):
    """Who leads the race on the chart, read from the runs' validation curves (the held-out text)
    on the chart's x axis; None for a chart of fewer than two runs (no race)."""
    if len(logs) < 2:
        return None
    curves = {name: (log.evals[x_axis], log.evals["nats_per_char"]) for name, log in zip(verdict_names(logs), logs)}
    verdict = race_verdict(curves)
    when = None if verdict is None else f"{verdict.at:.0f} s" if x_axis == "elapsed" else f"{verdict.at:,.0f} steps"
    return verdict_sentence(verdict, when)


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
            f" Your runs shared this server's processors with up to {others} runs of other people, "
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
        f"**The long race**: the bundled models, each trained about {minutes:.0f} minutes on one GPU, "
        f"scored on four plays they never train on. They are not the same size ({short_count(min(sizes))} to "
        f"{short_count(max(sizes))} parameters), so this ranks these models more than their cells."
    )
    verdict = long_race_verdict(curves)
    if verdict is not None:
        caption += " " + verdict_sentence(verdict, f"{verdict.at:.0f} minutes")
    return caption


LONG_RACE_COLORS = {"LSTM": "#d62728", "GRU": "#17becf", "GRU (z overwrites)": "#1f77b4", "RNN": "#7f7f7f"}


def long_race_figure(curves):
    """The bundled models' validation curves (lab.instruments.race.long_race) against minutes of training."""
    fig = go.Figure()
    for curve in curves:
        fig.add_trace(
            go.Scatter(
                x=curve.minutes,
                y=curve.nats_per_char,
                customdata=curve.step,
                hovertemplate=f"{curve.title}: %{{y:.3f}} nats/char at step %{{customdata:,}}<extra></extra>",
                mode="lines+markers",
                name=f"{curve.name} · {short_count(curve.parameters)} parameters · {curve.steps:,} steps",
                line=dict(color=LONG_RACE_COLORS.get(curve.name, "#2ca02c"), width=2),
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
        template="plotly_white",
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
    return [(value, f"the lab's {CELL_NAMES.get(best.cell, best.cell)}, trained for minutes on a GPU {value:.2f}")]


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


def draw_progress_and_samples(logs):
    """Under the chart: a progress bar per running run, each run's first and latest samples, the
    runs table, and where finished runs were saved."""
    names = {id(log): name for log, name in zip(logs, legend_names(logs))}  # what the chart calls them
    active = [log for log in logs if log.job.running]
    for log in active:
        last = log.last_step
        if log.job.queue_position:
            st.progress(
                0.0,
                text=f"**{names[id(log)]}** · waiting for this server's training budget: number "
                f"{log.job.queue_position} in the queue",
            )
            continue
        if last is None:
            st.progress(0.0, text=f"**{names[id(log)]}** · starting…")
            continue
        st.progress(
            min(1.0, last["progress"]),
            text=f"**{names[id(log)]}** · step {last['step']:,} · train loss {last['train_loss']:.3f} · "
            f"{last['tokens_per_s']:,.0f} tokens/s · ETA {format_eta(last['eta'])}",
        )
    shown = active or logs[-1:]
    for column, log in zip(st.columns(len(shown)) if shown else [], shown):
        with column:
            st.markdown(f"**Samples** · {names[id(log)]}")
            if log.sample is None:
                st.caption("The first sample comes after the first step.")
                continue
            if log.first_sample is not log.sample:  # how it wrote at the start, to compare with now
                st.caption(f"At step {log.first_sample['step']:,}")
                st.code(log.first_sample["text"], language=None, wrap_lines=True)
            st.caption(f"At step {log.sample['step']:,}" + (" (the latest)" if log.job.running else ""))
            st.code(log.sample["text"], language=None, wrap_lines=True)
    if not logs:
        return
    st.dataframe(
        pd.DataFrame([{**log.row(), "run": names[id(log)]} for log in logs]),
        hide_index=True,
        width="stretch",
        column_config={"params": st.column_config.NumberColumn(format="%d")},
    )
    for log in logs:
        job = log.job
        if job.status == "failed":
            st.error(f"{log.label} failed: {plain(job.message)}")
            if job.result is not None and job.result.steps > 0 and job.checkpoint_path is None:
                # the save failed (a full disk, say): the weights are still in the job, so try again
                if st.button("Try saving it again", key=f"train_resave_{id(job)}"):
                    with user_errors("Saving"):
                        job.save()
                        st.rerun()  # the run is saved now: drawn again without its failure
        elif job.checkpoint_path is not None:
            why = f" ({job.message})" if job.message != job.status else ""
            # its name only: the folder's path holds the session's secret key
            st.success(
                f"{log.label} {job.status}{plain(why)} and was saved: it is listed as "
                rf"**{plain(job.checkpoint_path.name.rsplit('_v', 1)[0])}\_latest (yours)** "
                "on the Sample and Gates pages."
            )


MORE_SECONDS = 60  # what "Continue this run" offers at first: a minute more


def draw_continue_controls(logs):
    """Under the runs table: "Continue this run" for each run that ended and was saved with its training
    state (lab.server.jobs.TrainingJob.continuation). Only a name's newest run offers it: continuing an older
    one would save versions that interleave with its successor's."""
    newest = {log.job.name: log for log in logs}
    for log in logs:
        job = log.job
        if job.status not in ("finished", "stopped") or job.checkpoint_path is None or newest[job.name] is not log:
            continue
        if not job.resumable:
            st.caption(f"{log.label} cannot be continued: {why_not_resumable(job.model.config, job.config)}.")
            continue
        with st.container(horizontal=True, vertical_alignment="bottom"):
            more = st.number_input(
                f"More seconds for {log.label}",
                FIELDS["seconds"].low,
                FIELDS["seconds"].high,
                value=MORE_SECONDS,
                key=f"train_more_{id(job)}",
            )
            if st.button(
                "Continue this run",
                key=f"train_continue_{id(job)}",
                help="It goes on from where it ended: the same weights, optimizer state and stream of "
                "batches, and saves the next version of its checkpoint. Its learning rate follows "
                "the cosine over the new total time, so it rises again at first, then anneals.",
            ):
                with user_errors("Continuing the run"):
                    continued = job.continuation(float(more))
                    continued.start()  # queued for the server's budget, like a new run
                    register_job(continued)
                    st.session_state.setdefault("train_logs", {})[id(continued)] = RunLog(
                        continued,
                        f"{job.name}, continued from step {continued.resume.step:,}",
                        log.params,
                        log.cell,
                        log.tokenizer,
                        log.vocab,
                        title=log.title,
                    )
                    st.rerun()  # the whole page: its Stop button and the live chart's refresh


def format_eta(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "…"
    seconds = int(round(seconds))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
