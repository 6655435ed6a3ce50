"""Per-session folders under one user directory, for a hosted app that a whole class shares.

Each browser session saves its runs and uploads in a folder of its own, named by a key the server issued: 128
random bits and a MAC of them under a secret kept in the user directory, so no session can guess another's
key, and a key the server never issued (a hand-made cookie) is refused. A signed-in person's key is made from
their identity instead (`identity_space_key`), so that it is the same on every device; signing out revokes, on
every server sharing the directory, that person's identity cookies issued until then (`sign_out`,
`signed_out`), so a copy of one taken before is no sign-in. A folder's modification time is when its session
was last seen: `sweep` deletes folders not seen for `keep_seconds` (never less than an hour) that no live
session holds, and the temporary files of saves that were killed. Each space has its own quota, counted by
what is on disk (a file under two names, name_vN and name_latest, once): `reserve_room` refuses a save that
would pass it, or the whole directory's bound, so no student's save ever deletes another student's file; it
holds the whole directory's lock from the check until the file is on disk, so that saves from many spaces,
threads and processes at once never pass the bound together.

    key = new_space_key("user_checkpoints")
    folder = space_dir("user_checkpoints", key)      # user_checkpoints/<key>/, made on first use
    mark_seen("user_checkpoints", key)
    with reserve_room("user_checkpoints", folder, n_bytes, space_bytes=200 * 2**20, total_bytes=500 * 2**20):
        ...write the file...
    sweep("user_checkpoints", keep_seconds=2 * 86400)
"""

import base64
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from lab.errors import LabError
from lab.settings import MIN_KEEP_HOURS

SPACE_KEY = re.compile(r"[A-Za-z0-9_-]{38}")  # secrets.token_urlsafe(16) and 16 characters of its MAC
SECRET_NAME = ".space-secret"
SIGNED_OUT_NAME = ".signed-out"  # beside the secret: one file per person who signed out, named by a MAC
# how far a sign-in provider's clock may be from this server's: a cookie's time of issue is the provider's
# (its ID token's `iat`), a sign-out's is the server's
CLOCK_SKEW_SECONDS = 60
MIN_KEEP_SECONDS = 3600 * MIN_KEEP_HOURS  # no sweep deletes a space seen more recently than this
STALE_TEMP_SECONDS = 3600  # a save's temporary file this old belongs to a save that was killed
_secrets = {}


class SpaceFullError(LabError):
    """A save that would pass a space's quota or the user directory's bound."""


def _secret(root):
    """The user directory's secret (32 random bytes), made once and shared by every app process."""
    root = Path(root).resolve()
    if root not in _secrets:
        root.mkdir(parents=True, exist_ok=True)
        path = root / SECRET_NAME
        if not path.is_file():  # written whole, then linked: a second process never reads half of it
            tmp = root / f"{SECRET_NAME}.{secrets.token_hex(8)}"
            tmp.write_bytes(secrets.token_bytes(32))
            os.chmod(tmp, 0o600)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            tmp.unlink()
        _secrets[root] = path.read_bytes()
    return _secrets[root]


def _mac(root, token):
    digest = hmac.new(_secret(root), token.encode(), hashlib.sha256).digest()[:12]
    return base64.urlsafe_b64encode(digest).decode()  # 16 characters


def new_space_key(root):
    token = secrets.token_urlsafe(16)
    return token + _mac(root, token)


def identity_space_key(root, issuer, subject):
    """The space key of a signed-in person: the same on every device and in every browser they sign in
    with, so their files, their share of the training budget and their cap on runs are one. Made from who
    the sign-in provider says they are (its `iss` and the `sub` it never reuses, not an email that can
    change hands), under the user directory's secret: nobody can work out another's key from their name."""
    identity = f"{issuer}\n{subject}".encode()
    digest = hmac.new(_secret(root), b"identity\n" + identity, hashlib.sha256).digest()
    token = base64.urlsafe_b64encode(digest).decode()[:22]  # the length and alphabet of a random key's token
    return token + _mac(root, token)


def _signed_out_file(root, issuer, subject):
    digest = hmac.new(_secret(root), f"signed-out\n{issuer}\n{subject}".encode(), hashlib.sha256).hexdigest()
    return Path(root) / SIGNED_OUT_NAME / digest[:32]


def _revoked_through(root, issuer, subject):
    """The latest time of issue this person's sign-outs revoked, or None where they never signed out."""
    try:
        return float(_signed_out_file(root, issuer, subject).read_text(encoding="ascii"))
    except FileNotFoundError:
        return None


def sign_out(root, issuer, subject, issued_at, now=None):
    """Revoke this person's identity cookies issued until now, on every server process sharing `root`.

    Streamlit's identity cookie stays valid for 30 days wherever it was copied, and its sign-out only deletes
    it from the browser that signed out. A cookie says when it was issued (its ID token's `iat`, by the
    provider's clock), so the server keeps, per person, the latest time of issue it refuses (`signed_out`):
    the signing-out cookie's own, or CLOCK_SKEW_SECONDS before now, whichever is later. The next sign-in's
    cookie is issued after both; a cookie of another device issued less than a minute before the sign-out
    is the one kind that outlives it."""
    now = time.time() if now is None else now
    through = now - CLOCK_SKEW_SECONDS
    with contextlib.suppress(TypeError, ValueError):  # no time of issue: the skew's bound alone
        if float(issued_at) <= now + CLOCK_SKEW_SECONDS:  # not NaN, nor a future that would refuse every sign-in
            through = max(through, float(issued_at))
    path = _signed_out_file(root, issuer, subject)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _directory_lock(root, "signed-out"):  # read, compare and write as one: two sign-outs at once keep the later
        earlier = _revoked_through(root, issuer, subject)
        through = through if earlier is None else max(through, earlier)
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
        tmp.write_text(repr(through), encoding="ascii")
        os.replace(tmp, path)  # whole: a reader sees the old time or the new one


