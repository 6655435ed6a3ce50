"""Memory: how long each cell remembers, in five sections, one on the screen at a time (chosen at the
top, kept in the link): how far a changed token travels in each model's state (one measure for every
cell, the vanilla RNN's included: the first view compares them all); measured retention of the keep
gates as a spread over the units (the typical unit forgets within a step or two, a few units keep half
for over 100 tokens) with the longest memories coloured on the text; the analytic g^k picture and bias
half-lives; gradients through time; the delayed-recall probe. Only the section shown is computed and
drawn. Each section is a fragment: its slider reruns it alone."""

import pandas as pd
import streamlit as st

from lab.experiments.probe import TOY_TASKS
from lab.instruments.memory import (
    KEEP_GATE_LABELS,
    MAX_RETENTION_LAG,
    MEMORY_SPANS,
    bias_time_constants,
    constant_gate_retention,
    memory_spread,
)
from lab.lessons.memory import half_life_words, memory_spread_sentence, reach_sentence
from lab.nets.cells import CELLS
from lab.words import count
from ui.app.frame import setup_page
from ui.cell_labels import cell_label
from ui.memory.defaults import GRADIENT_MODELS, GRADIENT_STEPS, REACH_LAG, REACH_MODELS, RETENTION_MODELS, TEXT
from ui.memory.probe import probe_section
from ui.shared.cached_calls import cached_gradient, cached_reach, cached_retention, cached_trace, checkpoint_key
from ui.shared.checkpoint_picker import NO_CHECKPOINTS, by_listed_name, checkpoint_infos
from ui.shared.coloured_text import activation_html
from ui.shared.common import section_choice, show_table
from ui.shared.links import Field, mirror_to_url, restore_from_url
from ui.shared.memory_charts import (
    analytic_figure,
    gradient_figure,
    log_range,
    longest_memory_layer,
    memory_spread_figure,
    reach_figure,
    retention_band_figure,
)
from ui.shared.model_names import model_title
from ui.shared.plain_text import plain, said, user_errors

setup_page("Memory")
st.title("🧠 Memory")
st.caption(
    "Two views of memory: "
    "what the keep gates let survive, and how strongly the last prediction still depends on a step long ago. "
    "Then a task that needs memory and nothing else."
)
SECTIONS = {  # URL value -> what the choice at the top says
    "reach": "1 · How far a change travels",
    "units": "2 · How long each unit remembers",
    "analytic": "3 · A keep gate held constant",
    "gradients": "4 · Gradients through time",
    "probe": "5 · A task that needs memory",
}

G_VALUES = [0.5, 0.731, 0.9, 0.99, 0.999, 0.9999, 0.99999]
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
SPREAD_COLUMNS = {
    "name": "model",
    "layer": "layer",
    "units": "units",
    "median_half_life": "the median unit keeps half for",
    "longest_half_life": "the longest-memory unit keeps half for",
    **{f"longer_than_{k}": f"share keeping more than half after {count(k, 'token')}" for k in MEMORY_SPANS},
}  # lab.instruments.memory.memory_spread's columns, as shown

infos = checkpoint_infos(("lm", "scan_markov"))
by_name = by_listed_name(infos)  # a student's file as "yours: NAME", beside a bundled one of that name
if not infos:
    st.warning(NO_CHECKPOINTS)


def key_of(name):
    return checkpoint_key(by_name[name])


