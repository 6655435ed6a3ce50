"""The bundled models on a server's CPU (issue 39): each file's size, its load time, how fast it samples, and
the server's memory once every one of them is loaded.

    python -m benchmarks.bundled_models [--threads 2] [--tokens 300] [--repeats 3]

For each file in checkpoints/, as the pages use it: load_checkpoint (what a picker's first choice of it
costs), then generation as the Sample page runs it (lab.nets.models.for_sampling; top-k 20 at T = 0.8, a
fixed seed), timed as the best of --repeats runs of --tokens tokens, beside the same model with its float32
weights (for_device). The resident memory (psutil) is read before the first load and after the last, with
every model and its sampling copy still held, as a server's caches hold them.
"""

import argparse
import time

import psutil
import torch

from lab.instruments.sampling import SamplingConfig, generate
from lab.nets.models import count_parameters, for_device, for_sampling
from lab.training.checkpoints import BUNDLED_DIR, SUFFIX, load_checkpoint

PROMPT = "KING RICHARD:\n"


def tokens_per_second(model, tokenizer, tokens, repeats):
    config = SamplingConfig(max_new_tokens=tokens, temperature=0.8, top_k=20, seed=0)
    generate(model, tokenizer, PROMPT, SamplingConfig(max_new_tokens=8))  # first-call set-up, untimed
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        generate(model, tokenizer, PROMPT, config)
        best = min(best, time.perf_counter() - start)
    return tokens / best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    process = psutil.Process()
    before = process.memory_info().rss
    held = []
    print("| model | parameters | file | load | tokens/s, float32 | tokens/s, as sampled | sampled with |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(BUNDLED_DIR.glob(f"*_latest{SUFFIX}")):
        start = time.perf_counter()
        checkpoint = load_checkpoint(path)
        load = time.perf_counter() - start
        held.append(checkpoint)
        if checkpoint.tokenizer is None:  # a classifier: nothing to sample
            continue
        sampler = for_sampling(checkpoint.model)
        held.append(sampler)
        float32 = tokens_per_second(for_device(checkpoint.model, "cpu").eval(), checkpoint.tokenizer, args.tokens, 1)
        sampled = tokens_per_second(sampler, checkpoint.tokenizer, args.tokens, args.repeats)
        # an int8 module keeps its weights as packed buffers, not parameters
        weights = "int8" if count_parameters(sampler) < count_parameters(checkpoint.model) else "float32"
        print(
            f"| {path.name.removesuffix(f'_latest{SUFFIX}')} | {count_parameters(checkpoint.model):,} | "
            f"{path.stat().st_size / 1e6:.1f} MB | {load:.2f} s | {float32:.0f} | {sampled:.0f} | {weights} |",
            flush=True,
        )
    after = process.memory_info().rss
    print(
        f"\nresident memory: {before / 2**20:.0f} MiB before loading, {after / 2**20:.0f} MiB with all "
        f"the models and their sampling copies loaded; on {args.threads} threads, "
        f"{psutil.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in psutil.getloadavg())}"
    )


if __name__ == "__main__":
    main()
