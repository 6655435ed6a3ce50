"""Features of a text on hand-made strings: the value after reading each character, and per token."""

import re

import numpy as np
import pytest

from lab.data import SentencePieceTokenizer, load_bundled_corpus
from lab.instruments.features import FEATURES, feature_matrix, feature_values

PASSAGE = "Hor.\nLook!\n\n[Enter Ghost.]\n\nLADY MACBETH.\nI'll go.\n"


def per_char(feature, text=PASSAGE):
    """A feature's values on `text`, one digit per character (the last digit of the value)."""
    return "".join(str(int(v))[-1] for v in FEATURES[feature].per_char(text))


@pytest.mark.parametrize(
    "feature, expected",
    [
        # one digit per character of PASSAGE:  Hor.|Look!||[Enter Ghost.]||LADY MACBETH.|I'll go.|   (| a newline)
        ("in_brackets", "000000000000111111111111100000000000000000000000000"),
        ("line_position", "123401234500123456789012340012345678901230123456780"),
        ("in_heading", "111100000000000000000000000011111111111110000000000"),
        ("after_heading", "000011111100000000000000000000000000000001111111110"),
        ("word_position", "123001234000012345012345000012340123456700123401200"),
        ("word_start", "100001000000010000010000000010000100000000100001000"),
        ("is_vowel", "010000110000010010000100000001000010010000100000100"),
        ("is_space", "000000000000000000100000000000001000000000000010000"),
        ("is_upper", "100001000000010000010000000011110111111100100000000"),
        ("is_newline", "000010000011000000000000001100000000000001000000001"),
    ],
)
def test_each_feature_on_a_hand_made_passage(feature, expected):
    assert len(expected) == len(PASSAGE)
    assert per_char(feature) == expected


def test_quotes_toggle_and_brackets_do_not_nest():
    assert per_char("in_quotes", 'He said "go" now') == "0000000011100000"
    assert per_char("in_brackets", "a[b[c]d]e") == "011110000"  # the first "]" closes


def test_a_heading_needs_a_blank_line_before_it_and_a_full_stop():
    text = "Ham.\nGo on.\nSo.\n\nHam!\n\nFirst Witch.\nAll hail!\n"
    heading_lines = [line for line, value in zip(text.split("\n"), _line_values(text)) if value]
    assert heading_lines == ["Ham.", "First Witch."]  # "So." follows a line, "Ham!" has no full stop


def _line_values(text):
    """in_heading per line: the value on each line's first character (0 for an empty line)."""
    values, start = [], 0
    for line in text.split("\n"):
        values.append(FEATURES["in_heading"].per_char(text)[start] if line else 0)
        start += len(line) + 1
    return values


def test_token_values_and_the_feature_matrix():
    tokens = ["[", "E", "x", "i", "t", ".", "]", "\n", "L"]
    np.testing.assert_array_equal(feature_values(tokens, "in_brackets"), [1, 1, 1, 1, 1, 1, 0, 0, 0])
    matrix = feature_matrix(tokens, ["line_position", "is_vowel"])
    assert matrix.shape == (9, 2) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix[:, 0], [1, 2, 3, 4, 5, 6, 7, 0, 1])
    np.testing.assert_array_equal(matrix[:, 1], [0, 1, 0, 1, 0, 0, 0, 0, 0])
    assert feature_matrix(tokens).shape == (9, len(FEATURES))
    with pytest.raises(ValueError, match="in_brackets"):
        feature_values(tokens, "in_parentheses")


def test_subword_tokens_take_their_first_last_or_any_character():
    sp = SentencePieceTokenizer.train(load_bundled_corpus()[20000:26000], vocab_size=150)
    text = "Laer.\nMy father's spirit"
    token_texts = [sp.decode([i]) for i in sp.encode(text)]
    assert "".join(token_texts) == text and len(token_texts) < len(text)
    np.testing.assert_array_equal(feature_values(token_texts, "is_space"), [t.startswith(" ") for t in token_texts])
    ends = np.cumsum([len(t) for t in token_texts])
    np.testing.assert_array_equal(feature_values(token_texts, "line_position"), ends - len("Laer.\n") * (ends >= 6))
    word_starts = [m.start() for m in re.finditer(r"(?<![A-Za-z])(?<![A-Za-z]')[A-Za-z]", text)]  # not "father's" s
    starts_a_word = [any(e - len(t) <= i < e for i in word_starts) for t, e in zip(token_texts, ends)]
    np.testing.assert_array_equal(feature_values(token_texts, "word_start"), starts_a_word)
