"""What a character model pays, on the held-out split, at each speaker heading's newline.

    python -m benchmarks.heading_cost CHECKPOINT [--corpus FILE]

Reads the last 10% of the corpus (the engine's validation split) in one pass
with the state carried, and splits the per-character loss into: the newline
that ends a heading line with no full stop ("THESEUS"), the spaces that indent
a line, and everything else. Each row gives the count, the mean loss, and its
share of the split's mean loss (nats/char). This is how the bundled corpus's
one odd heading format was found (BENCHMARKS-HISTORY.md, issue 3); run it on the
corpus as it was (scripts/build_corpus.py at commit c09efa2) to see the cost.
"""

import argparse

import torch
import torch.nn.functional as F

from lab.data import check_long_enough, encode_to_tensor, split_train_val
from lab.training.checkpoints import load_checkpoint
from lab.training.process import configure_cpu
from lab.training.tasks import load_corpus
from scripts.build_corpus import bare_headings


def position_kinds(text):
    """For each character of text[1:] (the targets): 1 = newline after a bare heading, 2 = indent, 0 = other."""
    kinds, lines, starts = torch.zeros(len(text) - 1, dtype=torch.long), text.split("\n"), [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    for i in bare_headings(lines):
        kinds[starts[i] + len(lines[i]) - 1] = 1  # the newline ending line i is a target at this index
    for start, line in zip(starts, lines):
        indent = len(line) - len(line.lstrip(" "))
        if indent:
            kinds[max(start - 1, 0) : start - 1 + indent] = 2
    return kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a character-level language model's checkpoint")
    parser.add_argument("--corpus", default="bundled", help="'bundled' or a text file")
    args = parser.parse_args()
    configure_cpu(2)
    try:
        checkpoint = load_checkpoint(args.checkpoint)
        if getattr(checkpoint.tokenizer, "kind", None) != "char":
            raise ValueError(f"{args.checkpoint}: not a character-level language model (positions are characters)")
        text = load_corpus(args.corpus)
        # the engine's own split (LMTask): one id per character, so the held-out text is the ids' tail
        held_out_ids = split_train_val(encode_to_tensor(checkpoint.tokenizer, text))[1]
        check_long_enough(len(held_out_ids), 1, "held-out split")
    except ValueError as error:  # lab's CheckpointError and DataError included
        parser.error(str(error))
    held_out = text[len(text) - len(held_out_ids) :]
    with torch.no_grad():
        logits = checkpoint.model.eval()(held_out_ids[None, :-1])[0]
    loss = F.cross_entropy(logits[0], held_out_ids[1:], reduction="none")
    kinds = position_kinds(held_out)
    print(f"held-out split read in one pass: {loss.mean():.4f} nats/char over {len(loss):,} characters")
    for kind, name in enumerate(["other characters", "newline after a bare heading", "indenting spaces"]):
        chosen = loss[kinds == kind]
        mean = f"{chosen.mean():.3f} nats" if len(chosen) else "-"
        print(f"{name:30s} {len(chosen):7,d} chars, mean {mean}, share {chosen.sum() / len(loss):.4f} nats/char")


if __name__ == "__main__":
    main()
