"""The toy tasks' results, as the toy-task lesson and the Train page's memory race show them: the table
shipped beside the bundled models (by scripts/build_probe_results.py), and a live race's rows in the
same columns (ui.shared.memory_charts.probe_figure's)."""

import numpy as np
import pandas as pd
import streamlit as st

from lab.nets.models import count_parameters

RESULTS = "memory_probe.csv"  # its name beside the bundled models


@st.cache_data(max_entries=4, show_spinner=False)
def cached_results(path, mtime):
    return pd.read_csv(path)


def shipped_results(path):
    """The shipped table (at `path`), or None after a message saying it is missing."""
    if not path.is_file():
        st.warning(
            "The toy-task results that come with this lab are missing from this installation: ask whoever "
            "runs this lab to make them again (about 15 minutes). The live run below still works.",
            icon="📦",
        )
        return None
    return cached_results(str(path), path.stat().st_mtime)


def live_rows(jobs, task, distance):
    """The live run so far: per cell its latest validation accuracy, in probe_figure's columns."""
    rows = []
    for cell, job in jobs.items():
        evals = [e for e in job.events() if e["type"] == "eval"]
        steps = [e for e in job.events() if e["type"] == "step"]
        rows.append(
            {
                "cell": cell,
                "distance": distance,
                "status": job.status,
                "steps": steps[-1]["step"] if steps else 0,
                "accuracy": evals[-1]["val_accuracy"] if evals else np.nan,
                "chance": job.task.chance,
                "params": count_parameters(job.model),
                "skipped": False,
                "task": task,
            }
        )
    return pd.DataFrame(rows)
