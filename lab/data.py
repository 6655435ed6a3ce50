"""Data for RNN Lab: corpora, tokenizers, batches and sequential-image datasets.

Dimensions used in shape comments:
    N  number of tokens in a corpus (or of samples in a dataset)
    B  batch size (also: number of parallel streams in ConsecutiveWindows)
    T  block size, the number of time steps in one training window
    V  vocabulary size
    K  n_max - 1, the width of a padded n-gram context
    L  length of a pixel sequence (32 * 32 = 1024 for CIFAR-10)

Public names, one line each:
    DataError                  bad user data: a ValueError whose message says what is wrong
    MAX_CORPUS_BYTES           the largest text read_text accepts (20 MB)
    read_at_most               a file's bytes, never more than a limit + 1, whatever its size claims
    read_text                  validate and decode a user-supplied text file or upload
    check_long_enough          raise DataError when a corpus cannot fill one training window
    BUNDLED_CORPUS             folder of the shipped Shakespeare corpus (35 plays, 4.6 MB)
    load_bundled_split         the shipped corpus as (training plays, validation plays), no network
    load_bundled_corpus        the same as one text
    split_text                 a text's contiguous split: the first 1 - val_fraction, the rest
    TINY_SHAKESPEARE_URL       where karpathy's Tiny Shakespeare lives
    TINY_SHAKESPEARE_SHA256    SHA-256 of its 1,115,394 bytes
    default_cache_dir          $RNNLAB_CACHE or ~/.cache/rnnlab
    download_tiny_shakespeare  optional download, hash-checked and cached on disk
    CharTokenizer              one token per character
    SentencePieceTokenizer     BPE or unigram subwords, trained in memory
    TOKENIZERS                 kind -> tokenizer class
    build_tokenizer            make a tokenizer of a given kind from a text
    tokenizer_from_state       rebuild a tokenizer from its to_state() dict (checkpoints)
    chars_per_token            average characters per token of a tokenizer on a text
    encode_to_tensor           a whole corpus as one LongTensor of token ids
    split_train_val            contiguous train / validation split of a token tensor
    random_windows             a batch of random (x, y) windows, nanoGPT style
    ConsecutiveWindows         consecutive (x, y) windows for truncated BPTT
    ngram_samples              mixed 2..5-gram (context, target) samples for ScanMarkov
    FlattenSequence            transform: image (C, H, W) -> sequence (H*W, C)
    cifar10_transform          Grayscale -> ToTensor -> Normalize -> FlattenSequence
    load_cifar10               CIFAR-10 as 1024-step grayscale pixel sequences
    load_digits_sequences      scikit-learn's digits as pixel sequences (offline)
    SequenceDatasetInfo        what the UI needs to know about a sequence dataset
    SEQUENCE_DATASETS          name -> SequenceDatasetInfo
    load_sequence_dataset      load one of SEQUENCE_DATASETS by name

torchvision and scikit-learn are imported inside the functions that need them,
so `import lab.data` stays light.
"""

import base64
import binascii
import codecs
import hashlib
import io
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
import torch.nn.functional as F

from lab.errors import LabError


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
            f"{what} has {n_tokens} tokens, shorter than one training window of {window + 1} tokens "
            f"(block size {window} + 1 target); use a longer text or a smaller block size"
        )


# -----------------------------------------------------------------------------
# corpora

BUNDLED_CORPUS = Path(__file__).parent / "corpus"
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
    return Path(os.environ.get("RNNLAB_CACHE") or Path.home() / ".cache" / "rnnlab")


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


def _show_chars(chars: list[str], limit: int = 20) -> str:
    shown = ", ".join(repr(c) for c in chars[:limit])
    return shown + (f" and {len(chars) - limit} more" if len(chars) > limit else "")


