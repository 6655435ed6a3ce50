"""One checkpoint format: safetensors weights with JSON metadata.

A checkpoint file holds the weights, the model config (family, cell and
convention), the tokenizer (character table or SentencePiece model bytes), the
metrics history, the lab version and a timestamp. safetensors is a header of
JSON plus raw tensor bytes, so loading a file can never execute code: a pickle
(what torch.save writes) is rejected as "not an RNN Lab checkpoint".

Everything in the header is data from a file a user may have edited: it is
validated whole against one schema (`read_header`) before anything is built,
so a file either loads completely or is refused with one line naming the field.

A resumable checkpoint also carries its run's lab.train.TrainingState: AdamW's
moments as tensors named `optim.<parameter>.exp_avg`, `.exp_avg_sq` and `.step`,
the random generators' states as `rng.torch` (one row per rank) and `rng.data`,
and the step, the elapsed time and AdamW's settings as JSON (`training_state`).
Both halves are checked as strictly as the weights; files without them load as before.

Versioning follows seed 002: saving "astra" writes astra_v1, astra_v2, ...
and refreshes astra_latest. Several sessions may save under one name at once:

* Every write goes to a temporary file `.NAME~RANDOM.tmp` in the same folder,
  flushed to disk, so a crash mid-save never leaves a partial checkpoint.
* A save holds the folder's lock (flock on the directory) from its temporary
  file to the last rename. Inside it the version is published with link(2),
  which like O_EXCL fails when the name exists, so two savers can never both
  become _v1 even where the lock does not work; `_latest` is then replaced
  by a hard link to the same file, so it always names the newest version.
* A temporary file found while holding the lock belongs to a save that died
  (kill -9, power cut): the next save or listing removes it, and points a
  `_latest` that a dead save left behind its newest version at that version.
"""

import errno
import hashlib
import json
import math
import os
import re
import reprlib
import secrets
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal, Optional

import torch
from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

import lab
from lab.capacity import SERVER_BUDGET, CapacityError
from lab.cost import FLOAT_BYTES, check_model_size, parameter_count
from lab.data import DataError, read_at_most, tokenizer_from_state
from lab.errors import LabError
from lab.models import build_model, config_from_dict, config_to_dict, conventions
from lab.schema import STRICT, refusal
from lab.train import TrainingState, resolve_device

FORMAT = "rnnlab-checkpoint"
FORMAT_VERSION = "1"
SUFFIX = ".safetensors"
MAX_CHECKPOINT_BYTES = 200 * 2**20  # the biggest upload we parse (Scribe-gamma is 58 MB)
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
_VERSIONED = re.compile(r"^(?P<name>.+)_v(?P<version>\d+)$")
TEMP_GLOB = ".*~*.tmp"  # "~" is never in a sanitized name, so these are only ever our temporary files


class CheckpointError(LabError):
    """A file that is not a loadable RNN Lab checkpoint; the message says why."""


@dataclass
class Checkpoint:
    model: torch.nn.Module
    config: object
    tokenizer: object  # None for pixel classifiers
    metrics: dict  # {"history": [eval events], ...}
    meta: dict  # name, version, timestamp, lab_version, extra
    path: Path = None
    training_state: TrainingState = None  # only in a resumable checkpoint


@dataclass
class CheckpointInfo:
    """What a listing shows, read from the header only (no weights loaded)."""

    name: str
    version: int
    path: Path
    family: str
    cell: str
    timestamp: str
    bundled: bool
    metrics: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    has_tokenizer: bool = True  # text pages need one; a hand-made file may lack it


