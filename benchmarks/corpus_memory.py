"""Peak memory of turning the largest accepted upload (20 MB of text) into a character task.

    python -m benchmarks.corpus_memory

Builds a text just under lab.data.MAX_CORPUS_BYTES from the bundled corpus,
reads it as an upload would be read, and reports the process's peak resident
memory before and after LMTask.from_text(text, "char") (train/val token ids).
"""
import resource

from lab.data import BUNDLED_CORPUS, MAX_CORPUS_BYTES, read_text
from lab.train import LMTask


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main():
    base = BUNDLED_CORPUS.read_bytes()
    text = read_text((base * (MAX_CORPUS_BYTES // len(base) + 1))[: MAX_CORPUS_BYTES - 16])
    before = peak_mb()
    task = LMTask.from_text(text, "char")
    after = peak_mb()
    n_ids = len(task.train_ids) + len(task.val_ids)
    print(f"{len(text):,} characters -> {n_ids:,} token ids; peak resident memory {before:.0f} MB before the task, "
          f"{after:.0f} MB after: +{after - before:.0f} MB (the ids themselves are {n_ids * 8 / 2**20:.0f} MB)")


if __name__ == "__main__":
    main()
