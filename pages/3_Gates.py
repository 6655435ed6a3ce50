"""Gates: what the units learned, text first. A gallery of the units that track a feature of the
text; a span you select and the units that fire on it; one unit colouring the text; which earlier
characters drove a prediction; one gate of one layer as a heatmap, its saturation, the cell's
equations and code, each drawn when asked for.

Each part is a fragment: moving its slider reruns that part only. A button that shows a unit in
another part reruns the page (its callback has set the unit first)."""

import inspect

import streamlit as st

from lab.instruments.features import FEATURE_KINDS, FEATURES
from lab.instruments.introspect import GATE_KINDS, MAX_TRACE_TOKENS, SIGMOID_GATES, gate_summary
from lab.instruments.units import UNIT_ORDERS, span_units, top_units, unit_gallery
from lab.nets.cells import CELLS
from ui.cached_calls import (
    cached_influence,
    cached_passage_unit,
    cached_trace,
    cached_unit_correlations,
    cached_unit_order,
    checkpoint_key,
)
from ui.cell_labels import CELL_NOTES, cell_label, equations_latex
from ui.checkpoint_picker import checkpoint_picker
from ui.coloured_text import activation_html, activation_legend_html, influence_html, influence_legend_html
from ui.common import plain_convention, setup_page, show_anchors
from ui.gate_charts import gate_heatmap, saturation_histogram, unit_trace_figure
from ui.links import Field, mirror_to_url, restore_from_url
from ui.plain_text import piece_label, plain, user_errors
from ui.span_select import span_select, span_text

setup_page("Gates")
st.title("🔬 Gates")
st.caption(
    "The model reads your text once, from the zero state. Below: the units that learned something you "
    "can name, the units behind any stretch of text you select, and what every gate does at every step."
)

TEXTS = {  # passages of the bundled corpus (lab/corpus/): Hamlet trains, Macbeth is held out
    "Hamlet meets the Ghost (a [stage direction])": (
        "Hor:\nLook, my lord, it comes!\n\n[Enter Ghost.]\n\nHam:\nAngels and ministers of grace defend us!--\n"
        "Be thou a spirit of health or goblin damn'd,\nBring with thee airs from heaven or blasts from hell,\n"
    ),
    'Macbeth\'s witch ("quotes" and (parentheses))': (
        "FIRST WITCH:\nA sailor's wife had chestnuts in her lap,\n"
        "And mounch'd, and mounch'd, and mounch'd:--\"Give me,\" quoth I:\n"
        '"Aroint thee, witch!" the rump-fed ronyon cries.\n\nMACBETH:\n'
        "I keep a servant fee'd. I will to-morrow,\n(And betimes I will) to the weird sisters:\n"
    ),
    "To be, or not to be": (
        "Ham:\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
        "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
    ),
}
# a longer passage from a held-out play (never trained on): Macbeth's witches at their cauldron;
# stage directions, a chant in short lines and short speeches
PASSAGE = ("[Thunder. Enter the three Witches.]\n\nFIRST WITCH:\nThrice the brinded cat", 1200)
TEXT_MAX_CHARS = 4000  # the box and the link alike; the trace itself reads at most MAX_TRACE_TOKENS
MAX_HEATMAP_UNITS = 48  # rows a heatmap can show at once: more would be too thin to read
# lab.instruments.units' column names -> what a student reads in the tables of units
UNIT_COLUMNS = {
    "correlation": "correlation r",
    "abs_correlation": "|r|",
    "mean_inside": "mean on the span",
    "mean_outside": "mean elsewhere",
}
# the page's settings as they appear in a link: ?model=...&text=...&layer=...&unit=...
SETTINGS = {
    "model": (Field("text", "Model"), "gates_checkpoint"),
    "text": (Field("text", "Text", high=TEXT_MAX_CHARS), "gates_text"),
    "layer": (Field("int", "Layer", 0, 63), "gates_layer"),
    "cards": (Field("int", "Units in the gallery", 1, 12), "gates_cards"),
    "span": (Field("range", "Span", 0, MAX_TRACE_TOKENS - 1), "gates_span"),
    "gate": (Field("text", "Gate of the unit shown", high=8), "gates_unit_gate"),
    "unit": (Field("int", "Unit", 0, 100_000), "gates_unit"),
    "predict": (Field("int", "Predicted token", 1, MAX_TRACE_TOKENS - 1), "gates_predict"),
    "order": (Field("choice", "Unit order", choices=tuple(UNIT_ORDERS)), "gates_order"),
    "units": (Field("int", "Units shown", 1, MAX_HEATMAP_UNITS), "gates_units"),
    "feature": (Field("choice", "Feature", choices=tuple(FEATURES)), "gates_feature"),
    "heatmap_layer": (Field("int", "Layer of the heatmap", 0, 63), "gates_heatmap_layer"),
    "heatmap_gate": (Field("text", "Gate of the heatmap", high=8), "gates_heatmap_gate"),
}
DEFAULTS = {
    "model": "char-lstm_latest",
    "text": next(iter(TEXTS.values())),
    "layer": 0,
    "cards": 6,
    "span": None,
    "gate": "h",
    "unit": None,
    "predict": None,
    "order": "feature",
    "units": 32,
    "feature": next(iter(FEATURES)),
    "heatmap_layer": 0,
    "heatmap_gate": "h",
}
restore_from_url(SETTINGS, DEFAULTS)