def sanitize_name(name):
    """A checkpoint base name safe to use as a file name inside the checkpoint folder."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name).strip()).strip(".-")[:64]
    if not cleaned:
        raise LabError(f"name: {name!r} has no usable characters; use letters, digits, '-', '_' or '.'")
    return cleaned


def _inside(folder, filename):
    folder = Path(folder).resolve()
    path = (folder / filename).resolve()
    if path.parent != folder:
        raise LabError(f"name: {filename!r} would leave the checkpoint folder")
    return path


# ---------------------------------------------------------------------------
# writing: temporary file, folder lock, exclusive publication


def _lock_path(folder):
    """The folder's lock file: in the system's temporary folder, named by the folder's resolved path,
    so that every process on this machine finds it and the folder holds only checkpoints."""
    digest = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:24]
    locks = Path(tempfile.gettempdir()) / "rnnlab-locks"
    locks.mkdir(exist_ok=True)
    return locks / f"{digest}.lock"


@contextmanager
def _folder_lock(folder, blocking=True):
    """Hold the folder's exclusive lock; yields False instead of waiting when not `blocking`
    and another process or thread holds it. The OS drops the lock of a killed process (filelock:
    flock on POSIX, LockFileEx on Windows)."""
    if not Path(folder).is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(folder))
    lock = FileLock(_lock_path(folder), timeout=-1 if blocking else 0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _write_temp(folder, stem, data):
    """data -> a new `.STEM~RANDOM.tmp` in `folder`, on disk (fsync) before it is renamed anywhere."""
    tmp = Path(folder) / f".{stem}~{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


@contextmanager
def _naming_the_path(path):
    """An OSError (a full disk, a read-only folder) re-raised with the path it was writing."""
    try:
        yield
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e


def atomic_write_bytes(path, data):
    """Write to a temporary file beside `path`, flush to disk, then rename over it (under the folder lock)."""
    path = Path(path)
    with _naming_the_path(path), _folder_lock(path.parent):
        tmp = _write_temp(path.parent, path.name, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def next_version(folder, name):
    versions = [
        int(m["version"])
        for p in Path(folder).glob(f"{name}_v*{SUFFIX}")
        if (m := _VERSIONED.match(p.name[: -len(SUFFIX)])) and m["name"] == name
    ]
    return max(versions, default=0) + 1


def _newest_versions(folder):
    """name -> (version, path) of the highest name_vN in `folder`."""
    newest = {}
    for path in Path(folder).glob(f"*_v*{SUFFIX}"):
        if (m := _VERSIONED.match(path.name[: -len(SUFFIX)])) and int(m["version"]) > newest.get(m["name"], (0,))[0]:
            newest[m["name"]] = (int(m["version"]), path)
    return newest


def _header_version(path):
    """The version a checkpoint's header records, 0 when it has none or cannot be read."""
    try:
        with safe_open(str(path), framework="pt") as f:
            version = (f.metadata() or {}).get("version", "")
    except (SafetensorError, OSError, ValueError):
        return 0
    return _version_number(version) or 0


def _version_number(text):
    """A header's version string as an int, None unless it is 1-9 ASCII digits."""
    return int(text) if re.fullmatch(r"\d{1,9}", text, re.ASCII) else None


def _tidy(folder):
    """With the folder lock held: remove dead saves' temporary files, and point every existing
    name_latest that lags behind name's newest version at that version (a save killed between
    publishing name_vN and replacing name_latest). Returns the temporary files removed."""
    orphans = list(Path(folder).glob(TEMP_GLOB))
    for tmp in orphans:
        tmp.unlink(missing_ok=True)
    for name, (version, path) in _newest_versions(folder).items():
        latest = Path(folder) / f"{name}_latest{SUFFIX}"
        if latest.exists() and _header_version(latest) < version:
            link = Path(folder) / f".{latest.name}~{secrets.token_hex(8)}.tmp"
            os.link(path, link)
            os.replace(link, latest)
    return orphans


def checkpoint_bytes(model, tokenizer=None, metrics=None, name="", version=0, extra=None, training_state=None):
    """Serialise a model and everything needed to use it (and, given a training_state, to continue
    training it) into safetensors bytes."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        "version": str(version),
        "config": json.dumps(config_to_dict(model.config)),
        "conventions": json.dumps(conventions(model)),
        "tokenizer": json.dumps(tokenizer.to_state() if tokenizer is not None else None),
        "metrics": json.dumps(metrics or {}),
        "extra": json.dumps(extra or {}),
        "lab_version": lab.__version__,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if training_state is not None:
        tensors.update(_training_tensors(training_state))
        metadata["training_state"] = json.dumps(
            {
                "step": training_state.step,
                "elapsed": training_state.elapsed,
                "train_loss": training_state.train_loss if math.isfinite(training_state.train_loss) else None,
                "hyperparameters": training_state.hyperparameters,
                "optimizer": sorted(training_state.optimizer),
                "rng": sorted(training_state.rng),
            }
        )
    return save_safetensors_bytes(tensors, metadata)


_MOMENTS = ("exp_avg", "exp_avg_sq", "step")  # AdamW's state for one parameter


def _training_tensors(state):
    """A TrainingState's tensors under their flat names in the file."""
    tensors = {f"optim.{name}.{key}": moments[key] for name, moments in state.optimizer.items() for key in _MOMENTS}
    tensors.update({f"rng.{name}": rng for name, rng in state.rng.items()})
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


