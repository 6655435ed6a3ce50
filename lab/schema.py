"""Validation of what a student, a URL, the command line or a file hands the lab, declared with pydantic.

Every config (a model's, a run's, the sampler's, a study's) is a `config` dataclass: each field's type
and bounds sit beside it as an annotation, checked strictly (an integer is not a float, True is not 1,
NaN and infinity are no numbers) and unknown fields are refused. The JSON a checkpoint carries is read
through pydantic models in lab.training.checkpoints the same way.

A refusal is always the lab's own error, one line naming the field: "batch_size: input should be less
than or equal to 4096, got 5000". Rules that tie fields together stay in the config's __post_init__,
which raises LabError itself.
"""

import functools
import reprlib
import types
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Literal, Union, get_args, get_origin

import annotated_types
import pydantic
import pydantic.dataclasses
from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError

from lab.errors import LabError

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

# the field types the configs share
PositiveInt = Annotated[int, Field(ge=1)]
Seed = Annotated[int, Field(ge=0, lt=2**63)]  # torch.Generator's range
Fraction = Annotated[float, Field(ge=0, lt=1)]  # dropout rates, label smoothing
PositiveNumber = Annotated[float, Field(gt=0)]
Device = Literal["auto", "cpu", "cuda"]  # lab.training.train.resolve_device's names
MAX_SECONDS = 10**9  # 31 years: any budget or elapsed time beyond it is an edited file, and schedules divide by it
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]

# ---------------------------------------------------------------------------
# a setting declared once: its type, bounds, default and description in the config, its names beside it


@dataclass(frozen=True)
class PageRange:
    """The narrower range a page offers for a setting than the lab allows, and why (a classroom's limit, or
    an inclusive end for a number box where the lab's bound is open). Whole-number ends make the page's box
    count in whole numbers."""

    low: float
    high: float
    why: str


@dataclass(frozen=True)
class Names:
    """Where a config field appears besides the config: its command-line option (default: the field's name,
    dashed), its name in a page's URL and the label of its widget (none: the page does not offer it)."""

    cli: str = None
    url: str = None
    label: str = None
    page: PageRange = None


@dataclass(frozen=True)
class Setting:
    """One config field as its clients read it (`declared_settings`)."""

    name: str
    type: type  # int, float, bool or str (a Literal's choices)
    default: object
    description: str
    low: float = None  # None: unbounded
    high: float = None
    low_open: bool = False  # gt rather than ge
    high_open: bool = False
    choices: tuple = ()
    optional: bool = False  # None is a value (a budget not given)
    names: Names = Names()

    @property
    def cli(self):
        return self.names.cli or self.name.replace("_", "-")


CLASSROOM = "a class shares one server: a student's run asks for at most this much of it"


def declare(kind, description, names=Names(), **bounds):
    """A field's type with its declaration: its bounds, what it is (the command line's help, the page's),
    and its names."""
    return Annotated[kind, Field(description=description, **bounds), names]


BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)


def _unwrapped(annotation):
    """Optional[Annotated[int, Field(ge=1)]] -> (int, [its constraints], optional)."""
    constraints, optional = [], False
    if get_origin(annotation) in (Union, types.UnionType):
        optional = type(None) in get_args(annotation)
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            constraints += getattr(meta, "metadata", [meta])
        annotation = get_args(annotation)[0]
    return annotation, constraints, optional


def declared_settings(cls):
    """A `config` dataclass's fields -> {name: Setting}: what the command line, a page's widgets and its URL
    are built from, so that a bound or a default is written once, in the config."""
    settings = {}
    for name, info in cls.__pydantic_fields__.items():
        kind, constraints, optional = _unwrapped(info.annotation)
        constraints += info.metadata
        bounds = {
            b.__name__.lower(): getattr(c, b.__name__.lower()) for c in constraints for b in BOUNDS if isinstance(c, b)
        }
        names = next((c for c in constraints if isinstance(c, Names)), Names())
        choices = get_args(kind) if get_origin(kind) is Literal else ()
        settings[name] = Setting(
            name,
            type(choices[0]) if choices else kind,
            info.default,
            info.description,
            low=bounds.get("ge", bounds.get("gt")),
            high=bounds.get("le", bounds.get("lt")),
            low_open="gt" in bounds,
            high_open="lt" in bounds,
            choices=choices,
            optional=optional,
            names=names,
        )
    return settings


# ---------------------------------------------------------------------------
# text that reaches a page or a terminal