def use_preset():
    st.session_state.gates_text = TEXTS[st.session_state.gates_preset]


def show_unit(layer, gate, unit):
    state = st.session_state
    state.gates_layer, state.gates_unit_gate, state.gates_unit = int(layer), gate, int(unit)


def show_unit_button(label, key, layer, gate, unit, help=None):
    """A button that shows a unit in "One unit, colouring the text": its callback sets the unit, and
    a rerun of the whole page (not only the fragment holding the button) draws it there."""
    if st.button(label, key=key, on_click=show_unit, args=(layer, gate, unit), help=help):
        st.rerun()


def mirror():
    """The URL follows the settings: every fragment calls this, since a fragment's rerun skips the
    page's own last line."""
    mirror_to_url(SETTINGS, DEFAULTS)


def first_token_with(token_texts, char, default, after=-1):
    """The first token after token `after` that holds `char`, else `default`."""
    return next((t for t in range(after + 1, len(token_texts)) if char in token_texts[t]), default)


def default_span(token_texts):
    """(first, last) token of the first [stage direction], without the "]" that ends it (its inside is
    what a bracket unit tracks), else of the first line; some token always stays outside."""
    start = first_token_with(token_texts, "[", None)
    start, closing = (0, "\n") if start is None else (start, "]")
    end = first_token_with(token_texts, closing, len(token_texts) - 1, after=start)
    return start, max(start, min(end - 1, len(token_texts) - 2))


top = st.columns([1.2, 1.4, 1])
with top[0]:
    checkpoint = checkpoint_picker("gates_checkpoint", default_name=DEFAULTS["model"])
with top[1]:
    st.selectbox("Example text", list(TEXTS), key="gates_preset", on_change=use_preset)
with top[2].expander("✏️ Your own text"):
    text = st.text_area(
        "Text to read", key="gates_text", height=150, max_chars=TEXT_MAX_CHARS, help="Up to 2,000 tokens."
    )
if checkpoint is None:
    st.stop()

trace = None
key = checkpoint_key(checkpoint)
with user_errors("Tracing"):
    trace = cached_trace(*key, text)
if trace is None:
    st.stop()
T, n_layers = len(trace.token_ids), len(trace.layers)
for layer_key in ("gates_layer", "gates_heatmap_layer"):  # a model with fewer layers than the last one, or a link's
    if st.session_state.get(layer_key, 0) >= n_layers:
        st.session_state[layer_key] = 0


