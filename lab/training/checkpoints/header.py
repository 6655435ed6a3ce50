"""What a checkpoint file's header holds, and its validation: the JSON entries (config, tokenizer,
metrics, training state, ...) read through pydantic models, so a file either loads completely or is
refused with one line naming the entry."""

import json
import re
import reprlib
from dataclasses import dataclass
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lab.data import DataError, tokenizer_from_state
from lab.errors import LabError
from lab.nets.cost import check_model_size
from lab.nets.models import config_from_dict
from lab.schema import STRICT, refusal
from lab.words import count

FORMAT = "rnnlab-checkpoint"
FORMAT_VERSION = "1"


class CheckpointError(LabError):
    """A file that is not a loadable RNN Lab checkpoint; the message says why."""


# safetensors' own words for a broken file ("Error while deserializing: header too large") -> what they
# mean to someone who only has the file: the weights (cut short, or an entry pointing outside them) or
# the header before them (its length, its JSON text). Checked in this order, after the prefix that
# names the step safetensors was at ("deserializing header" even where the weights are at fault)
_UNREADABLE = (
    (("incomplete", "offset", "shape", "data type", "buffer"), "it is cut short or its weights are damaged"),
    (("header", "json", "utf-8"), "its header is damaged or too large"),
)
_LIBRARY_PREFIX = re.compile(r"^error while deserializing( header)?:\s*")


def unreadable(source, error):
    """CheckpointError, in plain words, for a file that safetensors (or JSON) could not read: what is
    broken, never the library's own message."""
    said = _LIBRARY_PREFIX.sub("", str(error).lower())
    what = next((why for words, why in _UNREADABLE if any(w in said for w in words)), "it is damaged")
    return CheckpointError(f"{source}: not a checkpoint RNN Lab can read: {what}")


def version_number(text):
    """A header's version string as an int, None unless it is 1-9 ASCII digits."""
    return int(text) if re.fullmatch(r"\d{1,9}", text, re.ASCII) else None


@dataclass
class Header:
    """A checkpoint's metadata, every field checked."""

    config: object  # a config dataclass (LMConfig, ...), within this server's cost limits
    config_dict: dict
    tokenizer: object  # a lab.data tokenizer, or None
    metrics: dict
    meta: dict  # name, version, timestamp, lab_version, extra
    training_state: dict = None  # the JSON half of a resumable checkpoint's TrainingState, checked


def _json_field(metadata, key, source, kind, default=None):
    """A JSON-encoded header entry, decoded and of the expected kind (dict, list, or None allowed too)."""
    if key not in metadata and default is not None:
        return default
    try:
        value = json.loads(metadata[key])
    except KeyError:
        raise CheckpointError(f"{source}: checkpoint metadata {key!r} is missing") from None
    except (ValueError, RecursionError):  # JSONDecodeError, an over-long integer, nesting too deep
        raise CheckpointError(f"{source}: checkpoint metadata {key!r} is not valid JSON") from None
    if not isinstance(value, kind):
        raise CheckpointError(
            f"{source}: checkpoint metadata {key!r} must be {_KIND_NAMES[kind]}, not {_json_kind(value)}"
        )
    return value


_KIND_NAMES = {dict: "an object", list: "a list", (dict, type(None)): "an object or null"}


