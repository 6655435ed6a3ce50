"""The Ablation page's last section: a short live run of both arms (lab.runs.live_ablation: the ablation's
runner, as on the command line), on this server's training budget, polled while it trains."""

import pandas as pd
import streamlit as st

from lab.experiments.ablation import AblationConfig
from lab.runs import live_ablation
from lab.words import count
from ui.ablation.views import show_answer, show_details, show_gate_statistics, show_loss
from ui.shared.boundary import fragment, redraw_by_itself
from ui.shared.joined import shared_run_text
from ui.shared.live_refresh import live_refresh_seconds
from ui.shared.plain_text import said, user_errors
from ui.shared.sessions import register_job, session_key, train_in_process, watching_sessions

LIVE_LR = 3e-3  # the live run's peak rate: 6x the seed's 5e-4, so that 64-step digits learn within a minute
# the live run's epoch events -> the column names a student reads (as in the results' own table)
LIVE_COLUMNS = {
    "seed": "random seed",
    "train_loss": "train loss",
    "val_loss": "test loss (nats)",
    "val_accuracy": "test accuracy (fraction)",
    "z_mean": "mean z",
    "r_mean": "mean r",
    "b_z_mean": "b_z = b_iz + b_hz",
}


def run_it_yourself():
    st.header("5 · Run it yourself (a short live version)")
    st.caption(
        "Both arms train one run after another (one random seed at a time, as the command line does) on a "
        "background thread of this server (its GPU when it has one, else its CPU), on the offline digits set, "
        "with a training subset and shorter sequences: **a demo of the method, not the study**. Closing the tab "
        "stops it. By default the images are the digits' own 8 × 8 pixels, so each sequence is **64 steps, not "
        f"1024**, and the learning rate is {LIVE_LR:g} instead of the gate-bias study's 5e-4: on a CPU both arms "
        "learn visibly in about a minute (with these defaults, near 70% test accuracy after 6 epochs), which "
        "1024-step sequences would need hours for."
    )
    job = st.session_state.get("ablation_job")
    running = job is not None and job.running
    with st.form("ablation_live_form"):
        c = st.columns(6)
        size = c[0].selectbox(
            "Image side", [8, 16, 32], key="ablation_size", format_func=lambda s: f"{s} ({count(s * s, 'step')})"
        )
        n_train = c[1].number_input("Training sequences", 16, 1437, step=16, key="ablation_train")
        n_test = c[2].number_input("Test sequences", 10, 360, step=10, key="ablation_test")
        epochs = c[3].number_input("Epochs", 1, 20, key="ablation_epochs")
        batch = c[4].number_input("Batch size", 4, 128, key="ablation_batch")
        n_seeds = c[5].number_input("Random seeds per arm", 1, 3, key="ablation_seeds")
        start = st.form_submit_button("Train both arms", type="primary", disabled=running)
    if start and not running:
        with user_errors("Starting the live ablation"):
            config = AblationConfig(
                dataset="digits",
                size=int(size),
                epochs=int(epochs),
                seeds=tuple(range(int(n_seeds))),
                arms=("baseline", "ablated"),
                batch_size=int(batch),
                lr=LIVE_LR,
                limit_train=int(n_train),
                limit_test=int(n_test),
                gate_batch=8,
            )
            # started, or a classmate's of the same settings joined; a CapacityError is shown by user_errors
            job = live_ablation(config, owner=session_key(), in_process=train_in_process())
            register_job(job)
            st.session_state["ablation_job"] = job


def live_view():
    job = st.session_state.get("ablation_job")
    if job is None:
        return
    if job.running and st.button("Stop", key="ablation_stop"):
        job.stop()
    events = job.events()
    for e in events:
        if e["type"] == "error":
            st.error(f"The live run failed: {said(e['message'])}")
    steps = pd.DataFrame(
        [
            {"arm": e["arm"], "seed": e["seed"], "step": e["step"], "train_loss": e["train_loss"]}
            for e in events
            if e["type"] == "step"
        ]
    )
    done = [e for e in events if e["type"] == "epoch"]
    queued = (
        f", number {job.queue_position} in the queue for this server's training budget" if job.queue_position else ""
    )
    st.write(
        f"Status: **{job.status}**{queued}"
        + (f" ({said(job.message)})" if job.message else "")
        + (f" · {count(len(steps), 'step')}" + (" so far" if job.running else "") if len(steps) else "")
    )
    shared = shared_run_text(job)
    if shared:
        st.caption(shared)
    if job.running:
        if len(steps):
            show_loss(steps, "Live training loss", "ablation_live_loss")
        if done:
            st.dataframe(
                pd.DataFrame(done)[
                    ["arm", "seed", "epoch", "train_loss", "val_loss", "val_accuracy", "z_mean", "r_mean", "b_z_mean"]
                ].rename(columns=LIVE_COLUMNS),
                hide_index=True,
                key="ablation_live_epochs",
            )
    elif job.results is not None:
        show_answer(job.results, "live")
        with st.expander("Its statistics and training curves"):
            show_details(job.results, "live")
        st.subheader("Inside its gates")
        show_gate_statistics(job.results, "live")
        if st.session_state.get("ablation_shown") is not job:  # leave the polling fragment once
            st.session_state["ablation_shown"] = job
            redraw_by_itself()


def live_section():
    run_it_yourself()
    job = st.session_state.get("ablation_job")
    if job is not None and job.running:
        fragment(run_every=live_refresh_seconds(watching_sessions(), False))(live_view)()  # a class's share
    else:
        live_view()
