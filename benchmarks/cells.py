"""Training throughput of the recurrent cells on CPU (issue 2's speed benchmark).

    python -m benchmarks.cells [--threads 2] [--repeats 5] [--default-malloc]

Measures forward + backward + AdamW step tokens/s at B=64, T=128, E=128, H=256,
2 layers for the GRU (PyTorch convention) and the LSTM in lab's three backends:
fast (lab/nets/kernels.py), fused (torch.nn.GRU / nn.LSTM) and reference
(lab/nets/cells.py, autograd over the equations); and for seed 002's cell: its
LSTMCell and LSTMLayer as published (two bias-free nn.Linear per gate plus a
bias vector, a loop indexing x[:, t], the layers' states stacked every step;
the GRU written the same way), and a tidied version of that pattern (biases
folded into the nn.Linear, no per-step stacking). Then times the selective scan's
loop against its parallel form at T=128 and T=1024.
"""

import argparse
import resource
import time

import torch
import torch.nn as nn

from lab.nets.backends import make_layer
from lab.nets.cells import RecurrentStack, scan_parallel, scan_sequential
from lab.training.process import configure_cpu

B, T, E, H, L = 64, 128, 128, 256, 2


class Seed002LSTMCell(nn.Module):
    """Seed 002's LSTMCell as published: two bias-free nn.Linear per gate
    (input and hidden) and a separate bias vector, forget bias 1."""

    def __init__(self, in_features, hidden_dim):
        super().__init__()
        self.W_f_x, self.W_f_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.W_i_x, self.W_i_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.W_o_x, self.W_o_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.W_g_x, self.W_g_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.b_f = nn.Parameter(torch.ones(hidden_dim))
        self.b_i, self.b_o, self.b_g = (nn.Parameter(torch.zeros(hidden_dim)) for _ in range(3))

    def forward(self, x, h_prev, c_prev):
        g_t = torch.tanh(self.W_g_x(x) + self.W_g_h(h_prev) + self.b_g)
        i_t = torch.sigmoid(self.W_i_x(x) + self.W_i_h(h_prev) + self.b_i)
        f_t = torch.sigmoid(self.W_f_x(x) + self.W_f_h(h_prev) + self.b_f)
        c_t = f_t * c_prev + i_t * g_t
        o_t = torch.sigmoid(self.W_o_x(x) + self.W_o_h(h_prev) + self.b_o)
        h_t = o_t * torch.tanh(c_t)
        return h_t, c_t


class Seed002GRUCell(nn.Module):
    """Seed 001's GRU equations written the way seed 002 writes its LSTMCell."""

    def __init__(self, in_features, hidden_dim):
        super().__init__()
        self.W_r_x, self.W_r_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.W_z_x, self.W_z_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.W_h_x, self.W_h_h = (
            nn.Linear(in_features, hidden_dim, bias=False),
            nn.Linear(hidden_dim, hidden_dim, bias=False),
        )
        self.b_r, self.b_z, self.b_h = (nn.Parameter(torch.zeros(hidden_dim)) for _ in range(3))

    def forward(self, x, h_prev, c_prev):  # c_prev: unused, so that one layer loop serves both cells
        r_t = torch.sigmoid(self.W_r_x(x) + self.W_r_h(h_prev) + self.b_r)
        z_t = torch.sigmoid(self.W_z_x(x) + self.W_z_h(h_prev) + self.b_z)
        n_t = torch.tanh(self.W_h_x(x) + self.W_h_h(r_t * h_prev) + self.b_h)
        return (1 - z_t) * h_prev + z_t * n_t, c_prev


class Seed002Layer(nn.Module):
    """Seed 002's LSTMLayer loop as published: x[:, t] indexing, every layer
    inside the time loop, the layers' states stacked into one tensor each step."""

    def __init__(self, cell_cls, in_features=E, hidden_dim=H, n_layers=L):
        super().__init__()
        self.hidden_dim, self.n_layers = hidden_dim, n_layers
        self.layers = nn.ModuleList(
            cell_cls(in_features if i == 0 else hidden_dim, hidden_dim) for i in range(n_layers)
        )

    def forward(self, x):
        batch_dim, seq_length, _ = x.shape
        h_prev = torch.zeros(self.n_layers, batch_dim, self.hidden_dim, device=x.device, dtype=x.dtype)
        c_prev = torch.zeros(self.n_layers, batch_dim, self.hidden_dim, device=x.device, dtype=x.dtype)
        outputs = []
        for t in range(seq_length):
            x_t = x[:, t, :]
            new_h, new_c = [], []
            for layer_idx, cell in enumerate(self.layers):
                h, c = cell(x_t, h_prev[layer_idx], c_prev[layer_idx])
                new_h.append(h)
                new_c.append(c)
                x_t = h
            h_prev = torch.stack(new_h, dim=0)
            c_prev = torch.stack(new_c, dim=0)
            outputs.append(x_t)
        return torch.stack(outputs, dim=1)


