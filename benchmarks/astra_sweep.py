"""The 5-minute recipe sweep behind astra-alpha's training settings (issue 3).

    python -m benchmarks.astra_sweep [--seconds 300] [--only NAME ...]

Trains astra-alpha's model (character GRU, E=64, H=256, 1 layer) on the
bundled corpus once per variant below, each for the same wall-clock budget on
2 threads, and prints one Markdown row per variant: steps, tokens/s, the last
training loss, the validation loss on the engine's 256 random windows, and
the validation split read in order with the state carried
(LMTask.evaluate_in_order). Every variant starts from the preset as it was
before the sweep (B=64, weight decay 0.01, no dropout, lr 3e-3, T=64) and
changes only what its name says. Each variant takes the full budget: the whole
list is about 80 minutes at 300 s.
"""

import argparse
import dataclasses

import torch

from lab.data import load_bundled_corpus
from lab.nets.models import build_model, count_parameters
from lab.training.presets import get_preset
from lab.training.process import configure_cpu
from lab.training.tasks import LMTask
from lab.training.train import train

BEFORE = ({"dropout": 0.0}, {"batch_size": 64, "weight_decay": 0.01, "lr": 3e-3, "block_size": 64})
VARIANTS = {  # name: (model overrides, training overrides), on top of BEFORE
    "before the sweep": ({}, {}),
    "wd 0.1, dropout 0.2": ({"dropout": 0.2}, {"weight_decay": 0.1}),
    "H=384, dropout 0.3": ({"hidden_size": 384, "dropout": 0.3}, {}),
    "2 layers, dropout 0.2, lr 2e-3": ({"num_layers": 2, "dropout": 0.2}, {"lr": 2e-3}),
    "stateful (truncated BPTT)": ({}, {"stateful": True}),
    "wd 0.1, dropout 0.2, T=128": ({"dropout": 0.2}, {"weight_decay": 0.1, "block_size": 128}),
    "wd 0.1, dropout 0.2, T=256": ({"dropout": 0.2}, {"weight_decay": 0.1, "block_size": 256}),
    "wd 0.2, dropout 0.3": ({"dropout": 0.3}, {"weight_decay": 0.2}),
    "B=32, wd 0.1, dropout 0.2": ({"dropout": 0.2}, {"weight_decay": 0.1, "batch_size": 32}),
    "B=16, wd 0.1, dropout 0.2": ({"dropout": 0.2}, {"weight_decay": 0.1, "batch_size": 16}),
    "B=32, wd 0.1, dropout 0.2, lr 2e-3": ({"dropout": 0.2}, {"weight_decay": 0.1, "batch_size": 32, "lr": 2e-3}),
    "B=32, wd 0.1, dropout 0.2, lr 4e-3": ({"dropout": 0.2}, {"weight_decay": 0.1, "batch_size": 32, "lr": 4e-3}),
    "B=32, wd 0.1, dropout 0.1": ({"dropout": 0.1}, {"weight_decay": 0.1, "batch_size": 32}),
    "B=32, wd 0.1, dropout 0.2, E=128": ({"dropout": 0.2, "embed_dim": 128}, {"weight_decay": 0.1, "batch_size": 32}),
    "B=32, wd 0.05, dropout 0.2": ({"dropout": 0.2}, {"weight_decay": 0.05, "batch_size": 32}),
    "B=32, wd 0.1 (astra-alpha now)": ({}, {"weight_decay": 0.1, "batch_size": 32}),
    "B=32, wd 0.2": ({}, {"weight_decay": 0.2, "batch_size": 32}),
}


def run(name, seconds, task):
    preset = get_preset("astra-alpha")
    model_overrides, train_overrides = VARIANTS[name]
    config = dataclasses.replace(preset.model, vocab_size=task.vocab_size, **{**BEFORE[0], **model_overrides})
    train_config = preset.train_config(**{**BEFORE[1], **train_overrides, "max_steps": None, "max_seconds": seconds})
    torch.manual_seed(train_config.seed)
    model = build_model(config)
    result = train(model, task, train_config)
    in_order = task.evaluate_in_order(model, next(model.parameters()).device)
    tokens_per_s = result.steps * train_config.batch_size * train_config.block_size / result.elapsed
    return (
        f"| {name} | {count_parameters(model):,} | {result.steps:,} | {tokens_per_s:,.0f} | "
        f"{result.last_train_loss:.3f} | {result.history[-1]['val_nats_per_char']:.4f} | "
        f"{in_order['val_nats_per_char_in_order']:.4f} |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), metavar="NAME", help="run only these variants")
    args = parser.parse_args()
    configure_cpu(2)
    task = LMTask.from_text(load_bundled_corpus(), "char")
    print(f"{args.seconds:.0f} s each, 2 threads, torch {torch.__version__}")
    print(
        "| variant | parameters | steps | tokens/s | last train loss | val, 256 random windows (nats/char) "
        "| val, split read in order |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.only or VARIANTS:
        print(run(name, args.seconds, task), flush=True)


if __name__ == "__main__":
    main()