TEXT_MAX_CHARS, BIASES_MAX_CHARS = 4000, 200  # the boxes and the link alike
# the page's settings as they appear in a link: ?text=...&lag=...&g=...&biases=...
SETTINGS = {
    "section": (Field("choice", "Section", choices=tuple(SECTIONS)), "memory_section"),
    "text": (Field("text", "Text", high=TEXT_MAX_CHARS), "memory_text"),
    "lag": (Field("int", "Longest lag", 8, MAX_RETENTION_LAG), "memory_max_lag"),
    "g": (Field("float", "Keep gate g", 0.5, 0.99999), "memory_g"),
    "biases": (Field("text", "Biases", high=BIASES_MAX_CHARS), "memory_biases"),
    "steps": (Field("int", "Steps T", 10, 400), "memory_grad_steps"),
    "probe_task": (Field("choice", "Probe task", choices=tuple(TOY_TASKS)), "memory_probe_task"),
    "probe_cell": (Field("choice", "Probe cell", choices=tuple(CELLS)), "memory_probe_cell"),
}
DEFAULTS = {
    "section": "reach",
    "text": TEXT,
    "lag": 128,
    "g": 0.99,
    "biases": "-1, 0, 1, 2, 4, 6.2",
    "steps": GRADIENT_STEPS,
    "probe_task": "recall",
    "probe_cell": "rnn",
}
restore_from_url(SETTINGS, DEFAULTS)
if st.session_state.memory_g not in G_VALUES:  # the slider offers these values only
    st.session_state.memory_g = min(G_VALUES, key=lambda g: abs(g - st.session_state.memory_g))
st.session_state.memory_max_lag -= st.session_state.memory_max_lag % 8  # the slider's step
st.session_state.memory_grad_steps -= st.session_state.memory_grad_steps % 10
section = section_choice(SECTIONS, "memory_section")
if section in ("units", "gradients"):
    text = st.text_area(
        "Text the models read (for retention and gradients)", height=120, key="memory_text", max_chars=TEXT_MAX_CHARS
    )


def mirror():
    """The URL follows the settings: every fragment calls this, since a fragment's rerun skips the
    lines of the page outside it."""
    mirror_to_url(SETTINGS, DEFAULTS)


def model_label(name):
    """A checkpoint's listed name as every page names it (ui.shared.model_names)."""
    return model_title(name)


# ---------------------------------------------------------------------------
@st.fragment
def change_reach_view():
    """Every model's memory measured one way, the vanilla RNN's included: how far a changed token travels."""
    st.header(SECTIONS["reach"])
    st.markdown(
        "Change one token of a text and let each model read both versions. How much of the difference is "
        "still in its state $k$ tokens later? A state that forgets lets the change fade; a state that remembers "
        "carries it. The same measure for every cell, gates or none."
    )
    chosen = st.session_state.setdefault("memory_reach_checkpoints", [n for n in REACH_MODELS if n in by_name])
    chosen = [name for name in chosen if name in by_name]
    curves = []
    for name in chosen:
        with user_errors(f"Following a change through {plain(model_label(name))}"):
            reach = cached_reach(*key_of(name), st.session_state.memory_text, REACH_LAG)
            curves.append((model_label(name), by_name[name].cell, reach))
    if curves:
        st.plotly_chart(reach_figure(curves), key="memory_reach_chart")
        st.markdown(f"**What the chart shows.** {reach_sentence(curves)}")
        st.caption(
            f"Each line: the median over {curves[0][2].changes} changes spread over the text, each to a token "
            "drawn at random. The state is the last layer's, the one every prediction is read from; a line ends "
            "where less than 0.01% of the change is left."
        )
    with st.expander("The text and the models"):
        st.text_area("Text the models read", height=120, key="memory_text", max_chars=TEXT_MAX_CHARS)
        st.multiselect("Checkpoints", list(by_name), key="memory_reach_checkpoints", format_func=model_label)
    mirror()


