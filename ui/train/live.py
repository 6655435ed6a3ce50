"""The Train page's live view: the race chart of this session's runs beside the bundled models' long race,
their progress and samples, redrawn every two seconds while a run trains (less often as more students watch:
ui.shared.live_refresh)."""

import streamlit as st

from lab.instruments.race import long_race
from lab.server.capacity import server_budget
from lab.training.checkpoints import list_checkpoints
from ui.shared.boundary import fragment, redraw_by_itself
from ui.shared.common import page_link
from ui.shared.live_refresh import live_refresh_seconds
from ui.shared.plain_text import plain
from ui.shared.sessions import watching_sessions
from ui.train import chart, memory_race, runs

# the bundled files' figures, read once per process: the live view below is redrawn every 2 s for every
# watching student, and building the long race's plotly figure alone took 35 ms of the interpreter they share


@st.cache_resource(show_spinner=False)
def long_race_chart():
    """The bundled character models' validation curves over their training (read from the files' headers):
    (plotly figure, caption, the curves), shared read-only by every session."""
    curves = long_race(list_checkpoints(None, include_versions=False))
    return chart.long_race_figure(curves), chart.long_race_caption(curves), curves


@st.cache_data(show_spinner=False)
def bundled_anchors():
    return chart.bundled_anchors(list_checkpoints(None, include_versions=False))


def waiting_for_first_point(logs):
    """A run training whose first point has not come (a run still in the budget's queue is not: it may wait
    minutes, and its chart redrawn every 2 s for nothing was most of a class's load on the server)."""
    return any(log.job.status == "running" and log.last_step is None for log in logs)


def live_view(auto, x_axis, refresh, values, task, corpus_label):
    logs = runs.session_logs()
    n_running = server_budget().snapshot()[2]
    active = [log for log in logs if log.job.running]
    for log in active:  # how busy the server is while these train: what their step counts mean
        log.other_runs = max(log.other_runs, n_running - len(active))
    memory_race.view(x_axis)
    if memory_race.race_jobs() and not logs:
        return rerun_when_done(auto, [], refresh)
    kinds = {(log.tokenizer, log.vocab, log.job.extra.get("corpus")) for log in logs} or {
        (values["tokenizer"], task and task.vocab_size, corpus_label)
    }
    # drawn even before the first run, so the chart (and plotly.js) is ready when the first point comes
    x_span = values["seconds"] if x_axis == "elapsed" else 100
    anchors = chart.char_anchors(kinds, bundled_anchors())
    figure, caption, long_curves = long_race_chart()
    live_column, long_column = st.columns([3, 2])
    with live_column:
        st.plotly_chart(chart.shared_race_figure(logs, x_axis, anchors, x_span), key="train_chart", width="stretch")
        verdict = chart.live_verdict(logs, x_axis, long_curves)
        if logs:
            st.caption(
                " ".join(filter(None, [verdict and f"**{plain(verdict)}**", plain(chart.steps_sentence(logs))]))
                + " Thin lines: loss on the batches it trains on; dashed with dots: on text it never trains on."
            )
    with long_column:
        st.plotly_chart(figure, key="train_long_race", width="stretch")
        st.caption(caption)
    st.caption(server_budget().sentence())
    runs.draw_progress_and_samples(logs)
    runs.draw_continue_controls(logs)
    if any(log.job.checkpoint_path for log in logs):
        with st.container(horizontal=True):
            for page in ("Sample", "Gates", "Checkpoints"):
                page_link(page, label=f"Open the {page} page")
    rerun_when_done(auto, logs, refresh)


def rerun_when_done(auto, logs, refresh):
    if auto and not (any(log.job.running for log in logs) or memory_race.running()):
        redraw_by_itself()  # the last run ended: redraw the page once, without the refresh
    if auto and refresh < live_refresh_seconds(watching_sessions(), waiting_for_first_point(logs)):
        redraw_by_itself()  # the first points are drawn, or more students watch: redraw less often from now on


def live_race(running, values, task, corpus_label):
    """The live view, a fragment redrawn while a run of this session trains."""
    refresh = live_refresh_seconds(
        watching_sessions(), waiting_for_first_point(st.session_state.get("train_logs", {}).values())
    )
    fragment(run_every=refresh if running else None)(live_view)(
        bool(running), values["x"], refresh, values, task, corpus_label
    )
