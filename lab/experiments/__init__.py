"""Reproducible experiments over the lab backend: each is a config dataclass, a function that
runs it and reports through events, and a results file the app and BENCHMARKS.md read.

    ablation    seed 003's GRU gate-bias ablation (baseline b_z = +1 vs r/z biases frozen at 0)
"""
