"""Per-session folders under one user directory, for a hosted app that a whole class shares.

Each browser session saves its runs and uploads in a folder of its own, named by a random key
(128 bits: not guessable from another session), so no session can list, load, overwrite or
delete another's files. A folder's modification time is when its session was last seen:
`sweep` deletes folders not seen for `keep_seconds` and, if the user directory is still over
`max_bytes`, the oldest files first, so the disk does not fill.

    key = new_space_key()
    folder = space_dir("user_checkpoints", key)      # user_checkpoints/<key>/, made on first use
    mark_seen("user_checkpoints", key)
    sweep("user_checkpoints", keep_seconds=2 * 86400, max_bytes=500 * 2**20)
"""
import os
import re
import secrets
import shutil
import time
from pathlib import Path

SPACE_KEY = re.compile(r"[A-Za-z0-9_-]{22}")  # secrets.token_urlsafe(16)


def new_space_key():
    return secrets.token_urlsafe(16)


def is_space_key(text):
    return isinstance(text, str) and SPACE_KEY.fullmatch(text) is not None


def space_dir(root, key, create=True):
    """The folder of one session's files; a key that is not one of ours is refused (no path tricks)."""
    if not is_space_key(key):
        raise ValueError("not a valid space key")
    folder = Path(root) / key
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def mark_seen(root, key, now=None):
    """Record that the session is still around (only where it has saved something)."""
    folder = space_dir(root, key, create=False)
    if folder.is_dir():
        now = time.time() if now is None else now
        os.utime(folder, (now, now))


def _spaces(root):
    root = Path(root)
    return [p for p in root.iterdir() if p.is_dir() and is_space_key(p.name)] if root.is_dir() else []


def sweep(root, keep_seconds, max_bytes, now=None):
    """Delete the spaces not seen for keep_seconds, then the oldest files until the spaces hold at
    most max_bytes. Returns the paths removed. Files outside space folders are never touched."""
    now = time.time() if now is None else now
    removed = []
    for folder in _spaces(root):
        if now - folder.stat().st_mtime > keep_seconds:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    last_seen = {folder: folder.stat().st_mtime for folder in _spaces(root)}
    files = [(p.stat(), p) for folder in last_seen for p in folder.iterdir() if p.is_file()]
    total = sum(stat.st_size for stat, _ in files)
    for stat, path in sorted(files, key=lambda item: item[0].st_mtime):
        if total <= max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= stat.st_size
        removed.append(path)
        seen = last_seen[path.parent]  # deleting a file touches its folder: keep the last-seen time
        os.utime(path.parent, (seen, seen))
    return removed
