"""A figure many students' pages show at once, made once. A class watching one shared run (lab.server.shared_runs)
draws the same chart thirty times a redraw, and building a plotly figure was the most of the server's time while
they watched (a profile of thirty pressing Start on 2 cores: 38% of its busy samples in plotly's figure building).
A figure is kept by what it shows: the runs (each the job every student shares) and how far each has been read."""

import collections
import threading

KEPT_FIGURES = 64  # a class's distinct charts at once, with room to spare: each a few hundred kB at most

_made = collections.OrderedDict()  # key -> figure, the least recently shown first
_lock = threading.Lock()


def run_key(job):
    """What tells one run from another in a figure's key: the job the students share (a run joined is a Member of
    it), by identity and the moment it started (an id alone can be reused once a job is gone)."""
    shared = getattr(job, "job", job)
    return id(shared), getattr(shared, "started_at", None)


def shared_figure(key, make):
    """The figure for `key`, made by `make()` the first time a page asks for it; plotly figures are only read
    when a page shows them (st.plotly_chart copies them), so every page may show the same one."""
    with _lock:
        figure = _made.get(key)
        if figure is not None:
            _made.move_to_end(key)
            return figure
    figure = make()  # outside the lock: two pages may make it at once, the second one's is kept
    with _lock:
        _made[key] = figure
        while len(_made) > KEPT_FIGURES:
            _made.popitem(last=False)
    return figure
