"""Settings mirrored in the URL, so that a link opens a page exactly as it was shown.

Every page names its linkable settings as `Field`s (kind, bounds or choices, label) keyed by
a short URL name, each bound to a widget key:

    SETTINGS = {"tokens": (Field("int", "New tokens", 1, 2000), "sample_tokens"), ...}
    restore_from_url(SETTINGS, DEFAULTS)   # before the widgets: the URL's values, or the defaults
    ...widgets with those keys...
    mirror_to_url(SETTINGS, DEFAULTS)      # after them: the URL holds what differs from the defaults

What a page reads from its URL is a pydantic model made from its fields (`link_model`): each field's
kind is a type with its bounds (an integer or a finite number in [low, high], one of the choices, true
or false, a text of at most `high` characters, a span "a-b"), and pydantic reads the URL's strings
into those types. A bad value in a link is refused with one plain line that names the field
(lab.schema.error_message); that setting keeps the page's own value, and the link's other settings
still apply.
"""

import dataclasses
import functools
from dataclasses import dataclass
from typing import Annotated, Literal

import pydantic
import streamlit as st
from pydantic import AfterValidator, BeforeValidator, ConfigDict, StringConstraints, ValidationError

from lab.nets.models import LMConfig
from lab.schema import declared_settings, error_message
from lab.training.train import TrainConfig
from ui.shared.plain_text import plain

# a URL holds only strings: they are read into each field's type (strict mode would refuse "3" for 3);
# NaN and infinity are no numbers, and a name the page does not have is refused
LINK = ConfigDict(extra="forbid", allow_inf_nan=False)
TEXT_MAX_CHARS = 64  # a text field's longest value when its Field gives no `high`


def _span_parts(text):
    """A span's URL form "a-b" -> its two ends, for pydantic to read as integers."""
    first, dash, last = str(text).partition("-")
    if not dash:
        raise ValueError("a span is two integers written a-b")
    return first, last


def _ordered(span):
    if span[0] > span[1]:
        raise ValueError(f"the span starts at {span[0]}, after its end {span[1]}")
    return span


def _bounded(number, field):
    return Annotated[number, pydantic.Field(ge=field.low, le=field.high)]


# each kind of Field -> the type its URL value is read into
KINDS = {
    "choice": lambda field: Literal[field.choices],
    "int": lambda field: _bounded(int, field),
    "float": lambda field: _bounded(float, field),
    "bool": lambda field: bool,  # true/false, 1/0, yes/no, on/off
    "text": lambda field: Annotated[str, StringConstraints(max_length=int(field.high or TEXT_MAX_CHARS))],
    "range": lambda field: Annotated[
        tuple[_bounded(int, field), _bounded(int, field)], BeforeValidator(_span_parts), AfterValidator(_ordered)
    ],  # two integers "a-b" with low <= a <= b <= high
}


@dataclass(frozen=True)
class Field:
    """One setting: its kind (a key of KINDS), bounds (or choices) and label."""

    kind: str
    label: str
    low: float = None
    high: float = None  # for "text": the longest value (TEXT_MAX_CHARS if not given)
    choices: tuple = ()
    help: str = None  # what the widget's help says

    @classmethod
    def declared(cls, setting):
        """The field of a lab config's setting (lab.schema.Setting): its label and description as declared,
        its bounds the config's, or the narrower range declared for the page beside them."""
        page = setting.names.page
        low, high = (page.low, page.high) if page else (setting.low, setting.high)
        if setting.type is bool:
            kind = "bool"
        else:
            whole = page is not None and isinstance(page.low, int) and isinstance(page.high, int)
            kind = "int" if setting.type is int or whole else "float"
        if kind != "bool" and (page is None and (setting.low_open or setting.high_open)):
            raise ValueError(f"{setting.name}: an open bound needs a page range a number box can hold")
        if kind != "bool":  # a number box takes bounds of its value's type only
            low, high = (int, float)[kind == "float"](low), (int, float)[kind == "float"](high)
        return cls(kind, setting.names.label, low, high, help=f"{setting.description}.")

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of setting {self.kind!r}: one of {', '.join(KINDS)}")

    @property
    def annotation(self):
        """The type (with its bounds) pydantic reads this setting's URL value into."""
        return KINDS[self.kind](self)

    def format(self, value):
        """A value of this field -> its URL form."""
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "range":
            return f"{value[0]}-{value[1]}"
        return f"{value:g}" if self.kind == "float" else str(value)


