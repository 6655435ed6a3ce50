"""Ablation: seed 003's question, do the GRU's reset and update gate biases matter over 1024 steps?
The first screen asks it in a student's words and answers it from the shipped study (lab.experiments.ablation):
one chart of the arms and a sentence a student can repeat. Under it, five sections, one on the screen at a
time (chosen there, kept in the link): the study in full (its equations and statistics, in an expander),
what its training did to the gates, what a bias means as a time constant, published anchors, and a short
live run of both arms (the same runner as the command line)."""

import streamlit as st

from ui.ablation.live import live_section
from ui.ablation.sections import (
    DEFAULTS,
    SECTIONS,
    SETTINGS,
    published_anchors,
    shipped_gates,
    shipped_study,
    the_answer,
    time_constants,
)
from ui.app.frame import setup_page
from ui.shared.boundary import page_part
from ui.shared.common import section_choice
from ui.shared.links import mirror_to_url, restore_from_url

setup_page("Ablation")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("⚖️ Does a strong memory help a GRU learn?")
    restore_from_url(SETTINGS, DEFAULTS)
    if st.session_state.ablation_size not in (8, 16, 32):
        st.session_state.ablation_size = 16
    the_answer()
    section = section_choice(SECTIONS, "ablation_section")
    {
        "study": shipped_study,
        "gates": shipped_gates,
        "time": time_constants,
        "anchors": published_anchors,
        "live": live_section,
    }[section]()
    mirror_to_url(SETTINGS, DEFAULTS)
