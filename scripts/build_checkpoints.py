"""Regenerate the bundled checkpoints in checkpoints/ from the bundled corpus.

    python scripts/build_checkpoints.py [--seconds 120] [--only gru-torch lstm]

Each model trains for a fixed wall-clock budget on the CPU (2 threads), the
same engine the app and `python -m lab train` use, and is saved as
checkpoints/<name>_latest.safetensors (no version history is bundled). The
final validation losses are printed as a Markdown table for BENCHMARKS.md.
"""
import argparse
import dataclasses
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.checkpoints import SUFFIX, atomic_write_bytes, checkpoint_bytes  # noqa: E402
from lab.models import build_model, count_parameters  # noqa: E402
from lab.presets import get_preset  # noqa: E402
from lab.train import TASKS, configure_cpu, load_bundled_corpus, train  # noqa: E402

SMALL = dict(embed_dim=64, hidden_size=256, num_layers=1)  # astra-alpha's size, one per cell
BUNDLE = {
    # name: (preset it starts from, model overrides, train overrides)
    "char-rnn": ("astra-alpha", {"cell": "rnn", **SMALL}, {"lr": 2e-3}),
    "char-gru-seed": ("astra-alpha", {"cell": "gru_seed", **SMALL}, {}),
    "char-gru-torch": ("astra-alpha", {"cell": "gru_torch", **SMALL}, {}),
    "char-lstm": ("astra-alpha", {"cell": "lstm", **SMALL}, {}),
    "char-scan": ("astra-alpha", {"cell": "scan", "embed_dim": 64, "hidden_size": 128, "num_layers": 2,
                                  "norm": "every"}, {"lr": 2e-3}),
    "scan-markov": ("scan-markov-windows", {}, {}),  # the shipped file; seed 004's recipe: BENCHMARKS.md, issue 17
    "scribe-alpha": ("scribe-alpha", {}, {"batch_size": 32}),
}


def build(name, seconds, out_dir, text):
    preset_name, model_overrides, train_overrides = BUNDLE[name]
    preset = get_preset(preset_name)
    task = TASKS[preset.task].from_text(text, preset.tokenizer, **preset.tokenizer_options)
    config = dataclasses.replace(preset.model, vocab_size=task.vocab_size, **model_overrides)
    train_config = preset.train_config(**train_overrides, max_steps=None, max_seconds=seconds, eval_interval=100,
                                       eval_windows=512)
    torch.manual_seed(train_config.seed)
    model = build_model(config)
    result = train(model, task, train_config)
    last = result.history[-1]
    metrics = {"history": result.history, "steps": result.steps, "elapsed": result.elapsed,
               "reason": result.reason, "train_config": dataclasses.asdict(train_config), "corpus": "bundled"}
    data = checkpoint_bytes(model.cpu(), task.tokenizer, metrics, name, 0, {"preset": preset_name, "bundled": True})
    path = out_dir / f"{name}_latest{SUFFIX}"
    atomic_write_bytes(path, data)
    cell = config.cell
    return (f"| {name} | {cell} | {count_parameters(model):,} | {task.tokenizer.kind} | {result.steps} | "
            f"{seconds:.0f} | {last['val_loss']:.3f} | {last['val_nats_per_char']:.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120, help="training budget per model")
    parser.add_argument("--only", nargs="*", choices=sorted(BUNDLE), help="rebuild only these")
    parser.add_argument("--out", default=str(ROOT / "checkpoints"))
    args = parser.parse_args()
    configure_cpu(2)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = load_bundled_corpus()
    print("| checkpoint | cell | params | tokenizer | steps | seconds | val loss/token | val nats/char |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.only or BUNDLE:
        print(build(name, args.seconds, out_dir, text), flush=True)


if __name__ == "__main__":
    main()
