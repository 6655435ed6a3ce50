"""One checkpoint format: safetensors weights with JSON metadata.

A checkpoint file holds the weights, the model config (family, cell and
convention), the tokenizer (character table or SentencePiece model bytes), the
metrics history, the lab version and a timestamp. safetensors is a header of
JSON plus raw tensor bytes, so loading a file can never execute code: a pickle
(what torch.save writes) is rejected as "not an RNN Lab checkpoint".

Versioning follows seed 002: saving "astra" writes astra_v1, astra_v2, ...
and refreshes astra_latest. Every write goes to a temporary file in the same
folder and is renamed into place, so a crash mid-save leaves the previous file
intact.
"""
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

import lab
from lab.data import DataError, tokenizer_from_state
from lab.models import build_model, config_from_dict, config_to_dict, conventions
from lab.train import resolve_device

FORMAT = "rnnlab-checkpoint"
FORMAT_VERSION = "1"
SUFFIX = ".safetensors"
MAX_CHECKPOINT_BYTES = 200 * 2**20  # the biggest upload we parse (Scribe-gamma is 58 MB)
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
_VERSIONED = re.compile(r"^(?P<name>.+)_v(?P<version>\d+)$")


class CheckpointError(ValueError):
    """A file that is not a loadable RNN Lab checkpoint; the message says why."""


@dataclass
class Checkpoint:
    model: torch.nn.Module
    config: object
    tokenizer: object  # None for pixel classifiers
    metrics: dict  # {"history": [eval events], ...}
    meta: dict  # name, version, timestamp, lab_version, extra
    path: Path = None


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


def sanitize_name(name):
    """A checkpoint base name safe to use as a file name inside the checkpoint folder."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name).strip()).strip(".-")[:64]
    if not cleaned:
        raise ValueError(f"name: {name!r} has no usable characters; use letters, digits, '-', '_' or '.'")
    return cleaned


def _inside(folder, filename):
    folder = Path(folder).resolve()
    path = (folder / filename).resolve()
    if path.parent != folder:
        raise ValueError(f"name: {filename!r} would leave the checkpoint folder")
    return path


def atomic_write_bytes(path, data):
    """Write to a temporary file beside `path`, flush to disk, then rename over it."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; a checkpoint is an ordinary shareable file
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def next_version(folder, name):
    versions = [int(m["version"]) for p in Path(folder).glob(f"{name}_v*{SUFFIX}")
                if (m := _VERSIONED.match(p.name[: -len(SUFFIX)])) and m["name"] == name]
    return max(versions, default=0) + 1


def checkpoint_bytes(model, tokenizer=None, metrics=None, name="", version=0, extra=None):
    """Serialise a model and everything needed to use it into safetensors bytes."""
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
    return save_safetensors_bytes(tensors, metadata)


def save_checkpoint(folder, name, model, tokenizer=None, metrics=None, extra=None):
    """Save name_vN (N one more than the last) and refresh name_latest; returns the versioned path."""
    name = sanitize_name(name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    version = next_version(folder, name)
    data = checkpoint_bytes(model, tokenizer, metrics, name, version, extra)
    path = _inside(folder, f"{name}_v{version}{SUFFIX}")
    atomic_write_bytes(path, data)
    atomic_write_bytes(_inside(folder, f"{name}_latest{SUFFIX}"), data)
    return path


def _check_size(n_bytes, source):
    if n_bytes > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{source}: {n_bytes / 2**20:.0f} MB is larger than the "
                              f"{MAX_CHECKPOINT_BYTES // 2**20} MB limit for a checkpoint")