@functools.lru_cache(maxsize=64)
def link_model(fields):
    """The pydantic model of what a page reads from its URL; `fields`: ((URL name, Field), ...)."""
    return pydantic.create_model("Link", __config__=LINK, **{name: (field.annotation, None) for name, field in fields})


def parse_query(query, fields):
    """A URL's query ({name: str}) -> ({name: value} for the valid ones, warnings for the rest).
    `fields`: URL name -> Field. Each warning is one line naming the setting; the link's words are
    quoted in it as plain text: the page shows them with ui.shared.plain_text.plain, so nothing in a link
    renders as Markdown, a link or an image."""
    warnings = [
        f"Ignored “{name}={raw}” in the link: there is no such setting on this page."
        for name, raw in query.items()
        if name not in fields
    ]
    given = {name: str(raw) for name, raw in query.items() if name in fields}
    model = link_model(tuple(fields.items()))
    while True:  # each bad value is refused on its own, and the rest are read again without it
        try:
            link = model.model_validate(given)
        except ValidationError as error:
            name = error.errors(include_url=False)[0]["loc"][0]
            warnings.append(
                f"Ignored “{name}={given.pop(name)}” in the link, so {fields[name].label} keeps this page's "
                f"own value. {error_message(error)}."
            )
            continue
        return {name: getattr(link, name) for name in given}, warnings


def _page_id(settings):
    return "_".join(sorted(key for _, key in settings.values()))


def restore_from_url(settings, defaults):
    """On a session's first visit to the page, set each widget's first value from the URL, else keep
    one set before (by a test, or a link to another page), else use its default (`defaults`: URL
    name -> value). Later runs keep what the student chose, also after a visit to another page,
    unless a link opened the page with settings other than those it last wrote into the URL (a
    lesson's link to the full page, in the same session): then the link's settings are set again.
    -> the URL names of the settings this run took from the link (empty when it took none)."""
    page_id = _page_id(settings)
    first_visit_flag = f"_links_restored_{page_id}"
    query = st.query_params.to_dict()
    # Streamlit forgets a widget's value when a run does not draw it (another page): the values this
    # page last mirrored are kept apart, and set again for the widgets that lost theirs
    kept = st.session_state.get(f"_links_kept_{page_id}", {})
    if first_visit_flag in st.session_state and query in ({}, st.session_state.get(f"_links_mirrored_{page_id}")):
        for name, (_, key) in settings.items():
            value = kept.get(key, defaults[name])
            if key not in st.session_state and value is not None:
                st.session_state[key] = value
        return set()
    st.session_state[first_visit_flag] = True
    values, warnings = parse_query(query, {name: field for name, (field, _) in settings.items()})
    for name, (_, key) in settings.items():
        value = values.get(name, st.session_state.get(key, kept.get(key, defaults[name])))
        if value is not None:  # None: the page chooses the first value itself (e.g. the best unit)
            st.session_state[key] = value
    for warning in warnings:
        st.warning(plain(warning))
    return set(values)


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
    page_id = _page_id(settings)
    st.session_state[f"_links_mirrored_{page_id}"] = query
    kept = st.session_state.setdefault(f"_links_kept_{page_id}", {})
    kept.update({key: st.session_state[key] for _, key in settings.values() if key in st.session_state})


# TrainConfig's settings the Train page offers (those with a URL name), keyed by it: their kinds, bounds,
# labels and help are TrainConfig's declarations. The Train page's links and the lessons' links to it
# spell a training recipe with them
TRAINING = {s.names.url: s for s in declared_settings(TrainConfig).values() if s.names.url}
# the same for the model's sizes and rates (LMConfig's declarations; a scan preset reads "emb" and "dropout" too)
MODEL = {s.names.url: s for s in declared_settings(LMConfig).values() if s.names.url}


def url_values(recipe, names=None):
    """A TrainConfig's (or a dict of its fields') values under their URL names (only `names` when given)."""
    fields = recipe if isinstance(recipe, dict) else dataclasses.asdict(recipe)
    return {url: fields[s.name] for url, s in TRAINING.items() if s.name in fields and (names is None or url in names)}
