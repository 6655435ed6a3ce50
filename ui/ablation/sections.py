"""The Ablation page's question and answer, and its sections on the shipped study (lab.experiments.ablation):
the study in full, what its training did to the gates, what a bias means as a time constant, published
anchors. The page's settings and their URL form too; the live run is ui.ablation.live."""

import pandas as pd
import streamlit as st

from lab.experiments.ablation import SHIPPED_DIR, chrono_mean, load_results, time_constant_table
from lab.settings import server_settings
from lab.words import count
from ui.ablation.views import show_answer, show_details, show_gate_statistics
from ui.shared.common import show_anchors
from ui.shared.links import Field
from ui.shared.plain_text import user_errors

ARMS_IN_DETAIL = (
    "The study trains a one-layer GRU on images read one grey pixel per step (its size is below), in up to "
    "three arms. **baseline**: every bias learnable, update-gate bias $b_z = +1$. **ablated**: the reset and "
    "update biases (the $r$ and $z$ chunks of both $b_{ih}$ and $b_{hh}$) frozen at exactly 0 by gradient hooks; "
    "the candidate bias stays learnable. **chrono**: the update-gate bias starts at $\\log U[1, T-1]$ (chrono "
    "initialisation, a retention time of hundreds of steps at $T = 1024$), every bias learnable.\n\n"
    "PyTorch's convention: $h_t = (1 - z_t)\\,n_t + z_t\\,h_{t-1}$, so $z$ **keeps** memory and $b_z = +1$ "
    "means *keep more* ($\\sigma(1) = 0.73$ at initialisation). Lab puts the +1 in $b_{iz}$ only, so the gate "
    "starts at $\\sigma(1)$; filling both bias vectors with +1, an easy slip, would start it at $\\sigma(2) = 0.88$."
)


SECTIONS = {  # URL value -> what the choice under the answer says
    "study": "1 · The study in full",
    "gates": "2 · Inside its gates",
    "time": "3 · What a bias means",
    "anchors": "4 · Published anchors",
    "live": "5 · Run it yourself",
}
# the page's settings as they appear in a link: ?section=live&size=16&epochs=3...
SETTINGS = {
    "section": (Field("choice", "Section", choices=tuple(SECTIONS)), "ablation_section"),
    "size": (Field("int", "Image side", 8, 32), "ablation_size"),
    "train": (Field("int", "Training sequences", 16, 1437), "ablation_train"),
    "test": (Field("int", "Test sequences", 10, 360), "ablation_test"),
    "epochs": (Field("int", "Epochs", 1, 20), "ablation_epochs"),
    "batch": (Field("int", "Batch size", 4, 128), "ablation_batch"),
    "seeds": (Field("int", "Random seeds per arm", 1, 3), "ablation_seeds"),
}
DEFAULTS = {"section": "study", "size": 8, "train": 1437, "test": 120, "epochs": 6, "batch": 32, "seeds": 1}


@st.cache_data(show_spinner=False, max_entries=4)
def cached_results(path, mtime):
    return load_results(path)


def shipped_results():
    """The shipped study's results, or None when there are none."""
    path = (server_settings().ablation_dir or SHIPPED_DIR) / "results.json"  # read after setup_page checked them
    return cached_results(str(path), path.stat().st_mtime) if path.is_file() else None


def show_shipped(show, missing):
    """The shipped study drawn by `show` (show_answer, show_details or show_gate_statistics); `missing`:
    what to say when there is none. A file that cannot be read, or is malformed, is named in one line,
    never a traceback. Whether there were results to show."""
    results = None
    with user_errors("Reading the shipped results"):
        results = shipped_results()
        if results is None:
            st.info(missing)
    if results is None:
        return False
    try:
        show(results, "shipped")
    except (KeyError, TypeError, IndexError, ValueError):  # a hand-edited or older results file
        st.error(
            "The study's results file on this server is damaged or from an older version of the lab, so it "
            "cannot be shown; whoever runs the server can run the study again."
        )
    return True


def the_answer():
    """The first screen: the study's question in a student's words, one chart of its arms, and its answer
    in a sentence a student can repeat (ui.ablation.views.show_answer), computed from the shipped results."""
    results = None
    with user_errors("Reading the shipped results"):
        results = shipped_results()
    steps = count(results["dataset"]["sequence_length"] if results is not None else 1024, "step")
    arms = (
        f" The same GRU trained in {count(len(results['summary']), 'arm')}, with "
        f"{count(len(results['config']['seeds']), 'random seed')} each, answers it."
        if results is not None
        else ""
    )
    st.markdown(
        f"**The question.** A GRU reads an image one grey pixel at a time, {steps} per image, then names what "
        "it shows. Its keep gate decides, at every step, how much of its memory survives. **Does starting that "
        f"gate biased toward remembering help the GRU learn?**{arms}"
    )
    missing = (
        "This copy of the lab has no results of the study: whoever runs the server can make them with the "
        "lab's ablation command (about three hours on a CPU). The live run in the last section still works."
    )
    show_shipped(show_answer, missing)


def shipped_study():
    st.header("1 · The study in full")
    with st.expander("How it was run: the arms in equations, the statistics and the training curves"):
        st.markdown(ARMS_IN_DETAIL)
        if show_shipped(show_details, "No shipped results: the answer above says how to make them."):
            st.caption(
                "The study reads handwritten digits because they ship with the lab; on a machine that can "
                "download CIFAR-10 (and better, has a GPU), the same command runs the gate-bias study on its images."
            )


def shipped_gates():
    st.header("2 · Inside its gates: what training did to z and r")
    show_shipped(show_gate_statistics, "No shipped results: the answer above says how to make them.")


def time_constants():
    st.header("3 · What a bias means: time constants")
    results = None
    with user_errors("Reading the shipped results"):
        results = shipped_results()
    seq_len = results["dataset"]["sequence_length"] if results is not None else 1024
    st.markdown(
        "With inputs and state near zero, a keep gate sits at $g = \\sigma(b_z)$: the old state shrinks by "
        "$g$ per step, so it lives $\\tau = 1/(1-g)$ steps and halves every $\\log 0.5 / \\log g$ steps. "
        "The last column is $g^T$: what a constant gate keeps "
        "over the whole sequence."
    )
    tau_biases = [
        (0.0, "ablated arm: b_z frozen at 0"),
        (1.0, "baseline: b_iz = +1"),  # lab's rows, in plain words
        (2.0, "+1 in both b_iz and b_hz (an easy slip)"),
        (chrono_mean(seq_len), f"chrono mean, E[log U[1, {seq_len - 1}]]"),
        (6.2, "a chrono bias a little above the mean, +6.2"),
    ]
    table = pd.DataFrame(time_constant_table(tau_biases, seq_len=seq_len)).rename(
        columns={"sigmoid(b)": "kept per step σ(b)", "tau (steps)": "time constant τ (steps)"}
    )
    st.dataframe(
        table,
        hide_index=True,
        key="ablation_tau_table",
        column_config={c: st.column_config.NumberColumn(format="%.3g") for c in table.columns[2:]},
    )


def published_anchors():
    st.header("4 · Published anchors")
    st.caption(
        "Full training on real sequential CIFAR-10 / LRA Image (1024 steps); the shipped digits study is "
        "far shorter and easier, so compare trends, not numbers."
    )
    show_anchors("scifar_lstm", "scifar_urgru", "lra_image_transformer", "lra_image_s4")
