"""Races between training runs: who leads, read from their loss curves; runs sized to equal parameter
counts; and the bundled models' own long race, read from their checkpoints' training histories.

A curve is a run's (x, loss) points, x in seconds, minutes or steps. Runs are compared where every
one of them has data: at the furthest x all of them reached, each curve's loss interpolated linearly
there between its own points (never extrapolated before its first point or past its last).
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from lab.nets.cost import parameter_count
from lab.nets.families import FAMILIES, keeps_with_gates
from lab.nets.families import name as cell_name
from lab.nets.models import config_from_dict
from lab.words import count, listing

# Losses this close count as level: a validation figure on a few dozen windows moves by about 0.01-0.02
# nats/char from one evaluation to the next with the weights barely changed.
LEVEL_WITHIN = 0.02
MAX_WIDTH = 4096  # the widest layer the Train page offers


@dataclass(frozen=True)
class Verdict:
    """Where a race stands: each run's loss at `at`, the furthest x every run reached."""

    at: float
    standings: tuple  # ((name, loss), ...), lowest loss first
    level_within: float = LEVEL_WITHIN

    @property
    def level(self):
        """The names within `level_within` of the leader, the leader first."""
        best = self.standings[0][1]
        return [name for name, loss in self.standings if loss - best < self.level_within]

    @property
    def trailing(self):
        """(name, loss) of the runs behind the level group."""
        return self.standings[len(self.level) :]


def race_verdict(curves, min_points=2, level_within=LEVEL_WITHIN):
    """{name: (xs, losses)} -> a Verdict, or None while the race cannot be called: fewer than two
    curves with `min_points` points each, or curves whose x ranges do not overlap yet."""
    ready = {name: _finite_and_sorted(xs, ys) for name, (xs, ys) in curves.items()}
    ready = {name: (xs, ys) for name, (xs, ys) in ready.items() if len(xs) >= min_points}
    if len(ready) < 2 or len(ready) < len(curves):
        return None
    start = max(float(xs[0]) for xs, _ in ready.values())
    at = min(float(xs[-1]) for xs, _ in ready.values())
    if at < start:
        return None
    losses = {name: float(np.interp(at, xs, ys)) for name, (xs, ys) in ready.items()}
    return Verdict(at, tuple(sorted(losses.items(), key=lambda item: item[1])), level_within)


def _finite_and_sorted(xs, ys):
    """The points with a finite x and loss (a run that never validated per character has NaNs), by x."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    order = np.argsort(xs[keep], kind="stable")
    return xs[keep][order], ys[keep][order]


def _names(names):
    """["GRU", "LSTM"] -> "the GRU and the LSTM"."""
    return listing(f"the {name}" for name in names)


def verdict_sentence(verdict, when, unit="nats/char"):
    """The verdict in one sentence; `when` says where the curves were compared ("60 s", "800 steps")."""
    if verdict is None:
        return "Too early to call the race: every run needs two points on the chart, at overlapping times."
    (leader, best), level, trailing = verdict.standings[0], verdict.level, verdict.trailing
    if not trailing:
        return (
            f"After {when}, all {count(len(level), 'run')} are level, within {verdict.level_within} {unit}: "
            "too close to call."
        )
    gap = trailing[0][1] - best
    if len(level) == 1:
        sentence = f"After {when}, the {leader} leads by {gap:.2f} {unit} over the {trailing[0][0]}"
    else:
        sentence = (
            f"After {when}, {_names(level)} are level (within {verdict.level_within} {unit}), "
            f"{gap:.2f} ahead of the {trailing[0][0]}"
        )
    figures = ", ".join(f"{name} {loss:.2f}" for name, loss in verdict.standings)
    return f"{sentence} ({figures})."


FASTER = 1.25  # a leader that took this many times the steps of every runner behind it led on speed


def race_story(verdict, when, families, steps=None, long_verdict=None, long_when=""):
    """The text race's verdict, why it stands so, and where the long race ends, in a few sentences.

    verdict: race_verdict of the runs' validation curves; when: where they were compared ("40 s", "300
    steps"); families: {name: cell} of each run; steps: {name: steps taken} when the race is in seconds
    (None on a chart in steps); long_verdict: long_race_verdict of the bundled models, compared at
    `long_when` ("30 minutes"), or None when they are missing."""
    sentences = [verdict_sentence(verdict, when)]
    if verdict is not None:
        sentences.append(_why_it_leads(verdict, families, steps))
    if long_verdict is not None:
        sentences.append(_where_it_ends(verdict, families, long_verdict, long_when))
    return " ".join(s for s in sentences if s)


def _why_it_leads(verdict, families, steps):
    if not verdict.trailing:
        return (
            "Early on every cell learns the same first thing, which letters are common and which follow which, "
            "so their curves lie together."
        )
    ahead, behind = verdict.level, [name for name, _ in verdict.trailing]
    why = []
    if steps and all(steps[a] >= FASTER * steps[b] for a in ahead for b in behind):
        slowest = min(behind, key=steps.get)
        why.append(
            f"T{_names(ahead)[1:]} took {listing(count(steps[a], 'step') for a in ahead)} in that time to the "
            f"{slowest}'s {steps[slowest]:,}: a cheaper step, so more of them in the same seconds."
        )
    gated_ahead = {keeps_with_gates(families.get(a)) for a in ahead}
    gated_behind = {keeps_with_gates(families.get(b)) for b in behind}
    if gated_ahead == {False} and True in gated_behind:
        why.append(
            "Early in training the simpler cell often leads: it has fewer things to learn, no gates that read its "
            "state, and the first thing every cell learns, which letter follows which, needs none. A gated cell "
            "must also learn what to keep, which pays later."
        )
    elif gated_ahead == {True} and False in gated_behind:
        # "the gated cells" only when none of them trails: one behind cannot be said to pull ahead
        trailing_gated = [b for b in behind if keeps_with_gates(families.get(b))]
        leaders = "The gated cells" if not trailing_gated else "T" + _names(ahead)[1:]
        one = bool(trailing_gated) and len(ahead) == 1
        why.append(
            f"{leaders} {'pulls' if one else 'pull'} ahead once {'its' if one else 'their'} gates learn what to "
            "keep from further back (a speaker's name, a word half spelled), which the letter statistics alone "
            "cannot give."
            + (
                f" {'T' + _names(trailing_gated)[1:]} {'has' if len(trailing_gated) == 1 else 'have'} such gates "
                "too but trails here."
                if trailing_gated
                else ""
            )
        )
    return " ".join(why)


def _where_it_ends(verdict, families, long_verdict, long_when):
    first, last = long_verdict.standings[0][0], long_verdict.standings[-1][0]
    ending = f"The long race beside it ends, after {long_when} on a GPU, with the {first} ahead and the {last} last"
    if verdict is None or not verdict.trailing:
        return ending + "."
    leaders = {cell_name(families.get(name, name)) for name in verdict.level}
    if first in leaders:
        return ending + ": the same leader as here."
    return ending + ": this lead is an early one."


# ---------------------------------------------------------------------------
# what a run is, in plain words


def plain_name(config):
    """ "GRU · 256 units", "LSTM · 2 layers of 640 units": a model config as a student reads it."""
    cell = cell_name(config.cell)
    if not hasattr(config, "hidden_size"):  # the fixed-architecture scan models: only the width changes
        return f"{cell} · {config.embed_dim} wide"
    if config.num_layers == 1:
        return f"{cell} · {count(config.hidden_size, 'unit')}"
    return f"{cell} · {count(config.num_layers, 'layer')} of {count(config.hidden_size, 'unit')}"


def short_count(n):
    """274,451 -> "274k", 5,149,075 -> "5.1M"."""
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:,}"


def width_for_parameters(config, cell, target):
    """The hidden size that gives `cell` the parameter count nearest `target`, all else as in `config`:
    a race at equal parameters instead of equal widths (an LSTM has four weight blocks per layer to
    an RNN's one, so at one width it is about four times the model). Parameters grow with the width,
    so a bisection finds it."""
    low, high = 1, MAX_WIDTH
    while low < high:
        middle = (low + high) // 2
        if parameter_count(dataclasses.replace(config, cell=cell, hidden_size=middle)) < target:
            low = middle + 1
        else:
            high = middle
    candidates = {max(1, low - 1), low}
    return min(
        candidates, key=lambda h: abs(parameter_count(dataclasses.replace(config, cell=cell, hidden_size=h)) - target)
    )


def validation_figure(metrics):
    """The validation figure of the weights a checkpoint holds, from its metrics: its own record (a run that
    stops early, as the bundled Leviathan, keeps its best evaluation's weights and records that evaluation's
    figure), else its history's last evaluation; nats per character for a text model (an image classifier's
    accuracy where it has no such figure), NaN without any. Sample, the published anchors and `python -m
    lab list` read it here, and so does the Checkpoints page's table."""
    if "val_nats_per_char" in metrics:
        return float(metrics["val_nats_per_char"])
    last = (metrics.get("history") or [{}])[-1]
    return float(last.get("val_nats_per_char", last.get("val_accuracy", math.nan)))


