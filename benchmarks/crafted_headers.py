"""What refusing a crafted checkpoint costs, as its header grows (issue 50, item 1): CPU seconds and the peak of
Python's allocations while lab.training.checkpoints.load_checkpoint reads it, for headers whose `extra` holds n
unknown keys (the reported 48 MB upload held 2.3 million) and whose history holds n evaluations with a bad field.
Each file is the bundled 2x640 LSTM's weights under the crafted header.

    python -m benchmarks.crafted_headers [--sizes 1000 10000 100000 400000 2300000]
"""

import argparse
import json
import time
import tracemalloc

from safetensors import safe_open
from safetensors.torch import save

from lab.training.checkpoints import BUNDLED_DIR, CheckpointError, load_checkpoint

SOURCE = BUNDLED_DIR / "char-lstm_latest.safetensors"


def crafted(kind, n):
    """The bundled LSTM's weights under a header whose `extra` has n unknown keys ("keys"), or whose history
    has n evaluations each with a field of the wrong type ("history")."""
    with safe_open(str(SOURCE), "pt") as f:
        metadata, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    if kind == "keys":
        metadata["extra"] = json.dumps({f"k{i:07d}": 0 for i in range(n)})
    else:
        metrics = json.loads(metadata["metrics"])
        metrics["history"] = [{"step": "one", "val_loss": "x"}] * n
        metadata["metrics"] = json.dumps(metrics)
    return save(tensors, metadata)


def cost(data):
    """-> (CPU seconds, peak MB of Python allocations, the refusal's line) of reading `data`."""
    tracemalloc.start()
    start = time.process_time()
    try:
        load_checkpoint(data, "cpu")
        said = "accepted"
    except CheckpointError as error:
        said = str(error)
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak, said


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 180_000, 2_300_000])
    args = parser.parse_args()
    print("| header | n | file MB | CPU s | peak Python MB | refused with |")
    print("|---|---|---|---|---|---|")
    for kind in ("keys", "history"):
        for n in args.sizes:
            data = crafted(kind, n)
            seconds, peak, said = cost(data)
            mb = len(data) / 2**20
            print(f"| {kind} | {n:,} | {mb:.1f} | {seconds:.3f} | {peak:.1f} | {said[:90]} |", flush=True)


if __name__ == "__main__":
    main()
