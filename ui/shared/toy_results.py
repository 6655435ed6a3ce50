"""The toy tasks' results, as the toy-task lesson and the Train page's memory race show them: the table
shipped beside the bundled models (by scripts/build_probe_results.py), and a live race's rows in the
same columns (ui.shared.memory_charts.probe_figure's)."""

import numpy as np
import pandas as pd
import streamlit as st

from lab.nets.models import count_parameters

RESULTS = "memory_probe.csv"  # its name beside the bundled models


@st.cache_resource(max_entries=16, show_spinner=False)
def cached_results(path, mtime, task=None):
    """The shipped table, or its rows of one task: one object shared read-only by every session (a copy per page
    visit, as st.cache_data gives, was redone by every redraw of a class's live views)."""
    table = pd.read_csv(path)
    return table if task is None else table[table["task"] == task]


def shipped_results(path, task=None):
    """The shipped table (at `path`), or its rows of one `task`; None after a message saying it is missing."""
    if not path.is_file():
        st.warning(
            "The toy-task results that come with this lab are missing from this installation: ask whoever "
            "runs this lab to make them again (about 15 minutes). The live run below still works.",
            icon="📦",
        )
        return None
    return cached_results(str(path), path.stat().st_mtime, task)


def live_rows(jobs, task, distance, at_evaluation=False):
    """The live run so far (as of this second: lab.server.jobs.SETTLE_SECONDS): per cell its latest validation
    accuracy, in probe_figure's columns (its steps: those taken so far; with `at_evaluation`, those the accuracy
    was measured after, as a chart's hover says them)."""
    rows = []
    for cell, job in jobs.items():
        last_eval, last_step = job.latest("eval", settled=True), job.latest("step", settled=True)
        steps = (last_eval if at_evaluation else last_step) or {}
        rows.append(
            {
                "cell": cell,
                "distance": distance,
                "status": job.status,
                "steps": steps.get("step", 0),
                "accuracy": last_eval["val_accuracy"] if last_eval else np.nan,
                "chance": job.task.chance,
                "params": count_parameters(job.model),
                "skipped": False,
                "task": task,
            }
        )
    return pd.DataFrame(rows)
