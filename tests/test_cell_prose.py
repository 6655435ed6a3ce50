"""Every count and list of cells in prose agrees with the record (lab.nets.families.FAMILIES): the README, the
sentences of the pages (app.py, pages/, ui/) and the docstrings of lab/nets, which a student reads through "Show
code". Home had said "you train small RNNs, GRUs, LSTMs and a selective scan" since before the minGRU and the
minLSTM joined, and a lesson's background "the RNN, GRU and LSTM equations this lab implements": no test read them.

The rules, over each sentence (a README paragraph or table cell, a string in the code, split at its full stops):

* a sentence (or a clause between semicolons) that names three or more kinds of cell is a list of cells. It
  names every kind of the record (the two GRU conventions are one kind: "GRU"), or it says which part of the
  record it lists and names exactly that part's kinds: PyTorch's own layers (the fused forms), the gates that read
  only the input, a race's runners.
  A list chosen for one lesson is named in CHOSEN, and checked against the models that lesson shows;
* "N cells" or "N families" counts the record's families (a race's runners in a sentence about a race);
* lab/nets/cells.py's table of cells names every family's id, in the record's order.
"""

import ast
import re
from pathlib import Path

import pytest

from lab.nets.families import FAMILIES, RACES, racers

ROOT = Path(__file__).resolve().parent.parent
# how prose names each kind of cell (a kind: lab.nets.families.kinds, the two GRU conventions in one)
KIND_NAMES = {
    "min_gru": r"(?<![\w-])minGRUs?\b",
    "min_lstm": r"(?<![\w-])minLSTMs?\b",
    "rnn": r"(?<![\w-])(?:vanilla )?RNNs?\b(?! Lab)",  # "RNN Lab" is the app
    "gru": r"(?<![\w-])GRUs?\b",  # not minGRU
    "lstm": r"(?<![\w-])LSTMs?\b",  # not minLSTM, nor a model's name (Leviathan-LSTM)
    "scan": r"\bselective scans?\b",
}
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
COUNT = re.compile(r"\b(\w+) (?:cells|cell families|families|recurrent cells)\b", re.IGNORECASE)


def kind(cell):
    return FAMILIES[cell].kind or cell


def kinds_of(cells):
    return {kind(cell) for cell in cells}


EVERY_KIND = kinds_of(FAMILIES)
# the parts of the record a sentence may list, each with the words that say which part it lists
PARTS = {
    "PyTorch's own layers": (r"PyTorch's own|torch\.nn|fused", kinds_of(c for c, f in FAMILIES.items() if f.fused)),
    "gates that read only the input": (
        r"read only the input",
        kinds_of(c for c, f in FAMILIES.items() if f.gates and not f.gates_read_state),
    ),
    **{f"the {race} race's runners": (r"\brace\b|\brunners\b", kinds_of(racers(race))) for race in RACES},
}


def _chosen_for_the_forgetting_lesson():
    from ui.lessons.memory import FORGET_MODELS

    return kinds_of(c for c, f in FAMILIES.items() if f.bundled in FORGET_MODELS)


# lists that name the models one lesson shows, not the record: the sentence's start -> the kinds it must name
CHOSEN = {"How fast does that influence fade with distance": _chosen_for_the_forgetting_lesson}


def _sentences(text):
    return re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\"“])|;\s+", re.sub(r"\s+", " ", text))


def _strings(path):
    """The strings of a Python file as prose: each literal (implicit concatenation joined), f-strings with their
    fields as {}."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def prose():
    """(where, sentence) of every sentence in the README, the pages' code and lab/nets."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    readme = re.sub(r"```.*?```", "", readme, flags=re.S)  # commands, not prose
    for paragraph in re.split(r"\n\s*\n", readme):
        for part in paragraph.split("|") if paragraph.startswith("|") else [paragraph]:
            for sentence in _sentences(part):
                yield "README.md", sentence
    files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]
    files += sorted((ROOT / "lab" / "nets").glob("*.py"))
    for path in files:
        for text in _strings(path):
            for sentence in _sentences(text):
                yield str(path.relative_to(ROOT)), sentence


PROSE = list(prose())


def named_kinds(sentence):
    return {k for k, pattern in KIND_NAMES.items() if re.search(pattern, sentence)}


def list_problem(sentence):
    """Why a sentence's list of cells disagrees with the record, or None."""
    named = named_kinds(sentence)
    if len(named) < 3 or named == EVERY_KIND:
        return None
    for start, chosen in CHOSEN.items():
        if sentence.startswith(start) or start in sentence:
            return None if named == chosen() else f"names {sorted(named)}; the lesson shows {sorted(chosen())}"
    for part, (words, kinds) in PARTS.items():
        if re.search(words, sentence) and named == kinds:
            return None
    return f"names {sorted(named)}, not every kind of cell {sorted(EVERY_KIND)} nor a part of the record it names"


def test_the_rules_catch_a_stale_list_and_a_stale_count():
    """The rules themselves, on the sentences that had gone stale, and on their fixed forms."""
    assert list_problem("In this lab you train small RNNs, GRUs, LSTMs and a selective scan on Shakespeare.")
    assert list_problem("the RNN, GRU and LSTM equations this lab implements")
    assert not list_problem("In this lab you train small RNNs, GRUs, LSTMs, a selective scan, minGRUs and minLSTMs.")
    assert not list_problem("Fused: PyTorch's own RNN, GRU and LSTM layers.")
    assert count_problem("One file for the eight cells") and not count_problem(
        f"One file for the {NUMBER_WORDS[len(FAMILIES)]} cells"
    )


def count_problem(sentence):
    for match in COUNT.finditer(sentence):
        word = match.group(1).lower()
        number = int(word) if word.isdigit() else NUMBER_WORDS.index(word) if word in NUMBER_WORDS else None
        if number is None:
            continue
        allowed = {len(FAMILIES)}
        if re.search(r"\brace\b|\brunners\b|toy tasks?", sentence):
            allowed |= {len(racers(race)) for race in RACES}
        if number not in allowed:
            return f"counts {number} where the record has {sorted(allowed)}"
    return None


@pytest.mark.parametrize("rule", [list_problem, count_problem], ids=["lists", "counts"])
def test_every_list_and_count_of_cells_in_prose_agrees_with_the_record(rule):
    problems = [f"{where}: {rule(sentence)}: “{sentence[:160]}”" for where, sentence in PROSE if rule(sentence)]
    assert not problems, "\n".join(problems)


def test_the_prose_lists_whole_were_found():
    """The rules read what they should: the README's two full lists of cells, and Home's."""
    full = [where for where, sentence in PROSE if named_kinds(sentence) == EVERY_KIND]
    assert full.count("README.md") >= 2 and "app.py" in full


def test_the_reference_cells_table_names_every_family_in_the_records_order():
    doc = ast.get_docstring(ast.parse((ROOT / "lab" / "nets" / "cells.py").read_text(encoding="utf-8")))
    table = doc[doc.index("Cells (") :].split("\n\n")[0].splitlines()[1:]
    assert [line.split()[0] for line in table] == list(FAMILIES)
