"""The gate-bias study's results as the Ablation page draws them, for the shipped study and a live run
alike: its answer (one chart of the arms and a sentence a student can repeat), its details (the
statistics, the accuracy table, the loss curves), and the gate statistics (z and r per epoch, z over
the sequence, its distribution), with the frozen-bias check."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.experiments.ablation import ARM_WORDS, answer, conclusion, epoch_rows, step_rows
from lab.words import count
from ui.cell_labels import run_by
from ui.shared.chart_style import WHITE
from ui.shared.common import ARM_COLORS
from ui.shared.plain_text import plain


def band(fig, x, low, high, color, name):
    """A shaded q10-q90 (or mean ± std) band under a line."""
    fig.add_trace(
        go.Scatter(
            x=list(x) + list(x)[::-1],
            y=list(high) + list(low)[::-1],
            fill="toself",
            fillcolor=color,
            opacity=0.15,
            line=dict(width=0),
            hoverinfo="skip",
            showlegend=False,
            legendgroup=name,
        )
    )


def loss_figure(steps, title, height=320):
    """The training loss per step, one line per (arm, random seed): `steps` has columns arm, seed, step,
    train_loss (lab.experiments.ablation.step_rows, or a live run's step events)."""
    fig = go.Figure()
    for (arm, seed), g in steps.groupby(["arm", "seed"]):
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["train_loss"],
                mode="lines",
                name=f"{arm}, random seed {seed}",
                line=dict(color=ARM_COLORS.get(arm), width=1.5),
                legendgroup=arm,
            )
        )
    fig.update_layout(
        title=title, xaxis_title="step", yaxis_title="cross-entropy", height=height, margin=dict(t=40, b=10)
    )
    return fig


def show_loss(steps, title, key, height=320, where=st):
    """The training loss chart, when some run has a line to draw (two steps or more); else a sentence
    with the losses so far: a chart of single points draws nothing."""
    if steps.groupby(["arm", "seed"]).size().max() >= 2:
        where.plotly_chart(loss_figure(steps, title, height), key=key)
        return
    firsts = ", ".join(
        f"{arm}, random seed {seed}: {g['train_loss'].iloc[-1]:.3f}"
        for (arm, seed), g in steps.groupby(["arm", "seed"])
    )
    where.caption(f"Training loss after the first step ({firsts}): a curve needs two steps.")


def accuracy_table(results):
    rows = []
    for arm, s in results["summary"].items():
        mean, std = s["val_accuracy_mean"], s["val_accuracy_std"]
        rows.append(
            {
                "arm": arm,
                "random seeds": s["n_seeds"],
                "test accuracy": "–"
                if mean is None
                else f"{100 * mean:.1f}%" + ("" if std is None else f" ± {100 * std:.1f}"),
                "per random seed": ", ".join(
                    f"{100 * v:.1f}%" for v in s["val_accuracy_by_seed"].values() if v is not None
                ),
                "test loss": s["val_loss_mean"],
                "train loss (last epoch)": s["train_loss_mean"],
                "mean z": s["z_mean_final"],
                "mean r": s["r_mean_final"],
                "b_z = b_iz + b_hz": s["b_z_mean_final"],
            }
        )
    return pd.DataFrame(rows)


def trained_epochs(results):
    """The study's epoch rows after training began (epoch 0 is the untrained model's)."""
    epochs = pd.DataFrame(epoch_rows(results))
    return epochs[epochs["step"] > 0] if len(epochs) else epochs


def answer_figure(trained, num_classes):
    """The study's answer in one chart: each arm's test accuracy per epoch (mean over its random seeds, a
    band of one standard deviation), named in a student's words, with what guessing scores. `trained`:
    trained_epochs."""
    fig = go.Figure()
    for arm, g in trained.groupby("arm", sort=False):
        m = g.groupby("epoch")["val_accuracy"].agg(["mean", "std"]).reset_index().fillna(0)
        band(fig, m["epoch"], 100 * (m["mean"] - m["std"]), 100 * (m["mean"] + m["std"]), ARM_COLORS.get(arm), arm)
        fig.add_trace(
            go.Scatter(
                x=m["epoch"],
                y=100 * m["mean"],
                mode="lines+markers",
                name=ARM_WORDS.get(arm, arm),
                line=dict(color=ARM_COLORS.get(arm), width=2.5),
                legendgroup=arm,
            )
        )
    fig.add_hline(y=100 / num_classes, line_dash="dot", annotation_text="guessing", line_color="#888")
    fig.update_layout(
        xaxis_title="epoch (one pass over the training images)",
        yaxis_title="test images named correctly (%)",
        yaxis_range=[0, 100],
        height=290,
        margin=dict(l=10, r=10, t=10, b=10),
        legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
        template=WHITE,
    )
    return fig


def show_answer(results, key):
    """What one study (shipped or live) answers: its chart of the arms, and the sentence a student can
    repeat (lab.experiments.ablation.answer), both computed from the same results."""
    trained = trained_epochs(results)
    if len(trained) and trained["epoch"].nunique() >= 2:
        st.plotly_chart(answer_figure(trained, results["dataset"]["num_classes"]), key=f"ablation_{key}_answer")
    else:  # one point per arm is no curve
        st.caption("Each arm's test accuracy after one epoch is in the answer below; a curve over epochs needs two.")
    st.markdown(f"**The answer.** {plain(answer(results))}")


