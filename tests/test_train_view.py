"""ui.train.chart's pieces (and ui.train.runs.RunLog, which reads a run's events): the race chart's axis,
its unit (nats per character) and the reference lines it draws."""

import math
from types import SimpleNamespace

from ui.cell_labels import cell_colour, cell_label
from ui.shared import live_refresh as rp
from ui.train import chart as tv
from ui.train.chart import NANOGPT_ANCHORS, char_anchors, race_figure
from ui.train.runs import RunLog, starting_text

NANOGPT = [label for _, label in NANOGPT_ANCHORS]


BUNDLED = [(1.40, "the lab's LSTM, 6 minutes on a GPU 1.40")]


def test_anchors_compare_like_with_like():
    tiny = char_anchors({("char", 65, "tiny-shakespeare")}, BUNDLED)
    assert [label for _, label in tiny][1:] == NANOGPT and tiny[0][0] == math.log(65)
    bundled = char_anchors({("char", 76, "bundled")}, BUNDLED)
    assert bundled[1:] == BUNDLED  # nanoGPT scored other text: never drawn over runs on the bundled plays
    uploaded = char_anchors({("char", 50, "upload:notes.txt")}, BUNDLED)
    assert [y for y, _ in uploaded] == [math.log(50)]  # the uniform guess still holds for any text
    # per character, a subword run is compared with the same text's character figures too
    assert char_anchors({("sentencepiece", 1000, "tiny-shakespeare")}) == NANOGPT_ANCHORS
    assert (
        char_anchors({("char", 76, "bundled"), ("sentencepiece", 1000, "bundled")}, BUNDLED) == BUNDLED
    )  # no uniform guess: ln V is per token
    assert char_anchors({("char", 76, "bundled"), ("char", 65, "tiny-shakespeare")}, BUNDLED) == []
    assert char_anchors({("char", 76, "bundled"), ("char", 50, "upload:notes.txt")}, BUNDLED) == []


def test_an_empty_race_chart_starts_at_zero_and_shows_its_anchors():
    figure = race_figure([], "elapsed", anchors=[(math.log(76), "uniform"), (1.47, "nanoGPT")], x_span=60)
    assert tuple(figure.layout.xaxis.range) == (0, 60)
    low, high = figure.layout.yaxis.range
    assert low == 0 and high > math.log(76)


class FakeJob:
    """The part of a TrainingJob a RunLog reads."""

    def __init__(self, events, chars_per_token):
        self._events, self.task = events, SimpleNamespace(chars_per_token=chars_per_token)
        self.running, self.status, self.checkpoint_path = True, "running", None

    def events(self, since=0, settled=False):
        return self._events[since:]


def test_a_subword_run_is_charted_per_character_with_its_token_loss_in_the_hover():
    events = [
        {"type": "step", "step": 1, "elapsed": 0.5, "train_loss": 6.0},
        {"type": "eval", "step": 1, "elapsed": 0.6, "val_loss": 6.4, "val_nats_per_char": 2.0},
    ]
    log = RunLog(FakeJob(events, chars_per_token=3.2), "scribe", 1, "gru_seed", "sentencepiece", 1000).update()
    train, val = race_figure([log]).data
    assert list(train.y) == [6.0 / 3.2] and list(train.customdata) == [6.0]
    assert list(val.y) == [2.0] and list(val.customdata) == [6.4]
    row = log.row()
    assert row["train nats/char"] == f"{6.0 / 3.2:.3f}" and row["val nats/char"] == "2.000"


def test_the_runs_table_never_shows_none_before_the_first_validation():
    log = RunLog(
        FakeJob([{"type": "step", "step": 1, "elapsed": 0.5, "train_loss": 4.0}], 1.0), "rnn", 1, "rnn", "char", 76
    ).update()
    assert None not in log.row().values() and log.row()["val nats/char"] == "…"


def test_a_class_watching_together_keeps_its_redraws_within_the_servers_share_after_the_first_points():
    assert rp.live_refresh_seconds(1, waiting_for_first_point=False) == 2.0
    assert rp.live_refresh_seconds(6, waiting_for_first_point=False) == 2.0
    assert rp.live_refresh_seconds(30, waiting_for_first_point=True) == 2.0  # a new run's first point comes fast
    for watching in range(1, 200):
        refresh = rp.live_refresh_seconds(watching, waiting_for_first_point=False)
        assert refresh in rp.REFRESH_STEPS  # few steps: a slowing redraws the student's page
        assert refresh <= rp.live_refresh_seconds(watching + 1, waiting_for_first_point=False)  # never faster
        if refresh < rp.REFRESH_STEPS[-1]:
            assert watching / refresh <= rp.CLASS_REDRAWS_PER_SECOND  # the class's redraws within their share
    assert rp.live_refresh_seconds(30, waiting_for_first_point=False) == 10.0


def race_log(title, cell, evals, steps=3, other_runs=0):
    events = [{"type": "step", "step": s, "elapsed": s, "train_loss": 3.0} for s in range(1, steps + 1)]
    events += [
        {"type": "eval", "step": s, "elapsed": s, "val_loss": loss, "val_nats_per_char": loss} for s, loss in evals
    ]
    log = RunLog(FakeJob(events, 1.0), f"{cell}-e64-h256x1-1 #1", 274_451, cell, "char", 83, title=title).update()
    log.other_runs = other_runs
    return log


