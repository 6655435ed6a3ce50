"""Lessons: short lessons, each on a page of its own, on the bundled models. Each asks a question, runs one
experiment the student steers with a control or two, says what to notice in the figures just
computed, checks understanding, and links to the full instrument page with the same settings.
A link to one lesson: ?lesson=<slug> (ui.lessons.LESSONS)."""

import streamlit as st

from ui.app.frame import setup_page
from ui.lessons import LESSONS, URL_DEFAULTS, URL_SETTINGS, show_lesson
from ui.shared.boundary import page_part
from ui.shared.links import Field, mirror_to_url, restore_from_url

setup_page("Lessons")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    title, choice = st.columns([1, 2], vertical_alignment="bottom")  # one line: the lesson itself fills the screen
    title.title("🎓 Lessons")

    SETTINGS = {"lesson": (Field("choice", "Lesson", choices=tuple(LESSONS)), "lessons_lesson"), **URL_SETTINGS}
    DEFAULTS = {"lesson": None, **URL_DEFAULTS}  # lesson None: the first, and the URL always names the lesson shown
    restore_from_url(SETTINGS, DEFAULTS)
    slugs = list(LESSONS)
    slug = choice.selectbox(
        "Lesson",
        slugs,
        key="lessons_lesson",
        format_func=lambda s: f"{slugs.index(s) + 1} · {LESSONS[s].title}",
        help="Short lessons, each on a page of its own: a question, an experiment you steer, what to notice, a "
        "question to check yourself, and a link to the full page. Words you do not know are in the sidebar's glossary.",
    )

    show_lesson(slug)
    mirror_to_url(SETTINGS, DEFAULTS, shown=["lesson", *LESSONS[slug].settings])  # after the lesson: its step moves

    position = slugs.index(slug)
    if position + 1 < len(slugs):
        following = slugs[position + 1]
        st.button(
            f"Next lesson: {LESSONS[following].title} →",
            key="lessons_next",
            type="primary",
            on_click=lambda: st.session_state.update(lessons_lesson=following),
        )
