"""The networks: recurrent cells as their equations, the faster backends proven equal to them, and the
model families built from them.

    cells       RNN, GRU (seed and PyTorch conventions), LSTM, selective scan: each `forward` its equations
    kernels     the `fast` backend: the same cells with optimised loops and hand-written backward passes
    backends    the registry (`reference`, `fast`, `fused` = torch.nn) and the default per device
    models      language model, sequence classifier, ScanMarkov; configs, summaries, `evaluating`
    cost        what a model costs from its config alone (parameters, training memory) and the limits

Imports only lab.errors and lab.schema: a newcomer can read the networks without the rest of the lab.
"""
