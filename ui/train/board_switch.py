"""The Train page's "show on the class board" switch: kept in the board's file (ui.shared.board), for
this person, so that each run they start while it is on is posted to the Class page. It sits in the row
under Start (ui.train.controls), where a student sees it with the run it posts."""

import streamlit as st

from lab.errors import LabError
from lab.server.board import MAX_NAME, owner_id
from ui.shared.board import store
from ui.shared.plain_text import said
from ui.shared.sessions import session_key


def _save_switch():
    """The switch or the name changed: kept in the board's file (a name that is not one: switched off,
    with the reason)."""
    on, name = st.session_state.train_board_on, st.session_state.train_board_name
    st.session_state.pop("train_board_error", None)
    if on and not name.strip():  # the name box shows under the buttons now: nothing is posted until it is filled
        return
    try:
        store().set_student(owner_id(session_key()), name, on)
    except LabError as error:
        st.session_state.train_board_on = False
        st.session_state.train_board_error = str(error)


def show_on_board_switch(buttons, container):
    """The student's switch (off until they turn it on) among the `buttons` (the row of Start), and, while it is
    on, the name the board shows for them in a row of `container` under them; a name refused is said under
    them. Nothing more than the switch while it is off: the live chart stays on a laptop's first screen."""
    if "train_board_on" not in st.session_state:  # this session's first draw: as this person left it
        name, on = store().student(owner_id(session_key()))
        st.session_state.update(train_board_on=on, train_board_name=name)
    buttons.toggle(
        "Show my runs on the class board",
        key="train_board_on",
        on_change=_save_switch,
        help="Runs you start while this is on appear on the Class page, under the name beside it, for your "
        "teacher to show the class. Runs started while it is off never do; turning it off takes yours off.",
    )
    if not st.session_state.train_board_on:
        return
    row = container.container(horizontal=True, vertical_alignment="bottom", key="train_board_row")
    row.text_input(
        "Your name on the class board",
        key="train_board_name",
        max_chars=MAX_NAME,
        on_change=_save_switch,
        placeholder="a first name or a nickname",
        width=280,
    )
    if "train_board_error" in st.session_state:
        container.error(said(st.session_state.train_board_error))
