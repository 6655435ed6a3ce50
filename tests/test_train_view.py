"""ui.train_view's chart pieces: the race chart's axis and the reference lines it draws."""
import math

from ui.train_view import char_anchors, race_figure


def test_nanogpt_anchors_only_over_a_shakespeare_corpus():
    bundled = char_anchors({("char", 76, "bundled")})
    assert [label for _, label in bundled][1:] == ["nanoGPT char, CPU 1.88", "nanoGPT char, GPU 1.47"]
    assert bundled[0][0] == math.log(76)
    uploaded = char_anchors({("char", 50, "upload:notes.txt")})
    assert [y for y, _ in uploaded] == [math.log(50)]  # the uniform guess still holds for any text
    assert char_anchors({("sentencepiece", 1000, "bundled")}) == []
    assert char_anchors({("char", 76, "bundled"), ("char", 50, "upload:notes.txt")}) == []


def test_an_empty_race_chart_starts_at_zero():
    assert tuple(race_figure([], "elapsed", x_span=60).layout.xaxis.range) == (0, 60)
