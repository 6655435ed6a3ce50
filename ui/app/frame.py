"""Every page's frame: its page config, the sidebar naming every page (ui.shared.common.PAGES) with
signing in and the glossary, and this session's heartbeat, which starts the server's warm-up once a
first page is drawn (ui.app.warm_up). A sign-in comes back to Home (Streamlit's way): the frame takes the
student on to the page where they pressed "Sign in", with its settings (ui.shared.sign_in)."""

import streamlit as st

from ui.shared import sessions
from ui.shared.common import PAGES, page_link
from ui.shared.sessions import keep_session_alive, refuse_bad_settings, start_server_process
from ui.shared.sign_in import identity, must_sign_in, remember_return, require_sign_in, sign_in_box, take_return

HOME = next(iter(PAGES))  # where Streamlit brings a sign-in back to
RETURN_CHECKED = "_rnnlab_sign_in_return_checked"  # this session looked for where its sign-in was pressed

# the words every page leans on, one click away in the sidebar of every page
GLOSSARY = {
    "token": "One unit of text the model reads and predicts: a character, or for a subword model a common "
    "piece of a word (“▁the”, “ing”). The model sees only their numbers.",
    "embedding": "The vector of numbers a model learns for each token: the first layer turns token number "
    "i into row i of a table, and the network reads that row.",
    "softmax": "Turns the model's scores for every possible next token into probabilities that add up to 1: "
    "exp(score) divided by the sum of all of them.",
    "entropy": "How unsure a probability distribution is, in nats: 0 when one token is certain, ln V when "
    "all V tokens are equally likely.",
    "epoch": "One pass over the whole training text (or the training images).",
    "state": "The vector h_t (and the LSTM's cell state c_t) a recurrent network carries from one step "
    "to the next: its only memory of what it has read.",
    "gate": "A vector of numbers in (0, 1), σ of a weighted sum, that multiplies another vector element by "
    "element: how much of each unit to let through, keep or overwrite.",
    "BPTT": "Backpropagation through time: the chain rule applied backwards along the unrolled steps. "
    "The gradient reaching a step far back is a product of one factor per step in between.",
    "nats/char": "The loss, −ln P(next token), summed over a text and divided by its characters. ln 65 ≈ 4.17 "
    "is a uniform guess over 65 characters; lower is better, and it compares character and "
    "subword models fairly.",
    "convention": "Which way a GRU's update gate z points. In one convention z overwrites "
    "(h = (1−z)·h + z·h̃: the GRU (z overwrites) cell, as in Scribe-α). In PyTorch's, z keeps "
    "(h = (1−z)·n + z·h: the GRU (z keeps) cell). Same name, opposite meaning.",
    "chrono initialisation": "Tallec & Ollivier (2018): start the keep-gate biases at log U[1, T−1], so the "
    "units begin with memories spread from 1 to T steps long.",
    "random seed": "The number that starts a random generator: the same random seed gives the same sample "
    "or the same initial weights again.",
}


def setup_page(name):
    """Page config, the sidebar naming every page, signing in and the glossary, and this session's
    heartbeat, which starts the server's warm-up once a first page is drawn; on bad server settings, only the
    line that says which (ui.shared.sessions.refuse_bad_settings); where sign-in is required, only how to sign
    in to whoever has not (ui.shared.sign_in)."""
    icon = PAGES[name][1]
    st.set_page_config(page_title=f"{name} · RNN Lab", page_icon=icon, layout="wide")
    refuse_bad_settings()
    start_server_process()

    def remember_this_page():  # as "Sign in" is pressed: where its sign-in comes back to
        remember_return(sessions.session_key(), name, st.query_params.to_dict())

    if must_sign_in():  # the page stops at how to sign in: first the browser's key, which the way back reads
        with st.sidebar:
            sessions.remember_space_in_a_cookie()
    require_sign_in(on_press=remember_this_page)
    back_to_where_sign_in_was_pressed(name)
    with st.sidebar:
        for page in PAGES:
            page_link(page)
        sign_in_box(on_press=remember_this_page)
        with st.expander("📖 Glossary"):
            st.markdown("\n\n".join(f"**{term}**: {meaning}" for term, meaning in GLOSSARY.items()))
        keep_session_alive(on_page_drawn=_start_warm_up)


def back_to_where_sign_in_was_pressed(name):
    """On Home, once per session of someone signed in: if this browser pressed "Sign in" on another page for the
    identity it now has, switch to that page with its settings (st.switch_page: the address becomes the page's)."""
    if name != HOME or st.session_state.get(RETURN_CHECKED) or identity() is None:
        return
    st.session_state[RETURN_CHECKED] = True
    back = take_return(sessions.space_cookie(), st.user.get("iat"))
    if back is not None and back[0] in PAGES and back[0] != HOME:
        page, query = back
        st.switch_page(PAGES[page][0], query_params=query)


def _start_warm_up():
    # imported when the page is drawn, not with it: the warm-up's imports (every page's defaults) would
    # slow the first page of a server started with `streamlit run app.py`
    from ui.app.warm_up import start_warm_up

    start_warm_up()
