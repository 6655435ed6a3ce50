"""The Memory page's third section: a keep gate held constant (g to the power k, with the published
anchors), and what a keep-gate bias means as a time constant and a half-life."""

import pandas as pd
import streamlit as st

from lab.instruments.memory import bias_time_constants, constant_gate_retention
from ui.memory.settings import BIASES_MAX_CHARS, G_VALUES, mirror
from ui.shared.boundary import fragment
from ui.shared.common import show_table
from ui.shared.memory_charts import analytic_figure
from ui.shared.plain_text import plain, said

BIAS_NOTES = {
    0.0: "no bias: the gate starts half open",
    1.0: "the Ablation page's baseline starts b_z at +1: σ(1) = 0.731 keeps ~73% per step",
    6.2: "chrono initialisation for 1024 steps puts biases near +6: σ(6.2) ≈ 0.998, the GRU then ignores new input",
}

BIAS_COLUMNS = {
    "bias": "bias b",
    "retention": "kept per step σ(b)",
    "tau": "time constant τ (steps)",
    "half_life": "half-life (steps)",
}  # lab.instruments.memory.bias_time_constants' columns, as shown


def constant_gate_anchors():
    """What a keep gate held constant keeps, with the published anchors."""
    with st.expander("Anchors: what a constant keep gate does", expanded=False):
        anchor = constant_gate_retention(0.99999, [100, 1000, 100_000])
        st.table(
            pd.DataFrame(
                [
                    {
                        "reference": "A nearly shut GRU update gate, z = 0.00001, keeps 0.99999 per step",
                        "result": f"0.99999¹⁰⁰ = {anchor[0]:.5f}; after 1,000 steps {anchor[1]:.4f}; "
                        f"after 100,000 {anchor[2]:.3f}",
                    },
                    {
                        "reference": "An LSTM forget gate held at f = 1",
                        "result": "1ᵏ = 1: the cell state can be held untouched",
                    },
                    {
                        "reference": "A PyTorch GRU's update-gate bias +1 at initialisation (the Ablation page's "
                        "baseline, 1024-step pixel sequences)",
                        "result": "σ(1) = 0.731: ~73% kept per step",
                    },
                    {
                        "reference": "Chrono initialisation over 1024 steps: biases near +6 (here +6.2)",
                        "result": "σ(6.2) ≈ 0.998",
                    },
                ]
            )
        )


@fragment
def analytic():
    st.header("3 · The analytic picture: g to the power k")
    left, right = st.columns([2, 1])
    with left:
        g = st.select_slider("Keep gate held constant at g", G_VALUES, key="memory_g")
        st.plotly_chart(analytic_figure(g, [v for v in G_VALUES if v != g], 100_000), key="memory_gk_chart")
    with right:
        kept = constant_gate_retention(g, [10, 100, 1000])
        for k, value in zip((10, 100, 1000), kept):
            st.metric(f"g^{k:,}", f"{value:.5f}")
        st.markdown(
            "Even a nearly shut GRU update gate ($z = 0.00001$, keep $0.99999$) leaves "
            "$0.99999^{100} = 0.99900$: the memory leaks a little every step, and the leak compounds. "
            "The LSTM's $f = 1$ keeps $c$ exactly."
        )
    mirror()


@fragment
def bias_table():
    st.subheader("Keep-gate bias → time constant and half-life")
    biases_text = st.text_input(
        "Biases (comma separated)",
        key="memory_biases",
        max_chars=BIASES_MAX_CHARS,
        help="The bias of the factor that keeps: b_z for the PyTorch GRU, b_f for the LSTM, "
        "−b_z for the GRU where z overwrites.",
    )
    try:
        biases = [float(b) for b in biases_text.replace(";", ",").split(",") if b.strip()]
        if not biases:
            raise ValueError("type at least one number")
    except ValueError as e:
        st.error(f"Biases: could not read {plain(biases_text)} as numbers ({said(e)}).")
        biases = []
    if biases:
        table = bias_time_constants(biases)
        table["note"] = [BIAS_NOTES.get(b, "") for b in table["bias"]]
        show_table(table, BIAS_COLUMNS, {"bias": "{:g}", "retention": "{:.4f}", "tau": "{:.1f}", "half_life": "{:.1f}"})
        st.caption(
            "retention σ(b) with inputs at zero; time constant τ = 1/(1 − σ(b)); half-life: the k with σ(b)^k = ½."
        )
    mirror()
