"""Every setting of the server and the command line, declared once: its environment variable (RNNLAB_
and the field's name in capitals), its type, its bounds and what it does, in one pydantic-settings model.

    server_settings().keep_hours      # 48.0, or RNNLAB_KEEP_HOURS as a number from 1 to 8,760
    server_settings()                 # LabError, one line naming the variable and what it may be

Nothing else reads an RNNLAB_ variable (tests/test_settings.py checks it), so a value out of its bounds
is refused in one place, before it is used: `streamlit run serve.py` stops with that line before it
opens, and under `streamlit run app.py` every page shows it instead of its content (ui.shared.sessions). An
empty value is refused like any other that is not allowed: unset a variable to get its default.

The environment is parsed once: `server_settings` keeps its answer for as long as the RNNLAB_ variables
are the same (a server's never change; a test's monkeypatch does change them, and is read again).

The README's table of settings is `settings_table()`: `python -m lab.settings` prints it.
"""

import functools
import os
import re
import tempfile
from pathlib import Path
from typing import Annotated

from annotated_types import Ge, Gt, Le
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from lab.errors import LabError
from lab.words import count

PREFIX = "RNNLAB_"
ROOT = Path(__file__).resolve().parent.parent  # the repository: app.py, lab/, user_checkpoints/
MIN_KEEP_HOURS = 1  # a session's files are kept at least this long after it was last seen (lab.server.spaces)
RAY_ADDRESS = re.compile(r"auto|local|(ray://)?[\w.\-\[\]:]+:\d{1,5}")
_EMAIL_PART = r"[^@\s,;<>()\[\]\"]+"  # no space, list separator, bracket or quote
EMAIL = re.compile(rf"{_EMAIL_PART}@{_EMAIL_PART}\.{_EMAIL_PART}")  # what a sign-in provider's `email` claim looks like
# a teacher key: long enough that a class cannot guess it, in characters any keyboard types
TEACHER_KEY = re.compile(r"[A-Za-z0-9_-]{12,128}")


# a folder's name: its whole length, with room under it for a space's key and a checkpoint's file name within
# every system's limit on a path (4,096 bytes on Linux), and each of its parts as most file systems bound a name
MAX_FOLDER_CHARS = 1024
MAX_NAME_BYTES = 255
FOLDER_ALLOWED = f"a folder (not a file, not in one, at most {count(MAX_FOLDER_CHARS, 'character')})"
WRITABLE_ALLOWED = FOLDER_ALLOWED.replace("a folder", "a folder the server can write", 1)


class FolderRefused(ValueError):
    """Why a folder setting is refused, in words that follow what it may be: "a part of it is a file"."""


def _folder(path, writable=False):
    """`path` if a folder can be there (and, `writable`, the server can make and write it), else
    FolderRefused. Checked before the server opens (serve.py), so that a bad folder stops it with one line
    instead of failing in a page, or in a save at the end of a student's run."""
    text = str(path)
    if text in ("", "."):  # Path("") is ".": an empty value would mean wherever the server started
        raise FolderRefused("empty")
    if len(text) > MAX_FOLDER_CHARS:  # before the file system sees it: a stat of 100,000 characters raises
        raise FolderRefused(f"{count(len(text), 'character')} long")
    try:
        longest = max(len(os.fsencode(part)) for part in path.parts)
    except UnicodeError:
        raise FolderRefused("not a name this system's files can have") from None
    if longest > MAX_NAME_BYTES:
        raise FolderRefused(f"one of its names is {longest:,} bytes long, more than {MAX_NAME_BYTES}")
    try:
        absolute = path.absolute()
        there = next((p for p in (absolute, *absolute.parents) if p.exists()), None)  # the nearest that is
        if there is None:  # not even its root (a drive that is not there)
            raise OSError
        if not there.is_dir():
            raise FolderRefused("a file" if there == absolute else "a part of it is a file, not a folder")
        if writable:  # access() says yes to root under /proc: only a folder made and removed there tells
            os.rmdir(tempfile.mkdtemp(prefix=".rnnlab-write-check-", dir=there))
    except OSError:
        raise FolderRefused(f"the server cannot {'write' if writable else 'read'} there") from None
    return path


def _ray_address(text):
    if RAY_ADDRESS.fullmatch(text) is None:
        raise ValueError("not an address")
    return text


