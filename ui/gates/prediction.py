"""The Gates page's prediction section: which earlier tokens (characters or subwords, the model's unit) drove
one prediction, each coloured by the gradient of its log-probability (lab.instruments.prediction.input_influence)."""

import streamlit as st

from ui.gates.settings import first_token_with, mirror, token_slider, too_short
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_influence
from ui.shared.coloured_text import influence_html, influence_legend_html
from ui.shared.plain_text import piece_label, user_errors


@fragment
def drivers(trace, key, unit="character"):
    """Which past tokens drove one prediction; `unit`: what one token of the model is (its tokenizer's unit)."""
    st.subheader(f"🧭 Which earlier {unit}s drove this prediction?")
    if too_short(trace, "pick a prediction in it"):
        return
    T = len(trace.token_ids)
    predict = st.session_state.get("gates_predict")
    if predict is None or not 1 <= predict < T:  # first visit or a shorter text: the first "]", else the last
        st.session_state.gates_predict = max(first_token_with(trace.token_texts, "]", T - 1), 1)
    target = token_slider(f"The predicted {unit}", trace, range(1, T), "gates_predict")
    influence = None
    with user_errors("Tracing the influence"):
        influence = cached_influence(*key, tuple(trace.token_ids), target)
    if influence is not None:
        st.html(influence_legend_html())
        st.html(influence_html(trace.token_texts, influence))
        st.caption(
            f"The model gave the framed “{piece_label(trace.pieces[target])}” a probability of "
            f"{influence.probability:.3f}. Each earlier {unit} is coloured by the size of the gradient "
            f"of that log-probability with respect to the {unit}'s embedding: how much a small change "
            f"to it would move the prediction. Try the vanilla RNN and a gated cell on the same {unit}: "
            "how far back does each reach?"
        )
    mirror()
