"""Lessons on how long a memory lasts: keep or overwrite, why the vanilla RNN forgets, and the
gate-bias study read as a lesson."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.data import DataError
from lab.experiments.ablation import ARM_WORDS, answer, arm_title, epoch_rows, load_results, verdict_rule
from lab.instruments.memory import constant_gate_retention, gradient_decay_fit, keep_gate_biases, memory_spread
from lab.lessons.memory import (
    ablated_check,
    band_sentence,
    forgetting_sentences,
    gradient_metric,
    keep_bias,
    learned_bias_sentence,
    memory_spread_sentence,
    study_reading,
)
from lab.lessons.words import share_kept, steps, steps_figure
from lab.nets.families import FAMILIES
from lab.words import count, layer_name
from ui.cell_labels import cell_label, checkpoint_cell, with_cell_labels
from ui.lessons.common import (
    PASSAGE,
    SUBWORD_MODEL,
    background,
    bundled,
    check_yourself,
    model_choice,
    notice,
    open_full_page,
    shipped,
    uses,
)
from ui.shared.cached_calls import cached_gradient, cached_retention, checkpoint_key
from ui.shared.chart_style import LEGEND_ABOVE
from ui.shared.common import ARM_COLORS
from ui.shared.memory_charts import gradient_figure, log_range, longest_memory_layer, retention_band_figure
from ui.shared.model_names import bundled_title
from ui.shared.plain_text import plain, said, user_errors

# ---------------------------------------------------------------------------
# keep or overwrite

KEEP_MODELS = ["char-gru-torch_latest", "char-gru-seed_latest", "char-lstm_latest", SUBWORD_MODEL]
KEEP_LAGS = 128  # long enough to show memories of over 100 tokens
# lab.instruments.memory.keep_gate_biases' columns -> what a student reads
LEARNED_COLUMNS = {
    "keep_gate": "keep factor",
    "bias_median": "median keep bias",
    "bias_q10": "keep bias (10th percentile)",
    "bias_q90": "keep bias (90th percentile)",
    "retention": "kept per step at the median bias",
    "half_life": "half-life (steps)",
}


def keep_or_overwrite():
    cols = st.columns(2)
    bias = cols[0].slider(
        "Keep-gate bias b",
        -2.0,
        8.0,
        1.0,
        0.1,
        key="lessons_keep_bias",
        help="The bias of the factor that keeps, with every input at zero.",
    )
    with cols[1]:
        name = model_choice("lessons_keep_model", KEEP_MODELS, KEEP_MODELS[0], "Trained model to compare")
    implied = keep_bias(bias)
    metrics = st.columns(3)
    metrics[0].metric("kept per step σ(b)", share_kept(implied.retention))
    metrics[1].metric("time constant 1 / (1 − σ(b))", steps(implied.tau))
    metrics[2].metric("half-life", steps(implied.half_life))
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    layers = None
    with user_errors("Measuring retention"):
        layers = [r.up_to(KEEP_LAGS) for r in cached_retention(*checkpoint_key(checkpoint), PASSAGE)]
    if layers is None:
        return
    layer, measured = longest_memory_layer(layers)
    label = bundled_title(name)
    reference = (
        f"a gate held at σ({bias:g}) = {share_kept(implied.retention)}",
        constant_gate_retention(implied.retention, measured.lags),
    )
    st.plotly_chart(
        retention_band_figure(measured, f"{label} · {layer_name(layer)}, measured on the passage", reference),
        key="lessons_keep_chart",
    )
    learned = keep_gate_biases(checkpoint.model)
    with st.expander("Show the numbers: the keep biases training learned, layer by layer"):
        shown = learned.assign(
            layer=learned["layer"] + 1,  # numbered from 1, as every page names layers
            retention=learned["retention"].map(share_kept),
            half_life=learned["half_life"].map(steps_figure),
        )  # the same precision as the sentences
        st.table(
            with_cell_labels(shown)
            .rename(columns=LEARNED_COLUMNS)
            .style.format({LEARNED_COLUMNS[c]: "{:.2f}" for c in ("bias_median", "bias_q10", "bias_q90")}),
            hide_index=True,
        )
    biases = learned[learned["layer"] == layer].iloc[0]
    seed_note = (  # the families where z overwrites (the seeds' GRU, the minGRU) keep by 1 - z
        f" In the {cell_label(biases['cell'])} z overwrites, so the factor that keeps is 1 − z and its bias is "
        "−b_z: the numbers show −b_z."
        if FAMILIES[biases["cell"]].keep_label == "1 - z"
        else ""
    )
    spread = memory_spread([(label, layer, measured)])
    uses((name, checkpoint))
    notice(
        f"{implied.sentence()}\n\n{learned_bias_sentence(plain(label), biases)}{seed_note}\n\n"
        f"Measured on the passage, where the inputs and the state move the gate too: "
        f"{plain(memory_spread_sentence(spread))} {band_sentence(measured)} The next lesson follows the "
        "gradient back along such paths."
    )
    check_yourself(
        "The Ablation page's study starts its PyTorch-convention GRU with b_z = +1. In the other "
        f"convention, where z overwrites (the convention of the {bundled_title('char-gru-seed')} and "
        f"{bundled_title(SUBWORD_MODEL)}), which sign of "
        "b_z makes a unit remember longer?",
        "Negative. There z says how much to overwrite (h = (1 − z)·h + z·h̃), so the "
        "factor that keeps is 1 − σ(b_z) = σ(−b_z). In PyTorch's convention z keeps, and +1 means "
        "remember more. Same letter, opposite meaning: that is why the lab keeps two GRU cells.",
    )
    open_full_page(
        "Memory",
        "Open the Memory page with this bias in its table",
        section="analytic",
        biases=f"-1, 0, 1, 2, 4, 6.2, {bias:g}",
        lag=KEEP_LAGS,
    )


# ---------------------------------------------------------------------------
# why the vanilla RNN forgets

FORGET_MODELS = ["char-rnn_latest", "char-gru-torch_latest", "char-lstm_latest"]
FORGET_FIT = 30  # the steps nearest the loss over which the decay per step is fitted (all of them when fewer)


def why_the_rnn_forgets():
    background("equations")
    cols = st.columns(2)
    read = cols[0].slider("Steps T read before the loss", 20, 200, 100, 10, key="lessons_forget_steps")
    trained = cols[1].toggle(
        "Trained models (off: the same models at initialisation)", True, key="lessons_forget_trained"
    )
    curves, fits, cells, named = [], {}, {}, []
    for name in FORGET_MODELS:
        checkpoint = bundled(name)
        if checkpoint is None:
            continue
        named.append((name, checkpoint))
        label = bundled_title(name)
        with user_errors(f"Gradients of {label}"):
            norms = cached_gradient(*checkpoint_key(checkpoint), PASSAGE[: read + 1], fresh_seed=None if trained else 0)
            curves.append((label, checkpoint_cell(checkpoint), norms))
            fits[label] = gradient_decay_fit(norms, FORGET_FIT - 1)
            cells[label] = checkpoint_cell(checkpoint)
    if not curves:
        return
    st.plotly_chart(
        gradient_figure(
            curves,
            "trained" if trained else "at initialisation (torch seed 0)",
            log_range(*[c[2] for c in curves]),
        ),
        key="lessons_forget_chart",
    )
    metrics = st.columns(len(fits))
    for column, (label, fit) in zip(metrics, fits.items()):
        title, value, said = gradient_metric(label, fit)  # the g, g^k and R² the notice says
        column.metric(title, value, help=said)
    uses(*named, untrained=not trained)
    notice(forgetting_sentences(fits, cells, read))
    check_yourself(
        "A gradient is multiplied by 0.7 per step back. How much of it is left 50 steps back, and "
        "what keep factor would leave 60% after 50 steps?",
        "0.7^50 ≈ 1.8 × 10⁻⁸: nothing a float32 gradient step can act on. To keep 60% after 50 steps "
        "the factor must be 0.6^(1/50) ≈ 0.990: a keep gate near 1, which is what gating offers and "
        "the vanilla RNN lacks.",
    )
    open_full_page("Memory", "Open the Memory page with T = " + str(read), section="gradients", steps=read)


# ---------------------------------------------------------------------------
# do gate biases matter over 1024 steps?

STUDY_METRICS = {  # epoch_rows column -> (label, format, what a higher value means)
    "val_accuracy": ("test accuracy", "{:.1%}", "better"),
    "val_loss": ("test loss (nats)", "{:.3f}", "worse"),
    "z_mean": ("mean update gate z (keeps)", "{:.3f}", "more memory kept per step"),
}


@st.cache_data(max_entries=4, show_spinner=False)
def cached_study(path, mtime):
    return load_results(path)


def gate_biases_over_1024_steps():
    background("gate_bias")
    path = shipped("ablation/results.json")
    if not path.is_file():
        st.warning(
            "This lesson reads the gate-bias study that comes with this lab, which is missing from this "
            "installation: ask whoever runs this lab to run the study again.",
            icon="📦",
        )
        return
    study = None
    try:
        study = cached_study(str(path), path.stat().st_mtime)
    except (DataError, OSError) as e:
        st.error(f"Could not read the gate-bias study: {said(e)}")
    if study is None:
        return
    d, config, summary = study["dataset"], study["config"], study["summary"]
    arms = list(summary)
    st.markdown(
        f"**What was run.** A one-layer GRU in PyTorch's convention (H = {config['hidden_size']}) reads "
        f"{plain(d['title'])} one grey pixel per step, **{count(d['sequence_length'], 'step')}** per image, and "
        f"names the digit. {count(len(arms), 'arm')}, {count(len(config['seeds']), 'random seed')} each, "
        f"{count(config['epochs'], 'epoch')} over {count(d['n_train'], 'training image')}:\n\n"
        # each arm by its name in a student's words (lab.experiments.ablation.ARM_WORDS, the Ablation page's), a
        # name of no record as the file has it, inert
        + "\n".join(f"- **{plain(arm_title(arm))}**: {ARM_WORDS.get(arm, '')}" for arm in arms)
    )
    metric = st.radio(
        "Follow",
        list(STUDY_METRICS),
        format_func=lambda m: STUDY_METRICS[m][0],
        horizontal=True,
        key="lessons_study_metric",
    )
    label, fmt, higher = STUDY_METRICS[metric]
    epochs = pd.DataFrame(epoch_rows(study)).dropna(subset=[metric])
    by_epoch = epochs.groupby(["arm", "epoch"], sort=False)[metric].agg(["mean", "std"]).reset_index()
    fig = go.Figure(
        [
            go.Scatter(
                x=g["epoch"],
                y=g["mean"],
                mode="lines+markers",
                name=f"{arm_title(arm)} (mean of seeds)",
                line=dict(color=ARM_COLORS.get(arm)),
                error_y=dict(type="data", array=g["std"].fillna(0), visible=True),
            )
            for arm, g in by_epoch.groupby("arm", sort=False)
        ]
    )
    if metric == "val_accuracy":
        fig.add_hline(y=1 / d["num_classes"], line_dash="dot", annotation_text="chance")
    fig.update_layout(
        height=320,
        margin=dict(l=60, r=10, t=10, b=40),
        xaxis_title="epoch",
        yaxis_title=label,
        legend=LEGEND_ABOVE,
    )
    st.plotly_chart(fig, key="lessons_study_chart")
    final = epochs[epochs["epoch"] == epochs["epoch"].max()].groupby("arm", sort=False)[metric]
    means, stds = final.mean(), final.std()
    columns = st.columns(len(means))
    for column, arm in zip(columns, means.index):
        column.metric(
            f"{plain(arm_title(arm))}: final {label}",
            fmt.format(means[arm]),
            help=f"± {fmt.format(stds[arm])} across seeds",
        )
    # one verdict rule on the page, stated once (lab.experiments.ablation.gap_verdict): the answer, the reading and
    # the check below all follow it; the sentences are Markdown, so the file's arm names in them are made inert
    reading = study_reading(summary, d, config["epochs"], title=lambda arm: plain(arm_title(arm)))
    notice(
        f"**What the study says.** {plain(answer(study))}\n\n**How this lab decides.** {verdict_rule()}\n\n{reading}"
    )
    check_yourself(*ablated_check(study))
    open_full_page(
        "Ablation", "Open the Ablation page, with three random seeds per arm for its live run", section="live", seeds=3
    )
