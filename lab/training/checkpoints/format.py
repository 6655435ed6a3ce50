"""A checkpoint's bytes: the model, its tokenizer, its metrics and (for a resumable run) its training
state serialised as safetensors, and the same bytes loaded back, never executing code."""

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

import lab
from lab.data import read_at_most
from lab.nets.cost import FLOAT_BYTES, parameter_count
from lab.nets.models import build_model, config_to_dict, conventions
from lab.training.checkpoints.entries import FORMAT, FORMAT_VERSION, MAX_HISTORY
from lab.training.checkpoints.header import (
    CheckpointError,
    check_metadata_strings,
    header_json,
    read_header,
    unreadable,
)
from lab.training.train import TrainingState, resolve_device

MAX_CHECKPOINT_BYTES = 200 * 2**20  # the biggest upload we parse (Scribe-gamma is 58 MB)


@dataclass
class Checkpoint:
    model: torch.nn.Module
    config: object
    tokenizer: object  # None for pixel classifiers
    metrics: dict  # {"history": [eval events], ...}
    meta: dict  # name, version, timestamp, lab_version, extra
    path: Path = None
    training_state: TrainingState = None  # only in a resumable checkpoint


def checkpoint_bytes(model, tokenizer=None, metrics=None, name="", version=0, extra=None, training_state=None):
    """Serialise a model and everything needed to use it (and, given a training_state, to continue
    training it) into safetensors bytes. The header is checked as loading checks it, so that what the
    lab writes always loads: CheckpointError, naming the entry, for metrics or extra it would refuse."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        "version": str(version),
        "config": json.dumps(config_to_dict(model.config)),
        "conventions": json.dumps(conventions(model)),
        "tokenizer": json.dumps(tokenizer.to_state() if tokenizer is not None else None),
        "metrics": json.dumps(_thinned_history(metrics or {})),
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
                "optimizer_start": training_state.optimizer_start,
            }
        )
    read_header(metadata, name or "checkpoint")
    return save_safetensors_bytes(tensors, metadata)


def _thinned_history(metrics):
    """`metrics` with a history of more than MAX_HISTORY evaluations cut to MAX_HISTORY evenly spaced ones, its last
    kept: a chart of 20,000 points shows what one of 50,000 shows, and a header stays the size loading allows."""
    history = metrics.get("history") or []
    if len(history) <= MAX_HISTORY:
        return metrics
    stride = len(history) / MAX_HISTORY
    kept = [history[int(i * stride)] for i in range(MAX_HISTORY - 1)] + [history[-1]]
    return {**metrics, "history": kept}


_MOMENTS = ("exp_avg", "exp_avg_sq", "step")  # AdamW's state for one parameter
_TRAINING_PREFIXES = ("optim.", "rng.")  # a TrainingState's tensors are named so (_training_tensors)


def _training_tensors(state):
    """A TrainingState's tensors under their flat names in the file."""
    tensors = {f"optim.{name}.{key}": moments[key] for name, moments in state.optimizer.items() for key in _MOMENTS}
    tensors.update({f"rng.{name}": rng for name, rng in state.rng.items()})
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


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


def _check_size(n_bytes, source, max_bytes=None):
    max_bytes = max_bytes or MAX_CHECKPOINT_BYTES
    if n_bytes > max_bytes:
        raise CheckpointError(
            f"{source}: {n_bytes / 2**20:.0f} MB is larger than the {max_bytes // 2**20} MB limit for a checkpoint"
        )


def _parse(data, source, max_bytes=None):
    """bytes -> (tensors, metadata), refusing anything that is not our format; the header's size and shape are
    checked before anything is built from it (header_json)."""
    _check_size(len(data), source, max_bytes)
    try:
        header = header_json(data, source)
        check_metadata_strings(header, source)
        tensors = load_safetensors_bytes(data)
    except (CheckpointError, SafetensorError, ValueError, OverflowError) as e:
        if data[:1] == b"\x80" or data[:2] == b"PK":  # pickle protocol 2+ / torch.save's zip
            raise CheckpointError(
                f"{source}: not an RNN Lab checkpoint: it is a pickle or torch.save file, "
                "which could run code when loaded, so it was not opened"
            ) from None
        if isinstance(e, CheckpointError):
            raise
        raise unreadable(source, e) from None
    return tensors, header.get("__metadata__") or {}


def load_checkpoint(source, device="auto", max_bytes=None):
    """Load a checkpoint from a path or from bytes (an upload). Never executes code.

    The model lands on `device` ("auto": CUDA when present, lab.training.train.resolve_device),
    where sampling and introspection then run it.

    `max_bytes`: the largest file read. The default (MAX_CHECKPOINT_BYTES) is what the app opens; a
    build resuming its own progress file (a seed-scale model with its optimizer state) passes more.

    Raises CheckpointError with a clear message for a corrupt, truncated,
    foreign, malicious (pickle), malformed-metadata, too costly or
    wrong-architecture file, or one whose weights are not finite.
    """
    if isinstance(source, (bytes, bytearray)):
        data, label, path = bytes(source), "uploaded file", None
    else:
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"{path.name}: no such checkpoint file")
        _check_size(path.stat().st_size, path.name, max_bytes)  # before reading: an honest big file's quick refusal
        try:
            data = read_at_most(path, max_bytes or MAX_CHECKPOINT_BYTES)  # st_size can lie (/proc, a growing file)
        except OSError as e:
            raise CheckpointError(f"{path.name}: could not be read ({e.strerror or e})") from None
        label = path.name
    tensors, metadata = _parse(data, label, max_bytes)
    header = read_header(metadata, label)
    with torch.device("meta"):  # shapes only: the config passed lab.nets.cost's limits, this allocates nothing
        skeleton = build_model(header.config)
    expected = skeleton.state_dict()
    # the weights first (a config edited to another architecture is named as such), then the training state
    weights = {k for k in tensors if header.training_state is None or not k.startswith(_TRAINING_PREFIXES)}
    missing = sorted(set(expected) - weights)
    unexpected = sorted(weights - set(expected))
    wrong = sorted(k for k in set(expected) & weights if expected[k].shape != tensors[k].shape)
    if missing or unexpected or wrong:
        detail = "; ".join(
            f"{what}: {', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''}"
            for what, keys in [("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)]
            if keys
        )
        raise CheckpointError(f"{label}: weights do not match the architecture in its config ({detail})")
    training_state = None
    if header.training_state is not None:  # its tensors are taken out: what is left are the weights
        training_state = _training_state(
            tensors, header.training_state, dict(skeleton.named_parameters()), header.metrics.get("history", []), label
        )
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
    # the skeleton takes the file's weights, as float32: no random initialisation first (the orthogonal
    # one of a 2x640 LSTM alone took ~1 s on a busy core, each load), and no Module.to_empty, which on
    # the meta device imports PyTorch's compiler stack (about 1 s of the first load)
    skeleton.load_state_dict({name: t.float() for name, t in tensors.items()}, assign=True)
    model = skeleton.to(resolve_device(device)).eval()
    return Checkpoint(model, header.config, header.tokenizer, header.metrics, header.meta, path, training_state)


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
    leftover = sorted(k for k in tensors if k.startswith(_TRAINING_PREFIXES))
    if leftover:
        raise CheckpointError(f"{label}: training state entry {leftover[0]!r} is not listed in its header")
    train_loss = math.nan if state["train_loss"] is None else state["train_loss"]
    return TrainingState(
        state["step"],
        state["elapsed"],
        train_loss,
        optimizer,
        state["hyperparameters"],
        rng,
        list(history),
        state.get("optimizer_start", 0),
    )