def _emails(text):
    """The list as written, "a@school.org, B@school.org" -> ("a@school.org", "b@school.org"): compared
    without case, as providers send them."""
    parts = text if isinstance(text, tuple) else str(text).split(",")  # a tuple: the default, none
    emails = tuple(part.strip().lower() for part in parts)
    if not all(EMAIL.fullmatch(email) for email in emails):
        raise ValueError("not a list of email addresses")
    return emails


def _teacher_key(text):
    if TEACHER_KEY.fullmatch(text) is None:
        raise ValueError("not a key")
    return text


Folder = Annotated[Path, AfterValidator(_folder)]  # read from only
WritableFolder = Annotated[Path, AfterValidator(functools.partial(_folder, writable=True))]


def _number(default, low, high, description, above=False):
    """A numeric field from `low` (or above it) to `high`, never NaN or infinite; its type says whole or not."""
    return Field(default, allow_inf_nan=False, description=description, **{"gt" if above else "ge": low, "le": high})


class ServerSettings(BaseSettings):
    """The settings, each from the environment variable RNNLAB_<NAME> (the default when unset)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", frozen=True)

    user_dir: WritableFolder = Field(
        ROOT / "user_checkpoints",
        description="where the sessions' folders live",
        json_schema_extra={"shown": "`user_checkpoints/`"},
    )
    keep_hours: float = _number(
        48.0,
        MIN_KEEP_HOURS,
        24 * 365,
        "how long a session's files are kept after it was last seen (a session still open keeps its files)",
    )
    user_dir_max_mb: float = _number(
        500.0,
        1,
        10**7,
        "the bound on all sessions' files together: a save that would pass it is refused with a message "
        "(nobody's files are deleted to make room)",
    )
    space_max_mb: float = _number(
        100.0,
        1,
        10**7,
        "one session's quota, counted as on disk (a checkpoint's two names once); a save over it is refused, "
        "and the student deletes some of theirs on the Checkpoints page",
    )
    # 1,536: the training process (420) and a class's eleven distinct default-sized runs at once; measured on 2
    # cores with thirty students, 1.6 GB at the peak, within Community Cloud's 2.7 GB (BENCHMARKS.md, "A class of
    # 30 on two cores"); at 1,024 the eleventh waited a whole run for room
    training_budget_mb: float = _number(
        1536.0, 1, 10**7, "the server's training budget, in MB of estimated training memory"
    )
    session_share: float = _number(0.5, 0, 1, "the part of the budget one session may hold at a time", above=True)
    session_runs: int = _number(8, 1, 1000, "the runs one session may have training or waiting at once")
    # a page sends its heartbeat every 5 s (ui.shared.sessions.HEARTBEAT_SECONDS): less would stop an open page's runs
    unattended_seconds: float = _number(
        150.0, 6, 86_400, "a session's runs stop this long after its last open page closed"
    )
    training_processes: int = _number(
        1,
        0,
        256,
        "the processes the runs train in, beside the server at the lowest priority (nice 19: they train on the "
        "cores the pages leave idle, with a share of a host busy with other work, and keep off the server's "
        "interpreter); the runs in one process "
        "take turns step by step. About one for each core beyond one kept for the pages: 1 on 2 cores, 15 on 16 "
        "(each ~570 MB, paid once however many runs are in it). 0: the runs train in threads of the server "
        "itself (the least memory, the slowest pages while they train)",
    )
    concurrent_steps: int = _number(
        1,
        1,
        256,
        "how many jobs that train in the server's own threads (live ablations) compute a step at once",
    )
    ray_address: Annotated[str, AfterValidator(_ray_address)] | None = Field(
        None,
        description="the Ray cluster every run trains on (Training on Ray, below); unset: on this server",
        json_schema_extra={"shown": "unset", "allowed": "auto, local or HOST:PORT"},
    )
    ray_warm_actors: int = _number(0, 0, 10_000, "the Ray actors started with the server, for runs to take")
    ray_warm_actor_mb: int = _number(1024, 1, 10**7, "the memory of the Ray cluster each warm actor holds, in MB")
    max_train_memory_mb: int = _number(
        1024, 1, 10**7, "the most training memory one run may need, in MB (the command line's too)"
    )
    max_params: int = _number(50_000_000, 1, 10**11, "the most parameters a model may have (the command line's too)")
    max_layers: int = _number(16, 1, 1000, "the most recurrent layers a model may have (the app offers up to 8)")
    ablation_dir: Folder | None = Field(
        None,
        description="the gate-bias study the Ablation page shows; unset: the one shipped with the lab",
        json_schema_extra={"shown": "`checkpoints/ablation/`"},
    )
    cache: WritableFolder = Field(
        Path.home() / ".cache" / "rnnlab",
        description="where downloaded data sets are kept",
        json_schema_extra={"shown": "`~/.cache/rnnlab`"},
    )
    require_sign_in: bool = Field(
        False,
        description="every page asks for sign-in first (the [auth] section of the app's secrets, README: Running a "
        "class); unset or false: anyone may use the app, and signing in is offered when sign-in is set up",
        json_schema_extra={"shown": "false", "allowed": "true or false"},
    )
    # NoDecode: a comma-separated list, as a teacher writes it, not JSON
    teacher_emails: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_emails)] = Field(
        (),
        description="the teachers' emails: signed in with one of them, the Class page shows its teacher's view "
        "(the class board's controls)",
        json_schema_extra={"shown": "none", "allowed": "email addresses separated by commas"},
    )
    teacher_key: Annotated[str, AfterValidator(_teacher_key)] | None = Field(
        None,
        description="a key that opens the Class page's teacher's view without sign-in (keep it secret: anyone who "
        "types it is a teacher); unset: only the teachers' emails open it",
        json_schema_extra={"shown": "unset", "allowed": "12 to 128 letters, digits, - or _"},
    )
    rescue_dir: WritableFolder = Field(
        Path(tempfile.gettempdir()) / "rnnlab-rescue",
        description="where the command line saves a trained model when its folder cannot take it (a full disk)",
        json_schema_extra={"shown": "`rnnlab-rescue` in the system's temporary folder"},
    )


def variable(name):
    """A field's environment variable: keep_hours -> RNNLAB_KEEP_HOURS."""
    return PREFIX + name.upper()


