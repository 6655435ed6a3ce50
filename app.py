"""RNN Lab's entry point (`streamlit run app.py`) and its Home page: what the lab teaches,
the model families' equations, one click to every page, and the seeds' presets with their
parameter counts.

The other pages are the scripts in pages/, served by Streamlit's own pages/ router; ui.app.frame.setup_page
draws the sidebar that names them (Home first).
"""

import streamlit as st

from lab.nets.families import FAMILIES
from ui.app.frame import setup_page
from ui.cell_labels import equations_latex
from ui.home.presets import show_presets
from ui.shared.boundary import page_part
from ui.shared.common import page_link, show_anchors

setup_page("Home")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("🧠 RNN Lab")
    st.markdown(
        "Recurrent networks read a sequence one step at a time and carry a **memory**, the hidden state, "
        "from step to step. In this lab you train small RNNs, GRUs, LSTMs, a selective scan, minGRUs and minLSTMs on "
        "Shakespeare, then watch them think: the gates that decide what to keep and what to overwrite, how fast "
        "memories fade, and how the sampling strategy turns the same model into a poet or a parrot."
    )

    with st.container(border=True):
        st.markdown(
            "**New here? Start with the lessons.** Short lessons, each on a page of its own, on the bundled models: "
            "one step of a cell with its real numbers, why the hidden state is the memory, how the next token "
            "is chosen, how long a gate remembers, why the vanilla RNN forgets, characters against subwords, a "
            "recurrence you can scan, what a study of gate biases can and cannot show, and toy tasks that "
            "train every kind of cell side by side in seconds."
        )
        page_link("Lessons", label="**Open the lessons**")

    PAGE_BLURBS = {
        "Train": "Train a model on a corpus and race the families on one live loss chart.",
        "Sample": "Generate text with greedy, temperature, top-k and top-p sampling, side by side.",
        "Gates": "Heatmaps of every gate, character by character.",
        "Memory": "How long a hidden state remembers: decay, gradients through time, a memory probe.",
        "Checkpoints": "Bundled and your own models: summaries, downloads, uploads.",
        "Ablation": "A gate-bias study: do the GRU's gate biases matter over 1024 steps?",
    }
    for column, (page, blurb) in zip(st.columns(3) + st.columns(3), PAGE_BLURBS.items()):
        with column, st.container(border=True, height="stretch"):
            page_link(page, label=f"**{page}**")
            st.caption(blurb)

    # the equations and the presets side by side as tabs: each is a reference a teacher opens, not the page's point,
    # and one under the other made Home more than three laptop screens
    families, presets = st.tabs(["The model families", "Presets"])
    families.caption(
        "x_t is the input at step t, h_t the hidden state, σ the logistic sigmoid, ⊙ the element-wise product. "
        "Each cell is written in the lab from plain tensor operations, one line per equation (the Gates page "
        "shows its code)."
    )
    left, right = families.columns(2, gap="large")
    half = (len(FAMILIES) + 1) // 2
    for n, family in enumerate(FAMILIES.values()):
        with left if n < half else right:
            st.subheader(family.name)
            st.caption(family.note)
            st.latex(equations_latex(family.id))
    with right:
        st.info(
            "Two GRU conventions, one name: the same trained weights mean different things under each. "
            "They are separate cells here, “GRU (z overwrites)” and “GRU (z keeps)”, and every model's "
            "summary names its convention.",
            icon="⚠️",
        )

    show_presets(presets)
    show_anchors("nanogpt_cpu", "nanogpt_gpu", "leviathan", "uniform_char")
