"""The one place a page or a part of a page fails: as one plain line, never an exception's element with its
stack, the server's paths or a student's space key (which opens the student's files). Every page's body runs in
`page_part`, and every fragment is made by `fragment`, which runs it in `page_part` too; what reaches the log is
the whole traceback, for the teacher. Streamlit's own display (client.showErrorDetails = "none" in
.streamlit/config.toml) is the backstop for anything raised outside them.
"""

import contextlib
import functools
import logging

import streamlit as st

from lab.errors import LabError
from lab.server.pages_first import after_the_pages, drawing_a_page
from ui.shared.plain_text import said

log = logging.getLogger(__name__)  # ui.shared.sessions sends it to the server's log
REDRAWS_ITSELF = "_rnnlab_redraws_itself"  # the page's next run is its own redraw (redraw_by_itself)

GONE = (
    "A file this part of the page was reading is no longer there (deleted or replaced meanwhile, perhaps in "
    "another tab): pick a model again, or reload the page."
)
UNREADABLE = "A file this part of the page needed could not be read: reload the page to try again."
FAILED = (
    "This part of the page could not be drawn: something went wrong inside the lab (the server's log has the "
    "details for your teacher). Reload the page to try again."
)


def plain_failure(error):
    """What a page says of `error`, in one plain line: a refusal's own words (bad input: a LabError names what
    was wrong), a file gone or unreadable in words, anything else as the lab's fault, never its message."""
    if isinstance(error, LabError):
        return said(" ".join(str(error).split()))
    if isinstance(error, FileNotFoundError):
        return GONE
    if isinstance(error, OSError):
        return UNREADABLE
    return FAILED


@contextlib.contextmanager
def page_part(awaited=None):
    """Run a page's body or a fragment: an exception ends that part with plain_failure's line on the page and
    its traceback in the server's log. Streamlit's st.stop and st.rerun are BaseExceptions and pass through.
    A part someone waits for (a page opened, a setting changed, a button pressed; not a live view's timer, nor a
    page redrawing itself: redraw_by_itself) is drawn while the server's runs step aside
    (lab.server.pages_first), as on an idle server. `awaited`: a fragment's own say; None, a page's body."""
    if awaited is None:
        awaited = not st.session_state.pop(REDRAWS_ITSELF, False)
    try:
        with drawing_a_page(awaited):
            yield
    except Exception as error:
        if not isinstance(error, LabError):
            log.exception("a page part failed")
        st.error(plain_failure(error), icon="⚠️")


def redraw_by_itself():
    """st.rerun, for a page that redraws itself: its run ended, or its live view's pace changed. Nobody waits for
    that run, so the server's runs do not step aside for it (thirty students' pages, redrawn as their race's pace
    changed, had halved the race's)."""
    st.session_state[REDRAWS_ITSELF] = True
    st.rerun()


def fragment(func=None, *, run_every=None):
    """st.fragment, its body run in page_part: `@fragment`, or `fragment(run_every=1.0)(view)(...)`. A fragment
    on a timer is not awaited: its first drawing is its page's, and its redraws show what a run has done since,
    so the runs do not step aside for them (a class's thirty live charts would halve their pace), and they wait
    for the pages someone waits for (lab.server.pages_first.after_the_pages)."""

    def make(body):
        @functools.wraps(body)
        def guarded(*args, **kwargs):
            if run_every is not None:
                after_the_pages()
            with page_part(awaited=run_every is None):
                return body(*args, **kwargs)

        return st.fragment(guarded, run_every=run_every)

    return make(func) if func is not None else make
