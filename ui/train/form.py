"""The Train page's settings as widgets: the main ones on the first screen (a laptop's 768 pixels hold
them, Start beside them and the live chart), the others in an expander under the chart (the model's
shape, the corpus, the training recipe), and the model they make, checked before anything is built."""

import streamlit as st

from lab.nets.cost import check_training_memory, training_memory_bytes
from lab.nets.families import CELLS, FAMILIES
from lab.nets.models import config_to_dict
from lab.training.presets import PRESETS
from ui.cell_labels import backend_label, cell_choice
from ui.shared.common import parameter_count, preset_label, show_anchors
from ui.shared.model_names import TOKENIZER_LABELS, run_title
from ui.shared.plain_text import user_errors
from ui.train import settings as ts

F = ts.FIELDS


def main_settings():
    """The preset, the cell, its width and the seconds to train -> whether the preset fixes the
    architecture (the selective-scan presets)."""
    preset_col, cell_col, hidden_col, seconds_col = st.columns([2, 2, 1, 1])
    with preset_col:
        st.selectbox(
            F["preset"].label,
            ts.TEXT_PRESETS,
            key=ts.key("preset"),
            on_change=ts.apply_preset,
            format_func=preset_label,
            help="A model family with its training recipe; it fills in the other fields, which you can then change.",
        )
    fixed = ts.is_scan_markov({"preset": st.session_state[ts.key("preset")]})
    cell_col.selectbox(F["cell"].label, list(CELLS), key=ts.key("cell"), format_func=cell_choice, disabled=fixed)
    ts.number_input(hidden_col, "hidden", step=16, disabled=fixed)
    ts.number_input(
        seconds_col,
        "seconds",
        step=10,
    )
    return fixed


def more_settings(more, fixed, saved):
    """The expander's three columns: the model, the data, the training recipe -> (the data column, the
    uploaded corpus or None, whether the preset's task is n-grams)."""
    with more:
        model_col, data_col, train_col = st.columns(3, gap="large")
    with model_col:
        st.subheader("Model")
        st.radio(
            F["backend"].label,
            F["backend"].choices,
            key=ts.key("backend"),
            format_func=backend_label,
            horizontal=True,
            disabled=fixed,
            help="How the same cell is computed. Step by step: the equations line by line, as the Gates page shows "
            "them. Fast: the same equations with hand-optimised loops, checked equal. Fused: PyTorch's own RNN, GRU "
            "and LSTM layers (cuDNN on a GPU).",
        )
        c1, c2 = st.columns(2)
        ts.number_input(c1, "emb", step=8)
        ts.number_input(c2, "layers", disabled=fixed)
        ts.number_input(c1, "dropout", step=0.05, format="%.2f")
        if fixed:
            st.caption("The selective-scan presets have a fixed architecture; only the width E and dropout change.")

    with data_col:
        st.subheader("Data")
        st.radio(F["corpus"].label, list(ts.CORPUS_CHOICES), key=ts.key("corpus"), format_func=ts.CORPUS_CHOICES.get)
        st.radio(
            F["tokenizer"].label,
            ["char", "sentencepiece"],
            key=ts.key("tokenizer"),
            format_func=TOKENIZER_LABELS.get,
            horizontal=True,
            help="Characters: one token per character. Subwords: common pieces of words (byte-pair encoding, "
            "SentencePiece), learned from the corpus in about a second.",
        )
        if st.session_state[ts.key("tokenizer")] == "sentencepiece":
            ts.number_input(st, "vocab", step=100)
        upload = None
        if st.session_state[ts.key("corpus")] == "upload":
            upload = st.file_uploader("Your corpus (UTF-8 text, up to 20 MB)", type=["txt"], key="train_upload")

    with train_col:
        st.subheader("Training")
        c1, c2 = st.columns(2)
        ts.number_input(c1, "lr", step=1e-4, format="%g")
        ts.number_input(c2, "wd", step=0.01, format="%g")
        ts.number_input(c1, "batch")
        ngram = PRESETS[st.session_state[ts.key("preset")]].task == "ngram"
        ts.number_input(
            c2,
            "block",
            disabled=ngram,
        )
        ts.number_input(c1, "smoothing", step=0.05, format="%.2f")
        ts.number_input(
            c2,
            "clip",
            step=0.1,
            format="%.2f",
        )
        ts.number_input(
            c1,
            "eval_every",
            step=10,
        )
        ts.number_input(c2, "seed", step=1)
        st.checkbox(
            F["stateful"].label,
            key=ts.key("stateful"),
            help="Consecutive windows with the hidden state carried from batch to batch (detached), "
            "instead of random windows from a zero state.",
        )
        st.text_input(
            F["name"].label,
            key=ts.key("name"),
            max_chars=64,
            placeholder=f"automatic: {run_title(ts.default_run_name(ts.widget_values(saved)) + '-1')}",
        )
        show_anchors("nanogpt_cpu", "nanogpt_gpu", "uniform_char")
    return data_col, upload, ngram


def checked_model(notices, values, task):
    """The model the settings make, with its size and what training it takes in memory said in
    `notices`; None when it cannot be built or would not fit (the reason said there)."""
    model_config = None
    with notices:
        fused_problem = ts.fused_problem(values)
        if fused_problem:
            st.warning(fused_problem)
        elif task is not None:
            with user_errors("This model"):
                candidate = ts.model_config(values, task.vocab_size)
                convention = FAMILIES["scan" if ts.is_scan_markov(values) else values["cell"]].convention
                steps = task.sequence_length(ts.train_config(values))  # the window, or a ScanMarkov context
                need_mb = training_memory_bytes(candidate, values["batch"], steps) / 2**20
                st.caption(
                    f"**{parameter_count(config_to_dict(candidate)):,} parameters** · about {need_mb:,.0f} MB "
                    f"to train at B={values['batch']}, T={steps} · `{convention}`"
                )
                # refused here, before anything is built, with the limit and what to change (CostError)
                check_training_memory(candidate, values["batch"], steps)
                model_config = candidate
    return model_config