# ---------------------------------------------------------------------------
@st.fragment
def unit_memory(text):
    """How long each unit remembers: the spread over units, the sentence it supports, the longest memories."""
    st.header(SECTIONS["units"])
    st.markdown(
        "Every gated cell multiplies its old memory by a keep factor $a_t$ per unit: "
        "$h_t = a_t \\odot h_{t-1} + \\dots$ What unit $j$ held at step $t$ survives to $t+k$ scaled by "
        "$a_{t+1} \\cdots a_{t+k}$, averaged here over every start $t$ in the text. A unit's **half-life** "
        "is the first $k$ at which less than half survives. Keep factors: "
        + ", ".join(f"{cell_label(c)} `{g}`" for c, g in KEEP_GATE_LABELS.items())
        + ". The vanilla RNN has no keep gate: section 1 measures its memory with the others', and so do the "
        "gradients (section 4)."
    )
    cols = st.columns([3, 1])
    chosen = cols[0].multiselect(
        "Checkpoints",
        list(by_name),
        default=[n for n in RETENTION_MODELS if n in by_name],
        key="memory_checkpoints",
        format_func=model_label,
    )
    max_lag = cols[1].slider("Longest lag", 8, MAX_RETENTION_LAG, step=8, key="memory_max_lag")
    measured = []  # (name, layer, Retention)
    for name in chosen:
        if by_name[name].cell == "rnn":
            st.info(
                f"**{plain(model_label(name))}** is a vanilla RNN: it has no keep gate, so there is no retention "
                "to measure. Section 1 follows a change through its state, and section 4 its gradients."
            )
            continue
        with user_errors(f"Retention of {model_label(name)}"):
            for layer, r in enumerate(cached_retention(*key_of(name), text)):
                measured.append((name, layer, r.up_to(max_lag)))
    if not measured:
        if chosen:
            st.warning("None of the chosen checkpoints has a keep gate.")
        mirror()
        return
    curves = [(f"{model_label(name)} · layer {layer} ({r.keep_gate})", r.cell, r) for name, layer, r in measured]
    st.plotly_chart(memory_spread_figure(curves), key="memory_spread_chart")
    spread = memory_spread([(model_label(name), layer, r) for name, layer, r in measured])
    notice = memory_spread_sentence(spread)
    st.markdown(f"**What the chart shows.** {notice}")
    with st.expander("The numbers, layer by layer"):
        shown = spread.drop(columns=["cell"])
        for column in ("median_half_life", "longest_half_life"):
            shown[column] = [half_life_words(h, lags) for h, lags in zip(shown[column], shown["lags"])]
        shares = {c: "{:.1%}" for c in SPREAD_COLUMNS if c.startswith("longer_than_")}
        show_table(shown.drop(columns=["lags", "lag_limit"]), SPREAD_COLUMNS, shares)
    longest_memories(measured, text)
    mirror()


def longest_memories(measured, text):
    """One model's retention as a distribution over its units, and its longest-memory units on the text."""
    st.subheader("The longest memories, on the text")
    names = list(dict.fromkeys(name for name, _, _ in measured))
    if st.session_state.get("memory_units_model") not in names:
        st.session_state.memory_units_model = names[0]
    name = st.selectbox("Model", names, key="memory_units_model", format_func=model_label)
    layer, r = longest_memory_layer([r for n, _, r in measured if n == name])  # every layer, in order
    left, right = st.columns([2, 3])
    with left:
        st.plotly_chart(
            retention_band_figure(r, f"{model_label(name)} · layer {layer}: every unit's retention"),
            key="memory_band_chart",
        )
    trace = None
    with user_errors(f"Reading the text with {model_label(name)}"):
        trace = cached_trace(*key_of(name), text)
    if trace is None:
        return
    state = "c" if r.cell == "lstm" else "h"  # what the unit holds: the LSTM's cell state, else the state h
    half_lives = r.unit_half_lives
    with right:
        st.caption(
            f"The three units of layer {layer} that remember longest, each colouring the text by what it holds "
            f"(its {state}: red positive, blue negative). A long memory reads as a colour that lasts."
        )
        for unit in r.longest_units(3):
            st.markdown(f"Unit {unit}: keeps half for {half_life_words(half_lives[unit], len(r.lags))}")
            st.html(activation_html(trace.token_texts, trace.gate(layer, state)[:, unit], state, compact=True))


# ---------------------------------------------------------------------------
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


@st.fragment
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


@st.fragment
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


# ---------------------------------------------------------------------------
@st.fragment
def gradients(text):
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
            trained.append((model_label(name), cell, cached_gradient(*key_of(name), text[: steps + 1])))
            fresh.append((model_label(name), cell, cached_gradient(*key_of(name), text[: steps + 1], fresh_seed=0)))
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


# ---------------------------------------------------------------------------
if section == "reach":
    change_reach_view()
elif section == "units":
    unit_memory(text)
elif section == "analytic":
    constant_gate_anchors()
    analytic()
    bias_table()
elif section == "gradients":
    gradients(text)
else:
    probe_section(mirror)
mirror()
