"""The Class page's class board (lab.server.board holds its store, lab.server.board_losses its arithmetic,
ui.shared.board the store of this server's user directory, ui.class_board.charts its figures): one redraw
shared by every page that shows it, its chart, leaderboard at equal time and what made the difference, and
the teacher's controls.
"""

import threading
import time
from typing import NamedTuple

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.server.board import MAX_RUNS_PER_STUDENT
from lab.server.board_losses import equal_time, leaderboard
from lab.settings import server_settings
from lab.words import count
from ui.cell_labels import cell_label
from ui.class_board.charts import difference_chart, leaderboard_html, loss_chart
from ui.shared.board import board_at, store
from ui.shared.sessions import users_root
from ui.shared.sign_in import try_teacher_key

BOARD_REFRESH_SECONDS = 5.0  # the board redraws its live runs this often
# a shared redraw younger than this is every page's, however its losses moved on since: a page's next
# refresh, a little early or late, finds the redraw another page made in its own
FRESH_SECONDS = 0.8 * BOARD_REFRESH_SECONDS
KEPT_REDRAWS = 8  # the redraws kept at once, one per "Compare at" the pages ask for


def shown_rows(board, curves):
    """The runs `lab.server.board.BoardStore.snapshot` shows (`board`, `curves`: run id -> Curve), as
    rows: their student's name, their facts and their curve."""
    return [
        {"id": run_id, "who": board.students[board.runs[run_id].owner].name, "run": board.runs[run_id], "curve": curve}
        for run_id, curve in curves.items()
    ]


def table(rows, at_seconds):
    """The leaderboard at `at_seconds` as a DataFrame, best first, indexed by run id (its columns are the
    CSV's)."""
    by_id = {row["id"]: row for row in rows}
    ranked = leaderboard({row["id"]: row["curve"] for row in rows}, at_seconds)
    records = []
    for rank, (run_id, loss) in enumerate(ranked, start=1):
        row, run = by_id[run_id], by_id[run_id]["run"]
        records.append(
            {
                "rank": rank if loss is not None else None,
                "name": row["who"],
                "model": row["run"].title,
                "cell": cell_label(run.cell),
                "hidden size": run.hidden,
                "layers": run.layers,
                "learning rate": run.lr,
                "parameters": run.params,
                f"loss at {seconds_text(at_seconds)}": loss,
                "final loss": row["curve"].final_loss(),
                "seconds trained": round(row["curve"].reached(), 1),
                "run": run.run,
            }
        )
    return pd.DataFrame(records, index=[run_id for run_id, _ in ranked])


class Redraw(NamedTuple):
    at: float  # the seconds of training the leaderboard compares at
    table: pd.DataFrame  # the leaderboard, best first (the CSV)
    chart: go.Figure  # every run's loss over its seconds
    leaderboard: str  # the leaderboard's HTML
    difference: go.Figure  # final loss against hidden size, cell and learning rate


def redraw(rows, at_seconds):
    """What one redraw of the board computes from its runs' rows (live_board lays it out;
    benchmarks.class_board times it). `at_seconds`: 0 for the time every run has reached."""
    at = at_seconds or equal_time([row["curve"] for row in rows]) or 0.0
    frame = table(rows, at)
    chart = loss_chart(rows, at, list(frame.index))  # the names go to the best runs first
    return Redraw(at, frame, chart, leaderboard_html(frame, frame.columns[8]), difference_chart(rows))


class SharedRedraw:
    """One redraw of the board for every page that shows it: made again when the board's choices changed
    (a run posted, hidden or taken off, the board opened), or when losses came since and it is older than
    FRESH_SECONDS. Every page refreshing meanwhile, whatever its timer's phase, draws the same one: N pages
    open cost one redraw each BOARD_REFRESH_SECONDS, not N."""

    def __init__(self, board_store, clock=time.monotonic):
        self.store, self.clock = board_store, clock
        self._lock = threading.Lock()
        self._made = {}  # "Compare at" seconds -> (the store's marks, when, the Redraw or None)

    def get(self, at_seconds):
        """The board's Redraw compared at `at_seconds` (0: the time every run has reached); None while it
        shows no run."""
        with self._lock:  # one page redraws while the others wait for it, rather than each redrawing
            marks = self.store.marks()  # before the snapshot: a write between them redraws next time
            if at_seconds in self._made:
                (choices, losses), when, drawn = self._made[at_seconds]
                if choices == marks[0] and (losses == marks[1] or self.clock() - when < FRESH_SECONDS):
                    return drawn
            rows = shown_rows(*self.store.snapshot())
            drawn = redraw(rows, at_seconds) if rows else None
            self._made.pop(at_seconds, None)  # then the oldest first, below
            self._made[at_seconds] = (marks, self.clock(), drawn)
            while len(self._made) > KEPT_REDRAWS:
                del self._made[next(iter(self._made))]
            return drawn


