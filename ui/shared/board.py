"""The class board's store (lab.server.board, in the folder of every session's space), and the runs this
server process posted to it: the Train page posts a run as it starts (`post_to_board`), the Class page
reads them. Their jobs, whose events hold the losses, are kept here by the server process that started
them (`board_runs`), so the board reads a run live while it trains, and after its student cleared it
from their Train page."""

import threading

import streamlit as st

from lab.instruments.race import plain_name
from lab.server.board import BoardStore, Curve, owner_id, run_facts
from ui.shared.sessions import session_key, users_root


@st.cache_resource
def board_runs():
    """run id -> its TrainingJob and Curve, for the runs this server process started and posted."""
    return {"lock": threading.Lock(), "jobs": {}, "curves": {}}


def store():
    return BoardStore(users_root())


def post_to_board(job):
    """A run just started: on the board if its student's switch is on."""
    run_id = store().post(owner_id(session_key()), run_facts(job, plain_name(job.model.config)))
    if run_id is not None:
        runs = board_runs()
        with runs["lock"]:
            runs["jobs"][run_id], runs["curves"][run_id] = job, Curve()