@st.fragment
def gallery(trace, key, text):
    """Karpathy's pictures, chosen for the student: one card per feature, with the unit that tracks it."""
    st.subheader("🖼️ What the units learned")
    cards = st.columns([3, 1])
    cards[0].caption(
        "For each feature of your text, the unit (of any gate or state, any layer) that follows it "
        "most closely, strongest first, with Pearson's r over the text's tokens: ±1 would follow it "
        "exactly. Red is positive, blue negative; gates run from white (shut) to purple (open)."
    )
    n_cards = cards[1].slider("Units in the gallery", 1, 12, key="gates_cards")
    table = None
    with user_errors("Finding units"):
        table = cached_unit_correlations(*key, text)
    if table is None:
        return
    chosen = unit_gallery(table, n_cards)
    for row_start in range(0, len(chosen), 3):  # rows of three cards, so that the cards of a row line up
        for column, card in zip(st.columns(3), chosen.iloc[row_start : row_start + 3].itertuples()):
            feature_spec = FEATURES[card.feature]
            with column.container(border=True):
                st.markdown(f"**{feature_spec.description}**")
                st.caption(
                    f"r = {card.correlation:+.2f} · `{card.gate}` unit {card.unit} of layer {card.layer} · "
                    f"{FEATURE_KINDS[feature_spec.kind]}"
                )
                st.html(
                    activation_html(
                        trace.token_texts, trace.gate(card.layer, card.gate)[:, card.unit], card.gate, compact=True
                    )
                )
                show_unit_button("Study this unit", f"gates_gallery_{card.Index}", card.layer, card.gate, card.unit)
    if "gates_unit" not in st.session_state and len(chosen):  # first visit: the gallery's first unit below
        show_unit(*chosen.iloc[0][["layer", "gate", "unit"]])
    mirror()


@st.fragment
def span_finder(trace):
    """Text first: a span the student selects in the text itself, and the units that fire on it
    (LSTMVis's pattern selection)."""
    st.subheader("🔎 Select some text: which units fire on it?")
    T = len(trace.token_ids)
    if T < 2:
        st.info("Type a longer text to select a span of it.")
        return
    span = st.session_state.get("gates_span")
    if span is None or not 0 <= span[0] <= span[1] < T:  # first visit, or a shorter text
        span = default_span(trace.token_texts)
    st.caption(
        "Drag the mouse over a stretch of the text (or click in it, then hold Shift and press the arrow "
        "keys). The highlighted stretch is your span; the units that fire on it are listed below."
    )
    # the component proposes a new span, if the student has just selected one; the slider below may set it too
    chosen = span_select(trace.token_texts, tuple(span), key="gates_span_text", label="The text: select a part of it")
    if chosen != tuple(st.session_state.get("gates_span") or ()):
        st.session_state.gates_span = chosen
    with st.expander("Adjust the span one character at a time"):
        # value= makes it a range slider (Streamlit reads range or single from it); the session state decides the value
        start, last = st.select_slider(
            "Span of the text (first and last character)",
            options=range(T),
            value=st.session_state.gates_span,
            key="gates_span",
            format_func=lambda t: f"{t}: {piece_label(trace.pieces[t])}",
        )
    st.markdown(f"**The units that fire on “{plain(span_text(trace.token_texts, start, last))}”**")
    found = None
    with user_errors("Selecting"):
        found = span_units(trace, start, last + 1, k=5)
    if found is not None:
        st.caption(
            "Ranked by the correlation of each unit with your span (1 on it, 0 elsewhere): how far its "
            "value on the span stands out from the rest of the text."
        )
        st.dataframe(
            found.rename(columns=UNIT_COLUMNS).style.format(
                {
                    UNIT_COLUMNS["correlation"]: "{:+.3f}",
                    UNIT_COLUMNS["abs_correlation"]: "{:.3f}",
                    UNIT_COLUMNS["mean_inside"]: "{:+.3f}",
                    UNIT_COLUMNS["mean_outside"]: "{:+.3f}",
                }
            ),
            hide_index=True,
            width="stretch",
        )
        for n, (button, row) in enumerate(zip(st.columns(len(found)), found.itertuples())):
            with button:
                show_unit_button(f"Show {row.gate} {row.unit}", f"gates_span_show_{n}", row.layer, row.gate, row.unit)
    mirror()


