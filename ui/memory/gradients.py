"""The Memory page's fourth section: gradients through time, trained checkpoints against fresh models
of the same configuration (a fragment: its widgets rerun it alone)."""

import streamlit as st

from lab.words import count
from ui.memory.defaults import GRADIENT_MODELS
from ui.memory.settings import SECTIONS, key_of, mirror, model_label
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_gradient
from ui.shared.memory_charts import gradient_figure, log_range
from ui.shared.plain_text import user_errors


@fragment
def gradients(by_name, text):
    st.header(SECTIONS["gradients"])
    st.markdown(
        "$\\lVert \\partial L_T / \\partial h_t \\rVert$: how much the loss of the last prediction still "
        "depends on the hidden state $T - t$ steps earlier: the vanishing gradient of a vanilla RNN trained "
        "with backpropagation through time (BPTT). "
        "Left the trained checkpoints; right fresh models of the same configuration (random seed 0)."
    )
    cols = st.columns([3, 1])
    grad_chosen = cols[0].multiselect(
        "Checkpoints",
        list(by_name),
        default=[n for n in GRADIENT_MODELS if n in by_name],
        key="memory_grad_checkpoints",
        format_func=model_label,
    )
    steps = cols[1].slider("Steps T", 10, 400, step=10, key="memory_grad_steps")
    trained, fresh = [], []
    for name in grad_chosen:
        cell = by_name[name].cell
        with user_errors(f"Gradients of {model_label(name)}"):
            key = key_of(by_name, name)
            trained.append((model_label(name), cell, cached_gradient(*key, text[: steps + 1])))
            fresh.append((model_label(name), cell, cached_gradient(*key, text[: steps + 1], fresh_seed=0)))
    if trained:
        y_range = log_range(*[c[2] for c in trained + fresh])
        cols = st.columns(2)
        cols[0].plotly_chart(
            gradient_figure(trained, "trained (the checkpoints as saved)", y_range), key="memory_grad_trained"
        )
        cols[1].plotly_chart(
            gradient_figure(fresh, "at initialisation (same config, random seed 0)", y_range),
            key="memory_grad_fresh",
        )
        if len(text) < steps + 1:
            st.caption(f"The text has only {count(len(text), 'character')}, so T is shorter than the slider asks.")
        st.caption(
            "Distance 0 is the step whose output feeds the loss directly. A steep fall means a step far back "
            "barely moves the last prediction; a flat curve means it still does. A curve that leaves the "
            "bottom of the chart has underflowed to 0 in float32. A gated cell's gradient reaches far back "
            "along its few long-memory units (section 2)."
        )
    mirror()
