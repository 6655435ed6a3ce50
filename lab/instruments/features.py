"""Features of a text, token by token: the things a unit of a character model might track.

Glossary: N characters, T tokens, F features.

    feature_values(["[", "E", "x", "i", "t", ".", "]"], "in_brackets")   # (T,) 1 1 1 1 1 1 0
    feature_matrix(token_texts, ["line_position", "is_vowel"])          # (T, F)

Every feature (registry `FEATURES`) is defined per character, as its value
*after reading* that character, which is what a model's state at that step can
know. Each is of one of two kinds: "character" features are a class of the
character just read (is_vowel, is_space, is_upper, is_newline); "context"
features need the text before it (in_brackets, line_position, in_heading, ...),
so a unit that tracks one must carry a memory (Karpathy, Johnson & Fei-Fei
2015, "Visualizing and Understanding Recurrent Networks", found such units in
character LSTMs: quotes, line length, brackets).

A token takes the value of one of its characters: character classes use the
token's first character, context features its last, word_start any of them.
For a character model all are the character itself; for a subword "▁the" the
first character is the space, so is_space marks word starts.
"""

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lab.errors import LabError


def _inside(open_char, close_char):
    """1 after reading `open_char` until `close_char` is read (a toggle when they are equal)."""

    def per_char(text):
        inside, values = False, np.zeros(len(text))
        for n, ch in enumerate(text):
            if ch == open_char and not (inside and ch == close_char):
                inside = True
            elif ch == close_char:
                inside = False
            values[n] = inside
        return values

    return per_char


def _line_position(text):
    """Characters read since the last newline (0 right after reading "\\n")."""
    values, position = np.zeros(len(text)), 0
    for n, ch in enumerate(text):
        position = 0 if ch == "\n" else position + 1
        values[n] = position
    return values


def _word_position(text):
    """Letters read of the current word (an apostrophe inside a word counts: "damn'd"); 0 elsewhere."""
    values, position = np.zeros(len(text)), 0
    for n, ch in enumerate(text):
        position = position + 1 if ch.isalpha() or (ch == "'" and position) else 0
        values[n] = position
    return values


# A speaker heading is a short line after a blank line (or at the start of the text), one to three
# capitalised words and a colon: "Ham:", "LADY MACBETH:", "First Witch:" (the bundled plays
# abbreviate in some plays and not in others, lab/corpus/README.md). Texts that end headings with a
# full stop, as most printed editions do ("Ham."), count too.
SPEAKER_HEADING = re.compile(r"[A-Z][A-Za-z'-]*(?: [A-Z][A-Za-z'-]*){0,2}[:.]")


def _heading_lines(text):
    """(start, end) character ranges of the speaker headings in `text`, their newline excluded."""
    ranges, start, after_blank = [], 0, True
    for line in text.split("\n"):
        if after_blank and SPEAKER_HEADING.fullmatch(line):
            ranges.append((start, start + len(line)))
        after_blank = not line.strip()
        start += len(line) + 1
    return ranges


def _in_heading(text):
    """1 on the characters of a speaker heading ("Ham:"), 0 on its newline and elsewhere."""
    values = np.zeros(len(text))
    for start, end in _heading_lines(text):
        values[start:end] = 1
    return values


def _after_heading(text):
    """1 from a heading's newline to the end of the speech's first line: after reading that
    newline the model stands at the start of the speech; 0 again once the line's newline is read."""
    values = np.zeros(len(text))
    for _, end in _heading_lines(text):
        line_end = text.find("\n", end + 1)
        values[end : len(text) if line_end < 0 else line_end] = 1
    return values


def _char_class(test):
    return lambda text: np.array([float(test(ch)) for ch in text])


@dataclass(frozen=True)
class Feature:
    description: str
    per_char: Callable  # text (N chars) -> (N,) float array, the value after reading each character
    anchor: str  # which character of a token gives the token's value: "first", "last", or "any" (the largest)
    kind: str  # "context": the text so far decides it, a unit needs memory; "character": the character just read


FEATURES = {
    # The bundled Globe-edition plays put 1,547 stage directions in brackets
    # ("[Enter Ghost.]") and have only 177 double quotes: bracket tracking is
    # this corpus's analogue of Karpathy's quote-detection cell.
    "in_brackets": Feature("inside a [stage direction]", _inside("[", "]"), "last", "context"),
    "in_quotes": Feature('inside "double quotes" (rare in Shakespeare)', _inside('"', '"'), "last", "context"),
    "line_position": Feature("characters since the last newline", _line_position, "last", "context"),
    "in_heading": Feature('in a speaker heading ("Ham:", "LADY MACBETH:")', _in_heading, "last", "context"),
    "after_heading": Feature(
        "on the first line of a speech, just after its speaker heading", _after_heading, "last", "context"
    ),
    "word_position": Feature("letters read of the current word", _word_position, "last", "context"),
    "word_start": Feature(
        "the first letter of a word", lambda text: (_word_position(text) == 1).astype(float), "any", "context"
    ),
    "is_vowel": Feature("a vowel (aeiou, either case)", _char_class(lambda c: c in "aeiouAEIOU"), "first", "character"),
    "is_space": Feature("a space (for subwords: a word start)", _char_class(lambda c: c == " "), "first", "character"),
    "is_upper": Feature("an upper-case letter", _char_class(str.isupper), "first", "character"),
    "is_newline": Feature("a newline", _char_class(lambda c: c == "\n"), "first", "character"),
}
FEATURE_KINDS = {"context": "remembers the text so far", "character": "reacts to the character just read"}


def feature_values(token_texts, feature):
    """Per-token values (T,) of a FEATURES entry; token_texts: (T,) each token's own text
    (a GateTrace's `token_texts`), whose concatenation is the text."""
    if feature not in FEATURES:
        raise LabError(f"feature: unknown feature {feature!r}; valid features are {sorted(FEATURES)}")
    f = FEATURES[feature]
    per_char = f.per_char("".join(token_texts))  # (N,)
    lengths = np.array([len(t) for t in token_texts], dtype=int)  # (T,) characters per token
    ends = np.cumsum(lengths)  # (T,) one past each token's last character
    starts = ends - lengths
    if f.anchor == "any":
        return np.array([per_char[s:e].max(initial=0.0) for s, e in zip(starts, ends)])
    return per_char[starts if f.anchor == "first" else ends - 1]


def feature_matrix(token_texts, features=None):
    """Every feature's per-token values as the columns of a (T, F) float64 array, in the order of
    `features` (None: all of FEATURES)."""
    features = list(FEATURES) if features is None else list(features)
    return np.stack([feature_values(token_texts, f) for f in features], 1).astype(np.float64)
