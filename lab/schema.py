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
from typing import Annotated, Literal

import pydantic
import pydantic.dataclasses
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from lab.errors import LabError

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

# the field types the configs share
PositiveInt = Annotated[int, Field(ge=1)]
Seed = Annotated[int, Field(ge=0, lt=2**63)]  # torch.Generator's range
Fraction = Annotated[float, Field(ge=0, lt=1)]  # dropout rates, label smoothing
PositiveNumber = Annotated[float, Field(gt=0)]
Device = Literal["auto", "cpu", "cuda"]  # lab.training.train.resolve_device's names


def error_message(error: ValidationError, prefix="", field="value") -> str:
    """The first of pydantic's errors as one line: "field: what is wrong, got value" (`field` names
    a value validated whole)."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        text = "unknown field"
    elif first["type"] == "missing":
        text = "is missing"
    elif first["type"] == "value_error":  # a validator's rule across fields, worded by the validator
        text = str(first["ctx"]["error"])
        return f"{prefix}{where}: {text}" if where else f"{prefix}{text}"
    else:
        text = f"{first['msg'][:1].lower()}{first['msg'][1:]}, got {reprlib.repr(first['input'])}"
    return f"{prefix}{where or field}: {text}"


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