def signed_out(root, issuer, subject, issued_at):
    """Whether an identity cookie of this person issued at `issued_at` (its `iat`) was revoked by their
    sign-out here (`sign_out`). A cookie without a time of issue is refused once they have signed out:
    Streamlit's cookies always have one (Authlib requires `iat` in an ID token), so it is not one of them."""
    through = _revoked_through(root, issuer, subject)
    if through is None:
        return False
    try:
        return not float(issued_at) > through
    except (TypeError, ValueError):
        return True


def is_space_key(root, text):
    """Whether `text` is a key this server issued for the user directory `root`."""
    return (
        isinstance(text, str)
        and SPACE_KEY.fullmatch(text) is not None
        and hmac.compare_digest(text[22:], _mac(root, text[:22]))
    )


def space_dir(root, key, create=True):
    """The folder of one session's files; a key that is not one of ours is refused (no path tricks)."""
    if not is_space_key(root, key):
        raise LabError("not a valid space key")
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
    return [p for p in root.iterdir() if p.is_dir() and is_space_key(root, p.name)] if root.is_dir() else []


def folder_bytes(folder):
    """What a folder's files hold on disk: every file once, however many names it has (a checkpoint is
    name_vN and name_latest), temporary files of unfinished or killed saves included."""
    seen, total = set(), 0
    for path in Path(folder).iterdir() if Path(folder).is_dir() else ():
        try:
            stat = path.lstat()
        except FileNotFoundError:  # removed since the folder was read
            continue
        if path.is_file() and (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_size
    return total


def check_room(root, folder, n_bytes, space_bytes, total_bytes):
    """SpaceFullError, one line, unless `n_bytes` more fit in `folder` (a space of `root`) within its
    quota and in `root` within its bound."""
    used = folder_bytes(folder)
    if used + n_bytes > space_bytes:
        raise SpaceFullError(
            f"saving: your files use {used / 2**20:,.1f} MB of your {space_bytes / 2**20:,.0f} MB "
            f"and this file needs {n_bytes / 2**20:,.1f} MB; delete some on the Checkpoints page"
        )
    everyone = sum(folder_bytes(f) for f in _spaces(root))
    if everyone + n_bytes > total_bytes:
        raise SpaceFullError(
            f"saving: this server's disk for students' files is full ({everyone / 2**20:,.0f} of "
            f"{total_bytes / 2**20:,.0f} MB); ask your teacher, or delete some of yours"
        )


def _room_lock(root):
    """The user directory's lock for its size bound (`_directory_lock`)."""
    return _directory_lock(root, "room")


def _directory_lock(root, what):
    """A lock of the user directory's for `what`, one for every process on this machine (filelock:
    flock on POSIX, LockFileEx on Windows; dropped by the OS with a killed process). Kept in the system's
    temporary folder, named by the directory's resolved path, so that the directory holds only spaces."""
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:24]
    locks = Path(tempfile.gettempdir()) / "rnnlab-locks"
    locks.mkdir(exist_ok=True)
    return FileLock(locks / f"{digest}-{what}.lock", thread_local=False)


@contextlib.contextmanager
def reserve_room(root, folder, n_bytes, space_bytes, total_bytes):
    """check_room, then hold the user directory's lock while the caller writes its `n_bytes` (a save's
    temporary file, which the bound counts from then on): two saves in different spaces cannot both
    find room for one file. lab.training.checkpoints.save_checkpoint calls it as its `room`."""
    with _room_lock(root):
        check_room(root, folder, n_bytes, space_bytes, total_bytes)
        yield


def sweep(root, keep_seconds, now=None, in_use=()):
    """Delete the spaces not seen for keep_seconds, and temporary files older than an hour (saves that
    were killed). Returns the paths removed. Files outside space folders are never touched, and
    nothing in a space that was seen is deleted but its dead temporary files.

    Whatever `keep_seconds` says (a setting is bounded, lab.settings, but a caller may pass anything), a
    space seen within MIN_KEEP_HOURS is kept, and so is every space whose key is `in_use` (the sessions
    the server still hears from), however long ago its folder was touched."""
    now = time.time() if now is None else now
    keep_seconds = keep_seconds if keep_seconds >= MIN_KEEP_SECONDS else MIN_KEEP_SECONDS  # NaN too
    removed = []
    for folder in _spaces(root):
        seen = folder.stat().st_mtime
        if now - seen > keep_seconds and folder.name not in in_use:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            continue
        for tmp in folder.glob("*.tmp"):
            try:
                if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                    tmp.unlink()
                    removed.append(tmp)
            except FileNotFoundError:
                pass
        os.utime(folder, (seen, seen))  # deleting a file touches its folder: keep the last-seen time
    return removed
