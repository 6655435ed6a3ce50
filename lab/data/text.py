"""Texts as the lab reads them: a user's file or upload checked and decoded, the bundled corpus of
Shakespeare's plays, and Tiny Shakespeare's optional download (hash-checked, cached on disk)."""

import codecs
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from lab.errors import LabError
from lab.settings import server_settings
from lab.words import count


class DataError(LabError):
    """Bad data supplied by the user; the message is meant to be shown as is."""


# -----------------------------------------------------------------------------
# user-supplied text

_MB = 2**20
MAX_CORPUS_BYTES = 20 * _MB


def read_at_most(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The first max_bytes + 1 bytes of a file at most: more than max_bytes means too big.

    A file's st_size is only a hint: /proc files report 0 and a file can grow
    while it is read, so the bound is on what is read, never on what stat says.
    """
    chunks, size = [], 0
    with open(path, "rb", buffering=0) as f:
        while size <= max_bytes and (chunk := f.read(max_bytes + 1 - size)):  # pipes and /proc give less per read
            chunks.append(chunk)
            size += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# byte order marks of the encodings other than UTF-8 that editors save text in; UTF-32's
# little-endian mark starts with UTF-16's, so it is tried first
_BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]


def _decode(raw: bytes, name: str) -> str:
    """UTF-8 (a BOM dropped), or UTF-16/32 announced by a byte order mark; DataError otherwise."""
    encoding = next((enc for bom, enc in _BOMS if raw.startswith(bom)), None)  # the codecs drop the BOM
    if encoding is None:
        # UTF-8 never contains a NUL byte except for the NUL character itself,
        # which no real text has: it is the cheapest sign of a binary file
        if b"\x00" in raw:
            half = len(raw) // 2
            if max(raw[0::2].count(0), raw[1::2].count(0)) > 0.4 * half:  # every other byte NUL: UTF-16
                raise DataError(
                    f"{name}: looks like UTF-16 text without a byte order mark, not UTF-8; save it "
                    "as UTF-8 (e.g. iconv -f UTF-16LE -t UTF-8) and try again"
                )
            raise DataError(f"{name}: is not UTF-8 text (looks binary): it contains NUL bytes")
        encoding = "utf-8-sig"
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as e:
        what = "not UTF-8 text (looks binary)" if encoding == "utf-8-sig" else f"not valid {encoding.upper()} text"
        raise DataError(
            f"{name}: is {what}: byte 0x{raw[e.start]:02x} at offset {e.start} "
            "is invalid; save the file as UTF-8 and try again"
        ) from None


def read_text(source: str | os.PathLike | bytes, max_bytes: int = MAX_CORPUS_BYTES) -> str:
    """Read a user text: a path (str or PathLike) or the raw bytes of an upload.

    Pasted text should be passed as `text.encode()`, so it gets the same checks.
    The text must be non-empty, at most `max_bytes` (default MAX_CORPUS_BYTES =
    20 * 2**20 bytes = 20 MB) and UTF-8, or UTF-16/UTF-32 with a byte order mark
    (as Windows editors save "Unicode" text). A byte order mark is dropped and
    line endings become "\\n". Raises DataError naming the problem.
    """
    if isinstance(source, bytes):
        name, raw = "uploaded text", source
    else:
        path = Path(source)
        name = str(path)
        if not path.exists():
            raise DataError(f"{name}: file not found")
        if not path.is_file():
            raise DataError(f"{name}: is not a file")
        try:
            raw = read_at_most(path, max_bytes)  # never more than the limit + 1 byte in memory
        except OSError as e:
            raise DataError(f"{name}: could not be read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        size = len(raw) if isinstance(source, bytes) else max(len(raw), path.stat().st_size)
        raise DataError(f"{name}: is {size / _MB:.1f} MB, larger than the {max_bytes / _MB:g} MB limit")
    text = _decode(raw, name).replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise DataError(f"{name}: is empty (or only whitespace)")
    return text


def check_long_enough(n_tokens: int, window: int, what: str = "corpus") -> None:
    """A window of T inputs needs T + 1 tokens, because targets are shifted by one."""
    if n_tokens < window + 1:
        raise DataError(
            f"{what} has {count(n_tokens, 'token')}, shorter than one training window of {count(window + 1, 'token')} "
            f"(block size {window} + 1 target); use a longer text or a smaller block size"
        )


# -----------------------------------------------------------------------------
# corpora

BUNDLED_CORPUS = Path(__file__).parent.parent / "corpus"
BUNDLED_TRAIN, BUNDLED_VALIDATION = (
    BUNDLED_CORPUS / "shakespeare_train.txt",
    BUNDLED_CORPUS / "shakespeare_validation.txt",
)

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def load_bundled_split() -> tuple[str, str]:
    """The shipped Shakespeare corpus as (training text, validation text): 31 plays to learn from and
    4 whole plays held out (lab/corpus/README.md). No network."""
    return read_text(BUNDLED_TRAIN), read_text(BUNDLED_VALIDATION)


def load_bundled_corpus() -> str:
    """The shipped corpus as one text, the validation plays last (where split_text's 10% cut falls
    near; LMTask.from_corpus("bundled") uses the exact play boundary instead)."""
    return "\n\n".join(load_bundled_split())


def default_cache_dir() -> Path:
    """Where downloaded data sets are kept: RNNLAB_CACHE (lab.settings)."""
    return server_settings().cache


def download_tiny_shakespeare(
    cache_dir: Path | None = None,
    url: str = TINY_SHAKESPEARE_URL,
    timeout: float = 30,
    sha256: str = TINY_SHAKESPEARE_SHA256,
) -> str:
    """Tiny Shakespeare (1,115,394 characters), downloaded once and cached.

    The SHA-256 of the bytes is checked on download and on every cache hit; a
    corrupt cache file is downloaded again, and a download with the wrong hash
    raises DataError and caches nothing. `sha256` exists so tests can serve a
    small file of their own.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / "tinyshakespeare.txt"
    if path.is_file():
        raw = path.read_bytes()
        if hashlib.sha256(raw).hexdigest() == sha256:
            return raw.decode("utf-8")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            raw = response.read()
    except (urllib.error.URLError, OSError) as e:
        # HTTPError's str has the status code; URLError's reason is the socket error
        reason = e if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", e)
        raise DataError(
            f"could not download Tiny Shakespeare from {url}: {reason}. "
            "You are probably offline; the bundled corpus works without a network."
        ) from e
    actual = hashlib.sha256(raw).hexdigest()
    if actual != sha256:
        raise DataError(
            f"Tiny Shakespeare from {url} has SHA-256 {actual}, expected {sha256}; "
            "the download is corrupt or the file changed, nothing was cached"
        )
    # write to a temporary file in the same folder, then rename: a crash or a
    # concurrent reader never sees a half-written cache file
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".tinyshakespeare-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return raw.decode("utf-8")


# -----------------------------------------------------------------------------
# tokenizers: both have kind, vocab_size, encode, decode, id_to_piece, unknown,
# to_state / from_state, and a from_text constructor used by build_tokenizer