def _parse(data, source):
    """bytes -> (tensors, metadata), refusing anything that is not our format."""
    _check_size(len(data), source)
    try:
        tensors = load_safetensors_bytes(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    except (SafetensorError, ValueError, UnicodeDecodeError, OverflowError) as e:
        if data[:1] == b"\x80" or data[:2] == b"PK":  # pickle protocol 2+ / torch.save's zip
            raise CheckpointError(f"{source}: not an RNN Lab checkpoint: it is a pickle or torch.save file, "
                                  "which could run code when loaded, so it was not opened") from None
        raise CheckpointError(f"{source}: not an RNN Lab checkpoint (corrupt or truncated file: {e})") from None
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{source}: a safetensors file, but not an RNN Lab checkpoint (no {FORMAT!r} header)")
    return tensors, metadata


def _decode_json(metadata, key, source):
    try:
        return json.loads(metadata[key])
    except (KeyError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{source}: checkpoint metadata {key!r} is missing or malformed ({e})") from None


def load_checkpoint(source, device="auto"):
    """Load a checkpoint from a path or from bytes (an upload). Never executes code.

    The model lands on `device` ("auto": CUDA when present, lab.train.resolve_device),
    where sampling and introspection then run it.

    Raises CheckpointError with a clear message for a corrupt, truncated,
    foreign, malicious (pickle) or wrong-architecture file.
    """
    if isinstance(source, (bytes, bytearray)):
        data, label, path = bytes(source), "uploaded file", None
    else:
        path = Path(source)
        if not path.is_file():
            raise CheckpointError(f"{path}: no such checkpoint file")
        _check_size(path.stat().st_size, path.name)  # before reading it into memory
        data, label = path.read_bytes(), path.name
    tensors, metadata = _parse(data, label)
    try:
        config = config_from_dict(_decode_json(metadata, "config", label))
        tokenizer_state = _decode_json(metadata, "tokenizer", label)
        tokenizer = tokenizer_from_state(tokenizer_state) if tokenizer_state else None
    except (ValueError, TypeError, DataError) as e:  # TypeError: a config that is not a dict
        raise CheckpointError(f"{label}: checkpoint config or tokenizer is invalid: {e}") from None
    with torch.device("meta"):  # shapes only, no memory: an edited config cannot make us allocate a huge model
        expected = build_model(config).state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = sorted(k for k in set(expected) & set(tensors) if expected[k].shape != tensors[k].shape)
    if missing or unexpected or wrong:
        detail = "; ".join(f"{what}: {', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''}"
                           for what, keys in [("missing", missing), ("unexpected", unexpected),
                                              ("wrong shape", wrong)] if keys)
        raise CheckpointError(f"{label}: weights do not match the architecture in its config ({detail})")
    if tokenizer is not None and getattr(config, "vocab_size", tokenizer.vocab_size) != tokenizer.vocab_size:
        raise CheckpointError(f"{label}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                              f"expects {config.vocab_size}")
    model = build_model(config)
    model.load_state_dict(tensors)
    model.to(resolve_device(device)).eval()
    meta = {k: metadata.get(k, "") for k in ("name", "version", "timestamp", "lab_version")}
    meta["extra"] = _decode_json(metadata, "extra", label) if "extra" in metadata else {}
    return Checkpoint(model, config, tokenizer, _decode_json(metadata, "metrics", label), meta, path)


def read_info(path, bundled=False):
    """Header-only description of a checkpoint file (fast: no weights are read)."""
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path.name}: not an RNN Lab checkpoint ({e})") from None
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path.name}: not an RNN Lab checkpoint")
    config = _decode_json(metadata, "config", path.name)
    metrics = _decode_json(metadata, "metrics", path.name)
    version = metadata.get("version") or "0"
    if not (isinstance(config, dict) and isinstance(metrics, dict) and version.isdecimal()):  # an edited header
        raise CheckpointError(f"{path.name}: checkpoint metadata is malformed (config, metrics or version)")
    stem = path.name[: -len(SUFFIX)]
    return CheckpointInfo(name=stem, version=int(version), path=path,
                          family=config.get("family", ""), cell=config.get("cell", "scan"),
                          timestamp=metadata.get("timestamp", ""), bundled=bundled, metrics=metrics, config=config)


def list_checkpoints(user_dir=None, bundled_dir=BUNDLED_DIR, include_versions=True):
    """Bundled then user checkpoints, newest first within each; unreadable files are skipped."""
    found = []
    for folder, bundled in ((bundled_dir, True), (user_dir, False)):
        if folder is None or not Path(folder).is_dir():
            continue
        paths = sorted(Path(folder).glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in paths:
            if not include_versions and _VERSIONED.match(path.name[: -len(SUFFIX)]):
                continue
            try:
                found.append(read_info(path, bundled))
            except CheckpointError:
                continue
    return found


def delete_checkpoint(path, user_dir):
    """Delete a user checkpoint; bundled ones and paths outside `user_dir` are refused.
    A bare file name is looked up in `user_dir`."""
    path = Path(path)
    if path.name != str(path) and path.resolve().parent != Path(user_dir).resolve():
        raise CheckpointError(f"{path}: not in the user checkpoint folder; only your own checkpoints can be deleted")
    path = _inside(user_dir, path.name)
    if not path.is_file():
        raise CheckpointError(f"{path.name}: no such checkpoint")
    path.unlink()
