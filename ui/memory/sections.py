"""The Memory page's first two sections: how far a changed token travels in each model's state (one
measure for every cell), and how long each unit remembers (the spread of its keep gates' retention over
the units, with the longest memories coloured on the text). Each a fragment: its widgets rerun it alone."""

import streamlit as st

from lab.instruments.memory import MAX_RETENTION_LAG, MEMORY_SPANS, memory_spread
from lab.lessons.memory import half_life_words, memory_spread_sentence, reach_sentence
from lab.nets.families import FAMILIES
from lab.words import count, layer_name
from ui.cell_labels import cell_label
from ui.memory.defaults import REACH_LAG, REACH_MODELS, RETENTION_MODELS
from ui.memory.settings import SECTIONS, TEXT_MAX_CHARS, key_of, mirror, model_label
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_reach, cached_retention, cached_trace
from ui.shared.coloured_text import activation_html
from ui.shared.common import show_table
from ui.shared.memory_charts import longest_memory_layer, memory_spread_figure, reach_figure, retention_band_figure
from ui.shared.plain_text import plain, user_errors

SPREAD_COLUMNS = {
    "name": "model",
    "layer": "layer",
    "units": "units",
    "median_half_life": "the median unit keeps half for",
    "longest_half_life": "the longest-memory unit keeps half for",
    **{f"longer_than_{k}": f"share keeping more than half after {count(k, 'token')}" for k in MEMORY_SPANS},
}  # lab.instruments.memory.memory_spread's columns, as shown


@fragment
def change_reach_view(by_name):
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
        with user_errors(f"Following a change through {model_label(name)}"):
            reach = cached_reach(*key_of(by_name, name), st.session_state.memory_text, REACH_LAG)
            curves.append((model_label(name), by_name[name].cell, reach))
    if curves:
        st.plotly_chart(reach_figure(curves), key="memory_reach_chart")
        # the sentence is Markdown (its bold names): the names in it made inert, the chart's kept as they are
        named = [(plain(label), cell, reach) for label, cell, reach in curves]
        st.markdown(f"**What the chart shows.** {reach_sentence(named)}")
        st.caption(
            f"Each line: the median over {curves[0][2].changes} changes spread over the text, each to a token "
            "drawn at random. The state is the last layer's, the one every prediction is read from; a line ends "
            "where less than 0.01% of the change is left."
        )
    with st.expander("The text and the models"):
        st.text_area("Text the models read", height=120, key="memory_text", max_chars=TEXT_MAX_CHARS)
        st.multiselect("Checkpoints", list(by_name), key="memory_reach_checkpoints", format_func=model_label)
    mirror()


@fragment
def unit_memory(by_name, text):
    """How long each unit remembers: the spread over units, the sentence it supports, the longest memories."""
    st.header(SECTIONS["units"])
    st.markdown(
        "Every gated cell multiplies its old memory by a keep factor $a_t$ per unit: "
        "$h_t = a_t \\odot h_{t-1} + \\dots$ What unit $j$ held at step $t$ survives to $t+k$ scaled by "
        "$a_{t+1} \\cdots a_{t+k}$, averaged here over every start $t$ in the text. A unit's **half-life** "
        "is the first $k$ at which less than half survives. Keep factors: "
        + ", ".join(f"{f.name} `{f.keep_label}`" for f in FAMILIES.values() if f.keep)
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
        if FAMILIES[by_name[name].cell].keep is None:
            st.info(
                f"**{plain(model_label(name))}** is a {cell_label(by_name[name].cell)}: it has no keep gate, so "
                "there is no retention to measure. Section 1 follows a change through its state, and section 4 its "
                "gradients."
            )
            continue
        with user_errors(f"Retention of {model_label(name)}"):
            for layer, r in enumerate(cached_retention(*key_of(by_name, name), text)):
                measured.append((name, layer, r.up_to(max_lag)))
    if not measured:
        if chosen:
            st.warning("None of the chosen checkpoints has a keep gate.")
        mirror()
        return
    curves = [(f"{model_label(name)} · {layer_name(layer)} ({r.keep_gate})", r.cell, r) for name, layer, r in measured]
    st.plotly_chart(memory_spread_figure(curves), key="memory_spread_chart")
    spread = memory_spread([(model_label(name), layer, r) for name, layer, r in measured])
    notice = memory_spread_sentence(spread.assign(name=spread["name"].map(plain)))  # Markdown: names inert
    st.markdown(f"**What the chart shows.** {notice}")
    with st.expander("The numbers, layer by layer"):
        shown = spread.drop(columns=["cell"])
        for column in ("median_half_life", "longest_half_life"):
            shown[column] = [half_life_words(h, lags) for h, lags in zip(shown[column], shown["lags"])]
        shares = {c: "{:.1%}" for c in SPREAD_COLUMNS if c.startswith("longer_than_")}
        show_table(shown.drop(columns=["lags", "lag_limit"]), SPREAD_COLUMNS, shares)
    longest_memories(by_name, measured, text)
    mirror()


def longest_memories(by_name, measured, text):
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
            retention_band_figure(r, f"{model_label(name)} · {layer_name(layer)}: every unit's retention"),
            key="memory_band_chart",
        )
    trace = None
    with user_errors(f"Reading the text with {model_label(name)}"):
        trace = cached_trace(*key_of(by_name, name), text)
    if trace is None:
        return
    state = FAMILIES[r.cell].memory  # what the unit holds: the LSTM's cell state, else the state h
    half_lives = r.unit_half_lives
    with right:
        st.caption(
            f"The three units of {layer_name(layer)} that remember longest, each colouring the text by what it holds "
            f"(its {state}: red positive, blue negative). A long memory reads as a colour that lasts."
        )
        for unit in r.longest_units(3):
            st.markdown(f"Unit {unit}: keeps half for {half_life_words(half_lives[unit], len(r.lags))}")
            st.html(activation_html(trace.token_texts, trace.gate(layer, state)[:, unit], state, compact=True))
