"""The Train page's memory race: one cell of each kind on the toy task where memory decides
(lab.experiments.memory_race), started as one (all or none), drawn as their accuracy over the race,
with what the chart says and where the lab's longer runs of the same task end; and, before Start, whether
this server is too busy to call it in its time.

The jobs are the toy-task lesson's (lab.experiments.memory_race.start_toy_race): TrainingJobs of the
probe's models, started together, registered with the session so that closing the tab stops them; the
chart beside the race is that lesson's (ui.shared.toy_results), the shipped probe over every distance
with the live runners on it.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from lab.experiments.memory_race import (
    MEMORY_RACE,
    forecast,
    long_runs_sentence,
    memory_verdict,
    race_curves,
    race_in_progress,
    start_toy_race,
)
from lab.experiments.probe import TOY_CELLS, TOY_TASKS, ProbeConfig
from lab.server.capacity import lane_share, server_budget, step_lanes
from lab.training.checkpoints import BUNDLED_DIR
from lab.words import a_or_an, listing
from ui.cell_labels import cell_colour, cell_label
from ui.shared.chart_style import WHITE
from ui.shared.memory_charts import probe_figure
from ui.shared.plain_text import plain, said
from ui.shared.sessions import register_job, session_key, train_in_process
from ui.shared.shared_figures import run_key, shared_figure
from ui.shared.toy_results import RESULTS, live_rows, shipped_results
from ui.train.chart import CHART_HEIGHT

TASK, DISTANCE = MEMORY_RACE
STATE = "train_memory_jobs"  # this session's latest memory race: {cell: TrainingJob}


def race_jobs():
    """This session's latest memory race, {cell: job}, or {} before the first."""
    return st.session_state.get(STATE, {})


def start(seconds):
    """A new memory race of `seconds`, the session's previous one stopped -> its jobs."""
    for job in race_jobs().values():
        job.stop()
    # all or none, as the text race; joined where a classmate's identical race trains
    jobs = start_toy_race(TASK, DISTANCE, seconds, session_key(), "the memory race", in_process=train_in_process())
    for job in jobs.values():
        register_job(job)
    st.session_state[STATE] = jobs
    return list(jobs.values())


def forget_if_ended():
    """Clear finished runs: the memory race goes too once it has ended."""
    if race_jobs() and not any(job.running for job in race_jobs().values()):
        del st.session_state[STATE]


def what_it_does(seconds):
    """Before Start: what the memory race trains, and whether this server can call it in its time."""
    _, _, running, queued = server_budget().snapshot()
    lanes = step_lanes()
    joining = race_in_progress(TASK, DISTANCE, seconds)  # a classmate's identical race: pressing joins it
    outlook = forecast(seconds, running + queued, lanes, lane_share(lanes, running), in_progress=joining)
    spec = TOY_TASKS[TASK]
    # the runners named, not counted against another list: the text race before it has fewer of them
    runners = listing(a_or_an(cell_label(cell)) for cell in TOY_CELLS)
    line = (
        f"**Memory race**: {runners}, about {ProbeConfig().param_budget:,} parameters each, on a task where memory "
        "decides: "
        f"{spec.in_a_sentence} of {DISTANCE + 1} (“{spec.example(DISTANCE, longest=12)}”)."
    )
    return line, outlook


def accuracy_figure(curves, chance, x_axis):
    """Each runner's accuracy at the "?" over the race, with chance as a dotted line."""
    fig = go.Figure()
    for cell, (xs, accuracies) in curves.items():
        fig.add_trace(
            go.Scatter(
                x=np.asarray(xs, dtype=float),
                y=np.asarray(accuracies, dtype=float),
                mode="lines+markers",
                name=cell_label(cell),
                line=dict(color=cell_colour(cell), width=2.5),
                marker=dict(size=5),
                hovertemplate=f"{cell_label(cell)}: %{{y:.0%}} right<extra></extra>",
            )
        )
    fig.add_shape(type="line", xref="paper", x0=0, x1=1, y0=chance, y1=chance, line=dict(color="grey", dash="dot"))
    fig.add_annotation(
        xref="paper", x=1, y=chance, text=f"chance {chance:.0%}", showarrow=False, yanchor="bottom", xanchor="right"
    )
    fig.update_layout(
        height=CHART_HEIGHT,
        margin=dict(l=10, r=10, t=40, b=10),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        xaxis_title="seconds" if x_axis == "elapsed" else "step",
        yaxis=dict(title="answers right at the “?”", range=[0, 1.03], tickformat=".0%"),
        hovermode="x unified",
        template=WHITE,
    )
    return fig


def shipped_ends(rows, chance):
    """The shipped probe's rows of this task -> {cell: (accuracy, steps)} at the race's distance."""
    if rows is None:
        return None
    here = rows[(rows["distance"] == DISTANCE) & ~rows["skipped"]]
    return {r["cell"]: (float(r["accuracy"]), int(r["steps"])) for _, r in here.iterrows()} or None


def view(x_axis):
    """The memory race's chart, its verdict, and the lab's longer runs beside it (in the live fragment)."""
    jobs = race_jobs()
    if not jobs:
        return
    curves = race_curves(jobs, x_axis)
    chance = next(iter(jobs.values())).task.chance
    rows = shipped_results(BUNDLED_DIR / RESULTS, TASK)
    ends = shipped_ends(rows, chance)
    verdict = memory_verdict(curves, chance, x_axis, DISTANCE, ends)
    steps = {cell: _steps(job) for cell, job in jobs.items()}
    read = tuple((cell, run_key(job), len(job.events(kind="eval", settled=True))) for cell, job in jobs.items())
    race_column, long_column = st.columns([3, 2])
    with race_column:
        figure = shared_figure(  # the class's identical races are shared (lab.runs): one figure for every page
            ("memory race", x_axis, chance, read), lambda: accuracy_figure(curves, chance, x_axis)
        )
        st.plotly_chart(figure, key="train_memory_chart", width="stretch")
        st.caption(
            f"**{plain(verdict)}** Steps taken: "
            + ", ".join(f"the {cell_label(cell)} {n:,}" for cell, n in steps.items())
            + ". Each point: the share of 256 fresh sequences answered right."
        )
    with long_column:
        figure = shared_figure(
            ("memory race, longer runs", read),
            lambda: probe_figure(rows, live_rows(jobs, TASK, DISTANCE, at_evaluation=True)),
        )
        st.plotly_chart(figure, key="train_memory_long", width="stretch")
        st.caption(
            f"**The lab's longer runs** of the same task at every distance k (lines), and your runners at k = "
            f"{DISTANCE} (diamonds)." + (f" {long_runs_sentence(ends, chance)}" if ends else "")
        )
    for job in jobs.values():
        if job.status == "failed":
            st.error(f"The memory race's {plain(cell_label(_cell(job, jobs)))} failed: {said(job.message)}")


def _steps(job):
    return (job.latest("step", settled=True) or {}).get("step", 0)


def _cell(job, jobs):
    return next(cell for cell, j in jobs.items() if j is job)


def running():
    return [job for job in race_jobs().values() if job.running]