# ---------------------------------------------------------------------------
# the long race: the bundled character models, each trained minutes on a GPU


@dataclass(frozen=True)
class LongRaceCurve:
    """One bundled model's validation curve over its training."""

    name: str  # its cell family's name, for the verdict
    cell: str  # its cell family's id, for its colour
    title: str  # "LSTM · 2 layers of 640 units"
    parameters: int
    steps: int  # training steps it took in its time
    minutes: tuple  # when each validation was made (minutes of training)
    step: tuple  # the training step of each validation
    nats_per_char: tuple  # validation loss on the held-out plays
    checkpoint: str = ""  # the bundled file's name ("char-lstm_latest"), which the pages name in words


def long_race(infos):
    """Each cell family's own bundled character model (the one its record names), trained on the bundled corpus
    on a GPU, with the validation curve its checkpoint's training history holds, best final loss first: one
    runner per family, whose minutes compare (a model built on a CPU, the minGRU, is left out; a seed's larger
    model of a family, the Leviathan-LSTM, races with none of its size). `infos`: lab.training.checkpoints'
    CheckpointInfo listing (headers only, no weights loaded)."""
    curves = []
    for info in infos:
        is_character_model = info.family == "lm" and info.config.get("vocab_size", math.inf) < 256
        on_a_gpu = info.metrics.get("train_config", {}).get("device") == "cuda"
        if not (info.bundled and is_character_model and on_a_gpu and info.metrics.get("corpus") == "bundled"):
            continue
        evals = [e for e in info.metrics.get("history", []) if "val_nats_per_char" in e]
        if len(evals) < 2:
            continue
        config = config_from_dict(info.config)
        if FAMILIES[config.cell].bundled != info.name:
            continue
        curves.append(
            LongRaceCurve(
                cell_name(config.cell),
                config.cell,
                plain_name(config),
                parameter_count(config),
                int(info.metrics.get("steps", evals[-1]["step"])),
                tuple(e["elapsed"] / 60 for e in evals),
                tuple(e["step"] for e in evals),
                tuple(e["val_nats_per_char"] for e in evals),
                info.name,
            )
        )
    return sorted(curves, key=lambda c: c.nats_per_char[-1])


def long_race_verdict(curves):
    """The long race's Verdict, compared in minutes of training."""
    return race_verdict({c.name: (c.minutes, c.nats_per_char) for c in curves})