@st.cache_resource
def shared_redraw(root):
    """The SharedRedraw of the board in the folder `root`, one for the server process."""
    return SharedRedraw(board_at(root)[0])


def live_board(at_seconds, teacher):
    """The board itself: the chart, the leaderboard at equal time and what made the difference (every
    visitor who may see it sees the same, drawn once for all), and for the `teacher` the table as a CSV
    file. `at_seconds`: 0 for the time every run has reached."""
    drawn = shared_redraw(users_root()).get(at_seconds)
    if drawn is None:
        st.info(
            "No runs on the board yet: students turn on “Show my runs on the class board” on the Train page, "
            "then press Start."
        )
        return None
    chart_column, board_column = st.columns([3, 2], gap="medium")  # both on one projected screen
    chart_column.plotly_chart(drawn.chart, key="class_chart", width="stretch")
    with board_column:
        which = "the time every run shown has reached" if not at_seconds else "the time chosen above"
        st.subheader(f"Leaderboard at {seconds_text(drawn.at)} of training")
        runs = len(drawn.table)
        st.caption(
            f"Each run's loss after the same seconds of training ({which}): the fair race on a shared server. "
            f"{count(runs, 'run')}{', the best first' if runs > 1 else ''}; the board keeps each student's "
            f"{MAX_RUNS_PER_STUDENT} most recent."
        )
        st.html(drawn.leaderboard)
        if teacher:
            st.download_button(
                "Download the table (CSV)",
                drawn.table.to_csv(index=False).encode(),
                file_name="class-board.csv",
                mime="text/csv",
                key="class_csv",
                on_click="ignore",
            )
    st.subheader("What made the difference?")
    st.caption("Each run's final loss (its last tenth of training) against its hidden size, cell and learning rate.")
    st.plotly_chart(drawn.difference, key="class_difference", width="stretch")


def seconds_text(seconds):
    """12 s, 2.3 s: whole seconds once there are ten of them."""
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def teacher_controls(board):
    """The teacher's view: open the board to the class, hide runs from it. Each widget writes the board's
    file only when the teacher changes it, so two teachers' pages never undo each other's choices."""
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    left.toggle(
        "Open the board to the class",
        value=board.open,
        key="class_open",
        on_change=lambda: store().set_open(st.session_state.class_open),
        help="Students then see this board on their Class page, read-only: no hiding, no download.",
    )
    names = {run_id: f"{board.students[run.owner].name} · {run.run}" for run_id, run in board.runs.items()}
    right.multiselect(
        "Hidden runs",
        list(names),
        default=[run_id for run_id, run in board.runs.items() if run.hidden_by_teacher],
        format_func=names.get,
        key="class_hidden",
        on_change=_save_hidden,
        placeholder="none: every run shown is on the board",
    )


def _save_hidden():
    chosen, runs = set(st.session_state.class_hidden), store().read().runs
    for run_id, run in runs.items():
        if run.hidden_by_teacher != (run_id in chosen):
            store().hide(run_id, run_id in chosen)


def teacher_key_set():
    return server_settings().teacher_key is not None


def teacher_key_box():
    """For whoever is no teacher yet, where a teacher key is set: the box to type it in."""
    with st.expander("For the teacher"), st.form("class_key_form", border=False):
        typed = st.text_input("Teacher key", type="password", max_chars=128, key="class_key")
        if st.form_submit_button("Open the teacher's view"):
            if try_teacher_key(typed):
                st.rerun()
            st.error("That is not this server's teacher key.")
