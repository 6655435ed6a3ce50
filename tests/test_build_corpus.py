"""scripts/build_corpus.py: the normalisation applied to every play of the bundled corpus."""
from lab.data import BUNDLED_CORPUS
from scripts import build_corpus


def test_speaker_headings_get_one_format():
    play = ("A MIDSUMMER NIGHT'S DREAM\n\nby William Shakespeare\n\n"
            "THESEUS  \nNow, fair Hippolyta, our nuptial hour\n\n"
            "FIRST FAIRY\nOver hill, over dale,\n\n"
            "PROSPERO.\nThere, sir, stop:\nFROM THE TEXT IN CAPITALS\n\nACT IV\n\nSCENE I. The Wood.\n")
    lines = build_corpus.normalise(play).split("\n")
    assert "THESEUS." in lines and "FIRST FAIRY." in lines  # bare headings gain the full stop
    assert "PROSPERO." in lines and "PROSPERO.." not in lines  # headings that had one keep one
    assert "A MIDSUMMER NIGHT'S DREAM" in lines and "ACT IV" in lines  # titles: a blank line follows
    assert "FROM THE TEXT IN CAPITALS" in lines  # a line inside a speech is not a heading


def test_bundled_corpus_has_no_bare_speaker_headings():
    lines = BUNDLED_CORPUS.read_text(encoding="utf-8").split("\n")
    assert [lines[i] for i in build_corpus.bare_headings(lines)] == []
    assert lines.count("THESEUS.") > 40  # A Midsummer Night's Dream is there, in the common format
