"""Lessons on how long a memory lasts: keep or overwrite, why the vanilla RNN forgets, and the
gate-bias study read as a lesson."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.data import DataError
from lab.experiments.ablation import LEARNED, SIGNIFICANT, compare_with_baseline, epoch_rows, load_results
from lab.instruments.memory import (
    bias_time_constants,
    constant_gate_retention,
    gradient_decay_per_step,
    keep_gate_biases,
    memory_spread,
)
from ui.cached_calls import cached_gradient, cached_retention, checkpoint_key
from ui.cell_labels import checkpoint_cell, with_cell_labels
from ui.common import ARM_COLORS, study_conclusion
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
)
from ui.memory_charts import (
    gradient_figure,
    log_range,
    longest_memory_layer,
    memory_spread_sentence,
    retention_band_figure,
)
from ui.plain_text import plain, said, user_errors

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
    background("leviathan", "gate_bias")
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
    implied = bias_time_constants([bias]).iloc[0]
    metrics = st.columns(3)
    metrics[0].metric("kept per step σ(b)", f"{implied['retention']:.4f}")
    metrics[1].metric("time constant 1 / (1 − σ(b))", f"{implied['tau']:.1f} steps")
    metrics[2].metric("half-life", f"{implied['half_life']:.1f} steps")
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    layers = None
    with user_errors("Measuring retention"):
        layers = [r.up_to(KEEP_LAGS) for r in cached_retention(*checkpoint_key(checkpoint), PASSAGE)]
    if layers is None:
        return
    layer, measured = longest_memory_layer(layers)
    label = name.removesuffix("_latest")
    reference = (
        f"a gate held at σ({bias:g}) = {implied['retention']:.3f}",
        constant_gate_retention(implied["retention"], measured.lags),
    )
    st.plotly_chart(
        retention_band_figure(measured, f"{label} · layer {layer}, measured on the passage", reference),
        key="lessons_keep_chart",
    )
    learned = keep_gate_biases(checkpoint.model)
    with st.expander("Show the numbers: the keep biases training learned, layer by layer"):
        st.table(
            with_cell_labels(learned)
            .rename(columns=LEARNED_COLUMNS)
            .style.format(  # lab's names -> what a student reads
                {LEARNED_COLUMNS[c]: "{:.3f}" for c in ("bias_median", "bias_q10", "bias_q90", "retention")}
                | {LEARNED_COLUMNS["half_life"]: "{:.1f}"}
            ),
            hide_index=True,
        )
    biases = learned[learned["layer"] == layer].iloc[0]
    seed_note = (
        " In this GRU's convention z overwrites, so the factor that keeps is 1 − z and its bias is "
        "−b_z: the numbers show −b_z."
        if biases["cell"] == "gru_seed"
        else ""
    )
    spread = memory_spread([(label, layer, measured)])
    notice(
        f"A keep factor of σ({bias:g}) = **{implied['retention']:.3f}** multiplies the old memory every step, "
        f"so k steps keep σ(b)^k: a time constant of {implied['tau']:.1f} steps and half gone after "
        f"**{implied['half_life']:.1f}**. Since τ = 1 + e^b, above b ≈ 1 each step up in b multiplies the "
        "time constant by about e: memory time grows exponentially with the bias.\n\n"
        f"{plain(label)} learned a median keep bias of **{biases['bias_median']:.2f}** in its layer {layer} "
        f"(10–90% of units: {biases['bias_q10']:.2f} to {biases['bias_q90']:.2f}), which alone would keep "
        f"{biases['retention']:.2f} per step, a half-life of {biases['half_life']:.1f} steps.{seed_note}\n\n"
        f"Measured on the passage, where the inputs and the state move the gate too: "
        f"{plain(memory_spread_sentence(spread))} The chart shows the same: the median unit's line falls "
        "fast, while the dashed line of the unit that keeps most stays high. A model's memory lives in a "
        "few such units, not in the typical one, and the next lesson's gradients reach far back along them."
    )
    check_yourself(
        "The Ablation page's study starts its PyTorch-convention GRU with b_z = +1. In the other "
        "convention, where z overwrites (the `gru_seed` cell), which sign of b_z makes a unit remember "
        "longer?",
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
FORGET_FIT = 30  # steps back over which the decay per step is fitted


def why_the_rnn_forgets():
    background("equations", "leviathan")
    cols = st.columns(2)
    steps = cols[0].slider("Steps T read before the loss", 20, 200, 100, 10, key="lessons_forget_steps")
    trained = cols[1].toggle(
        "Trained models (off: the same models at initialisation)", True, key="lessons_forget_trained"
    )
    curves, factors = [], {}
    for name in FORGET_MODELS:
        checkpoint = bundled(name)
        if checkpoint is None:
            continue
        with user_errors(f"Gradients of {name}"):
            norms = cached_gradient(
                *checkpoint_key(checkpoint), PASSAGE[: steps + 1], fresh_seed=None if trained else 0
            )
            label = name.removesuffix("_latest")
            curves.append((label, checkpoint_cell(checkpoint), norms))
            factors[label] = gradient_decay_per_step(norms, FORGET_FIT)
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
    metrics = st.columns(len(factors))
    for column, (label, g) in zip(metrics, factors.items()):
        column.metric(f"{label}: per step g", f"{g:.3f}", help=f"g^50 = {g**50:.1e}")
    slowest, fastest = max(factors, key=factors.get), min(factors, key=factors.get)
    notice(
        f"Over the last {FORGET_FIT} steps each curve falls by a roughly constant factor g per step, so "
        f"k steps back it is about g^k of its value at the loss: the picture of a product of one factor per "
        f"step. **{fastest}** loses fastest, g = {factors[fastest]:.2f}: 50 steps back its gradient is "
        f"g^50 = **{factors[fastest] ** 50:.1e}** of what it was, so training barely learns to use anything "
        f"that far back. **{slowest}** keeps the most, g = {factors[slowest]:.2f}, g^50 = "
        f"{factors[slowest] ** 50:.1e}.\n\nThe vanilla RNN squashes its whole state through tanh and one "
        "matrix every step, and that factor is usually below 1. A gated cell has a path where the factor is "
        "its keep gate, which training can push towards 1: the previous lesson found a few units whose memory "
        "lasts tens of steps or more, and the gradient reaches far back along them, even though the typical "
        "unit forgets within a step or two. Flip the toggle: at initialisation the curves differ too, so part "
        "of the gap is the cell, part is what training did."
    )
    check_yourself(
        "A gradient is multiplied by 0.7 per step back. How much of it is left 50 steps back, and "
        "what keep factor would leave 60% after 50 steps?",
        "0.7^50 ≈ 1.8 × 10⁻⁸: nothing a float32 gradient step can act on. To keep 60% after 50 steps "
        "the factor must be 0.6^(1/50) ≈ 0.990: a keep gate near 1, which is what gating offers and "
        "the vanilla RNN lacks.",
    )
    open_full_page("Memory", "Open the Memory page with T = " + str(steps), section="gradients", steps=steps)


# ---------------------------------------------------------------------------
# do gate biases matter over 1024 steps?

STUDY_METRICS = {  # epoch_rows column -> (label, format, what a higher value means)
    "val_accuracy": ("test accuracy", "{:.1%}", "better"),
    "val_loss": ("test loss (nats)", "{:.3f}", "worse"),
    "z_mean": ("mean update gate z (keeps)", "{:.3f}", "more memory kept per step"),
}


ARM_MEANINGS = {  # what each arm does, in a student's words (lab.experiments.ablation.ARMS has the details)
    "baseline": "every bias learnable, the update-gate bias starting at +1 (keep a little more)",
    "ablated": "the reset and update biases held at exactly 0",
    "chrono": "the update-gate bias starting at log U[1, T - 1] (keep for hundreds of steps), every bias learnable",
}


@st.cache_data(max_entries=4, show_spinner=False)
def cached_study(path, mtime):
    return load_results(path)


def gate_biases_over_1024_steps():
    background("gate_bias")
    path = shipped("ablation/results.json")
    if not path.is_file():
        st.warning(
            "This lesson reads the shipped gate-bias study (`checkpoints/ablation/results.json`), which is "
            "missing from this installation. Run it again with `python -m lab ablation`.",
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
        f"{plain(d['title'])} one grey pixel per step, **{d['sequence_length']} steps** per image, and names "
        f"the digit. {len(arms)} arms, {len(config['seeds'])} random seeds each, {config['epochs']} epochs "
        f"over {d['n_train']} training images:\n\n"
        + "\n".join(f"- **{arm}**: {ARM_MEANINGS.get(arm, '')}" for arm in arms)
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
                name=f"{arm} (mean of seeds)",
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
        legend=dict(orientation="h", y=-0.25),
    )
    st.plotly_chart(fig, key="lessons_study_chart")
    final = epochs[epochs["epoch"] == epochs["epoch"].max()].groupby("arm", sort=False)[metric]
    means, stds = final.mean(), final.std()
    columns = st.columns(len(means))
    for column, arm in zip(columns, means.index):
        column.metric(f"{arm}: final {label}", fmt.format(means[arm]), help=f"± {fmt.format(stds[arm])} across seeds")
    accuracy = {arm: summary[arm]["val_accuracy_mean"] for arm in arms if summary[arm]["val_accuracy_mean"] is not None}
    keeps = ", ".join(
        f"{summary[arm]['z_mean_final']:.2f} in the {arm} arm"
        for arm in arms
        if summary[arm]["z_mean_final"] is not None
    )
    if max(accuracy.values(), default=0.0) < LEARNED:
        reading = (
            "**What it cannot show.** Whether that matters for the task: the arms reach only "
            + " and ".join(f"{v:.0%}" for v in accuracy.values())
            + f" test accuracy against a chance level of {1 / d['num_classes']:.0%}. {config['epochs']} "
            "epochs leave them near the start of learning, where none is likely to use a memory "
            f"{d['sequence_length']} steps long yet; a longer run would answer the question."
        )
    else:
        reading = (
            f"**What it means.** Every arm learned to name digits far above chance "
            f"({1 / d['num_classes']:.0%}). How much a gate keeps per step is the arms' largest difference; "
            "whether it changed how well the model names the digits is what the test above decides, "
            "arm by arm, against the luck of the random seeds."
        )
    notice(
        f"**What the study says:** {study_conclusion(study)}\n\n"
        f"**What it shows.** The biases change the gates: on average the update gate keeps {keeps} per step. " + reading
    )
    ablated = {c["arm"]: c for c in compare_with_baseline(study)}.get("ablated")
    if ablated is None:  # fewer than two seeds an arm: no test, the spread cannot be measured
        check_yourself(
            "The ablated arm scores a little differently from the baseline. Can you conclude that the "
            "gate biases matter?",
            "No. With a single random seed a gap can be the luck of one initialisation: the study needs "
            "several seeds per arm before a difference means anything.",
        )
    else:
        side = "above" if ablated["difference"] > 0 else "below"
        check_yourself(
            f"The ablated arm ends {abs(100 * ablated['difference']):.1f} points {side} the baseline. "
            "Can you conclude that freezing the gate biases at 0 changes how well a GRU learns this task?",
            (
                f"No. Welch's t-test over the {ablated['n'][0]} and {ablated['n'][1]} random seeds gives "
                f"p = {ablated['p']:.2f}: a gap that size turns up between seeds alone, so the study cannot "
                "tell the arms apart on accuracy, even though their gates differ."
                if ablated["p"] >= SIGNIFICANT
                else f"For this task and length, yes: Welch's t-test over the {ablated['n'][0]} and "
                f"{ablated['n'][1]} random seeds gives p = {ablated['p']:.3f}, a gap that seeds alone "
                "rarely make. Other tasks, lengths and sizes may differ."
            ),
        )
    open_full_page(
        "Ablation", "Open the Ablation page, with three random seeds per arm for its live run", section="live", seeds=3
    )
