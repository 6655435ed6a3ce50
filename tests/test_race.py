"""lab.instruments.race: the verdict read from synthetic curves (a leader, ties, too few points, curves that do not
overlap yet), runs sized to equal parameters, and the bundled models' long race read from their files."""

import dataclasses

import pytest

from lab.instruments.race import (
    LEVEL_WITHIN,
    long_race,
    long_race_verdict,
    plain_name,
    race_verdict,
    short_count,
    verdict_sentence,
    width_for_parameters,
)
from lab.nets.cost import parameter_count
from lab.nets.families import text_racers
from lab.nets.models import LMConfig
from lab.training.checkpoints import list_checkpoints


def test_the_leader_is_read_where_every_curve_has_data_and_the_sentence_says_by_how_much():
    curves = {
        "GRU": ([10, 20, 30, 40, 60], [3.0, 2.6, 2.4, 2.3, 2.1]),
        "LSTM": ([10, 30, 50], [3.1, 2.6, 2.4]),  # ends at 50 s: the race is read there
        "RNN": ([0, 25, 55], [4.0, 2.8, 2.6]),
    }
    verdict = race_verdict(curves)
    assert verdict.at == 50
    standings = dict(verdict.standings)
    assert standings["GRU"] == pytest.approx(2.2)  # halfway between 2.3 at 40 s and 2.1 at 60 s
    assert standings["LSTM"] == pytest.approx(2.4) and standings["RNN"] == pytest.approx(2.8 - 0.2 * 25 / 30)
    assert [name for name, _ in verdict.standings] == ["GRU", "LSTM", "RNN"]
    sentence = verdict_sentence(verdict, "50 s")
    assert sentence.startswith("After 50 s, the GRU leads by 0.20 nats/char over the LSTM")
    assert "GRU 2.20, LSTM 2.40, RNN 2.63" in sentence


def test_runs_within_the_noise_are_level_and_all_level_is_too_close_to_call():
    level = race_verdict({"GRU": ([0, 60], [3.0, 2.10]), "LSTM": ([0, 60], [3.0, 2.11]), "RNN": ([0, 60], [3.0, 2.4])})
    assert level.level == ["GRU", "LSTM"] and level.trailing[0][0] == "RNN"
    assert verdict_sentence(level, "60 s").startswith(
        f"After 60 s, the GRU and the LSTM are level (within {LEVEL_WITHIN} nats/char), 0.30 ahead of the RNN"
    )
    tie = race_verdict({"GRU": ([0, 60], [3.0, 2.1]), "LSTM": ([0, 60], [3.0, 2.1])})
    assert "all 2 runs are level" in verdict_sentence(tie, "60 s") and "too close to call" in verdict_sentence(
        tie, "60 s"
    )


def test_too_few_points_or_curves_that_do_not_overlap_yet_give_no_verdict():
    assert race_verdict({}) is None
    assert race_verdict({"GRU": ([0, 10], [3, 2])}) is None  # one runner is no race
    assert race_verdict({"GRU": ([0, 10], [3, 2]), "LSTM": ([5], [2.5])}) is None  # every run needs two points
    assert race_verdict({"GRU": ([0, 10], [3, 2]), "LSTM": ([20, 30], [2.5, 2.4])}) is None  # no common time
    assert race_verdict({"GRU": ([0, 10], [3, 2]), "LSTM": ([0, 10], [float("nan"), 2.4])}) is None  # NaN dropped
    assert verdict_sentence(None, "10 s").startswith("Too early to call")


def test_a_race_at_equal_parameters_gives_each_cell_the_width_nearest_the_target():
    base = LMConfig(vocab_size=83, cell="gru_torch", embed_dim=64, hidden_size=256)
    target = parameter_count(base)
    widths = {cell: width_for_parameters(base, cell, target) for cell in text_racers()}
    assert widths["gru_torch"] == 256 and widths["rnn"] > 256 > widths["lstm"] > widths["scan"]
    for cell, width in widths.items():
        count = parameter_count(dataclasses.replace(base, cell=cell, hidden_size=width))
        assert abs(count - target) / target < 0.01  # within 1%
        neighbours = [parameter_count(dataclasses.replace(base, cell=cell, hidden_size=width + d)) for d in (-1, 1)]
        assert all(abs(count - target) <= abs(n - target) for n in neighbours)


def test_a_run_is_named_in_plain_words():
    assert plain_name(LMConfig(cell="gru_torch", hidden_size=256)) == "GRU (z keeps) · 256 units"
    assert plain_name(LMConfig(cell="lstm", hidden_size=640, num_layers=2)) == "LSTM · 2 layers of 640 units"
    assert [short_count(n) for n in (950, 274_451, 5_149_075)] == ["950", "274k", "5.1M"]


def test_the_long_race_holds_every_bundled_character_model_trained_on_a_gpu_with_its_validation_curve():
    curves = long_race(list_checkpoints(None, include_versions=False))
    names = {"vanilla RNN", "GRU (z keeps)", "GRU (z overwrites)", "LSTM", "selective scan"}
    assert {c.name for c in curves} == names and len(curves) == len(names)  # one runner per family
    assert "char-min-gru_latest" not in {c.checkpoint for c in curves}  # built on a CPU: its minutes do not compare
    assert "leviathan-lstm_latest" not in {c.checkpoint for c in curves}  # the LSTM's runner is its record's model
    for curve in curves:
        assert len(curve.minutes) >= 5, f"{curve.title}: too sparse a history to draw"
        assert list(curve.minutes) == sorted(curve.minutes) and curve.steps >= curve.step[-1]
    finals = [c.nats_per_char[-1] for c in curves]
    assert finals == sorted(finals)  # best first
    verdict = long_race_verdict(curves)
    assert verdict.standings[0][0] == curves[0].name  # compared where all end: the best final loss leads