def test_the_race_chart_names_each_run_in_plain_words_with_its_size_and_steps():
    logs = [
        race_log("GRU · 256 units", "gru_torch", [(1, 3.0), (3, 2.5)], steps=412),
        race_log("LSTM · 220 units", "lstm", [(1, 3.0), (3, 2.7)], steps=380),
    ]
    figure = race_figure(logs)
    legend = [trace.name for trace in figure.data if trace.showlegend is not False]
    assert legend == ["GRU · 256 units · 274k parameters · 412 steps", "LSTM · 220 units · 274k parameters · 380 steps"]
    assert not any("#" in name or "-e64-" in name for name in legend)  # no run code names
    twins = [race_log("GRU · 256 units", "gru_torch", []), race_log("GRU · 256 units", "gru_torch", [])]
    assert len(set(tv.legend_names(twins))) == 2  # two runs of one kind are told apart


def test_the_race_verdict_and_step_counts_are_read_from_the_runs_on_the_chart():
    logs = [
        race_log("GRU · 256 units", "gru_torch", [(1, 3.0), (3, 2.5)], steps=412, other_runs=5),
        race_log("LSTM · 220 units", "lstm", [(1, 3.0), (3, 2.7)], steps=380),
    ]
    assert tv.live_verdict(logs, "elapsed").startswith("After 3 s, the GRU leads by 0.20 nats/char over the LSTM")
    assert tv.live_verdict(logs, "step").startswith("After 3 steps, the GRU leads")
    assert tv.live_verdict(logs[:1], "elapsed") is None  # one run is no race
    steps = tv.steps_sentence(logs)
    assert "the GRU 412, the LSTM 380" in steps and "up to 5 runs of other people" in steps


def test_a_run_waiting_on_a_ray_cluster_says_what_it_waits_for_and_for_how_long():
    from types import SimpleNamespace

    on_ray = SimpleNamespace(status="queued", ray_address="10.0.0.1:6379", started_at=100.0)
    assert starting_text(on_ray, now=123.4) == (
        "waiting for the cluster: a free CPU, then a fresh worker that loads PyTorch (a class's first runs can "
        "take a minute) · 23 s"
    )
    here = SimpleNamespace(status="running", ray_address=None, started_at=100.0)
    assert starting_text(here, now=101.0) == "starting… 1 s"
    started_on_ray = SimpleNamespace(status="running", ray_address="10.0.0.1:6379", started_at=100.0)
    assert starting_text(started_on_ray, now=130.0) == "starting… 30 s"  # the actor is up: its model is being built


def test_a_race_colours_each_run_by_its_family_as_every_chart_does():
    """The live race coloured runs by their order while the long race beside it coloured them by family: the
    same GRU was red in one and cyan in the other. Two runs of one family share the colour, not the dash."""
    logs = [
        race_log("LSTM · 220 units", "lstm", [(1, 3.0), (3, 2.6)]),
        race_log("GRU · 256 units", "gru_torch", [(1, 3.0), (3, 2.5)]),
        race_log("GRU · 128 units", "gru_torch", [(1, 3.1), (3, 2.7)]),
    ]
    lines = [trace.line for trace in race_figure(logs).data if trace.showlegend is not False]
    assert [line.color for line in lines] == [cell_colour("lstm"), cell_colour("gru_torch"), cell_colour("gru_torch")]
    assert lines[1].dash != lines[2].dash


def test_the_races_are_described_by_the_cells_they_run():
    """The race's line said "an RNN, a GRU, an LSTM and a selective scan" whatever ran: it now names its runners."""
    from lab.experiments.probe import TOY_CELLS
    from ui.train.runs import RACE_CELLS, racers

    assert racers(RACE_CELLS) == "a vanilla RNN, a GRU (z keeps), an LSTM and a selective scan"
    assert all(cell_label(cell) in racers(TOY_CELLS) for cell in TOY_CELLS) and "minGRU" in racers(TOY_CELLS)


def test_students_watching_the_same_run_to_the_same_point_share_one_figure():
    """A class watching one shared run: each page's RunLog reads the same job, and the chart is made once."""
    events = [{"type": "step", "step": s, "elapsed": s, "train_loss": 3.0} for s in range(1, 4)]
    job = FakeJob(events, 1.0)

    def page_log(title="GRU · 256 units"):  # each student's page keeps a RunLog of its own
        return RunLog(job, "gru", 274_451, "gru_torch", "char", 83, title=title).update()

    first = tv.shared_race_figure([page_log()], "elapsed", (), 60)
    assert tv.shared_race_figure([page_log()], "elapsed", (), 60) is first
    assert first.to_json() == tv.race_figure([page_log()], "elapsed", (), 60).to_json()  # what race_figure draws
    assert tv.shared_race_figure([page_log(title="my GRU")], "elapsed", (), 60) is not first  # another name
    assert tv.shared_race_figure([page_log()], "step", (), 60) is not first
    job._events.append({"type": "step", "step": 4, "elapsed": 4, "train_loss": 2.9})  # a new point: a new figure
    later = tv.shared_race_figure([page_log()], "elapsed", (), 60)
    assert later is not first and len(later.data[0].x) == 4
    other = FakeJob(list(events), 1.0)  # another run with the same points is drawn apart
    assert (
        tv.shared_race_figure([RunLog(other, "gru", 274_451, "gru_torch", "char", 83).update()], "elapsed", (), 60)
        is not later
    )
