"""Checkpoints in folders: versioned saves (name_vN and name_latest) that several sessions may make at
once, listing, and deleting. See lab.training.checkpoints for how a save stays whole."""

import errno
import functools
import hashlib
import os
import re
import secrets
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout
from safetensors import SafetensorError, safe_open

from lab.errors import LabError
from lab.training.checkpoints.format import checkpoint_bytes
from lab.training.checkpoints.header import (
    MAX_HEADER_BYTES,
    CheckpointError,
    check_metadata_strings,
    header_json,
    read_header,
    unreadable,
    version_number,
)

SUFFIX = ".safetensors"
BUNDLED_DIR = Path(__file__).resolve().parents[3] / "checkpoints"
_VERSIONED = re.compile(r"^(?P<name>.+)_v(?P<version>\d+)$")
TEMP_GLOB = ".*~*.tmp"  # "~" is never in a sanitized name, so these are only ever our temporary files


@dataclass(frozen=True)
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
    tokenizer_kind: str = ""  # lab.data's kind ("char", "sentencepiece"); "" without a tokenizer


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
    return version_number(version) or 0


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


def check_folder(folder):
    """OSError naming the problem when checkpoints could not be saved in `folder` (created if
    need be): a run is refused before it trains, not after. Creates nothing."""
    folder = Path(folder)
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # the folder or the ancestor that mkdir extends
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "cannot write checkpoints in this folder", str(existing))


def save_checkpoint(folder, name, model, tokenizer=None, metrics=None, extra=None, training_state=None, room=None):
    """Save name_vN (N one more than the newest) and point name_latest at it; returns the versioned path.
    With a training_state (lab.training.train.TrainingState) the run can be continued from the file. `room`,
    if given, is called with the file's size and returns a context manager that raises to refuse it and
    otherwise holds a reservation while the file is written (lab.server.spaces.reserve_room).

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
                with room(len(data)) if room is not None else nullcontext():  # checked and written as one
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


def read_info(path, bundled=False):
    """Header-only description of a checkpoint file (fast: no weights are read), after the same
    schema check as load_checkpoint; read once per version of the file (its inode, time and size: a save
    replaces a file, never writes into it), as every page that lists models lists them on every visit."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as e:
        raise unreadable(path.name, e) from None
    return _read_info(path, bundled, (stat.st_ino, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=512)
def _read_info(path, bundled, version):
    try:
        with open(path, "rb") as f:  # its size and shape first (header_json), then which entry is wrong, by name
            length = f.read(8)
            head = length + f.read(min(int.from_bytes(length, "little"), MAX_HEADER_BYTES))
        check_metadata_strings(header_json(head, path.name), path.name)
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except CheckpointError:
        raise
    except (SafetensorError, OSError, ValueError) as e:
        raise unreadable(path.name, e) from None
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
        tokenizer_kind=header.tokenizer.kind if header.tokenizer is not None else "",
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
        raise CheckpointError(f"{path.name}: not in your checkpoint folder; only your own checkpoints can be deleted")
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
