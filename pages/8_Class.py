"""Class: the class board. The runs students chose to show (Train's "show on the class board" switch),
live on one chart for a projector, a leaderboard at equal time, and what made the difference.

The teacher (signed in with one of RNNLAB_TEACHER_EMAILS, or with RNNLAB_TEACHER_KEY typed here) hides
runs, downloads the table and opens the board to the class, who then see it read-only. The board's
store and arithmetic: lab.server.board and lab.server.board_losses; its drawing, one redraw shared by every
page open: ui.class_board.
"""

import streamlit as st

from ui.app.frame import setup_page
from ui.class_board import board
from ui.shared.boundary import fragment, page_part
from ui.shared.common import page_link
from ui.shared.links import Field, mirror_to_url, restore_from_url
from ui.shared.sign_in import is_teacher

setup_page("Class")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    title, compare = st.columns([2, 1], vertical_alignment="bottom")  # one line: the board fills the screen
    title.title("🧑‍🏫 Class")
    SETTINGS = {"at": (Field("int", "Compare at", 0, 86_400), "class_at")}
    DEFAULTS = {"at": 0}
    restore_from_url(SETTINGS, DEFAULTS)

    teacher = is_teacher()
    shown = board.store().read()
    if not teacher:
        if board.teacher_key_set():
            board.teacher_key_box()
        if not shown.open:
            st.info(
                "The class board shows the runs your classmates chose to show, once your teacher opens it. To show "
                "yours, turn on “Show my runs on the class board” on the Train page before you press Start."
            )
            page_link("Train", label="Open the Train page to show your runs")  # what a student can do meanwhile
            st.stop()
    else:
        board.teacher_controls(shown)

    compare.number_input(
        "Compare at, in seconds of training (0: as far as every run has trained)",
        0,
        86_400,
        key="class_at",
        step=10,
        help="The leaderboard ranks every run by its loss after this many seconds.",
    )
    mirror_to_url(SETTINGS, DEFAULTS)
    fragment(run_every=board.BOARD_REFRESH_SECONDS)(board.live_board)(st.session_state.class_at, teacher)
