"""Tokenizers: one token per character, or SentencePiece subwords trained in memory; each saves
its whole state as JSON (to_state), which a checkpoint carries and tokenizer_from_state rebuilds.

A state read back is checked whole (its `State` model: known fields only, each typed and bounded),
and every piece a tokenizer can put into a text is printable: no control character but a line break
and a tab, no lone surrogate (the CLI could not print it). Tokenizers built from a text refuse such a
text the same way, so a saved tokenizer always loads."""

import base64
import binascii
import io
import re
from typing import Annotated, Literal

import sentencepiece as spm
import torch
from pydantic import BaseModel, Field, ValidationError

from lab.data.text import DataError
from lab.errors import LabError
from lab.schema import STRICT, TOKEN_WHITESPACE, describe_unprintable, printable_text, refusal, unprintable

MAX_VOCAB = 2**20  # tokens a tokenizer may have (every Unicode character is about 1.1 million)


def _show_chars(chars: list[str], limit: int = 20) -> str:
    shown = ", ".join(repr(c) for c in chars[:limit])
    return shown + (f" and {len(chars) - limit} more" if len(chars) > limit else "")


def _check_printable(text: str, what: str) -> None:
    """DataError naming `what` when `text` holds characters no tokenizer of the lab may produce."""
    found = unprintable(text, TOKEN_WHITESPACE)
    if found:
        raise DataError(f"{what}: {describe_unprintable(found)}; remove them and try again")


def _state(model, state: dict) -> dict:
    """A tokenizer's saved state validated against its `State` model, or DataError naming the field."""
    try:
        model.model_validate(state)
    except ValidationError as error:
        raise refusal(error, DataError, "tokenizer ") from None
    return state


class CharTokenizer:
    """One token per character; the vocabulary is the sorted set of characters."""

    kind = "char"
    unit = "character"  # what one token is, in a student's words: count(n, unit) says n of them

    class State(BaseModel):
        model_config = STRICT
        kind: Literal["char"]
        chars: Annotated[str, Field(min_length=1, max_length=MAX_VOCAB), printable_text(TOKEN_WHITESPACE)]

    def __init__(self, chars: str):
        if not chars or len(set(chars)) != len(chars):
            raise DataError("a char tokenizer needs a non-empty string of distinct characters")
        _check_printable(chars, "text")
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
        return cls(_state(cls.State, state)["chars"])


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
    unit = "subword"  # a common piece of a word, or a character the pieces do not cover
    MODEL_TYPES = ("bpe", "unigram")
    MIN_VOCAB = 32  # below this, subwords are barely more than characters
    MAX_LINE_CHARS = 2048  # longer lines are cut: sentencepiece skips very long sentences
    UNKNOWN = " ⁇ "  # what sentencepiece decodes <unk> to

    class State(BaseModel):
        model_config = STRICT
        kind: Literal["sentencepiece"]
        model_b64: Annotated[str, Field(min_length=1, max_length=2**26)]  # the model's bytes, base64
        model_type: Literal["bpe", "unigram"]  # MODEL_TYPES
        vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)]

    def __init__(self, model_proto: bytes, model_type: str):
        self.model_proto = model_proto
        self.model_type = model_type
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if self.sp.get_piece_size() > MAX_VOCAB:
            raise DataError(f"tokenizer vocab_size: {self.sp.get_piece_size()} pieces, more than {MAX_VOCAB:,}")
        if any(self.sp.is_byte(i) for i in range(self.sp.get_piece_size())):
            # the lab trains without byte fallback; a byte piece decodes to any byte, escape codes included
            raise DataError("tokenizer model_b64: the model has byte pieces, which the lab's tokenizers never have")
        # the text each id decodes to, whitespace as it is: decode joins these, so only checked text comes out
        # (what sentencepiece's decode gives for the models the lab trains, whatever a crafted model's
        # denormaliser would have made of them; tests/test_checkpoints.py compares the two)
        pieces = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        _check_printable("".join(pieces), "tokenizer model_b64")  # the pages show pieces as they are
        self.texts = [
            self.UNKNOWN if self.sp.is_unknown(i) else "" if self.sp.is_control(i) else piece.replace("▁", " ")
            for i, piece in enumerate(pieces)
        ]
        # every character that appears in some piece can be represented
        self.covered = set("".join(t for i, t in enumerate(self.texts) if not self.sp.is_unknown(i)))

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
        _check_printable(text, "text")
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
        return "".join(self.texts[int(i)] for i in ids)

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
        _state(cls.State, state)
        try:
            proto = base64.b64decode(state["model_b64"], validate=True)
            tok = cls(proto, state["model_type"])  # loading the bytes is their check
        except (binascii.Error, RuntimeError, UnicodeDecodeError) as e:
            raise DataError(f"tokenizer model_b64: not a sentencepiece model ({' '.join(str(e).split())})") from None
        if tok.vocab_size != state["vocab_size"]:
            raise DataError(
                f"tokenizer vocab_size: the model has {tok.vocab_size} pieces, the state says {state['vocab_size']}"
            )
        return tok


TOKENIZERS = {"char": CharTokenizer, "sentencepiece": SentencePieceTokenizer}


def build_tokenizer(kind: str, text: str, **options):
    """build_tokenizer("char", text) or build_tokenizer("sentencepiece", text, vocab_size=500)."""
    if not isinstance(kind, str) or kind not in TOKENIZERS:
        raise LabError(f"unknown tokenizer kind {kind!r}; valid kinds: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[kind].from_text(text, **options)


def tokenizer_from_state(state: dict):
    """Inverse of tokenizer.to_state(), e.g. after json.loads of a checkpoint."""
    # a list or a dict from JSON is not even hashable: only a string can name a kind
    if not isinstance(state, dict) or not isinstance(state.get("kind"), str) or state["kind"] not in TOKENIZERS:
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
