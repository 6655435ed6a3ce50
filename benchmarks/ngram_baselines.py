"""What a learned model gains over a Markov chain of the same order (issue 17), on the bundled corpus's split.

    python benchmarks/ngram_baselines.py [--checkpoints checkpoints/scan-markov_latest.safetensors ...]

For n = 2..5 (contexts of 1..4 characters), every target of the validation split (the last 10%)
that has 4 characters before it, scored three ways (lab.training.ngram): an interpolated Kneser-Ney
character n-gram model counted on the training split; each checkpoint reading only the n - 1
characters before the target from the zero state (a recurrent LM truncated to the chain's context;
ScanMarkov is trained on exactly such contexts). Prints Markdown tables for BENCHMARKS.md.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.data import load_bundled_corpus  # noqa: E402
from lab.training.checkpoints import load_checkpoint  # noqa: E402
from lab.training.ngram import N_MAX, kneser_ney_scores, truncated_scores  # noqa: E402
from lab.training.process import configure_cpu  # noqa: E402

ORDERS = range(2, N_MAX + 1)
DEFAULT = sorted(
    str(p.relative_to(ROOT))
    for p in (ROOT / "checkpoints").glob("*_latest.safetensors")
    if p.name.startswith(("char-", "scan-markov"))
)


def row(name, scores):
    return (
        f"| {name} | "
        + " | ".join(f"{scores[n]['loss']:.3f}" for n in ORDERS)
        + " | "
        + " | ".join(f"{100 * scores[n]['accuracy']:.1f}%" for n in ORDERS)
        + " |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", nargs="*", default=DEFAULT, help="checkpoints to score, truncated")
    args = parser.parse_args()
    configure_cpu(2)
    text = load_bundled_corpus()
    start = time.perf_counter()
    counts = kneser_ney_scores(text, orders=range(1, N_MAX + 1))
    print(
        f"Kneser-Ney counted and scored in {time.perf_counter() - start:.0f}s on {counts[1]['count']:,} targets; "
        f"order 1 (unigram): {counts[1]['loss']:.3f} nats/char, {100 * counts[1]['accuracy']:.1f}%\n"
    )
    print(
        "| model | "
        + " | ".join(f"n={n} nats/char" for n in ORDERS)
        + " | "
        + " | ".join(f"n={n} acc" for n in ORDERS)
        + " |"
    )
    print("|---|" + "---|" * 2 * len(ORDERS))
    print(row("Kneser-Ney n-gram (counts)", counts), flush=True)
    for path in args.checkpoints:
        checkpoint = load_checkpoint(path)
        print(row(Path(path).name, truncated_scores(checkpoint.model, checkpoint.tokenizer, text, ORDERS)), flush=True)


if __name__ == "__main__":
    main()