def show_details(results, key):
    """A study's statistics and training: its conclusion as the statistics put it (Welch's t-test), what
    was trained, the accuracy table and the loss curves."""
    d, cfg = results["dataset"], results["config"]
    st.markdown(f"**What this study says:** {plain(conclusion(results))}")
    seeds = cfg["seeds"]
    st.markdown(
        f"**{plain(d['title'])}**: {count(d['n_train'], 'training sequence')} / "
        f"{count(d['n_test'], 'test sequence')} of "
        f"**{count(d['sequence_length'], 'step')}**; {count(results['model']['parameters'], 'parameter')}, "
        f"{run_by(results['model']['backend'])}; {count(cfg['epochs'], 'epoch')} of "
        f"{count(results['training']['steps_per_epoch'], 'AdamW step')} (batch {cfg['batch_size']}, lr "
        f"{cfg['lr']:g} → {cfg['min_lr']:g}), {'random seed' if len(seeds) == 1 else 'random seeds'} "
        f"{', '.join(map(str, seeds))}." + ("" if results["complete"] else " **Incomplete study.**")
    )
    # static, as ui.shared.common.show_table's tables (a few rows, no grid to load); the arms are described above
    numbers = ("test loss", "train loss (last epoch)", "mean z", "mean r", "b_z = b_iz + b_hz")
    st.table(accuracy_table(results).style.format({c: "{:.3f}" for c in numbers}, na_rep="–"), hide_index=True)
    steps = pd.DataFrame(step_rows(results))
    if steps.empty:
        st.info("No training steps recorded yet.")
        return
    show_loss(steps, "Training loss per step (one line per random seed)", f"ablation_{key}_loss", 340)


def show_gate_statistics(results, key):
    """What training did to one study's gates (shipped or live): z and r per epoch, z over the sequence
    and its distribution at the end, and the frozen-bias check."""
    cfg, epochs = results["config"], pd.DataFrame(epoch_rows(results))
    if epochs.empty:
        st.info("No epoch finished yet.")
        return
    st.caption(
        f"z and r of the first {cfg['gate_batch']} test sequences, traced through the step-by-step twin of the "
        "model at initialisation (epoch 0) and after every epoch; lines are means over random seeds, bands the "
        "10th-90th percentile of all gate values (every unit, step and sequence)."
    )
    cols = st.columns(2)
    for col, gate in zip(cols, ("z", "r")):
        fig = go.Figure()
        for arm, g in epochs.groupby("arm", sort=False):
            m = g.groupby("epoch")[[f"{gate}_mean", f"{gate}_q10", f"{gate}_q90"]].mean().reset_index()
            band(fig, m["epoch"], m[f"{gate}_q10"], m[f"{gate}_q90"], ARM_COLORS.get(arm), arm)
            fig.add_trace(
                go.Scatter(
                    x=m["epoch"],
                    y=m[f"{gate}_mean"],
                    mode="lines+markers",
                    name=arm,
                    line=dict(color=ARM_COLORS.get(arm)),
                    legendgroup=arm,
                )
            )
        what = "update gate z (keeps memory)" if gate == "z" else "reset gate r"
        fig.update_layout(
            title=f"Mean {what} per epoch", xaxis_title="epoch", yaxis_range=[0, 1], height=320, margin=dict(t=40, b=10)
        )
        col.plotly_chart(fig, key=f"ablation_{key}_gate_{gate}")
    cols = st.columns(2)
    profile, hist = go.Figure(), go.Figure()
    for run in results["runs"]:
        if not run["epochs"]:
            continue
        z = run["epochs"][-1]["gates"]["z"]
        first = run["seed"] == results["summary"][run["arm"]]["seeds"][0]
        profile.add_trace(
            go.Scatter(
                x=z["time"]["t_start"],
                y=z["time"]["mean"],
                mode="lines",
                line_shape="hv",
                name=f"{run['arm']}, random seed {run['seed']}",
                line=dict(color=ARM_COLORS.get(run["arm"])),
                legendgroup=run["arm"],
            )
        )
        if first:
            edges = [i / len(z["histogram"]) for i in range(len(z["histogram"]))]
            hist.add_trace(
                go.Bar(
                    x=edges,
                    y=z["histogram"],
                    name=f"{run['arm']}, random seed {run['seed']}",
                    offset=0,
                    width=1 / len(z["histogram"]),
                    marker_color=ARM_COLORS.get(run["arm"]),
                    opacity=0.6,
                )
            )
    profile.update_layout(
        title="Mean z over the sequence, last epoch",
        xaxis_title="time step",
        yaxis_title="z",
        height=320,
        margin=dict(t=40, b=10),
    )
    hist.update_layout(
        title="Distribution of z, last epoch (first random seed)",
        xaxis_title="z",
        yaxis_title="fraction",
        barmode="overlay",
        height=320,
        margin=dict(t=40, b=10),
    )
    cols[0].plotly_chart(profile, key=f"ablation_{key}_profile")
    cols[1].plotly_chart(hist, key=f"ablation_{key}_hist")
    checks = [
        f"{plain(r['arm'])}, random seed {plain(r['seed'])}: {plain(r['frozen_bias_check'])}"
        for r in results["runs"]
        if r["frozen_bias_check"]
    ]
    if checks:
        st.success("Frozen-bias check (exact zeros after every epoch): " + "; ".join(checks))
