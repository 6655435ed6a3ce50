"""What a character model pays, on the held-out split, at each speaker heading's newline.

    python -m benchmarks.heading_cost CHECKPOINT [--corpus FILE]

Reads the last 10% of the corpus (the engine's validation split) in one pass
with the state carried, and splits the per-character loss into: the newline
that ends a heading line with no full stop ("THESEUS"), the spaces that indent
a line, and everything else. Each row gives the count, the mean loss, and its
share of the split's mean loss (nats/char). This is how the bundled corpus's
one odd heading format was found (BENCHMARKS.md, issue 3); run it on the
corpus as it was (scripts/build_corpus.py at commit c09efa2) to see the cost.
"""
import argparse
import re

import torch
import torch.nn.functional as F

from lab.checkpoints import load_checkpoint
from lab.train import configure_cpu, load_corpus

SPEAKER = re.compile(r"[A-Z][A-Z '-]*[A-Z]")  # as scripts/build_corpus.py's


def position_kinds(text):
    """For each character of text[1:] (the targets): 1 = newline after a bare heading, 2 = indent, 0 = other."""
    kinds, start, lines = torch.zeros(len(text) - 1, dtype=torch.long), 0, text.split("\n")
    for i, line in enumerate(lines):
        end = start + len(line)  # the newline ending this line is text[end], target index end - 1
        if 0 < i < len(lines) - 1 and SPEAKER.fullmatch(line) and not lines[i - 1] and lines[i + 1]:
            kinds[end - 1] = 1
        indent = len(line) - len(line.lstrip(" "))
        if indent:
            kinds[max(start - 1, 0):start - 1 + indent] = 2
        start = end + 1
    return kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--corpus", default="bundled", help="'bundled' or a text file")
    args = parser.parse_args()
    configure_cpu(2)
    checkpoint = load_checkpoint(args.checkpoint)
    text = load_corpus(args.corpus)
    held_out = text[len(text) - int(len(text) * 0.1):]
    ids = torch.tensor(checkpoint.tokenizer.encode(held_out))
    with torch.no_grad():
        logits = checkpoint.model.eval()(ids[None, :-1])[0]
    loss = F.cross_entropy(logits[0], ids[1:], reduction="none")
    kinds = position_kinds(held_out)
    print(f"held-out split read in one pass: {loss.mean():.4f} nats/char over {len(loss):,} characters")
    for kind, name in enumerate(["other characters", "newline after a bare heading", "indenting spaces"]):
        chosen = loss[kinds == kind]
        mean = f"{chosen.mean():.3f} nats" if len(chosen) else "-"
        print(f"{name:30s} {len(chosen):7,d} chars, mean {mean}, share {chosen.sum() / len(loss):.4f} nats/char")


if __name__ == "__main__":
    main()