@st.fragment
def one_unit(trace, key):
    """One unit over the text, and over a longer passage the model never trained on."""
    st.subheader("🎨 One unit, colouring the text")
    unit_cols = st.columns([1.2, 1, 1, 3])
    layer = unit_cols[0].selectbox(
        "Layer",
        range(len(trace.layers)),
        key="gates_layer",
        format_func=lambda l: f"layer {l}: {cell_label(trace.cells[l])}",
    )
    gate_names, gates = trace.gate_names[layer], trace.gates(layer)
    H = next(iter(gates.values())).shape[1]
    if st.session_state.get("gates_unit_gate") not in gate_names:
        st.session_state.gates_unit_gate = "h"
    unit_gate = unit_cols[1].selectbox("Gate", gate_names, key="gates_unit_gate")
    st.session_state.gates_unit = min(st.session_state.get("gates_unit", 0), H - 1)
    unit = unit_cols[2].number_input("Unit", 0, H - 1, step=1, key="gates_unit")
    values = gates[unit_gate][:, unit]
    with unit_cols[3]:
        st.html(activation_legend_html(unit_gate, gates[unit_gate]))
    st.html(activation_html(trace.token_texts, values, unit_gate))
    st.markdown(
        "**The same unit over a longer passage** from a play the model never trained on "
        "(*Macbeth*: the witches at their cauldron)"
    )
    with user_errors("Reading the longer passage"):
        st.html(activation_html(*cached_passage_unit(*key, *PASSAGE, layer, unit_gate, unit), unit_gate, compact=True))
    st.plotly_chart(unit_trace_figure(values, trace.pieces, unit_gate, unit), key="gates_unit_chart")
    mirror()


@st.fragment
def drivers(trace, key):
    """Which past characters drove one prediction."""
    st.subheader("🧭 Which earlier characters drove this prediction?")
    T = len(trace.token_ids)
    if T < 2:
        st.info("Type a longer text to pick a prediction in it.")
        return
    predict = st.session_state.get("gates_predict")
    if predict is None or not 1 <= predict < T:  # first visit or a shorter text: the first "]", else the last
        st.session_state.gates_predict = max(first_token_with(trace.token_texts, "]", T - 1), 1)
    target = st.select_slider(
        "The predicted character",
        options=range(1, T),
        key="gates_predict",
        format_func=lambda t: f"{t}: {piece_label(trace.pieces[t])}",
    )
    influence = None
    with user_errors("Tracing the influence"):
        influence = cached_influence(*key, tuple(trace.token_ids), target)
    if influence is not None:
        st.html(influence_legend_html())
        st.html(influence_html(trace.token_texts, influence))
        st.caption(
            f"The model gave the framed “{piece_label(trace.pieces[target])}” a probability of "
            f"{influence.probability:.3f}. Each earlier character is coloured by the size of the gradient "
            "of that log-probability with respect to the character's embedding: how much a small change "
            "to it would move the prediction. Try the vanilla RNN and a gated cell on the same character: "
            "how far back does each reach?"
        )
    mirror()


@st.fragment
def layer_details(trace, key, text):
    """One gate of one layer as a heatmap, its units sorted, the units that track a feature, how often
    the gates saturate, the cell's equations and code: each drawn when the student asks for it."""
    st.subheader("🗺️ One gate, every step: the heatmap")
    controls = st.columns([1.2, 0.8, 1.4, 1.6])
    layer = controls[0].selectbox(
        "Layer",
        range(len(trace.layers)),
        key="gates_heatmap_layer",
        format_func=lambda l: f"layer {l}: {cell_label(trace.cells[l])}",
    )
    cell, gate_names, gates = trace.cells[layer], trace.gate_names[layer], trace.gates(layer)
    H = next(iter(gates.values())).shape[1]
    if st.session_state.get("gates_heatmap_gate") not in gate_names:
        st.session_state.gates_heatmap_gate = "h"
    gate = controls[1].selectbox(
        "Gate", gate_names, key="gates_heatmap_gate", format_func=lambda g: f"{g}: {GATE_KINDS[g]}"
    )
    order = controls[2].radio(
        "Order the units",
        list(UNIT_ORDERS),
        key="gates_order",
        horizontal=True,
        help="\n".join(f"- **{o}**: {why}" for o, why in UNIT_ORDERS.items()),
    )
    feature = controls[3].selectbox(
        "Feature",
        list(FEATURES),
        key="gates_feature",
        format_func=lambda f: FEATURES[f].description,
        help="Orders the units by correlation with it, and picks the units below.",
    )
    max_units = min(H, MAX_HEATMAP_UNITS)
    # Streamlit before 1.67 forgets a widget's value on a run that did not draw it (the slider below is
    # drawn only with the heatmap): the page's default then
    st.session_state.gates_units = min(st.session_state.get("gates_units", DEFAULTS["units"]), max_units)
    switches = st.columns([1.2, 1.2, 1, 2])
    drawn = switches[0].toggle("Draw the heatmap", key="gates_heatmap_shown")
    saturation = switches[1].toggle("Gate saturation", key="gates_saturation_shown")
    code = switches[2].toggle("Show code", key="gates_show_code", help="The lab source of the cell being studied.")
    if max_units > 1:
        n_units = switches[3].slider("Units shown (the first in this order)", 1, max_units, key="gates_units")
    else:
        n_units = switches[3].number_input("Units shown", 1, 1, key="gates_units", disabled=True)
    if drawn:
        units = None
        with user_errors(f"Ordering the units of {gate}"):
            units = cached_unit_order(*key, text, layer, gate, order, feature if order == "feature" else None)
        if units is not None:
            st.plotly_chart(gate_heatmap(gates[gate], trace.pieces, gate, units[:n_units]), key="gates_heatmap")
            st.caption(
                f"{len(trace.token_ids)} tokens · {n_units} of the {H} units of this layer · hover a cell for "
                "the token, the unit and the value. Sigmoid gates on [0, 1] (dark: shut, yellow: open); tanh "
                "candidates and states red for positive, blue for negative."
            )
        feature_units(trace, layer, gate, feature)
    if saturation:
        saturation_view(trace, layer)
    left, right = st.columns([3, 2])
    with left:
        st.markdown(f"**{cell_label(cell)}**, as the lab implements it")
        st.markdown(CELL_NOTES[cell])
        st.caption(f"convention: `{plain_convention(trace.conventions[layer])}`")
    with right:
        st.latex(equations_latex(cell))
    if code:
        layer_class = CELLS[cell]  # the reference implementation, whatever backend the checkpoint trained with
        st.caption("The lab's code for this cell: its equations, line by line.")
        st.code(inspect.getsource(layer_class), language="python")
    mirror()


