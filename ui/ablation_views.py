"""The gate-bias study's results as the Ablation page draws them, for the shipped study and a live run
alike: what the study says, the accuracy table, the loss and accuracy curves, and the gate statistics
(z and r per epoch, z over the sequence, its distribution), with the frozen-bias check."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.experiments.ablation import epoch_rows, step_rows
from lab.words import count
from ui.common import ARM_COLORS, study_conclusion
from ui.plain_text import plain


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


def show_results(results, key):
    """What one study (shipped or live) found: its conclusion, accuracy table and training curves."""
    d, cfg = results["dataset"], results["config"]
    st.markdown(f"**What this study says:** {plain(study_conclusion(results))}")
    seeds = cfg["seeds"]
    st.markdown(
        f"**{d['title']}**: {count(d['n_train'], 'training sequence')} / {count(d['n_test'], 'test sequence')} of "
        f"**{count(d['sequence_length'], 'step')}**; {count(results['model']['parameters'], 'parameter')} "
        f"({results['model']['backend']}); {count(cfg['epochs'], 'epoch')} of "
        f"{count(results['training']['steps_per_epoch'], 'AdamW step')} (batch {cfg['batch_size']}, lr "
        f"{cfg['lr']:g} → {cfg['min_lr']:g}), {'random seed' if len(seeds) == 1 else 'random seeds'} "
        f"{', '.join(map(str, seeds))}." + ("" if results["complete"] else " **Incomplete study.**")
    )
    # static, as ui.common.show_table's tables (a few rows, no grid to load); the arms are described above
    numbers = ("test loss", "train loss (last epoch)", "mean z", "mean r", "b_z = b_iz + b_hz")
    st.table(accuracy_table(results).style.format({c: "{:.3f}" for c in numbers}, na_rep="–"), hide_index=True)
    epochs, steps = pd.DataFrame(epoch_rows(results)), pd.DataFrame(step_rows(results))
    if steps.empty:
        st.info("No training steps recorded yet.")
        return
    trained = epochs[epochs["step"] > 0]
    left, right = st.columns(2)
    show_loss(steps, "Training loss per step (one line per random seed)", f"ablation_{key}_loss", 340, left)
    if trained["epoch"].nunique() < 2:  # one point per arm is no curve: the table above holds it
        right.caption("Test accuracy after one epoch: the table above holds it; a curve over epochs needs two.")
        return
    acc = go.Figure()
    for arm, g in trained.groupby("arm", sort=False):
        m = g.groupby("epoch")["val_accuracy"].agg(["mean", "std", "count"]).reset_index().fillna(0)
        band(acc, m["epoch"], 100 * (m["mean"] - m["std"]), 100 * (m["mean"] + m["std"]), ARM_COLORS.get(arm), arm)
        acc.add_trace(
            go.Scatter(
                x=m["epoch"],
                y=100 * m["mean"],
                mode="lines+markers",
                name=f"{arm} (mean ± std)",
                line=dict(color=ARM_COLORS.get(arm)),
                legendgroup=arm,
            )
        )
    acc.update_layout(
        title="Test accuracy per epoch, mean ± std over random seeds",
        xaxis_title="epoch",
        yaxis_title="accuracy (%)",
        yaxis_range=[0, 100],
        height=340,
        margin=dict(t=40, b=10),
    )
    right.plotly_chart(acc, key=f"ablation_{key}_acc")


def show_gate_statistics(results, key):
    """What training did to one study's gates (shipped or live): z and r per epoch, z over the sequence
    and its distribution at the end, and the frozen-bias check."""
    cfg, epochs = results["config"], pd.DataFrame(epoch_rows(results))
    if epochs.empty:
        st.info("No epoch finished yet.")
        return
    st.caption(
        f"z and r of the first {cfg['gate_batch']} test sequences, traced through the reference twin of the "
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
        f"{r['arm']}, random seed {r['seed']}: {r['frozen_bias_check']}"
        for r in results["runs"]
        if r["frozen_bias_check"]
    ]
    if checks:
        st.success("Frozen-bias check (exact zeros after every epoch): " + "; ".join(checks))