class TidySeedLSTMCell(nn.Module):
    """Seed 002's pattern tidied: the bias folded into the input-side nn.Linear."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W = nn.ModuleList(nn.Linear(input_size, hidden_size) for _ in range(4))
        self.U = nn.ModuleList(nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(4))

    def forward(self, x, state):
        h, c = state
        i, f, g, o = (W(x) + U(h) for W, U in zip(self.W, self.U))
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class TidySeedGRUCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_r, self.U_r = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_z, self.U_z = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_h, self.U_h = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x, h):
        r = torch.sigmoid(self.W_r(x) + self.U_r(h))
        z = torch.sigmoid(self.W_z(x) + self.U_z(h))
        n = torch.tanh(self.W_h(x) + self.U_h(r * h))
        return (1 - z) * h + z * n


class TidySeedStack(nn.Module):
    """The same loop tidied: x[:, t] indexing, each layer's state kept as its own tensor."""

    def __init__(self, cell_cls, lstm):
        super().__init__()
        self.cells = nn.ModuleList(cell_cls(E if l == 0 else H, H) for l in range(L))
        self.lstm = lstm

    def forward(self, x):
        zeros = x.new_zeros(x.size(0), H)
        state = [(zeros, zeros) if self.lstm else zeros for _ in range(L)]
        outputs = []
        for t in range(x.size(1)):
            x_t = x[:, t, :]
            for l, cell in enumerate(self.cells):
                state[l] = cell(x_t, state[l])
                x_t = state[l][0] if self.lstm else state[l]
            outputs.append(x_t)
        return torch.stack(outputs, 1)


class Fused(nn.Module):
    """The fused backend as earlier runs measured it: one torch.nn module of L layers."""

    def __init__(self, module_cls):
        super().__init__()
        self.rnn = module_cls(E, H, num_layers=L, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class Lab(nn.Module):
    """L layers of one of lab's own backends ("fast" or "reference")."""

    def __init__(self, cell, backend):
        super().__init__()
        self.rnn = RecurrentStack([make_layer(cell, E if l == 0 else H, H, backend) for l in range(L)])

    def forward(self, x):
        return self.rnn(x)[0]


def tokens_per_second(models, repeats):
    """Median training tokens/s and page faults per step of each model. The models take
    turns, one step each per round, so a slow spell on shared cores hits all of them
    alike and the ratios between them stay fair."""
    x = torch.randn(B, T, E)
    steps = []
    for model in models:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt):
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()

        step()  # warm-up
        steps.append(step)
    times, faults = [[] for _ in models], [0 for _ in models]
    for _ in range(repeats):
        for i, step in enumerate(steps):
            faults_before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
            step()
            times[i].append(time.perf_counter() - start)
            faults[i] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    return [
        (B * T / sorted(model_times)[len(model_times) // 2], model_faults / repeats)
        for model_times, model_faults in zip(times, faults)
    ]


def time_scan(fn, T_len, repeats):
    a_logits = torch.randn(B, T_len, H, requires_grad=True)
    b = torch.randn(B, T_len, H, requires_grad=True)
    fn(torch.sigmoid(a_logits), b).sum().backward()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(torch.sigmoid(a_logits), b).sum().backward()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="only cap the threads; leave glibc's malloc at its defaults (see lab.training.process.configure_cpu)",
    )
    args = parser.parse_args()
    if args.default_malloc:
        torch.set_num_threads(args.threads)
    else:
        configure_cpu(args.threads)  # as the CLI and the app run: threads capped, freed buffers kept for reuse
    torch.manual_seed(0)
    print(
        f"torch {torch.__version__}, {args.threads} threads, B={B} T={T} E={E} H={H} layers={L}, "
        f"median of {args.repeats} train steps, the variants taking turns, "
        f"malloc {'defaults' if args.default_malloc else 'as configure_cpu sets it'}"
    )
    for name, cell, fused, seed_cell, tidy_cell in [
        ("GRU", "gru_torch", nn.GRU, Seed002GRUCell, TidySeedGRUCell),
        ("LSTM", "lstm", nn.LSTM, Seed002LSTMCell, TidySeedLSTMCell),
    ]:
        variants = (
            Lab(cell, "fast"),
            Fused(fused),
            Lab(cell, "reference"),
            Seed002Layer(seed_cell),
            TidySeedStack(tidy_cell, lstm=cell == "lstm"),
        )
        (s, s_pf), (f, f_pf), (r, r_pf), (k, k_pf), (t, t_pf) = tokens_per_second(variants, args.repeats)
        print(
            f"{name:5s} fast {s:9,.0f} tok/s | fused nn.{name} {f:9,.0f} tok/s | reference {r:9,.0f} tok/s"
            f" | seed 002 as published {k:9,.0f} tok/s | seed 002 tidied {t:9,.0f} tok/s\n"
            f"      page faults per step: {s_pf:,.0f} | {f_pf:,.0f} | {r_pf:,.0f} | {k_pf:,.0f} | {t_pf:,.0f}\n"
            f"      fast time / fused time = {f / s:.2f}x | fast speed-up over reference = {s / r:.2f}x,"
            f" over seed 002 as published = {s / k:.2f}x, over seed 002 tidied = {s / t:.2f}x"
        )
    for T_len in (128, 1024):
        loop, par = time_scan(scan_sequential, T_len, args.repeats), time_scan(scan_parallel, T_len, args.repeats)
        print(
            f"scan T={T_len:5d}: loop {loop:8.1f} ms | parallel {par:8.1f} ms (forward+backward, B={B}, H={H})"
            f" | {'parallel' if par < loop else 'loop'} wins by {max(loop, par) / min(loop, par):.2f}x"
        )


if __name__ == "__main__":
    main()
