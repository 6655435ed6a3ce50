"""What a checkpoint file's header holds, and its validation: the JSON entries (config, tokenizer,
metrics, training state, ...) read through pydantic models, so a file either loads completely or is
refused with one line naming the entry."""

import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from lab.data import DataError, tokenizer_from_state
from lab.errors import LabError
from lab.nets.cost import check_model_size
from lab.nets.models import config_from_dict
from lab.schema import describe_unprintable, refusal, unprintable
from lab.training.checkpoints.entries import (
    CONVENTIONS,
    FORMAT,
    Extra,
    Metadata,
    Metrics,
    TrainingStateHeader,
)
from lab.words import count


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


# What a header may hold, checked before any schema reads it: building one validation error for each of a crafted
# file's millions of unknown keys took 32 s and 2.6 GB. The lab writes headers of at most ~2.5 MB (a history of
# MAX_HISTORY evaluations of ~500 bytes), whose objects have at most ~40 keys (a TrainConfig's fields, an
# evaluation's figures)
MAX_HEADER_BYTES = 3 * 2**20
MAX_OBJECT_KEYS = 256
MAX_LIST_ITEMS = 10_000  # parameter names of a resumable checkpoint; entries.MAX_HISTORY's evaluations
MAX_TENSORS = 4 * 10_000 + 8  # each parameter's weights and AdamW's three moments, and the random generators


def header_json(head, source):
    """A safetensors file's first bytes (its 8-byte length, then at least that much) -> its JSON header (a dict),
    refused in one line when it is longer than any checkpoint's, is not JSON, lists more tensors than a model has
    or holds an object or a list larger than any header's."""
    length = int.from_bytes(head[:8], "little")
    damaged = CheckpointError(f"{source}: not a checkpoint RNN Lab can read: its header is damaged or too large")
    if length > MAX_HEADER_BYTES:  # refused before a byte of it is read
        raise damaged
    try:
        header = json.loads(head[8 : 8 + length])
    except (ValueError, RecursionError):
        raise damaged from None
    if not isinstance(header, dict):
        raise damaged
    if len(header) > MAX_TENSORS:
        raise CheckpointError(
            f"{source}: not a checkpoint RNN Lab can read: it lists {len(header):,} tensors, more than the "
            f"{MAX_TENSORS:,} of any model it can hold"
        )
    check_json_shape(header.get("__metadata__"), source, "metadata")
    return header


def check_json_shape(value, source, what):
    """CheckpointError naming the entry `what` when `value` (decoded JSON) has an object of more than
    MAX_OBJECT_KEYS keys or a list of more than MAX_LIST_ITEMS items: the schema's cost then stays that of a
    header the lab writes, whatever a crafted file holds."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if len(item) > MAX_OBJECT_KEYS:
                raise CheckpointError(
                    f"{source}: checkpoint {what} has an object of {len(item):,} fields, more than the "
                    f"{MAX_OBJECT_KEYS} any checkpoint holds"
                )
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            if len(item) > MAX_LIST_ITEMS:
                raise CheckpointError(
                    f"{source}: checkpoint {what} has a list of {len(item):,} items, more than the "
                    f"{MAX_LIST_ITEMS:,} any checkpoint holds"
                )
            stack.extend(v for v in item if isinstance(v, (dict, list)))


def check_metadata_strings(header, source):
    """A safetensors file's JSON header (header_json) -> CheckpointError naming the metadata entry that is not a
    printable string, which safetensors itself refuses without naming it (a number, or an escaped lone surrogate)."""
    metadata = header.get("__metadata__") or {}
    for key, value in metadata.items() if isinstance(metadata, dict) else ():
        if not isinstance(value, str):
            raise CheckpointError(f"{source}: checkpoint metadata {key!r} must be a string, not {_json_kind(value)}")
        if unprintable(key + value):
            raise CheckpointError(
                f"{source}: checkpoint metadata {key!r} {describe_unprintable(unprintable(key + value))}"
            )


def _json_field(metadata, key, source, kind):
    """A JSON-encoded header entry (Metadata checked it is there), decoded and of the expected kind
    (dict, list, or None allowed too)."""
    try:
        value = json.loads(metadata[key])
    except (ValueError, RecursionError):  # JSONDecodeError, an over-long integer, nesting too deep
        raise CheckpointError(f"{source}: checkpoint metadata {key!r} is not valid JSON") from None
    check_json_shape(value, source, key)
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


def _validated(schema, value, source, what):
    """`value` checked against a pydantic model or TypeAdapter, or CheckpointError naming the entry."""
    try:
        (getattr(schema, "model_validate", None) or schema.validate_python)(value)
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

    Raises CheckpointError with one line naming the first field that is missing, unknown, or of the
    wrong shape, type or range, or a config beyond this server's cost limits (lab.nets.cost)."""
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{source}: a safetensors file, but not an RNN Lab checkpoint (no {FORMAT!r} header)")
    _validated(Metadata, metadata, source, "metadata")
    config_dict = _json_field(metadata, "config", source, dict)
    tokenizer_state = _json_field(metadata, "tokenizer", source, (dict, type(None)))
    metrics = _validated(Metrics, _json_field(metadata, "metrics", source, dict), source, "metrics")
    extra = _validated(Extra, _json_field(metadata, "extra", source, dict), source, "extra")
    _validated(CONVENTIONS, _json_field(metadata, "conventions", source, list), source, "conventions")
    training_state = _check_training_state(metadata, source)
    try:
        config = config_from_dict(config_dict)
        check_model_size(config)
        tokenizer = tokenizer_from_state(tokenizer_state) if tokenizer_state is not None else None
    except (ValueError, DataError) as e:  # CostError and DataError are ValueErrors
        raise CheckpointError(f"{source}: checkpoint config or tokenizer is invalid: {e}") from None
    if tokenizer is not None and getattr(config, "vocab_size", tokenizer.vocab_size) != tokenizer.vocab_size:
        raise CheckpointError(
            f"{source}: checkpoint config vocab_size: the model expects {count(config.vocab_size, 'token')} but the "
            f"tokenizer has {tokenizer.vocab_size}"
        )
    meta = {k: metadata[k] for k in ("name", "version", "timestamp", "lab_version")}
    meta["extra"] = extra
    return Header(config, config_dict, tokenizer, metrics, meta, training_state)