class CharTokenizer:
    """One token per character; the vocabulary is the sorted set of characters."""

    kind = "char"

    def __init__(self, chars: str):
        if not chars or len(set(chars)) != len(chars):
            raise DataError("a char tokenizer needs a non-empty string of distinct characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        if not text:
            raise DataError("cannot build a char tokenizer from an empty text")
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def unknown(self, text: str) -> list[str]:
        return sorted(set(text) - self.stoi.keys())

    def encode(self, text: str) -> list[int]:
        missing = self.unknown(text)
        if missing:
            raise DataError(
                f"text has {len(missing)} unknown characters, not in the vocabulary: {_show_chars(missing)}"
            )
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def id_to_piece(self, i: int) -> str:
        return self.chars[int(i)]

    def to_state(self) -> dict:
        return {"kind": self.kind, "chars": self.chars}

    @classmethod
    def from_state(cls, state: dict) -> "CharTokenizer":
        if not isinstance(state.get("chars"), str):
            raise DataError("malformed char tokenizer state: 'chars' must be a string")
        return cls(state["chars"])


class SentencePieceTokenizer:
    """Subword tokenizer (BPE or unigram) trained in memory with sentencepiece.

    Newlines and spaces: sentencepiece is built for sentences, so by default it
    collapses repeated spaces and maps "\\n" to a space. We train on the corpus
    split into lines (no "\\n" left in them) and make "\\n" a user-defined
    symbol, so it is always its own token; with the "identity" normalisation,
    remove_extra_whitespaces=False and add_dummy_prefix=False, decode(encode(t))
    == t for any text made of characters seen in training. No dummy prefix means
    the first word of a line is a piece without "▁" both in training and when
    encoding, which keeps the two consistent. Characters never seen in training
    encode to <unk> (id 0) and decode to " ⁇ "; `unknown(text)` lists them.
    There are no BOS/EOS pieces: the models only need next-token prediction.
    """

    kind = "sentencepiece"
    MODEL_TYPES = ("bpe", "unigram")
    MIN_VOCAB = 32  # below this, subwords are barely more than characters
    MAX_LINE_CHARS = 2048  # longer lines are cut: sentencepiece skips very long sentences

    def __init__(self, model_proto: bytes, model_type: str):
        self.model_proto = model_proto
        self.model_type = model_type
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        pieces = (
            self.sp.id_to_piece(i)
            for i in range(self.sp.get_piece_size())
            if not (self.sp.is_unknown(i) or self.sp.is_control(i))
        )
        # every character that appears in some piece can be represented
        self.covered = set("".join(pieces).replace("▁", " "))

    @classmethod
    def train(cls, text: str, vocab_size: int = 1000, model_type: str = "bpe") -> "SentencePieceTokenizer":
        if model_type not in cls.MODEL_TYPES:
            valid = ", ".join(cls.MODEL_TYPES)
            raise DataError(f"unknown sentencepiece model_type {model_type!r}; valid: {valid}")
        # with character_coverage=1.0 every character needs its own piece,
        # plus <unk> and the newline symbol
        n_chars = len(set(text) - {"\n"})
        minimum = max(cls.MIN_VOCAB, n_chars + 2)
        if vocab_size < minimum:
            raise DataError(
                f"vocab_size={vocab_size} is too small: this text has {n_chars} distinct characters, each needs "
                f"its own piece (plus <unk> and newline); use vocab_size >= {minimum}"
            )
        if not text.strip("\n"):
            raise DataError("cannot train a sentencepiece tokenizer on an empty text")
        # a generator, not a list: no second copy of a 20 MB corpus split into Python strings
        lines = (
            line[i : i + cls.MAX_LINE_CHARS]
            for line in text.split("\n")
            for i in range(0, len(line), cls.MAX_LINE_CHARS)
        )
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=lines,
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                user_defined_symbols=["\n"],
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                add_dummy_prefix=False,
                bos_id=-1,
                eos_id=-1,
                max_sentence_length=4 * cls.MAX_LINE_CHARS,
                input_sentence_size=1_000_000,
                minloglevel=2,
            )
        except RuntimeError as e:
            too_high = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)", str(e))
            if too_high:
                raise DataError(
                    f"vocab_size={vocab_size} is too large for this corpus: sentencepiece can make at most "
                    f"{too_high.group(1)} {model_type} pieces from it; use a smaller vocab_size or a longer text"
                ) from None
            raise DataError(f"sentencepiece training failed: {e}") from None
        return cls(model.getvalue(), model_type)

    from_text = train  # the common constructor name build_tokenizer uses

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def unknown(self, text: str) -> list[str]:
        """Best effort: characters that appear in no piece of the vocabulary."""
        return sorted(set(text) - self.covered)

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def decode(self, ids) -> str:
        return self.sp.decode([int(i) for i in ids])

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(int(i))

    def to_state(self) -> dict:
        return {
            "kind": self.kind,
            "model_b64": base64.b64encode(self.model_proto).decode("ascii"),
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
        }

    @classmethod
    def from_state(cls, state: dict) -> "SentencePieceTokenizer":
        if state.get("model_type") not in cls.MODEL_TYPES:
            raise DataError(f"malformed sentencepiece tokenizer state: model_type {state.get('model_type')!r}")
        try:
            proto = base64.b64decode(state["model_b64"], validate=True)
            tok = cls(proto, state["model_type"])
        except (KeyError, TypeError, binascii.Error, RuntimeError) as e:
            raise DataError(f"malformed sentencepiece tokenizer state: {e!r}") from None
        if tok.vocab_size != state.get("vocab_size"):
            raise DataError(
                f"malformed sentencepiece tokenizer state: model has {tok.vocab_size} pieces, "
                f"state says {state.get('vocab_size')}"
            )
        return tok


