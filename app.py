"""RNN Lab's entry point (`streamlit run app.py`) and its Home page: what the lab teaches,
the model families' equations, one click to every page, and the seeds' presets with their
parameter counts.

The other pages are the scripts in pages/, served by Streamlit's own pages/ router; ui.common.setup_page
draws the sidebar that names them (Home first).
"""
import pandas as pd
import streamlit as st

from lab.models import config_to_dict
from lab.presets import PRESETS
from ui.common import page_link, parameter_count, setup_page, show_anchors
from ui.inspect_views import equations_latex

setup_page("Home")
st.title("🧠 RNN Lab")
st.markdown(
    "Recurrent networks read a sequence one step at a time and carry a **memory**, the hidden state, "
    "from step to step. In this lab you train small RNNs, GRUs, LSTMs and a selective scan on Shakespeare, "
    "then watch them think: the gates that decide what to keep and what to overwrite, how fast memories fade, "
    "and how the sampling strategy turns the same model into a poet or a parrot.")

with st.container(border=True):
    st.markdown("**New here? Start with the lessons.** Short lessons, one screen each, on the bundled models: "
                "one step of a cell with its real numbers, why the hidden state is the memory, how the next token "
                "is chosen, how long a gate remembers, why the vanilla RNN forgets, characters against subwords, a "
                "recurrence you can scan, what a study of gate biases can and cannot show, and toy tasks that "
                "train four cells side by side in seconds.")
    page_link("Lessons", label="**Open the lessons**")

PAGE_BLURBS = {
    "Train": "Train a model on a corpus and race the families on one live loss chart.",
    "Sample": "Generate text with greedy, temperature, top-k and top-p sampling, side by side.",
    "Gates": "Heatmaps of every gate, character by character.",
    "Memory": "How long a hidden state remembers: decay, gradients through time, a memory probe.",
    "Checkpoints": "Bundled and your own models: summaries, downloads, uploads.",
    "Ablation": "The gate-bias study's question: do the GRU's gate biases matter over 1024 steps?",
}
for column, (page, blurb) in zip(st.columns(3) + st.columns(3), PAGE_BLURBS.items()):
    with column, st.container(border=True, height="stretch"):
        page_link(page, label=f"**{page}**")
        st.caption(blurb)

st.header("The model families")
st.caption("x_t is the input at step t, h_t the hidden state, σ the logistic sigmoid, ⊙ the element-wise product. "
           "Each cell is written from tensor operations in `lab/cells.py`, whose docstrings state these equations.")
FAMILIES = [  # (cell, title, what to notice), in reading order
    ("rnn", "Vanilla RNN",
     "The equations appendix's RNN (the note that writes out the RNN, GRU and LSTM equations this lab "
     "implements): one matrix remembers, nothing protects the memory from being rewritten."),
    ("gru_seed", "GRU, the equations appendix's convention: z overwrites",
     "The equations appendix's GRU, also the Scribe design's (the note behind the Scribe subword GRU language "
     "models; `gru_seed`). The update gate z says how much to **overwrite**: "
     "z → 0 keeps the memory. The reset gate acts *before* U_h, inside the matrix product."),
    ("gru_torch", "GRU, PyTorch's convention: z keeps",
     "`torch.nn.GRU` and the gate-bias study (a GRU gate-bias ablation over 1024-step pixel sequences; "
     "`gru_torch`). Here z says how much to **keep**: z → 1 keeps the memory, so the study's bias +1 means "
     "*remember more*. The reset gate multiplies (W_hn h + b_hn) *after* the matrix product."),
    ("lstm", "LSTM",
     "The equations appendix's LSTM, as in the Leviathan notebook (a from-scratch character LSTM on Shakespeare): "
     "a separate cell state c_t; the forget gate f **keeps** (its bias starts at 1)."),
    ("scan", "Selective scan (the ScanMarkov design)",
     "The ScanMarkov design's Mamba-style selective recurrence on character n-grams: the gates depend on the "
     "input only, never on h, so the recurrence is linear and runs as a parallel associative scan. A **keeps**, "
     "B writes; the gate is a small MLP (H → 4H → 2H, GELU) of the input e_t."),
]
left, right = st.columns(2, gap="large")
for n, (cell, title, caption) in enumerate(FAMILIES):
    with left if n < 3 else right:
        st.subheader(title)
        st.caption(caption)
        st.latex(equations_latex(cell))
with right:
    st.info("Two GRU conventions, one name: the same trained weights mean different things under each. "
            "`gru_seed` and `gru_torch` are separate cells here, and every checkpoint summary names its "
            "convention.", icon="⚠️")


SOURCES = {"000": "Scribe design", "001": "equations appendix", "002": "Leviathan notebook",
           "003": "gate-bias study", "004": "ScanMarkov design"}  # lab/presets.py's seed numbers, as students know them


def source_names(seed):
    """A preset's seed field ("000/002") -> the documents' names ("Scribe design / Leviathan notebook")."""
    return " / ".join(SOURCES.get(s, s) for s in seed.split("/"))


@st.cache_data(show_spinner=False)
def preset_table():
    rows = []
    for preset in PRESETS.values():
        model = preset.model
        rows.append({
            "preset": preset.name, "source": source_names(preset.seed), "family": model.family,
            "cell": model.cell,
            "parameters": parameter_count(config_to_dict(model)),
            "published count": f"{preset.expected_params:,}" if preset.expected_params else "",
            "tokenizer": preset.tokenizer or "pixels", "description": preset.description})
    return pd.DataFrame(rows)


st.header("Presets")
st.caption("The design notes' model families as named presets (`lab/presets.py`); the Train page starts from one. "
           "Character models are counted at 65 characters, subword models at 1,000 pieces.")
st.dataframe(preset_table(), hide_index=True, width="stretch",
             column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                            "description": st.column_config.TextColumn(width="large")})
show_anchors("nanogpt_cpu", "nanogpt_gpu", "leviathan", "uniform_char")
