"""Peak memory of turning the largest accepted upload (20 MB of text) into a training task.

    python -m benchmarks.corpus_memory                   # char and sentencepiece, one process each
    python -m benchmarks.corpus_memory sentencepiece     # one tokenizer

Builds bytes just under lab.data.MAX_CORPUS_BYTES from the bundled corpus, as
an upload arrives, then does what the Train page does with them: read_text
(checks and decoding) and LMTask.from_text (tokenizer, token ids, split). Each
tokenizer runs in a fresh process, because peak resident memory (ru_maxrss)
only ever grows; the figure that matters on a shared server is the peak over
the idle process (lab and torch imported, nothing read yet).
"""

import resource
import subprocess
import sys
import time

from lab.data import BUNDLED_CORPUS, MAX_CORPUS_BYTES, read_text
from lab.training.tasks import LMTask

TOKENIZERS = ("char", "sentencepiece")


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(kind):
    idle = peak_mb()
    base = BUNDLED_CORPUS.read_bytes()
    upload = (base * (MAX_CORPUS_BYTES // len(base) + 1))[: MAX_CORPUS_BYTES - 16]
    start = time.perf_counter()
    task = LMTask.from_text(read_text(upload), kind)
    seconds = time.perf_counter() - start
    n_ids = len(task.train_ids) + len(task.val_ids)
    print(
        f"{kind:13s}: {len(upload) / 2**20:.1f} MB upload -> {n_ids:,} token ids "
        f"({n_ids * task.train_ids.element_size() / 2**20:.0f} MB) in {seconds:.0f}s; peak resident memory "
        f"{idle:.0f} MB idle, {peak_mb():.0f} MB after: +{peak_mb() - idle:.0f} MB",
        flush=True,
    )


def main(argv):
    if argv:
        measure(argv[0])
        return
    for kind in TOKENIZERS:  # a fresh process each: ru_maxrss never goes down
        subprocess.run([sys.executable, "-m", "benchmarks.corpus_memory", kind], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
