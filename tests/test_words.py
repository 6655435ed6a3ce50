"""Counts read right at every setting: "1 epoch", not "1 epochs" (lab.words.count), and no sentence of the
app or the lab puts a count straight before a plural noun, where a setting at 1 would read wrong."""

import ast
import re
from pathlib import Path

import pytest

from lab.words import a_or_an, count

ROOT = Path(__file__).resolve().parent.parent
# the nouns the pages and the lab count, each of which a setting can bring down to one ("parameters" is not
# among them: no model has one); "characters per token" and "tokens/s" are rates, not counts
PLURAL_NOUN = re.compile(
    r"^\s(?:epochs|steps|tokens|runs|random seeds|seeds|characters|images|test images|sequences|files|units|layers|"
    r"versions|lines|words|minutes|hours|cards|arms|classes|pixels|points)\b(?! per\b|/)"
)


@pytest.mark.parametrize(
    "n, noun, plural, said",
    [
        (1, "epoch", None, "1 epoch"),
        (0, "epoch", None, "0 epochs"),
        (2, "epoch", None, "2 epochs"),
        (1437, "training sequence", None, "1,437 training sequences"),
        (1, "batch", "batches", "1 batch"),
        (3, "batch", "batches", "3 batches"),
    ],
)
def test_a_count_says_one_thing_or_several(n, noun, plural, said):
    assert count(n, noun, plural) == said


def sources():
    """The app's and the lab's Python files."""
    files = [
        ROOT / "app.py",
        *(ROOT / "pages").glob("*.py"),
        *(ROOT / "ui").rglob("*.py"),
        *(ROOT / "lab").rglob("*.py"),
    ]
    return sorted(files)


def counts_before_a_plural(path):
    """f-string parts `{n} steps`: a value formatted as it is (not a decimal, whose "1.00 steps" reads
    right) straight before a plural noun."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, text in zip(node.values, node.values[1:]):
            if not (isinstance(value, ast.FormattedValue) and isinstance(text, ast.Constant)):
                continue
            spec = ast.unparse(value.format_spec) if value.format_spec else ""
            if "." not in spec and "%" not in spec and PLURAL_NOUN.match(str(text.value)):
                yield f"{path.relative_to(ROOT)}:{node.lineno}: {{{ast.unparse(value.value)}}}{text.value[:24]!r}"


def test_no_sentence_puts_a_bare_count_before_a_plural_noun():
    found = [line for path in sources() for line in counts_before_a_plural(path)]
    assert found == [], "say it with lab.words.count: " + "; ".join(found)


def test_the_article_is_the_one_the_name_is_said_with():
    said = {name: a_or_an(name) for name in ("LSTM", "RNN", "HMM", "GRU", "vanilla RNN", "update", "minGRU", "scan")}
    assert said == {
        "LSTM": "an LSTM",
        "RNN": "an RNN",
        "HMM": "an HMM",
        "GRU": "a GRU",
        "vanilla RNN": "a vanilla RNN",
        "update": "an update",
        "minGRU": "a minGRU",
        "scan": "a scan",
    }
