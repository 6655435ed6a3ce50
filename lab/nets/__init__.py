"""The networks: recurrent cells as their equations, the faster backends proven equal to them, and the
model families built from them.

    families    one record per cell family: its name, colour, equations, keep gate, forms and cost
    equations   a record's equations read as plain text and as the values each line writes and reads
    cells       RNN, GRU (seed and PyTorch conventions), LSTM, selective scan, minGRU, minLSTM: each
                `forward` its equations
    kernels     the `fast` backend: the same cells with optimised loops, hand-written backward passes and scans
    backends    the registry (`reference`, `fast`, `fused` = torch.nn) and the default per device
    models      language model, sequence classifier, ScanMarkov; configs, summaries, `evaluating`
    cost        what a model costs from its config alone (parameters, training memory) and the limits

Imports only lab.errors and lab.schema: a newcomer can read the networks without the rest of the lab.
"""
