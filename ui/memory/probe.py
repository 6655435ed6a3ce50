"""The Memory page's fourth section, the memory probe: toy tasks whose answer depends on a token read k
steps earlier (lab.experiments.probe), the shipped results against distance, and a small probe a student
runs on this server's training budget, with its progress polled only while it trains."""

from pathlib import Path

import pandas as pd
import streamlit as st

from lab.experiments.probe import TOY_TASKS, ProbeConfig, results_table
from lab.nets.families import CELLS
from lab.runs import memory_probe
from lab.training.checkpoints import BUNDLED_DIR
from lab.words import count
from ui.cell_labels import cell_label, with_cell_labels
from ui.shared.boundary import fragment, redraw_by_itself
from ui.shared.joined import shared_run_text
from ui.shared.live_refresh import live_refresh_seconds
from ui.shared.memory_charts import probe_figure
from ui.shared.plain_text import said, user_errors
from ui.shared.sessions import register_job, session_key, train_in_process, watching_sessions

PROBE_RESULTS = BUNDLED_DIR / "memory_probe.csv"  # written by scripts/build_probe_results.py


def load_probe_results(path=PROBE_RESULTS):
    """The shipped memory-probe table, or None when the file is missing."""
    path = Path(path)
    return pd.read_csv(path) if path.is_file() else None


def probe_section(mirror):
    """Section 4: the results (a fragment) and the runner (a fragment polling only while a probe of this session
    runs, as often as a class's share of redraws allows: ui.shared.live_refresh; an idle page costs nothing).
    `mirror` writes the page's settings into the URL: every fragment calls it, since a fragment's rerun skips the
    rest of the page."""
    probe_results(mirror)
    probe_running = st.session_state.get("memory_probe_job") is not None
    refresh = live_refresh_seconds(watching_sessions(), False) if probe_running else None
    fragment(probe_runner, run_every=refresh)(mirror)


@fragment
def probe_results(mirror):
    st.header("4 · Memory probe: toy tasks")
    st.markdown(
        "Sequences that end in a question mark whose answer depends on a token read $k$ steps earlier, with "
        "other tokens in between: nothing but memory helps, so accuracy falls to chance (always giving the "
        "commonest answer) once $k$ is longer than the cell can hold or learn to hold. One ~5,000-parameter "
        "model per task, cell and distance, trained from scratch."
    )
    task = st.radio(
        "Task", list(TOY_TASKS), format_func=lambda t: TOY_TASKS[t].title, horizontal=True, key="memory_probe_task"
    )
    st.caption(f"At the “?”: {TOY_TASKS[task].question} Example (k = 6): `{TOY_TASKS[task].example(6)}`")
    shipped = load_probe_results()
    live = st.session_state.get("memory_probe_live")
    live = live[live.task == task] if live is not None else None
    if shipped is None:
        st.info(
            "This copy of the lab has no shipped probe results (whoever runs the server can make them in about "
            "15 minutes); the live probe below still runs."
        )
    else:
        shipped = shipped[shipped.task == task]
        first = shipped.iloc[0]
        st.caption(
            f"Shipped results: at most {first['steps_budget']:,} AdamW steps of {first['batch_size']} fresh "
            f"sequences, stopped early at {first['solved']:.0%} right; ~{first['param_budget']:,} parameters per "
            "model. A cell at chance at two distances in a row was not trained at the longer ones."
        )
    if shipped is not None or live is not None:
        st.plotly_chart(probe_figure(shipped, live), key="memory_probe_chart")
        st.caption(
            "Read a curve as what that cell learns to hold at this size and budget, not as a hard capacity "
            "limit: more steps, or another learning rate, can move the long distances."
        )
    if shipped is not None:
        with st.expander("Shipped table"):
            table = results_table(shipped).rename(index=cell_label)
            st.table(
                table.style.format(
                    "{:.2f}", subset=[c for c in table.columns if c.startswith("k = ")], na_rep="skipped"
                )
            )
    if live is not None and len(live):
        st.table(
            with_cell_labels(live)[
                ["cell", "distance", "accuracy", "chance", "params", "hidden_size", "steps", "seconds"]
            ]
            .rename(columns={"hidden_size": "hidden size"})
            .style.format({"accuracy": "{:.3f}", "chance": "{:.3f}", "seconds": "{:.1f}"}),
            hide_index=True,
        )
    mirror()


def probe_runner(mirror):
    """Settings, Run and, while the probe trains, its progress: the part that reruns every second then."""
    st.subheader("Run a small probe yourself")
    cols = st.columns([1, 2, 1])
    probe_cell = cols[0].selectbox("Cell", list(CELLS), format_func=cell_label, key="memory_probe_cell")
    probe_distances = cols[1].multiselect(
        "Distances k", [2, 5, 10, 20, 50, 100], default=[2, 5, 10], key="memory_probe_distances"
    )
    probe_steps = cols[2].slider("Training steps per distance", 50, 1000, 300, step=50, key="memory_probe_steps")
    if st.button("Run the probe", key="memory_probe_run", type="primary"):
        with user_errors("The probe"):
            previous = st.session_state.get("memory_probe_job")
            if previous is not None:
                previous.stop()
            config = ProbeConfig(
                tasks=(st.session_state.memory_probe_task,),
                cells=(probe_cell,),
                distances=tuple(sorted(probe_distances)),
                steps=probe_steps,
                give_up_after=0,
            )
            # through the server's budget queue and step turns, where every training run trains; a classmate's
            # probe of the same settings is joined, not computed again
            job = memory_probe(config, owner=session_key(), in_process=train_in_process())
            register_job(job)
            st.session_state.memory_probe_job = job
            st.rerun()  # the whole page: this part now reruns every second, until the probe ends
    job = st.session_state.get("memory_probe_job")
    if job is None:
        mirror()
        return
    if job.running:
        show_progress(job)
        return
    del st.session_state.memory_probe_job
    if job.status == "failed":
        st.error(f"The probe did not work: {said(job.message)}")
    elif job.table is not None and len(job.table):
        st.session_state.memory_probe_live = job.table
    redraw_by_itself()  # the whole page: the results above, and this part stops polling


def show_progress(job):
    config = job.config
    shared = shared_run_text(job)
    if shared:
        st.caption(shared)
    last = job.latest("step")
    if job.status == "queued":
        st.progress(0.0, text=f"Waiting for the server: {count(job.queue_position, 'run')} ahead of this probe.")
    elif last:
        done = config.distances.index(last["distance"]) * config.steps + last["step"]
        st.progress(
            min(done / (len(config.distances) * config.steps), 1.0),
            text=f"k = {last['distance']}: step {last['step']}/{config.steps}, loss {last['train_loss']:.3f}",
        )
    else:
        st.progress(0.0, text="Starting…")
    if st.button("Stop the probe", key="memory_probe_stop"):
        job.stop()
