"""The Gates page's last section, one gate of one layer: its heatmap with the units in a chosen order,
the units that track a feature, how often the gates saturate, and the cell's equations and code, each
drawn when the student asks for it."""

import inspect

import streamlit as st

from lab.instruments.features import FEATURES
from lab.instruments.introspect import SIGMOID_GATES, gate_kind, gate_summary
from lab.instruments.units import UNIT_ORDERS, top_units
from lab.nets.families import CELLS
from lab.words import count
from ui.cell_labels import cell_label, cell_note, equations_latex
from ui.gates.charts import gate_heatmap, saturation_histogram
from ui.gates.settings import DEFAULTS, MAX_HEATMAP_UNITS, UNIT_COLUMNS, choose_layer, mirror, show_unit_button
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_unit_order
from ui.shared.common import show_table
from ui.shared.plain_text import plain, user_errors


@fragment
def layer_details(trace, key, text):
    """One gate of one layer as a heatmap, its units sorted, the units that track a feature, how often
    the gates saturate, the cell's equations and code: each drawn when the student asks for it."""
    st.subheader("🗺️ One gate, every step: the heatmap")
    controls = st.columns([1.2, 0.8, 1.4, 1.6])
    layer, gates, H = choose_layer(controls[0], trace, "gates_heatmap_layer", "gates_heatmap_gate")
    cell = trace.cells[layer]
    gate = controls[1].selectbox(
        "Gate", trace.gate_names[layer], key="gates_heatmap_gate", format_func=lambda g: f"{g}: {gate_kind(cell, g)}"
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
            st.plotly_chart(
                gate_heatmap(gates[gate], trace.pieces, gate, units[:n_units], gate_kind(cell, gate)),
                key="gates_heatmap",
            )
            st.caption(
                f"{count(len(trace.token_ids), 'token')} · {n_units} of the {count(H, 'unit')} of this layer · "
                "hover a cell for the token, the unit and the value. Sigmoid gates on [0, 1] (dark: shut, yellow: "
                "open); tanh candidates and states red for positive, blue for negative."
            )
        feature_units(trace, layer, gate, feature)
    if saturation:
        saturation_view(trace, layer)
    left, right = st.columns([3, 2])
    with left:
        st.markdown(f"**{cell_label(cell)}**, as the lab implements it")
        st.markdown(cell_note(cell))
        st.caption(f"convention: `{trace.conventions[layer]}`")
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
    show_table(found, UNIT_COLUMNS, {"correlation": "{:+.3f}", "abs_correlation": "{:.3f}"})
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
    st.table(summary.style.format({c: "{:.3f}" for c in ("mean", "std", "min", "max")}), hide_index=True)
