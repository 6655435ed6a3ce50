"""What the pages say about the trained models they compare, computed from their files: where the bundled
models are compared, why a bigger model can do worse (said only while their own figures show it). Every
figure is read as every page reads it: the validation loss of the weights a file holds from
lab.instruments.race.validation_figure, the parameters from lab.nets.cost.

    bigger_does_worse([ModelFigures.of(title, info) for info in bundled])
"""

import math
from dataclasses import dataclass

from lab.instruments.race import short_count, validation_figure
from lab.nets.cost import parameter_count
from lab.nets.models import config_from_dict
from lab.words import count


@dataclass(frozen=True)
class ModelFigures:
    """One trained character model's figures, all from its file: what `bigger_does_worse` compares."""

    title: str  # its name for students
    parameters: int  # lab.nets.cost.parameter_count of its config
    val: float  # validation_figure: nats per character on the held-out text
    train: float  # its training loss (nats per character) at the evaluation whose weights it holds
    step: int  # that evaluation's step
    epochs: float  # passes over its training text by then
    train_chars: int  # the characters of its training text (its windows per epoch times their size)
    later_val: float  # the highest held-out loss it reached after that step (its `val` when none)
    later_step: int  # where

    @classmethod
    def of(cls, title, info):
        """A listed character language model (lab.training.checkpoints.CheckpointInfo) -> its figures, or None
        for any other model or a file without the figures (a subword model's training loss is per token)."""
        metrics = info.metrics
        history = [e for e in metrics.get("history") or [] if "train_loss" in e and "val_nats_per_char" in e]
        recipe = metrics.get("train_config") or {}
        if info.family != "lm" or info.tokenizer_kind != "char" or not history or "batch_size" not in recipe:
            return None
        held = next((e for e in history if e["step"] == metrics.get("best_step")), history[-1])
        later = [e for e in history if e["step"] > held["step"]]
        worst = max(later, key=lambda e: e["val_nats_per_char"], default=held)
        if not held.get("epoch"):
            return None
        return cls(
            title,
            parameter_count(config_from_dict(info.config)),
            validation_figure(metrics),
            float(held["train_loss"]),
            int(held["step"]),
            float(held["epoch"]),
            round(held["step"] * recipe["batch_size"] * recipe["block_size"] / held["epoch"]),
            max(float(worst["val_nats_per_char"]), validation_figure(metrics)),
            int(worst["step"]),
        )


def bigger_does_worse(models):
    """Why a bigger model can do worse, in plain words, from the bundled character models' own figures
    (ModelFigures, one corpus): said only where a bigger model's held-out loss is above a smaller one's
    and its gap between held-out and training loss is the wider (over-fitting); "" where the figures do
    not show it. The biggest such model is held against the best smaller one."""
    models = [m for m in models if m is not None and math.isfinite(m.val)]
    for big in sorted(models, key=lambda m: m.parameters, reverse=True):
        smaller = [m for m in models if m.parameters < big.parameters and m.val < big.val]
        if not smaller:
            continue
        small = min(smaller, key=lambda m: m.val)
        gap, small_gap = big.val - big.train, small.val - small.train
        if gap <= small_gap:
            continue
        rose = (
            f" While it trained on, its held-out loss rose to {big.later_val:.3f} by step {big.later_step:,}; its "
            f"file keeps the weights of step {big.step:,}, where it was lowest."
            if big.later_val > big.val
            else ""
        )
        return (
            f"**Bigger is not always better.** {big.title} has {short_count(big.parameters)} parameters, "
            f"{big.parameters / small.parameters:.1f} times the {small.title}'s {short_count(small.parameters)}, "
            f"yet its loss on the held-out text is {big.val:.3f} nats/char against the {small.title}'s "
            f"{small.val:.3f}. On the text it trains on (its last training batch), its loss is {big.train:.3f}, "
            f"{gap:.3f} below its "
            f"held-out loss, where the {small.title}'s gap is {small_gap:.3f}: it has begun to learn its "
            f"training text by heart instead of what carries over to new text (over-fitting). That text is "
            f"small for it: {count(big.train_chars, 'character')}, about "
            f"{big.parameters / big.train_chars:.1f} parameters for each, in {big.epochs:.1f} passes over it.{rose}"
        )
    return ""