# what reorders the text around it on screen (Unicode's Bidi_Control characters): a name holding U+202E
# shows its end first, so "evil.exe" can read "exe.live"
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
TOKEN_WHITESPACE = "\n\t"  # the control characters a tokenizer's pieces may hold: a text's line breaks and tabs


def unprintable(text, allowed=""):
    """The distinct characters of `text` that no page or terminal should be handed, sorted: control
    characters (C0, DEL, C1: an escape sequence recolours or rewrites a terminal), lone surrogates (no
    encoding can write them: printing one raises) and bidirectional controls; those in `allowed` excepted."""
    return sorted(
        c for c in set(text) if c not in allowed and (unicodedata.category(c) in ("Cc", "Cs") or c in BIDI_CONTROLS)
    )


def describe_unprintable(found):
    """What `unprintable` found, in words: "contains U+001B, U+D800 (control characters or lone surrogates)"."""
    shown = ", ".join(f"U+{ord(c):04X}" for c in found[:5]) + (" ..." if len(found) > 5 else "")
    return f"contains {shown}, which cannot be shown (control characters, lone surrogates or direction overrides)"


def printable_text(allowed=""):
    """A validator for strings that reach text output: refused when they hold what `unprintable` finds."""

    def check(text):
        found = unprintable(text, allowed)
        if found:
            raise ValueError(describe_unprintable(found))
        return text

    return AfterValidator(check)


# a line of text from a file or a user shown as it is: a name, a description, a reason, a label
Text = Annotated[str, Field(max_length=1000), printable_text()]
Name = Annotated[str, Field(max_length=200), printable_text()]  # a run's, a preset's, a file's name
PathText = Annotated[str, Field(max_length=4096), printable_text()]  # a corpus: a name, or a file's path


def printable_part(text, max_length=200):
    """`text` less what `unprintable` finds, cut to `max_length`: a label made of a name the lab did not
    choose (an uploaded file's), so that the checkpoint it goes into passes its check."""
    drop = set(unprintable(text))
    return "".join(c for c in text if c not in drop)[:max_length]


def error_message(error: ValidationError, prefix="", field=None) -> str:
    """The first of pydantic's errors as one line: "field: what is wrong, got value" (`field` names
    a value validated whole)."""
    first = error.errors(include_url=False, include_context=True)[0]
    where = ".".join(_shown_part(part) for part in first["loc"]) or field
    if first["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        text = "unknown field"
    elif first["type"] == "missing":
        text = "is missing"
    elif first["type"] == "value_error":  # a validator's rule (across fields: it names them), worded by it
        text = str(first["ctx"]["error"])
        return f"{prefix}{where}: {text}" if where else f"{prefix}{text}"
    else:
        text = f"{first['msg'][:1].lower()}{first['msg'][1:]}, got {reprlib.repr(first['input'])}"
    more = error.error_count() - 1  # counted, not built: each built error costs (a crafted file held millions)
    and_more = f" (and {more:,} more {'problem' if more == 1 else 'problems'})" if more else ""
    return f"{prefix}{where or 'value'}: {text}{and_more}"


def _shown_part(part):
    """A part of a field's path as the message names it: a key a crafted file chose is quoted with its control
    characters and line breaks escaped, so the message stays one plain line."""
    text = str(part)
    return text if text.isprintable() else reprlib.repr(text)


def refusal(error: ValidationError, kind=LabError, prefix=""):
    """The lab's error for a ValidationError: a LabError raised by a validator (a rule across fields)
    as it was, else `kind` with the first error's line."""
    for entry in error.errors(include_url=False):
        cause = entry.get("ctx", {}).get("error")
        if isinstance(cause, LabError):
            return cause
    return kind(error_message(error, prefix))


def config(cls):
    """A dataclass whose fields are validated on construction (and by dataclasses.replace)."""
    cls = pydantic.dataclasses.dataclass(cls, config=STRICT)
    validate = cls.__init__

    @functools.wraps(validate)
    def __init__(self, *args, **kwargs):
        try:
            validate(self, *args, **kwargs)
        except ValidationError as error:
            raise refusal(error) from None

    cls.__init__ = __init__
    return cls


def check(value, annotation, field):
    """`value` validated against a type annotation (e.g. PositiveNumber), or a LabError naming `field`."""
    try:
        return _adapter(annotation).validate_python(value, strict=True)
    except ValidationError as error:
        raise LabError(error_message(error, field=field)) from None


@functools.lru_cache(maxsize=None)
def _adapter(annotation):
    return TypeAdapter(annotation)