def _json_kind(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


# The JSON a checkpoint carries, declared: lab.schema's rules (strict types, finite where it matters)
Count = Annotated[int, Field(ge=0)]
Number = Annotated[float, Field(allow_inf_nan=True)]  # a diverged run's history records NaN losses
MAX_ELAPSED_SECONDS = 10**9  # 31 years: a longer "elapsed" is an edited file, and the schedule divides by it
Unit = Annotated[float, Field(ge=0, le=1)]


class Event(BaseModel):
    """One entry of a run's history: every chart of it is drawn over its steps."""

    model_config = ConfigDict(extra="allow", strict=True)
    step: Count
    type: str = None
    epoch: Number = None
    elapsed: Number = None
    train_loss: Number = None
    lr: Number = None
    grad_norm: Number = None

    @model_validator(mode="after")
    def _validation_figures_are_numbers(self):
        for key, value in self.model_extra.items():
            if key.startswith("val_") and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise ValueError(f"{key} must be a number, got {reprlib.repr(value)}")
        return self


class Metrics(BaseModel):
    """The metrics entries the CLI and the pages compute with; others are kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True)
    steps: Count = None
    elapsed: Number = None
    reason: str = None
    corpus: str = None
    train_config: dict = None
    history: list[Event] = None


class AdamWSettings(BaseModel):
    """AdamW's settings as lab.training.train saves them. A resumed run restores them, so each is checked:
    amsgrad, maximize, capturable or differentiable would make it train differently or not at all."""

    model_config = STRICT
    lr: Unit
    initial_lr: Unit = None
    betas: Annotated[
        tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]], Field(strict=False)
    ]
    eps: Annotated[float, Field(gt=0, le=1e-3)]
    weight_decay: Unit
    amsgrad: Literal[False] = False
    maximize: Literal[False] = False
    capturable: Literal[False] = False
    differentiable: Literal[False] = False
    foreach: Optional[bool] = None
    fused: Optional[bool] = None
    decoupled_weight_decay: Literal[True] = True


RandomGenerator = Literal["torch", "data", "cuda"]  # dropout (CPU, CUDA) and the batch sampler


class TrainingStateHeader(BaseModel):
    """The JSON half of a resumable checkpoint's TrainingState (the tensors are checked on loading)."""

    model_config = STRICT
    step: Annotated[int, Field(ge=0, le=10**9)]
    elapsed: Annotated[float, Field(ge=0, le=MAX_ELAPSED_SECONDS)]
    train_loss: Optional[float]
    hyperparameters: AdamWSettings
    optimizer: list[str]  # parameter names, distinct
    rng: list[RandomGenerator]

    @model_validator(mode="after")
    def _names_are_distinct_and_complete(self):
        if len(set(self.optimizer)) != len(self.optimizer):
            raise ValueError("optimizer names a parameter twice")
        if not {"torch", "data"} <= set(self.rng):
            raise ValueError(f"rng must name the generators 'torch' and 'data', got {self.rng}")
        return self


def _validated(schema, value, source, what):
    """`value` checked against a pydantic schema, or CheckpointError naming the entry."""
    try:
        schema.model_validate(value)
    except ValidationError as error:
        raise refusal(error, CheckpointError, f"{source}: checkpoint {what} ") from None
    return value


def _check_training_state(metadata, source):
    """The JSON half of a TrainingState, validated whole; None when the file has none."""
    if "training_state" not in metadata:
        return None
    state = _json_field(metadata, "training_state", source, dict)
    return _validated(TrainingStateHeader, state, source, "training_state")


def read_header(metadata, source):
    """Validate a checkpoint's whole metadata (a dict of strings) and decode it into a Header.

    Raises CheckpointError with one line naming the first field that is missing or of the
    wrong shape or type, or a config beyond this server's cost limits (lab.nets.cost)."""
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{source}: a safetensors file, but not an RNN Lab checkpoint (no {FORMAT!r} header)")
    version = metadata.get("version") or "0"
    if version_number(version) is None:
        raise CheckpointError(f"{source}: checkpoint metadata 'version' must be a whole number, not {version[:20]!r}")
    config_dict = _json_field(metadata, "config", source, dict)
    tokenizer_state = _json_field(metadata, "tokenizer", source, (dict, type(None)), default={})
    metrics = _json_field(metadata, "metrics", source, dict, default={})
    extra = _json_field(metadata, "extra", source, dict, default={})
    names = _json_field(metadata, "conventions", source, list, default=[])
    if not all(isinstance(n, str) for n in names):
        raise CheckpointError(f"{source}: checkpoint metadata 'conventions' must be a list of strings")
    _validated(Metrics, metrics, source, "metrics")
    training_state = _check_training_state(metadata, source)
    try:
        config = config_from_dict(config_dict)
        check_model_size(config)
        tokenizer = tokenizer_from_state(tokenizer_state) if tokenizer_state else None
    except (ValueError, DataError) as e:  # CostError and DataError are ValueErrors
        raise CheckpointError(f"{source}: checkpoint config or tokenizer is invalid: {e}") from None
    if tokenizer is not None and getattr(config, "vocab_size", tokenizer.vocab_size) != tokenizer.vocab_size:
        raise CheckpointError(
            f"{source}: tokenizer has {count(tokenizer.vocab_size, 'token')} but the model expects {config.vocab_size}"
        )
    meta = {k: metadata.get(k, "") for k in ("name", "version", "timestamp", "lab_version")}
    meta["extra"] = extra
    return Header(config, config_dict, tokenizer, metrics, meta, training_state)
