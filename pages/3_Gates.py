"""Gates: every gate of every layer while a model reads a text; saturation; units that
track a feature of the text; the cell's equations and source code beside them."""
import inspect

import streamlit as st

from lab.cells import CELLS
from lab.features import FEATURES
from lab.introspect import SIGMOID_GATES, gate_summary
from lab.units import top_units
from ui import inspect_views as views
from ui.common import checkpoint_picker, setup_page, show_anchors, user_errors
from ui.links import Field, mirror_to_url, restore_from_url

setup_page("Gates")
st.title("🔬 Gates")
st.caption("The model reads your text once, from the zero state. Each heatmap shows one gate: "
           "tokens left to right, units top to bottom.")
show_anchors("uniform_char", "leviathan")

TEXTS = {  # passages of the bundled corpus (lab/corpus/shakespeare.txt)
    "Hamlet meets the Ghost (a [stage direction])": (
        "Hor.\nLook, my lord, it comes!\n\n[Enter Ghost.]\n\nHam.\nAngels and ministers of grace defend us!--\n"
        "Be thou a spirit of health or goblin damn'd,\nBring with thee airs from heaven or blasts from hell,\n"),
    "Macbeth's witch (\"quotes\" and (parentheses))": (
        "FIRST WITCH.\nA sailor's wife had chestnuts in her lap,\n"
        "And mounch'd, and mounch'd, and mounch'd:--\"Give me,\" quoth I:\n"
        "\"Aroint thee, witch!\" the rump-fed ronyon cries.\n\nMACBETH.\n"
        "I keep a servant fee'd. I will to-morrow,\n(And betimes I will) to the weird sisters:\n"),
    "To be, or not to be": (
        "Ham.\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
        "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"),
}
# the page's settings as they appear in a link: ?model=...&text=...&layer=...&unit=...
SETTINGS = {
    "model": (Field("text", "Model"), "gates_checkpoint"),
    "text": (Field("text", "Text", high=4000), "gates_text"),
    "layer": (Field("int", "Layer", 0, 63), "gates_layer"),
    "units": (Field("int", "Units shown", 1, 256), "gates_units"),
    "feature": (Field("choice", "Feature", choices=tuple(FEATURES)), "gates_feature"),
    "feature_gate": (Field("text", "Gate correlated with the feature", high=8), "gates_corr_gate"),
    "gate": (Field("text", "Gate of the unit shown", high=8), "gates_unit_gate"),
    "unit": (Field("int", "Unit", 0, 100_000), "gates_unit"),
}
DEFAULTS = {"model": "char-lstm_latest", "text": next(iter(TEXTS.values())), "layer": 0, "units": 64,
            "feature": next(iter(FEATURES)), "feature_gate": "h", "gate": "h", "unit": None}
restore_from_url(SETTINGS, DEFAULTS)


def use_preset():
    st.session_state.gates_text = TEXTS[st.session_state.gates_preset]


def show_unit(gate, unit):
    st.session_state.gates_unit_gate, st.session_state.gates_unit = gate, int(unit)


top = st.columns([1, 2])
with top[0]:
    checkpoint = checkpoint_picker("gates_checkpoint", default_name=DEFAULTS["model"])
    st.selectbox("Example text", list(TEXTS), key="gates_preset", on_change=use_preset)
with top[1]:
    text = st.text_area("Text to read", key="gates_text", height=150, help="Up to 2,000 tokens.")
if checkpoint is None:
    st.stop()

trace = None
with user_errors("Tracing"):
    trace = views.cached_trace(*views.checkpoint_key(checkpoint), text)
if trace is None:
    st.stop()

n_layers = len(trace.layers)
controls = st.columns([1, 2])
if st.session_state.gates_layer >= n_layers:  # a model with fewer layers than the last one, or a link's
    st.session_state.gates_layer = 0
layer = controls[0].selectbox("Layer", range(n_layers), key="gates_layer",
                              format_func=lambda l: f"layer {l}: {views.cell_label(trace.cells[l])}")
cell, gate_names = trace.cells[layer], trace.gate_names[layer]
gates = trace.gates(layer)
H = next(iter(gates.values())).shape[1]
max_units = min(H, 256)
st.session_state.gates_units = min(st.session_state.gates_units, max_units)
if max_units > 1:
    n_units = controls[1].slider("Units shown (the first ones)", 1, max_units, key="gates_units")
else:
    n_units = controls[1].number_input("Units shown", 1, 1, key="gates_units", disabled=True)
st.caption(f"`{trace.conventions[layer]}` · {len(trace.token_ids)} tokens · {H} units per layer")

