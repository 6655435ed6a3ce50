"""Sample: greedy, temperature, top-k and top-p side by side, every token coloured by
its probability; greedy's loops; stateful vs stateless generation (seeds 000, 001, 002, 004);
which earlier tokens drove a generated one; the next-token bars as you type.

The model, prompt, length and random seed rerun the page; every other setting reruns its own part
(a fragment): the samples, the traced token, or the typing."""

import streamlit as st

from ui.app.frame import setup_page
from ui.sample.columns import drivers, samples, stateful_or_stateless
from ui.sample.settings import SETTINGS, model_and_prompt
from ui.sample.type_and_watch import typing
from ui.sample.views import DEFAULTS
from ui.shared.boundary import page_part
from ui.shared.common import show_anchors
from ui.shared.links import restore_from_url

setup_page("Sample")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("💬 Sample")
    st.caption(
        "One prompt, four ways to pick the next token. Every generated token sits on a background "
        "coloured by how likely the model found it; same random seed, same text."
    )
    show_anchors("uniform_char", "nanogpt_cpu", "leviathan")
    restore_from_url(SETTINGS, DEFAULTS)
    checkpoint, prompt = model_and_prompt()
    # True once the whole page has run: a later run of one part alone is a fragment's (see samples())
    st.session_state.sample_page_done = False

    # one tab on the screen at a time: the page stays within three laptop screens, its point (four ways to pick the
    # next token, side by side) on the first
    four_ways, state, drove, typed = st.tabs(
        ["Four ways to pick the next token", "Stateful vs stateless", "What drove a token?", "Type and watch"]
    )
    with four_ways:
        samples(checkpoint, prompt)
    with state:
        stateful_or_stateless(checkpoint, prompt)
    with drove:
        drivers(checkpoint, prompt)
    with typed:
        typing(checkpoint)
    st.session_state.sample_page_done = True
