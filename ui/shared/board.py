"""The class board's store (lab.server.board, in the folder of every session's space) and its recorder
(lab.server.board_losses): the Train page posts a run as it starts (`post_to_board`), the recorder writes
its losses into the store as it trains and lets go of its job once it ends, and the Class page reads the
store, which a restarted server finds as it was."""

import streamlit as st

from lab.instruments.race import plain_name
from lab.server.board import BoardStore, owner_id, run_facts
from lab.server.board_losses import BoardRecorder
from ui.shared.sessions import session_key, users_root


@st.cache_resource
def board_at(root):
    """The board in the folder `root`: its store (which keeps a connection per thread) and its recorder,
    one of each for the server process."""
    store = BoardStore(root)
    return store, BoardRecorder(store)


def store():
    return board_at(users_root())[0]


def recorder():
    return board_at(users_root())[1]


def post_to_board(job):
    """A run just started: on the board if its student's switch is on, its losses recorded as it trains."""
    run_id = store().post(owner_id(session_key()), run_facts(job, plain_name(job.model.config)))
    if run_id is not None:
        recorder().follow(run_id, job)