def bounds(name):
    """A numeric field's (lowest, whether the lowest itself is refused, highest)."""
    metadata = ServerSettings.model_fields[name].metadata
    low = next((m.ge, False) if isinstance(m, Ge) else (m.gt, True) for m in metadata if isinstance(m, Ge | Gt))
    return (*low, next(m.le for m in metadata if isinstance(m, Le)))


def allowed(name):
    """What a field's variable may be, in words: "a number from 1 to 8,760"."""
    field = ServerSettings.model_fields[name]
    extra = field.json_schema_extra or {}
    if field.annotation not in (int, float):  # a folder, or a field that says what it may be
        writable = WritableFolder.__metadata__[0] in field.metadata
        return extra.get("allowed", WRITABLE_ALLOWED if writable else FOLDER_ALLOWED)
    low, above, high = bounds(name)
    kind = "a whole number" if field.annotation is int else "a number"
    return f"{kind} above {low:,} and at most {high:,}" if above else f"{kind} from {low:,} to {high:,}"


def shown_default(name):
    field = ServerSettings.model_fields[name]
    extra = field.json_schema_extra or {}
    return extra.get("shown") or f"{field.default:,}".removesuffix(".0")


def _one_line(error):
    """A ValidationError -> one line naming each variable at fault, its value and what it may be."""
    parts = []
    for problem in error.errors():
        name, value = problem["loc"][0], str(problem["input"])
        shown = repr(value if len(value) <= 40 else value[:40] + "...")
        why = problem.get("ctx", {}).get("error")
        because = f": {why}" if isinstance(why, FolderRefused) else ""  # which of a folder's conditions failed
        parts.append(f"{variable(name)}: {shown} is not {allowed(name)}{because}")
    return "; ".join(parts)


def server_settings():
    """The settings from this process's environment: a ServerSettings, or LabError in one line."""
    return _parse(tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(PREFIX))))


@functools.lru_cache(maxsize=4)
def _parse(_environment):  # the RNNLAB_ variables, as the cache's key: the model reads them itself
    try:
        return ServerSettings()
    except ValidationError as error:
        raise LabError(_one_line(error)) from None


def unknown_variables():
    """The RNNLAB_ variables of this process's environment that are no setting (a typo, an hour for hours),
    which nothing reads: for the server's log to name, so that a teacher sees that theirs was not applied."""
    return sorted(name for name in os.environ if name.upper().startswith(PREFIX) and name.upper() not in _declared())


@functools.cache
def _declared():
    return {variable(name) for name in ServerSettings.model_fields}


def settings_table():
    """The README's table of settings, from the model."""
    rows = ["| variable | default | allowed | what |", "|---|---|---|---|"]
    for name, field in ServerSettings.model_fields.items():
        rows.append(f"| `{variable(name)}` | {shown_default(name)} | {allowed(name)} | {field.description} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(settings_table())
