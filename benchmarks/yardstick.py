"""Score checkpoints on The Taming of the Shrew as Tiny Shakespeare's validation split holds it.

    python -m benchmarks.yardstick checkpoints/*.safetensors [--tiny FILE]

Tiny Shakespeare's validation split (its last 10%, as nanoGPT splits it) is the end of The Taming
of the Shrew and the start of The Tempest: the public yardstick, on which nanoGPT's 10.7M-parameter
character transformer scores 1.47 nats/char. Neither play is in the bundled corpus
(scripts/build_corpus.py). This reads the Shrew part (up to The Tempest's first line) in order with
the state carried, 8 streams, and reports nats per character beside the model's own validation
figures. The text is Tiny Shakespeare's own ("NAME:" headings, as the bundled plays write them),
downloaded once and cached (lab.data.download_tiny_shakespeare), or read from --tiny. Nothing here
trains or tunes on it.

A second column, a diagnostic and not the yardstick, scores the same text with each speaker
heading's colon a full stop ("PETRUCHIO." for "PETRUCHIO:"), as printed editions write them: what a
heading format the model never saw costs it (~10 nats at each of the Shrew's 707 headings).
"""

import argparse
import re

import torch

from lab.data import download_tiny_shakespeare, read_text
from lab.training.checkpoints import load_checkpoint
from lab.training.process import configure_cpu
from lab.training.tasks import LMTask

TEMPEST_STARTS = "\n\nMaster:\nBoatswain!"  # the first line of The Tempest in Tiny Shakespeare


def shrew_text(tiny):
    """The part of Tiny Shakespeare's validation split (its last 10%) before The Tempest begins."""
    validation = tiny[int(len(tiny) * 0.9) :]
    end = validation.find(TEMPEST_STARTS)
    if end < 0:
        raise ValueError("tiny: this is not Tiny Shakespeare (The Tempest's first line is missing)")
    return validation[: end + 2]


def headings_with_full_stops(text):
    """`text` with each speaker heading's colon ("NAME:" alone on its line) a full stop."""
    return re.sub(r"(?m)^([A-Za-z][A-Za-z ']*):$", r"\1.", text)


@torch.no_grad()
def shrew_nats_per_char(checkpoint, text, streams=8):
    """`checkpoint`'s loss on `text` read in order, state carried, in nats per character."""
    task = LMTask("", text, checkpoint.tokenizer)
    return task.evaluate_in_order(checkpoint.model.eval(), torch.device("cpu"), streams=streams)[
        "val_nats_per_char_in_order"
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--tiny", help="Tiny Shakespeare's input.txt (default: download once and cache)")
    args = parser.parse_args()
    configure_cpu(2)
    text = shrew_text(read_text(args.tiny) if args.tiny else download_tiny_shakespeare())
    print(f"The Taming of the Shrew in Tiny Shakespeare's validation split: {len(text):,} characters\n")
    print(
        "| checkpoint | parameters | own validation, windows | own validation, in order | Shrew, in order | "
        "Shrew, headings with a full stop |"
    )
    print("|---|---|---|---|---|---|")
    for path in args.checkpoints:
        checkpoint = load_checkpoint(path, device="cpu")
        if checkpoint.tokenizer is None:
            continue
        m = checkpoint.metrics
        params = sum(p.numel() for p in checkpoint.model.parameters())
        print(
            f"| {checkpoint.meta['name']} | {params:,} | {m.get('val_nats_per_char', float('nan')):.3f} | "
            f"{m.get('val_nats_per_char_in_order', float('nan')):.3f} | "
            f"{shrew_nats_per_char(checkpoint, text):.3f} | "
            f"{shrew_nats_per_char(checkpoint, headings_with_full_stops(text)):.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