def feature_units(trace, layer, gate, feature):
    """The five units of one gate that track the feature best, each with a button to show it."""
    found = None
    with user_errors("Finding units"):
        found = top_units(trace, feature, layer=layer, gate=gate, k=5)
    if found is None:
        return
    st.markdown(f"**The units of `{gate}` that track “{plain(FEATURES[feature].description)}”**")
    st.dataframe(
        found.rename(columns=UNIT_COLUMNS).style.format(
            {UNIT_COLUMNS["correlation"]: "{:+.3f}", UNIT_COLUMNS["abs_correlation"]: "{:.3f}"}
        ),
        hide_index=True,
        width="stretch",
    )
    for button, u in zip(st.columns(len(found)), found["unit"]):
        with button:
            show_unit_button(
                f"Unit {u}", f"gates_show_{u}", layer, gate, u, help=f"Colour the text by unit {u} of {gate} above"
            )
    st.caption(
        "Pearson correlation over the tokens of this text. Karpathy's famous quote-detection cell has a "
        "cousin here: the bundled plays put stage directions in [brackets]."
    )


def saturation_view(trace, layer):
    """Histograms of the sigmoid gates of one layer, and the summary of every gate."""
    gate_names, gates = trace.gate_names[layer], trace.gates(layer)
    sigmoid_gates = [g for g in gate_names if g in SIGMOID_GATES]
    if sigmoid_gates:
        for col, gate in zip(st.columns(len(sigmoid_gates)), sigmoid_gates):
            col.plotly_chart(saturation_histogram(gates[gate], gate), key=f"gates_hist_{gate}")
        st.caption(
            "A gate below 0.1 is nearly shut, above 0.9 nearly open; a saturated gate passes almost no "
            "gradient through its sigmoid (σ' = σ(1 − σ) < 0.09)."
        )
    else:
        st.info("The vanilla RNN has no sigmoid gates: only h = tanh(...), shown above.")
    summary = gate_summary(trace)
    summary = summary[summary["layer"] == layer].drop(columns=["layer", "cell"])
    summary["saturation"] = [f"{v:.1%}" if v == v else "–" for v in summary["saturation"]]  # NaN: not a sigmoid
    st.dataframe(
        summary.style.format({c: "{:.3f}" for c in ("mean", "std", "min", "max")}), hide_index=True, width="stretch"
    )


gallery(trace, key, text)
span_finder(trace)
one_unit(trace, key)
drivers(trace, key)
layer_details(trace, key, text)
show_anchors("uniform_char", "leviathan")
mirror()