TOKENIZERS = {"char": CharTokenizer, "sentencepiece": SentencePieceTokenizer}


def build_tokenizer(kind: str, text: str, **options):
    """build_tokenizer("char", text) or build_tokenizer("sentencepiece", text, vocab_size=500)."""
    if kind not in TOKENIZERS:
        raise LabError(f"unknown tokenizer kind {kind!r}; valid kinds: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[kind].from_text(text, **options)


def tokenizer_from_state(state: dict):
    """Inverse of tokenizer.to_state(), e.g. after json.loads of a checkpoint."""
    if not isinstance(state, dict) or state.get("kind") not in TOKENIZERS:
        kind = state.get("kind") if isinstance(state, dict) else type(state).__name__
        raise DataError(f"unknown tokenizer kind {kind!r} in saved state; valid kinds: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[state["kind"]].from_state(state)


def _safe_cut(text: str, start: int, end: int, chunk_chars: int) -> int:
    """Where a chunk of a subword text that should end near `end` may end without changing a token:
    just after a newline (a piece of its own) or just before a space (no piece spans whitespace;
    the space starts the next word's piece), looking back, then ahead. Only a run of 16 chunks
    without either (no real text) is cut where it stands."""
    cut = max(text.rfind("\n", start, end) + 1, text.rfind(" ", start + 1, end))
    if cut > start:
        return cut
    limit = min(len(text), end + 16 * chunk_chars)
    return min([i for i in (text.find("\n", end, limit) + 1, text.find(" ", end, limit)) if i > 0], default=limit)


def encode_to_tensor(tokenizer, text: str, chunk_chars: int = 2**20) -> torch.Tensor:
    """tokenizer.encode(text) as a LongTensor (N,), encoded a chunk of ~chunk_chars at a time.

    Memory: encoding 20 MB whole costs a Python list of millions of ints and, for
    sentencepiece, ~1 GB inside the library (BENCHMARKS.md). Chunks are kept as
    int32 until one int64 tensor is filled, so the peak is about 1.5x the ids.
    A character text may be cut anywhere; a subword text only where no token
    crosses the cut (_safe_cut), so the ids equal those of encoding it whole.
    """
    chunks, start = [], 0
    while start < len(text):
        end = start + chunk_chars
        if tokenizer.kind != "char" and end < len(text):
            end = _safe_cut(text, start, end, chunk_chars)
        chunks.append(torch.tensor(tokenizer.encode(text[start:end]), dtype=torch.int32))
        start = end
    ids = torch.empty(sum(len(c) for c in chunks), dtype=torch.long)  # (N,)
    offset = 0
    for chunk in chunks:
        ids[offset : offset + len(chunk)] = chunk
        offset += len(chunk)
    return ids


# -----------------------------------------------------------------------------
# losses comparable across tokenizers: a subword model sees fewer, harder
# tokens, so only the loss per character of text compares with a char model


def chars_per_token(tokenizer, text: str) -> float:
    n_tokens = len(encode_to_tensor(tokenizer, text))
    if n_tokens == 0:
        raise DataError("cannot measure characters per token on an empty text")
    return len(text) / n_tokens


# -----------------------------------------------------------------------------
# splits and batches
#
# random_windows picks B random windows of T + 1 tokens; y is x shifted by one:
#
#     data   a b c d e f g h i j k l m n o p q r s t u v w x
#     x      . . . d e f . . . . . . . . . . . . . . . . . .   (one row of x)
#     y      . . . . e f g . . . . . . . . . . . . . . . . .   (its targets)
#
# ConsecutiveWindows ("batchify") cuts the data into B streams, one per batch
# row, and walks through them T steps at a time. With B = 2 and T = 3:
#
#     stream 0   a b c | d e f | g h i | j k l       (the N % B tail is dropped)
#     stream 1   m n o | p q r | s t u | v w x
#
#     batch 0    x = [[a b c],    y = [[b c d],
#                     [m n o]]         [n o p]]
#     batch 1    x = [[d e f],    y = [[e f g],
#                     [p q r]]         [q r s]]
#
# Row b of batch i + 1 continues exactly where row b of batch i stopped, so the
# hidden state left by batch i is the right initial state for batch i + 1.


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """A text's contiguous split, in characters: the first 1 - val_fraction for training, the rest for
    validation. Split before tokenizing, so that a tokenizer is fitted on training text only."""
    if not 0 < val_fraction < 1:
        raise LabError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


def split_train_val(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous split: the first 1 - val_fraction for training, the rest for validation.

    Contiguous rather than shuffled, so validation text is unseen text, not
    windows that overlap training windows.
    """
    if not 0 < val_fraction < 1:
        raise LabError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n = int(len(ids) * (1 - val_fraction))
    return ids[:n], ids[n:]


def random_windows(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """B random windows of data (N,) -> x, y each (B, T), y[:, t] = x[:, t + 1]."""
    check_long_enough(len(data), block_size)
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(block_size)  # (B, T)
    return data[offsets], data[offsets + 1]


class ConsecutiveWindows:
    """Consecutive (x, y) windows over B parallel streams, for truncated BPTT.

    The caller carries the hidden state from one batch to the next and detaches
    it (h = h.detach()) before each step, so gradients flow through T steps only
    while the state still remembers everything before. Windows are all full
    (B, T); the last partial window of each stream is dropped.
    """

    def __init__(self, data: torch.Tensor, batch_size: int, block_size: int):
        stream_len = len(data) // batch_size
        check_long_enough(
            stream_len, block_size, what=f"each of the {batch_size} batch streams (corpus of {len(data)} tokens)"
        )
        self.block_size = block_size
        self.streams = data[: batch_size * stream_len].reshape(batch_size, stream_len)  # (B, N // B)

    def __len__(self) -> int:
        # the last window needs one extra token for its targets
        return (self.streams.size(1) - 1) // self.block_size

    def __iter__(self):
        T = self.block_size
        for i in range(len(self)):
            s = i * T
            yield self.streams[:, s : s + T], self.streams[:, s + 1 : s + T + 1]  # (B, T), (B, T)


def ngram_samples(
    ids: torch.Tensor,
    *,
    num_samples: int,
    pad_index: int,
    n_min: int = 2,
    n_max: int = 5,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mixed n-gram samples: n ~ uniform{n_min..n_max}, context = the n - 1 tokens before a target.

    Returns contexts (N, K) with K = n_max - 1, lengths (N,) = n - 1 and targets (N,).
    Contexts are LEFT-padded with `pad_index`: the last column is always the
    token right before the target, so a column means the same distance back in
    every sample and a model can read the context right to left and stop at
    `lengths`. Pass a pad index outside the vocabulary (e.g. V, with one extra
    embedding row) so padding never looks like a real token.
    """
    if not 2 <= n_min <= n_max:
        raise LabError(f"need 2 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    K = n_max - 1
    check_long_enough(len(ids), K)
    lengths = torch.randint(n_min - 1, n_max, (num_samples,), generator=generator)  # (N,) context lengths
    # target position t is uniform over the positions that have `length` tokens before them
    u = torch.rand(num_samples, generator=generator, dtype=torch.float64)  # float64: u * N < N even for N ~ 1e7
    t = lengths + (u * (len(ids) - lengths)).long()  # (N,)
    cols = torch.arange(K)  # (K,)
    positions = t[:, None] - K + cols  # (N, K), the K positions before t
    real = cols >= K - lengths[:, None]  # (N, K), False on the padding at the left
    contexts = torch.where(real, ids[positions.clamp(min=0)], torch.full_like(positions, pad_index))
    return contexts, lengths, ids[t]


# -----------------------------------------------------------------------------
# sequential images: each image is read one pixel per time step


class FlattenSequence:
    """Image tensor (C, H, W) -> sequence (H*W, C), pixels in row-major order."""

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        return img.flatten(1).t().contiguous()  # (C, H*W) -> (H*W, C)

    def __repr__(self) -> str:
        return "FlattenSequence()"


def cifar10_transform():
    """PIL image -> (1024, 1) sequence of grayscale pixels in [-1, 1]."""
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Grayscale(1),
            transforms.ToTensor(),  # (1, 32, 32) in [0, 1]
            transforms.Normalize((0.5,), (0.5,)),  # -> [-1, 1]
            FlattenSequence(),  # -> (1024, 1)
        ]
    )


def load_cifar10(root: str | os.PathLike, train: bool, download: bool = False) -> torch.utils.data.Dataset:
    """CIFAR-10 from root/cifar-10-batches-py; items are ((1024, 1) float, int label)."""
    from torchvision.datasets import CIFAR10

    try:
        return CIFAR10(root, train=train, download=download, transform=cifar10_transform())
    except (OSError, RuntimeError) as e:
        if not download:
            raise DataError(f"CIFAR-10 not found in {root}; pass download=True (needs internet, 170 MB)") from e
        raise DataError(
            f"could not download CIFAR-10 into {root}: {e}. "
            "You are probably offline; the digits dataset works without a network."
        ) from e


def load_digits_sequences(
    size: int = 32, train: bool = True, val_fraction: float = 0.2, seed: int = 0
) -> torch.utils.data.TensorDataset:
    """scikit-learn's 1,797 handwritten digits (shipped with it, no download) as pixel sequences.

    8x8 images with values 0..16 are scaled to [0, 1], bilinearly resized to
    size x size (32 gives 1024 steps, like CIFAR-10), normalised to [-1, 1] like
    cifar10_transform and flattened to (size*size, 1). The split is stratified
    by label and seeded, so train and test are the same on every call.
    Returns TensorDataset(x (N, L, 1) float32, y (N,) int64).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16  # (N, 1, 8, 8) in [0, 1]
    if size != 8:
        # bilinear weights are a convex combination, so values stay in [0, 1]
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)  # (N, 1, size, size)
    x = (x - 0.5) / 0.5  # [-1, 1]
    x = x.flatten(2).transpose(1, 2).contiguous()  # (N, L, 1)
    y = torch.tensor(digits.target, dtype=torch.long)  # (N,)
    train_idx, test_idx = train_test_split(
        torch.arange(len(y)).numpy(), test_size=val_fraction, random_state=seed, stratify=digits.target
    )
    idx = torch.from_numpy(train_idx if train else test_idx)
    return torch.utils.data.TensorDataset(x[idx], y[idx])


@dataclass(frozen=True)
class SequenceDatasetInfo:
    title: str  # for the UI
    num_classes: int
    needs_download: bool


SEQUENCE_DATASETS = {
    "digits": SequenceDatasetInfo("handwritten digits (scikit-learn, 8x8 upsampled, offline)", 10, False),
    "cifar10": SequenceDatasetInfo("CIFAR-10 in grayscale, 1024 pixels per image (170 MB download)", 10, True),
}


def load_sequence_dataset(
    name: str, train: bool, root: str | os.PathLike | None = None, download: bool = False, size: int = 32
) -> torch.utils.data.Dataset:
    """Load a SEQUENCE_DATASETS entry. `size` is for digits, `root` and `download` for CIFAR-10
    (root defaults to <cache dir>/cifar10)."""
    if name not in SEQUENCE_DATASETS:
        raise LabError(f"unknown sequence dataset {name!r}; valid names: {', '.join(SEQUENCE_DATASETS)}")
    if name == "digits":
        return load_digits_sequences(size=size, train=train)
    return load_cifar10(root if root is not None else default_cache_dir() / "cifar10", train, download)
