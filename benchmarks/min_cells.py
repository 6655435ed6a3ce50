"""minGRU and minLSTM against the GRU at equal parameters (issue 40, item 7): what the scan gains in speed.

    python -m benchmarks.min_cells [--threads 2] [--repeats 5] [--device cpu]

Training throughput (forward, backward and an AdamW step; tokens/s, the median of --repeats) of
character models of two layers, E = 64, at the parameter count of a 256-unit GRU: the GRU in PyTorch's
convention (fast, and PyTorch's fused kernel), and the minGRU and minLSTM, each with its scan as a loop
and as the parallel scan; at T = 128 (a training window) and T = 1024 (a long one). The models take turns,
one step each per round, so a slow spell on shared cores hits all of them alike.
"""

import argparse
import dataclasses
import time

import torch
import torch.nn.functional as F

from lab.instruments.race import width_for_parameters
from lab.nets.cost import parameter_count
from lab.nets.models import LMConfig, build_model
from lab.training.process import configure_cpu

B, V = 32, 65
BASE = LMConfig(cell="gru_torch", vocab_size=V, embed_dim=64, hidden_size=256, num_layers=2)
RUNNERS = (  # (label, cell, backend, scan mode)
    ("GRU, fast", "gru_torch", "fast", "parallel"),
    ("GRU, fused", "gru_torch", "fused", "parallel"),
    ("minGRU, loop", "min_gru", "fast", "sequential"),
    ("minGRU, parallel scan", "min_gru", "fast", "parallel"),
    ("minLSTM, loop", "min_lstm", "fast", "sequential"),
    ("minLSTM, parallel scan", "min_lstm", "fast", "parallel"),
)


def runner_config(cell, backend, scan_mode):
    hidden = width_for_parameters(BASE, cell, parameter_count(BASE))
    return dataclasses.replace(BASE, cell=cell, backend=backend, scan_mode=scan_mode, hidden_size=hidden)


def tokens_per_second(models, T, repeats, device):
    x = torch.randint(V, (B, T), device=device)
    steps = []
    for model in models:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt):
            opt.zero_grad(set_to_none=True)
            logits = model(x)[0]
            F.cross_entropy(logits.flatten(0, 1), x.flatten()).backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()

        step()  # warm-up
        steps.append(step)
    times = [[] for _ in models]
    for _ in range(repeats):
        for i, step in enumerate(steps):
            start = time.perf_counter()
            step()
            times[i].append(time.perf_counter() - start)
    return [B * T / sorted(t)[len(t) // 2] for t in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    configure_cpu(args.threads)
    device = torch.device(args.device)
    configs = [runner_config(cell, backend, mode) for _, cell, backend, mode in RUNNERS]
    print(f"B = {B}, E = 64, 2 layers, {args.threads} threads, {args.device}, median of {args.repeats}\n")
    print("| model | H | parameters | tokens/s at T = 128 | tokens/s at T = 1024 |")
    print("|---|---|---|---|---|")
    results = {}
    for T in (128, 1024):
        torch.manual_seed(0)
        models = [build_model(c).to(device) for c in configs]
        results[T] = tokens_per_second(models, T, args.repeats, device)
    for (label, *_), config, short, long in zip(RUNNERS, configs, results[128], results[1024]):
        print(f"| {label} | {config.hidden_size} | {parameter_count(config):,} | {short:,.0f} | {long:,.0f} |")


if __name__ == "__main__":
    main()
