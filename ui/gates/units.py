"""The Gates page's units, text first: the gallery of the units that track a feature of the text
(Karpathy's pictures), and one unit colouring the text and a longer passage the model never trained on."""

import streamlit as st

from lab.instruments.features import FEATURE_KINDS, FEATURES
from lab.instruments.units import unit_gallery
from lab.words import layer_name
from ui.gates.charts import unit_trace_figure
from ui.gates.settings import chance_bar, choose_layer, mirror, show_unit, show_unit_button
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_passage_unit, cached_unit_correlations
from ui.shared.coloured_text import activation_html, activation_legend_html
from ui.shared.plain_text import user_errors

# a longer passage from a held-out play (never trained on): Macbeth's witches at their cauldron;
# stage directions, a chant in short lines and short speeches
PASSAGE = ("[Thunder. Enter the three Witches.]\n\nFIRST WITCH:\nThrice the brinded cat", 1200)


@fragment
def gallery(trace, key, text):
    """Karpathy's pictures, chosen for the student: one card per feature, with the unit that tracks it.
    No heading: the section's choice above names it, and the cards' first lines keep to the first screen.
    A card whose correlation chance alone reaches on a text this short says so instead of calling it a find."""
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
    bar, sentence, too_short = chance_bar(trace, len(table))
    if too_short:  # a text too short for any finding says so before the cards; else the bar goes under them
        st.warning(sentence)
    chosen = unit_gallery(table, n_cards)
    for row_start in range(0, len(chosen), 3):  # rows of three cards, so that the cards of a row line up
        for column, card in zip(st.columns(3), chosen.iloc[row_start : row_start + 3].itertuples()):
            feature_spec = FEATURES[card.feature]
            found = card.abs_correlation > bar
            with column.container(border=True):
                st.markdown(f"**{feature_spec.description}**")
                st.caption(
                    f"r = {card.correlation:+.2f} · `{card.gate}` unit {card.unit} of {layer_name(card.layer)} · "
                    f"{FEATURE_KINDS[feature_spec.kind]}"
                    + ("" if found else f" · within chance: a finding needs |r| above {bar:.2f}")
                )
                st.html(
                    activation_html(
                        trace.token_texts, trace.gate(card.layer, card.gate)[:, card.unit], card.gate, compact=True
                    )
                )
                show_unit_button("Study this unit", f"gates_gallery_{card.Index}", card.layer, card.gate, card.unit)
    if not too_short:
        st.caption(sentence)
    mirror()


@fragment
def one_unit(trace, key, text):
    """One unit over the text, and over a longer passage the model never trained on; on a first visit
    the gallery's first unit."""
    st.subheader("🎨 One unit, colouring the text")
    if "gates_unit" not in st.session_state:
        with user_errors("Finding units"):
            first = unit_gallery(cached_unit_correlations(*key, text), 1)
            if len(first):
                show_unit(*first.iloc[0][["layer", "gate", "unit"]])
    unit_cols = st.columns([1.2, 1, 1, 3])
    layer, gates, H = choose_layer(unit_cols[0], trace, "gates_layer", "gates_unit_gate")
    unit_gate = unit_cols[1].selectbox("Gate", trace.gate_names[layer], key="gates_unit_gate")
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