def check_folder(folder):
    """OSError naming the problem when checkpoints could not be saved in `folder` (created if
    need be): a run is refused before it trains, not after. Creates nothing."""
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # the folder or the ancestor that mkdir extends
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot write checkpoints in this folder", str(existing))


def resumable_checkpoint_bytes(config):
    """About how large a resumable checkpoint of this model is: the weights and AdamW's two moments, all float32."""
    return 3 * FLOAT_BYTES * parameter_count(config)


def why_not_resumable(model_config, config):
    """None where a run of this model with this config can be saved with its training state and
    continued (TrainingJob(resumable=True), then job.continuation), else why not, in a sentence."""
    if config.stateful:
        return "a stateful run carries its hidden state from batch to batch, and that state is not saved"
    size = resumable_checkpoint_bytes(model_config)
    if size > MAX_CHECKPOINT_BYTES:
        return (
            f"with its optimizer's state this model's checkpoint would be about {size / 2**20:,.0f} MB, over the "
            f"{MAX_CHECKPOINT_BYTES // 2**20} MB a checkpoint may have"
        )
    return None


def check_resumable_size(config):
    """CheckpointError, before a run trains, when its resumable checkpoint would be over the size
    limit that loading it enforces."""
    n_bytes = resumable_checkpoint_bytes(config)
    if n_bytes > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(
            f"resumable: with its optimizer state this model's checkpoint would be about "
            f"{n_bytes / 2**20:.0f} MB, over the {MAX_CHECKPOINT_BYTES // 2**20} MB limit "
            "for a checkpoint; train it without --resumable"
        )


def save_checkpoint(folder, name, model, tokenizer=None, metrics=None, extra=None, training_state=None, room=None):
    """Save name_vN (N one more than the newest) and point name_latest at it; returns the versioned path.
    With a training_state (lab.train.TrainingState) the run can be continued from the file. `room`,
    if given, is called with the file's size first and raises to refuse it (lab.spaces.check_room).

    Safe to call from several threads or processes at once: each gets its own N. An OSError
    (a full disk, a read-only folder) names the file it was writing; the model is untouched,
    so the caller can save it elsewhere."""
    name = sanitize_name(name)
    folder = Path(folder)
    latest = _inside(folder, f"{name}_latest{SUFFIX}")
    with _naming_the_path(folder):
        folder.mkdir(parents=True, exist_ok=True)
    with _folder_lock(folder):
        _tidy(folder)
        version = next_version(folder, name)
        while True:
            path = _inside(folder, f"{name}_v{version}{SUFFIX}")
            with _naming_the_path(path):
                data = checkpoint_bytes(model, tokenizer, metrics, name, version, extra, training_state)
                if room is not None:
                    room(len(data))
                tmp = _write_temp(folder, name, data)
                try:
                    os.link(tmp, path)  # fails if the name exists, as O_EXCL would: never two savers' vN
                except FileExistsError:  # a saver that does not take the lock (another host) got there first
                    tmp.unlink()
                    version += 1
                    continue
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise
            with _naming_the_path(latest):
                try:
                    os.replace(tmp, latest)  # the same file as name_vN, under its second name
                except BaseException:
                    tmp.unlink(missing_ok=True)  # name_vN is saved; _tidy moves name_latest up to it later
                    raise
            return path


