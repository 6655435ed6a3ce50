"""Reproducible experiments over the lab: each is a config, a function that runs it through the server's
budget and reports through events, and results the app and BENCHMARKS.md read.

    ablation   seed 003's GRU gate-bias ablation (baseline b_z = +1 vs r/z biases frozen at 0)
    probe      the memory probe's toy tasks (recall, brackets, adding, parity), trained in seconds

May import every other part of the lab; nothing in the lab imports them but the command line.
"""
