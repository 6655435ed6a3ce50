"""Sampling speed on CPU: stateful generation against re-running the whole prefix (issue 4).

    python -m benchmarks.sampling [--threads 2 1] [--tokens 1000] [--repeats 3]

The model is preset astra-alpha (character GRU, PyTorch convention, E=64,
H=256, 1 layer, fast backend) over the bundled corpus's characters. Its
weights are untrained: speed does not depend on them. Greedy decoding, so both
paths must produce the same tokens (checked); top-k at seed 002's k=20, T=0.8
shows the cost of sampling on top of the forward pass. Each thread count in
--threads is measured in turn: batch-1 decoding has nothing to split between
threads, and on cores shared with other processes the extra thread's
synchronisation can cost more than the work (see BENCHMARKS.md).
"""

import argparse
import dataclasses
import os
import time

import torch

from lab.data import CharTokenizer, load_bundled_corpus
from lab.instruments.sampling import SamplingConfig, generate, generate_by_rerunning_prefix
from lab.nets.models import build_model, count_parameters
from lab.training.presets import get_preset

PROMPT = "Ham:\n"


def timed(fn, repeats):
    """Best wall time of `repeats` calls -> (seconds, last result)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(model, tokenizer, threads, tokens, repeats):
    """Print tokens/s of stateful greedy, stateful top-k and prefix re-running at one thread count."""
    torch.set_num_threads(threads)
    greedy = SamplingConfig(strategy="greedy", max_new_tokens=tokens)
    top_k = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=tokens)
    load_before = os.getloadavg()[0]
    generate(model, tokenizer, PROMPT, SamplingConfig(max_new_tokens=20))  # warm-up
    t_greedy, stateful = timed(lambda: generate(model, tokenizer, PROMPT, greedy), repeats)
    t_top_k, _ = timed(lambda: generate(model, tokenizer, PROMPT, top_k), repeats)
    t_rerun, rerun = timed(lambda: generate_by_rerunning_prefix(model, tokenizer, PROMPT, greedy), 1)
    load_after = os.getloadavg()[0]
    print(
        f"--- {threads} thread(s); 1-minute load average {load_before:.2f} before, {load_after:.2f} after "
        f"({os.cpu_count()} cores)"
    )
    print(f"stateful, greedy            {tokens / t_greedy:9.0f} tokens/s  ({t_greedy:.3f} s, best of {repeats})")
    print(f"stateful, top-k k=20 T=0.8  {tokens / t_top_k:9.0f} tokens/s  ({t_top_k:.3f} s, best of {repeats})")
    print(f"re-running the prefix       {tokens / t_rerun:9.0f} tokens/s  ({t_rerun:.3f} s, one run)")
    print(f"speed-up (greedy)           {t_rerun / t_greedy:9.1f}x")
    print(f"same tokens: {stateful.token_ids == rerun.token_ids}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    tokenizer = CharTokenizer.from_text(load_bundled_corpus())
    torch.manual_seed(0)
    config = dataclasses.replace(get_preset("astra-alpha").model, vocab_size=tokenizer.vocab_size)
    model = build_model(config)
    print(
        f"model: astra-alpha, {count_parameters(model):,} parameters, V={tokenizer.vocab_size}, untrained; "
        f"torch {torch.__version__}; {args.tokens} new tokens, prompt {PROMPT!r}"
    )
    for threads in args.threads:
        measure(model, tokenizer, threads, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