# ---------------------------------------------------------------------------
# reading: one schema for the whole header


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
    except (ValueError, RecursionError) as e:  # JSONDecodeError, an over-long integer, nesting too deep
        raise CheckpointError(f"{source}: checkpoint metadata {key!r} is not valid JSON ({e})") from None
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
    """AdamW's settings as lab.train saves them. A resumed run restores them, so each is checked:
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
    wrong shape or type, or a config beyond this server's cost limits (lab.cost)."""
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{source}: a safetensors file, but not an RNN Lab checkpoint (no {FORMAT!r} header)")
    version = metadata.get("version") or "0"
    if _version_number(version) is None:
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
            f"{source}: tokenizer has {tokenizer.vocab_size} tokens but the model expects {config.vocab_size}"
        )
    meta = {k: metadata.get(k, "") for k in ("name", "version", "timestamp", "lab_version")}
    meta["extra"] = extra
    return Header(config, config_dict, tokenizer, metrics, meta, training_state)


def _check_size(n_bytes, source):
    if n_bytes > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(
            f"{source}: {n_bytes / 2**20:.0f} MB is larger than the "
            f"{MAX_CHECKPOINT_BYTES // 2**20} MB limit for a checkpoint"
        )


def _parse(data, source):
    """bytes -> (tensors, metadata), refusing anything that is not our format."""
    _check_size(len(data), source)
    try:
        tensors = load_safetensors_bytes(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    except (SafetensorError, ValueError, UnicodeDecodeError, OverflowError, RecursionError, AttributeError) as e:
        if data[:1] == b"\x80" or data[:2] == b"PK":  # pickle protocol 2+ / torch.save's zip
            raise CheckpointError(
                f"{source}: not an RNN Lab checkpoint: it is a pickle or torch.save file, "
                "which could run code when loaded, so it was not opened"
            ) from None
        raise CheckpointError(f"{source}: not an RNN Lab checkpoint (corrupt or truncated file: {e})") from None
    return tensors, metadata


def load_checkpoint(source, device="auto"):
    """Load a checkpoint from a path or from bytes (an upload). Never executes code.

    The model lands on `device` ("auto": CUDA when present, lab.train.resolve_device),
    where sampling and introspection then run it.

    Raises CheckpointError with a clear message for a corrupt, truncated,
    foreign, malicious (pickle), malformed-metadata, too costly or
    wrong-architecture file, or one whose weights are not finite.
    """
    if isinstance(source, (bytes, bytearray)):
        data, label, path = bytes(source), "uploaded file", None
    else:
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"{path}: no such checkpoint file")
        _check_size(path.stat().st_size, path.name)  # before reading: a quick refusal of an honest big file
        try:
            data = read_at_most(path, MAX_CHECKPOINT_BYTES)  # st_size can lie (/proc, a growing file)
        except OSError as e:
            raise CheckpointError(f"{path}: could not be read ({e.strerror or e})") from None
        label = path.name
    tensors, metadata = _parse(data, label)
    header = read_header(metadata, label)
    with torch.device("meta"):  # shapes only: the config passed lab.cost's limits, this allocates nothing
        skeleton = build_model(header.config)
    expected = skeleton.state_dict()
    training_state = None
    if header.training_state is not None:  # its tensors are taken out first: what is left must be the weights
        training_state = _training_state(
            tensors, header.training_state, dict(skeleton.named_parameters()), header.metrics.get("history", []), label
        )
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = sorted(k for k in set(expected) & set(tensors) if expected[k].shape != tensors[k].shape)
    if missing or unexpected or wrong:
        detail = "; ".join(
            f"{what}: {', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''}"
            for what, keys in [("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)]
            if keys
        )
        raise CheckpointError(f"{label}: weights do not match the architecture in its config ({detail})")
    wrong_type = sorted(k for k, t in tensors.items() if t.dtype not in FLOAT_DTYPES)
    if wrong_type:
        raise CheckpointError(
            f"{label}: weight {wrong_type[0]!r} has type {tensors[wrong_type[0]].dtype}; weights must "
            f"be {', '.join(str(d).removeprefix('torch.') for d in FLOAT_DTYPES)}"
        )
    not_finite = sorted(k for k, t in tensors.items() if not _finite_as_float32(t))
    if not_finite:  # a diverged run's NaN or inf weights can only produce NaN probabilities
        raise CheckpointError(
            f"{label}: weights are not finite (NaN or infinite values in {', '.join(not_finite[:4])}"
            f"{' ...' if len(not_finite) > 4 else ''}); the run that saved them had diverged"
        )
    model = build_model(header.config)
    model.load_state_dict(tensors)
    model.to(resolve_device(device)).eval()
    return Checkpoint(model, header.config, header.tokenizer, header.metrics, header.meta, path, training_state)


# Reading an upload holds its bytes (the browser's upload, then a copy) and, at its peak, the weights
# decoded and the model built: ~5x a float16 file's bytes over them, measured on the bundled LSTM
# (9.8 MB: +50 MB peak). A page charges the budget for it while it reads.
UPLOAD_COST_PER_MB = 7
UPLOAD_WAIT_SECONDS = 30.0


def load_upload(data, owner, budget=None, wait_seconds=UPLOAD_WAIT_SECONDS):
    """load_checkpoint(data) on the CPU as one admitted job of the server's budget (lab.capacity), so
    that uploads are counted like runs: it waits up to `wait_seconds` for room, then CapacityError."""
    budget = budget or SERVER_BUDGET
    ticket = budget.request(UPLOAD_COST_PER_MB * len(data) / 2**20, owner, "reading an uploaded checkpoint")
    deadline = time.monotonic() + wait_seconds
    try:
        if not ticket.wait(lambda: time.monotonic() > deadline):
            raise CapacityError(
                f"upload: the server's training budget has had no room for {wait_seconds:.0f} s; "
                "try again when a run has ended"
            )
        return load_checkpoint(data, "cpu")
    finally:
        ticket.release()


# the weights a checkpoint may hold: they load as float32, so each must also be finite once cast (a float64
# 1e300 is finite, and inf in float32)
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _finite_as_float32(t):
    return bool(torch.isfinite(t.to(torch.float32)).all())


_RNG_STATE_BYTES = torch.get_rng_state().numel()  # the CPU generator's (Mersenne Twister) state


def _training_state(tensors, state, parameters, history, label):
    """Pop a resumable checkpoint's training tensors out of `tensors` and check each against the
    parameter it belongs to -> TrainingState. CheckpointError, one line, for any entry missing,
    unexpected, of the wrong shape or type, not finite, or (a second moment, a step count) negative."""

    def entry(key, shape, dtype=None):
        if key not in tensors:
            raise CheckpointError(f"{label}: training state entry {key!r} is missing")
        t = tensors.pop(key)
        if t.dtype not in FLOAT_DTYPES if dtype is None else t.dtype != dtype:
            raise CheckpointError(f"{label}: training state entry {key!r} has type {t.dtype}")
        if t.dim() != len(shape) or any(s is not None and s != n for s, n in zip(shape, t.shape)):
            raise CheckpointError(
                f"{label}: training state entry {key!r} has shape {tuple(t.shape)}, "
                f"expected {tuple('any' if s is None else s for s in shape)}"
            )
        if dtype is None and not _finite_as_float32(t):
            raise CheckpointError(f"{label}: training state entry {key!r} is not finite (as float32)")
        return t

    unknown = [name for name in state["optimizer"] if name not in parameters]
    if unknown:
        raise CheckpointError(f"{label}: training state names {unknown[0]!r}, which is not a parameter of the model")
    optimizer = {}
    for name in state["optimizer"]:
        moments = {
            key: entry(f"optim.{name}.{key}", () if key == "step" else parameters[name].shape) for key in _MOMENTS
        }
        if (moments["exp_avg_sq"] < 0).any() or moments["step"] < 0:
            raise CheckpointError(
                f"{label}: training state entry 'optim.{name}' has a negative second moment or step count"
            )
        optimizer[name] = moments
    shapes = {"torch": (None, _RNG_STATE_BYTES), "data": (_RNG_STATE_BYTES,), "cuda": (None, None)}
    rng = {name: entry(f"rng.{name}", shapes[name], torch.uint8) for name in state["rng"]}
    leftover = sorted(k for k in tensors if k.startswith(("optim.", "rng.")))
    if leftover:
        raise CheckpointError(f"{label}: training state entry {leftover[0]!r} is not listed in its header")
    train_loss = math.nan if state["train_loss"] is None else state["train_loss"]
    return TrainingState(
        state["step"], state["elapsed"], train_loss, optimizer, state["hyperparameters"], rng, list(history)
    )


def read_info(path, bundled=False):
    """Header-only description of a checkpoint file (fast: no weights are read), after the same
    schema check as load_checkpoint."""
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path.name}: not an RNN Lab checkpoint ({e})") from None
    header = read_header(metadata, path.name)
    stem = path.name[: -len(SUFFIX)]
    return CheckpointInfo(
        name=stem,
        version=int(header.meta["version"] or 0),
        path=path,
        family=header.config.family,
        cell=getattr(header.config, "cell", "scan"),
        timestamp=header.meta["timestamp"],
        bundled=bundled,
        metrics=header.metrics,
        config=header.config_dict,
        has_tokenizer=header.tokenizer is not None,
    )


def _modified(path):
    try:
        return path.stat().st_mtime
    except OSError:  # removed since the folder was read
        return 0.0


def scan_checkpoints(user_dir=None, bundled_dir=BUNDLED_DIR, include_versions=True):
    """(infos, problems): the readable checkpoints, bundled then user, newest first within each,
    and one line for every *.safetensors file skipped, saying why. Also tidies the user folder:
    temporary files of saves that died are removed (unless a save is running right now)."""
    found, problems = [], []
    if user_dir is not None and bundled_dir is not None and Path(user_dir).resolve() == Path(bundled_dir).resolve():
        user_dir = None  # `python -m lab list --dir checkpoints`: the bundled files, listed once, as bundled
    for folder, bundled in ((bundled_dir, True), (user_dir, False)):
        if folder is None or not Path(folder).is_dir():
            continue
        if not bundled:
            try:
                with _folder_lock(folder, blocking=False) as locked:
                    if locked:
                        _tidy(folder)
            except OSError:  # a read-only folder: nothing to tidy there
                pass
        # name_latest is a hard link to name_vN (one file, one mtime): the tie puts name_latest first
        paths = sorted(
            Path(folder).glob(f"*{SUFFIX}"), key=lambda p: (_modified(p), p.stem.endswith("_latest")), reverse=True
        )
        for path in paths:
            if not include_versions and _VERSIONED.match(path.name[: -len(SUFFIX)]):
                continue
            try:
                found.append(read_info(path, bundled))
            except CheckpointError as e:
                problems.append(str(e))
    return found, problems


def list_checkpoints(user_dir=None, bundled_dir=BUNDLED_DIR, include_versions=True):
    """Bundled then user checkpoints, newest first within each; unreadable files are skipped
    (scan_checkpoints also says why)."""
    return scan_checkpoints(user_dir, bundled_dir, include_versions)[0]


def delete_checkpoint(path, user_dir):
    """Delete a user checkpoint -> the paths removed; bundled ones and paths outside `user_dir` are
    refused. A bare file name is looked up in `user_dir`. A run's name_latest takes every name_vN of
    the run with it (deleting the latest alone would only bring the previous version back)."""
    path = Path(path)
    if path.name != str(path) and path.resolve().parent != Path(user_dir).resolve():
        raise CheckpointError(f"{path}: not in the user checkpoint folder; only your own checkpoints can be deleted")
    path = _inside(user_dir, path.name)
    if not path.is_file():
        raise CheckpointError(f"{path.name}: no such checkpoint")
    stem = path.name[: -len(SUFFIX)]
    if not stem.endswith("_latest"):
        path.unlink()
        return [path]
    name = stem[: -len("_latest")]
    with _folder_lock(path.parent):
        versions = [p for p in path.parent.glob(f"*_v*{SUFFIX}") if _version_of(p) == name]
        for doomed in [path, *versions]:
            doomed.unlink(missing_ok=True)
    return [path, *sorted(versions)]


def _version_of(path):
    """The run name of a name_vN file, else None."""
    m = _VERSIONED.match(path.name[: -len(SUFFIX)])
    return m["name"] if m else None
