"""Memory: how long each cell remembers, in five sections, one on the screen at a time (chosen at the
top, kept in the link): how far a changed token travels in each model's state (one measure for every
cell, the vanilla RNN's included: the first view compares them all); measured retention of the keep
gates as a spread over the units (the typical unit forgets within a step or two, a few units keep half
for over 100 tokens) with the longest memories coloured on the text; the analytic g^k picture and bias
half-lives; gradients through time; the delayed-recall probe. Only the section shown is computed and
drawn. Each section is a fragment: its slider reruns it alone."""

import streamlit as st

from ui.app.frame import setup_page
from ui.memory.analytic import analytic, bias_table, constant_gate_anchors
from ui.memory.gradients import gradients
from ui.memory.probe import probe_section
from ui.memory.sections import change_reach_view, unit_memory
from ui.memory.settings import SECTIONS, TEXT_MAX_CHARS, listed_models, mirror, restore_settings
from ui.shared.boundary import page_part
from ui.shared.common import section_choice

setup_page("Memory")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("🧠 Memory")
    st.caption(
        "Two views of memory: "
        "what the keep gates let survive, and how strongly the last prediction still depends on a step long ago. "
        "Then a task that needs memory and nothing else."
    )
    by_name = listed_models()
    restore_settings()
    section = section_choice(SECTIONS, "memory_section")
    if section in ("units", "gradients"):
        text = st.text_area(
            "Text the models read (for retention and gradients)",
            height=120,
            key="memory_text",
            max_chars=TEXT_MAX_CHARS,
        )

    if section == "reach":
        change_reach_view(by_name)
    elif section == "units":
        unit_memory(by_name, text)
    elif section == "analytic":
        constant_gate_anchors()
        analytic()
        bias_table()
    elif section == "gradients":
        gradients(by_name, text)
    else:
        probe_section(mirror)
    mirror()