# ---- heatmaps, one per gate
st.subheader("Every gate, token by token")
st.caption("Hover a cell for the token, the unit and the value. Sigmoid gates on [0, 1] (dark: shut, yellow: "
           "open); tanh candidates and states red for positive, blue for negative.")
for gate in gate_names:
    st.plotly_chart(views.gate_heatmap(gates[gate], trace.pieces, gate, n_units), key=f"gates_heatmap_{gate}")

# ---- interpretable units beside the equations
st.subheader("Which units track a feature of the text?")
left, right = st.columns([3, 2])
with left:
    feature_cols = st.columns(2)
    feature = feature_cols[0].selectbox("Feature", list(FEATURES), key="gates_feature",
                                        format_func=lambda f: f"{f}: {FEATURES[f].description}")
    if st.session_state.get("gates_corr_gate") not in gate_names:
        st.session_state.gates_corr_gate = "h"
    corr_gate = feature_cols[1].selectbox("Gate", gate_names, key="gates_corr_gate")
    found = None
    with user_errors("Finding units"):
        found = top_units(trace, feature, layer=layer, gate=corr_gate, k=5)
    if found is not None:
        st.dataframe(found.style.format({"correlation": "{:+.3f}", "abs_correlation": "{:.3f}"}),
                     hide_index=True, width="stretch")
        buttons = st.columns(len(found))
        for button, u in zip(buttons, found["unit"]):
            button.button(f"Show unit {u}", key=f"gates_show_{u}", on_click=show_unit, args=(corr_gate, u))
        if "gates_unit" not in st.session_state:  # first visit: show the best unit below
            show_unit(corr_gate, found["unit"].iloc[0])
        st.caption("Pearson correlation over the tokens of this text (lab.introspect.top_units). "
                   "Karpathy's famous quote-detection cell has a cousin here: the bundled plays put "
                   "stage directions in [brackets].")
with right:
    st.markdown(f"**{views.cell_label(cell)}**, as lab.cells implements it")
    for equation in views.CELL_EQUATIONS[cell]:
        st.latex(equation)
    st.markdown(views.CELL_NOTES[cell])
    st.caption(f"convention: `{trace.conventions[layer]}`")

# ---- one unit over the text
st.subheader("One unit, over the text")
unit_cols = st.columns([1, 1, 3])
if st.session_state.get("gates_unit_gate") not in gate_names:
    st.session_state.gates_unit_gate = "h"
unit_gate = unit_cols[0].selectbox("Gate", gate_names, key="gates_unit_gate")
st.session_state.gates_unit = min(st.session_state.get("gates_unit", 0), H - 1)
unit = unit_cols[1].number_input("Unit", 0, H - 1, step=1, key="gates_unit")
values = gates[unit_gate][:, unit]
with unit_cols[2]:
    st.html(views.activation_legend_html(unit_gate, gates[unit_gate]))
st.html(views.activation_html(trace.token_texts, values, unit_gate))
st.plotly_chart(views.unit_trace_figure(values, trace.pieces, unit_gate, unit), key="gates_unit_chart")

# ---- saturation
sigmoid_gates = [g for g in gate_names if g in SIGMOID_GATES]
st.subheader("Saturation of the sigmoid gates")
summary = gate_summary(trace)
summary = summary[summary["layer"] == layer].drop(columns=["layer", "cell"])
summary["saturation"] = [f"{v:.1%}" if v == v else "–" for v in summary["saturation"]]  # NaN: not a sigmoid gate
if sigmoid_gates:
    cols = st.columns(len(sigmoid_gates))
    for col, gate in zip(cols, sigmoid_gates):
        col.plotly_chart(views.saturation_histogram(gates[gate], gate), key=f"gates_hist_{gate}")
    st.caption("A gate below 0.1 is nearly shut, above 0.9 nearly open; a saturated gate passes almost no "
               "gradient through its sigmoid (σ' = σ(1 − σ) < 0.09).")
else:
    st.info("The vanilla RNN has no sigmoid gates: only h = tanh(...), shown above.")
st.dataframe(summary.style.format({c: "{:.3f}" for c in ("mean", "std", "min", "max")}), hide_index=True,
             width="stretch")

mirror_to_url(SETTINGS, DEFAULTS)

# ---- the code itself
if st.toggle("Show code", key="gates_show_code", help="The lab source of the cell being studied."):
    layer_class = CELLS[cell]  # the reference implementation, whatever backend the checkpoint trained with
    st.caption(f"`lab/cells.py` · `{layer_class.__name__}`")
    st.code(inspect.getsource(layer_class), language="python")
