"""Counts and lists in the words a student reads: "1 epoch", "2 epochs", "1,437 images"; "a, b and c".
The sentences the pages and the command line make about a number of things say it through `count`, so
that a setting at its smallest ("1 epochs") reads right too; a list of names is said through `listing`."""


def count(n, noun, plural=None):
    """`n` things: "1 epoch", "0 epochs", "2,048 tokens"; `plural` where adding "s" is wrong
    (count(1, "batch", "batches")). Whole numbers get thousands separators."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def a_or_an(name):
    """ "a GRU", "an LSTM", "an RNN", "a vanilla RNN", "an update": the article as the name is said aloud (a
    capital's letter name starts with a vowel sound for A E F H I L M N O R S X)."""
    first = name[:1]
    vowel = first in "AEFHILMNORSX" if first.isupper() and name[1:2].isupper() else first.lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {name}"


def listing(names):
    """["a"] -> "a", ["a", "b"] -> "a and b", ["a", "b", "c"] -> "a, b and c"; "" for none."""
    names = list(names)
    if not names:
        return ""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def layer_name(index):
    """A recurrent layer as students read it, numbered from 1 on every page: layer_name(0) -> "layer 1"
    (lab's lists and the widgets' values stay numbered from 0)."""
    return f"layer {index + 1}"
