"""The sweep of short runs behind the bundled models' recipe (scripts/build_checkpoints.py).

    python -m benchmarks.bundle_sweep [--minutes 7 | --steps 6000] [--only NAME ...]

Trains each variant below on the bundled corpus for the same budget of training
minutes on 2 threads (the cosine schedule spans the budget, so each run anneals
fully), with the build's engine: early stopping, resumable in build/sweep/<variant>.
Prints one Markdown row per variant: parameters, steps, tokens/s, the last
training loss, the best validation nats/char on the build's 512 random
windows (of the variant's own T: longer windows start cold less often, so compare
across T in the last column), and those best weights' nats/char on the whole
validation split read in order with the state carried. The question is which size, dropout and window an hour-long build
should use: the train/validation gap says how soon a recipe over-fits.
"""

import argparse
import dataclasses
import math
import re
from pathlib import Path

import torch

from lab.data import load_bundled_corpus
from lab.nets.models import count_parameters
from lab.training.presets import get_preset
from lab.training.process import configure_cpu
from lab.training.tasks import LMTask
from scripts.build_checkpoints import EVAL_INTERVAL, EVAL_WINDOWS, ROOT, train_until_plateau

VARIANTS = {  # name: (model overrides, training overrides) on astra-alpha's recipe
    "LSTM 1x512, dropout 0.2": ({"cell": "lstm", "hidden_size": 512, "dropout": 0.2}, {}),
    "LSTM 1x512, dropout 0.2, T=128": ({"cell": "lstm", "hidden_size": 512, "dropout": 0.2}, {"block_size": 128}),
    "LSTM 1x512, dropout 0.2, B=64": ({"cell": "lstm", "hidden_size": 512, "dropout": 0.2}, {"batch_size": 64}),
    "LSTM 2x384, dropout 0.2": ({"cell": "lstm", "hidden_size": 384, "num_layers": 2, "dropout": 0.2}, {"lr": 2e-3}),
    "LSTM 2x512, dropout 0.3": ({"cell": "lstm", "hidden_size": 512, "num_layers": 2, "dropout": 0.3}, {"lr": 2e-3}),
    # the second sweep, at a budget of steps on quiet cores: more dropout against the over-fitting above
    "LSTM 1x512, dropout 0.4": ({"cell": "lstm", "hidden_size": 512, "dropout": 0.4}, {}),
    "LSTM 1x512, dropout 0.5": ({"cell": "lstm", "hidden_size": 512, "dropout": 0.5}, {}),
    "LSTM 2x512, dropout 0.5": ({"cell": "lstm", "hidden_size": 512, "num_layers": 2, "dropout": 0.5}, {"lr": 2e-3}),
    # the state carried from window to window (truncated BPTT over the text read in order, as
    # word_language_model trains): the model learns to use more than 64 characters of context
    "LSTM 1x512, dropout 0.2, state carried": (
        {"cell": "lstm", "hidden_size": 512, "dropout": 0.2},
        {"stateful": True},
    ),
    # the ninth session: AWD-LSTM's regularisers (LMConfig.weight_dropout, embed_dropout), then width with them
    "LSTM 1x512, dropout 0.2, weight drop 0.5, embedding dropout 0.1": (
        {"cell": "lstm", "hidden_size": 512, "dropout": 0.2, "weight_dropout": 0.5, "embed_dropout": 0.1},
        {},
    ),
    "LSTM 1x768, dropout 0.25, weight drop 0.25": (
        {"cell": "lstm", "hidden_size": 768, "dropout": 0.25, "weight_dropout": 0.25},
        {},
    ),
}


def run(name, minutes, steps, task, work):
    preset = get_preset("astra-alpha")
    model_overrides, train_overrides = VARIANTS[name]
    config = dataclasses.replace(preset.model, vocab_size=task.vocab_size, backend="fused", **model_overrides)
    train_config = preset.train_config(
        **train_overrides,
        max_steps=steps,
        max_seconds=None if steps else minutes * 60,
        eval_interval=EVAL_INTERVAL,
        eval_windows=EVAL_WINDOWS,
    )
    folder = work / re.sub(r"[^a-z0-9]+", "-", name.lower())
    # a run that carries its state cannot be resumed (the state is not saved), so it trains in one piece
    chunk_seconds = math.inf if train_config.stateful else 300
    model, metrics = train_until_plateau(
        name, config, train_config, task, folder, chunk_seconds=chunk_seconds, log=lambda line: None
    )
    tokens_per_s = metrics["steps"] * train_config.batch_size * train_config.block_size / metrics["elapsed"]
    best = min(event["val_nats_per_char"] for event in metrics["history"])
    in_order = task.evaluate_in_order(model, torch.device("cpu"))["val_nats_per_char_in_order"]
    return (
        f"| {name} | {count_parameters(model):,} | {metrics['steps']:,} | {tokens_per_s:,.0f} | "
        f"{metrics['history'][-1]['train_loss']:.3f} | {best:.4f} | {in_order:.4f} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=7)
    parser.add_argument("--steps", type=int, help="a budget of steps instead of minutes (fair on busy cores)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), metavar="NAME", help="run only these variants")
    parser.add_argument("--work", default=str(ROOT / "build" / "sweep"))
    args = parser.parse_args()
    configure_cpu(2)
    task = LMTask.from_text(load_bundled_corpus(), "char")
    print(f"{args.steps:,} steps each" if args.steps else f"{args.minutes:g} minutes each", "2 threads")
    print(
        "| variant | parameters | steps | tokens/s | last train loss | best val nats/char (512 windows of T) "
        "| the same weights, split read in order |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.only or VARIANTS:
        print(run(name, args.minutes, args.steps, task, Path(args.work)), flush=True)


if __name__ == "__main__":
    main()
