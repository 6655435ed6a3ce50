"""Settings mirrored in the URL, so that a link opens a page exactly as it was shown.

Every page names its linkable settings as `Field`s (kind, bounds or choices, label) keyed by
a short URL name, each bound to a widget key:

    SETTINGS = {"tokens": (Field("int", "New tokens", 1, 2000), "sample_tokens"), ...}
    restore_from_url(SETTINGS, DEFAULTS)   # before the widgets: the URL's values, or the defaults
    ...widgets with those keys...
    mirror_to_url(SETTINGS, DEFAULTS)      # after them: the URL holds what differs from the defaults

A bad value in a link is ignored with a warning that names it; the page opens with its default.
"""

import math
from dataclasses import dataclass

import streamlit as st

from ui.plain_text import plain


@dataclass(frozen=True)
class Field:
    """One setting: its kind, bounds (or choices) and label; `key` is its widget key."""

    kind: str  # "choice", "int", "float", "bool", "text", "range" (two ints low <= a <= b <= high, "a-b")
    label: str
    low: float = None
    high: float = None  # for "text": the longest value (64 characters if not given)
    choices: tuple = ()

    def parse(self, raw):
        """A URL value (str) -> a value of this field; ValueError saying what is allowed."""
        if self.kind == "choice":
            if raw not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return raw
        if self.kind == "bool":
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError("must be true or false")
            return raw.lower() in ("true", "1")
        if self.kind == "text":
            longest = int(self.high or 64)
            if len(raw) > longest:
                raise ValueError(f"must be at most {longest:,} characters")
            return raw
        if self.kind == "range":
            first, _, last = raw.partition("-")
            if not (first.isdigit() and last.isdigit() and self.low <= int(first) <= int(last) <= self.high):
                raise ValueError(f"must be two integers a-b with {self.low:g} <= a <= b <= {self.high:g}")
            return int(first), int(last)
        try:
            value = int(raw) if self.kind == "int" else float(raw)
        except ValueError:
            raise ValueError(
                f"must be {'an integer' if self.kind == 'int' else 'a number'} in [{self.low:g}, {self.high:g}]"
            ) from None
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(f"must be in [{self.low:g}, {self.high:g}]")
        return value

    def format(self, value):
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "range":
            return f"{value[0]}-{value[1]}"
        return f"{value:g}" if self.kind == "float" else str(value)


def parse_query(query, fields):
    """A URL's query ({name: str}) -> ({name: value} for the valid ones, warnings for the rest).
    `fields`: URL name -> Field. The warnings are plain text, the link's words quoted in them: the page
    shows them with ui.plain_text.plain, so nothing in a link renders as Markdown, a link or an image."""
    values, warnings = {}, []
    for name, raw in query.items():
        quoted = f"“{name}={raw}”"
        if name not in fields:
            warnings.append(f"Ignored {quoted} in the link: there is no such setting on this page.")
            continue
        try:
            values[name] = fields[name].parse(str(raw))
        except ValueError as e:
            warnings.append(f"Ignored {quoted} in the link: {fields[name].label.lower()} {e}.")
    return values, warnings


def _page_id(settings):
    return "_".join(sorted(key for _, key in settings.values()))


def restore_from_url(settings, defaults):
    """On a session's first visit to the page, set each widget's first value from the URL, else keep
    one set before (by a test, or a link to another page), else use its default (`defaults`: URL
    name -> value). Later runs keep what the student chose, unless a link opened the page with
    settings other than those it last wrote into the URL (a lesson's link to the full page, in
    the same session): then the link's settings are set again."""
    page_id = _page_id(settings)
    first_visit_flag = f"_links_restored_{page_id}"
    query = st.query_params.to_dict()
    if first_visit_flag in st.session_state and query in ({}, st.session_state.get(f"_links_mirrored_{page_id}")):
        return
    st.session_state[first_visit_flag] = True
    values, warnings = parse_query(st.query_params.to_dict(), {name: field for name, (field, _) in settings.items()})
    for name, (_, key) in settings.items():
        value = values.get(name, st.session_state.get(key, defaults[name]))
        if value is not None:  # None: the page chooses the first value itself (e.g. the best unit)
            st.session_state[key] = value
    for warning in warnings:
        st.warning(plain(warning))


def mirror_to_url(settings, defaults, shown=None):
    """Write the settings that differ from the defaults into the URL (the link stays short); only
    those named in `shown` when given (a page showing one part of what its settings cover)."""
    query = {}
    for name, (field, key) in settings.items():
        if shown is not None and name not in shown:
            continue
        value = st.session_state.get(key, defaults[name])
        if value != defaults[name]:
            query[name] = field.format(value)
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)
    st.session_state[f"_links_mirrored_{_page_id(settings)}"] = query
