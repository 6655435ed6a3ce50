"""Recurrent cells as their equations: the reference implementation you read.

Glossary: B batch, T time, I input features, H hidden units.

Every layer has the same contract, so one stack, one trainer, one sampler and
one introspection path serve them all:

    out, state = layer(x, state, trace=None)     # x (B, T, I) -> out (B, T, H)

* `state` is explicit: a tensor (B, H), or a tuple (h, c) for the LSTM; None
  means zeros. Carry it between calls for stateful generation or truncated BPTT.
* Each `forward` below is its docstring's equations, one line each, in a loop
  over time; autograd does backpropagation through time (seed 001 A.4).
* Pass a dict as `trace` and the layer fills it with every gate, (B, T, H) each,
  for the gate heatmaps and memory-decay measurements.

Cells (each family's record, with its name, colour, equations and forms, is in lab/nets/families.py):
    rnn        vanilla RNN (seed 001 A.1)
    gru_seed   GRU, the seeds' own convention (seed 001 A.2, seed 000): z overwrites
    gru_torch  GRU, PyTorch's convention (seed 003, torch.nn.GRU): z keeps
    lstm       LSTM (seed 001 A.3, seed 002), forget-gate bias 1
    scan       selective scan: a selective linear recurrence (seed 004, Mamba-style)
    min_gru    minGRU (Feng et al. 2024): the GRU with gates that read x_t alone
    min_lstm   minLSTM (Feng et al. 2024): the LSTM's forget and input gates from x_t alone

This file is the `reference` backend. The same cells run faster, with the same
parameters, in lab/nets/kernels.py (`fast`) and torch.nn (`fused`); lab/nets/backends.py
picks one by name, and tests/test_cells.py proves all three equal.

One file for the seven cells (longer than most here) because a student reads them side by side: the
same stacked parameters, the same loop, and the one line where each differs.
"""

import math
from functools import partial

import torch
import torch.nn as nn

from lab.errors import LabError
from lab.nets.randomness import Dropout, dropout

# ---------------------------------------------------------------------------
# initialisation (seed 003): orthogonal recurrent weights, Xavier input weights


def _init_blocks(weight, n_blocks, init):
    """Apply `init` to each (H, ·) gate block of a stacked (n_blocks*H, ·) weight."""
    with torch.no_grad():
        for block in weight.chunk(n_blocks, 0):
            init(block)


def chrono_bias(hidden_size, t_max, generator=None):
    """Chrono initialisation (Tallec & Ollivier 2018): b ~ log U[1, T_max - 1]."""
    if t_max is None or t_max < 3:
        raise LabError(f"chrono_tmax must be an integer >= 3, got {t_max!r}")
    u = torch.rand(hidden_size, generator=generator) * (t_max - 2) + 1
    return torch.log(u)


class RecurrentLayer(nn.Module):
    """Parameters shared by the gated cells: every gate's weights stacked into one matrix.

        weight_ih (G*H, I)   W of every gate, stacked in the order the cell's docstring gives
        weight_hh (G*H, H)   U of every gate
        bias      (G*H,)     b of every gate
        bias_hh   (G*H,)     PyTorch's GRU only: the b_h* inside r * (W_hn h + b_hn)

    Stacking keeps checkpoints and torch.nn's weights interchangeable; each
    forward unstacks them into named gate blocks with `chunk`.
    """

    cell = ""  # its family's id (lab.nets.families.FAMILIES)
    n_gates = 1  # G: gate blocks stacked in weight_ih / weight_hh
    two_biases = False
    gate_names = ()  # keys this layer writes into `trace`, the hidden output h last
    gates_read_state = True  # False: the gates read x_t alone, so there is no U (weight_hh) and h is a scan

    def __init__(self, input_size, hidden_size, keep_bias=1.0, chrono_tmax=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.keep_bias = keep_bias
        self.chrono_tmax = chrono_tmax
        G, H = self.n_gates, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(G * H, input_size))
        self.weight_hh = nn.Parameter(torch.empty(G * H, H)) if self.gates_read_state else None
        self.bias = nn.Parameter(torch.zeros(G * H))
        self.bias_hh = nn.Parameter(torch.zeros(G * H)) if self.two_biases else None
        self.reset_parameters()

    def reset_parameters(self, generator=None):
        _init_blocks(self.weight_ih, self.n_gates, partial(nn.init.xavier_uniform_, generator=generator))
        if self.weight_hh is not None:
            _init_blocks(self.weight_hh, self.n_gates, partial(nn.init.orthogonal_, generator=generator))
        with torch.no_grad():
            self.bias.zero_()
            if self.bias_hh is not None:
                self.bias_hh.zero_()

    def _zeros(self, x):
        return x.new_zeros(x.size(0), self.hidden_size)  # (B, H)

    def _outputs(self, steps, trace):
        """steps: one tuple of (B, H) values per time step, in gate_names order, h last.
        Fills `trace` with each name's (B, T, H) stack; returns the outputs h (B, T, H)."""
        if trace is None:
            return torch.stack([values[-1] for values in steps], 1)
        trace.update((name, torch.stack(values, 1)) for name, values in zip(self.gate_names, zip(*steps)))
        return trace["h"]


class RNNLayer(RecurrentLayer):
    """Vanilla RNN, seed 001 A.1:

    h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h)
    """

    cell = "rnn"
    gate_names = ("h",)

    def forward(self, x, state=None, trace=None):
        W_xh, W_hh, b_h = self.weight_ih, self.weight_hh, self.bias  # (H, I), (H, H), (H,)
        h = self._zeros(x) if state is None else state  # (B, H)
        steps = []
        for x_t in x.unbind(1):  # (B, I) per step; unbind, not x[:, t], so autograd keeps no (B, T, I) per step
            h = torch.tanh(x_t @ W_xh.T + h @ W_hh.T + b_h)
            steps.append((h,))
        return self._outputs(steps, trace), h


class SeedGRULayer(RecurrentLayer):
    """GRU in the seeds' convention (seed 001 A.2 and seed 000), one bias per gate:

        r_t = sigmoid(W_r x_t + U_r h_{t-1} + b_r)
        z_t = sigmoid(W_z x_t + U_z h_{t-1} + b_z)
        n_t = tanh(W_h x_t + U_h (r_t * h_{t-1}) + b_h)     # seed's h~_t
        h_t = (1 - z_t) * h_{t-1} + z_t * n_t

    z_t is how much to OVERWRITE: z -> 0 keeps the memory. The reset gate acts
    before U_h (inside the matmul), unlike PyTorch. Weights stack [r; z; h].
    The remember-more bias is therefore b_z = -keep_bias (retention sigmoid(keep_bias)).
    """

    cell = "gru_seed"
    n_gates = 3
    gate_names = ("r", "z", "n", "h")

    def reset_parameters(self, generator=None):
        super().reset_parameters(generator)
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                self.bias[H : 2 * H] = -chrono_bias(H, self.chrono_tmax, generator)
            else:
                self.bias[H : 2 * H] = -self.keep_bias

    def forward(self, x, state=None, trace=None):
        W_r, W_z, W_h = self.weight_ih.chunk(3)  # (H, I) each
        U_r, U_z, U_h = self.weight_hh.chunk(3)  # (H, H) each
        b_r, b_z, b_h = self.bias.chunk(3)  # (H,) each
        h = self._zeros(x) if state is None else state  # (B, H)
        steps = []
        for x_t in x.unbind(1):  # (B, I)
            r = torch.sigmoid(x_t @ W_r.T + h @ U_r.T + b_r)
            z = torch.sigmoid(x_t @ W_z.T + h @ U_z.T + b_z)
            n = torch.tanh(x_t @ W_h.T + (r * h) @ U_h.T + b_h)
            h = (1 - z) * h + z * n
            steps.append((r, z, n, h))
        return self._outputs(steps, trace), h


class TorchGRULayer(RecurrentLayer):
    """GRU in PyTorch's convention (torch.nn.GRU, seed 003), two bias vectors:

        r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
        z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
        n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
        h_t = (1 - z_t) * n_t + z_t * h_{t-1}

    z_t is how much to KEEP, so seed 003's update-gate bias +1 means "remember
    more": at initialisation z ~ sigmoid(1) = 0.73. We put the +1 in b_iz only
    (seed 003's code fills both bias vectors, an effective +2, while its text
    reasons with sigmoid(1)). `bias` is b_ih; `bias_hh` is b_hh. Weights stack [r; z; n].
    """

    cell = "gru_torch"
    n_gates = 3
    two_biases = True  # b_hn sits inside r * (...), so it cannot merge with b_in
    gate_names = ("r", "z", "n", "h")

    def reset_parameters(self, generator=None):
        super().reset_parameters(generator)
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                self.bias[H : 2 * H] = chrono_bias(H, self.chrono_tmax, generator)
            else:
                self.bias[H : 2 * H] = self.keep_bias

    def forward(self, x, state=None, trace=None):
        W_ir, W_iz, W_in = self.weight_ih.chunk(3)  # (H, I) each
        W_hr, W_hz, W_hn = self.weight_hh.chunk(3)  # (H, H) each
        b_ir, b_iz, b_in = self.bias.chunk(3)  # (H,) each
        b_hr, b_hz, b_hn = self.bias_hh.chunk(3)
        h = self._zeros(x) if state is None else state  # (B, H)
        steps = []
        for x_t in x.unbind(1):  # (B, I)
            r = torch.sigmoid(x_t @ W_ir.T + b_ir + h @ W_hr.T + b_hr)
            z = torch.sigmoid(x_t @ W_iz.T + b_iz + h @ W_hz.T + b_hz)
            n = torch.tanh(x_t @ W_in.T + b_in + r * (h @ W_hn.T + b_hn))
            h = (1 - z) * n + z * h
            steps.append((r, z, n, h))
        return self._outputs(steps, trace), h


class LSTMLayer(RecurrentLayer):
    """LSTM, seed 001 A.3 and seed 002, one bias per gate:

        i_t = sigmoid(W_i x_t + U_i h_{t-1} + b_i)
        f_t = sigmoid(W_f x_t + U_f h_{t-1} + b_f)
        g_t = tanh(W_g x_t + U_g h_{t-1} + b_g)
        o_t = sigmoid(W_o x_t + U_o h_{t-1} + b_o)
        c_t = f_t * c_{t-1} + i_t * g_t
        h_t = o_t * tanh(c_t)

    Weights stack [i; f; g; o] (PyTorch's order, so nn.LSTM weights copy over
    with b = b_ih + b_hh). b_f starts at `keep_bias` (1, as seed 002).
    State is the pair (h, c).
    """

    cell = "lstm"
    n_gates = 4
    gate_names = ("i", "f", "g", "o", "c", "h")

    def reset_parameters(self, generator=None):
        super().reset_parameters(generator)
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                b_f = chrono_bias(H, self.chrono_tmax, generator)
                self.bias[H : 2 * H] = b_f
                self.bias[:H] = -b_f  # Tallec & Ollivier: b_i = -b_f
            else:
                self.bias[H : 2 * H] = self.keep_bias

    def forward(self, x, state=None, trace=None):
        W_i, W_f, W_g, W_o = self.weight_ih.chunk(4)  # (H, I) each
        U_i, U_f, U_g, U_o = self.weight_hh.chunk(4)  # (H, H) each
        b_i, b_f, b_g, b_o = self.bias.chunk(4)  # (H,) each
        h, c = (self._zeros(x), self._zeros(x)) if state is None else state  # (B, H) each
        steps = []
        for x_t in x.unbind(1):  # (B, I)
            i = torch.sigmoid(x_t @ W_i.T + h @ U_i.T + b_i)
            f = torch.sigmoid(x_t @ W_f.T + h @ U_f.T + b_f)
            g = torch.tanh(x_t @ W_g.T + h @ U_g.T + b_g)
            o = torch.sigmoid(x_t @ W_o.T + h @ U_o.T + b_o)
            c = f * c + i * g
            h = o * torch.tanh(c)
            steps.append((i, f, g, o, c, h))
        return self._outputs(steps, trace), (h, c)


# ---------------------------------------------------------------------------
# selective linear recurrence (seed 004). Both scans stay here: the loop is the
# recurrence as written, the parallel form is the associative scan seed 004
# teaches. The gates do not depend on h, so no recurrent matmul is left to
# optimise and ScanLayer serves the reference and fast backends alike;
# scan_mode picks the form (the loop is faster on a CPU, BENCHMARKS.md).


def scan_sequential(a, b, h0=None):
    """h_t = a_t * h_{t-1} + b_t, one step at a time. a, b (B, T, H); h0 (B, H)."""
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    outputs = []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):
        h = a_t * h + b_t
        outputs.append(h)
    return torch.stack(outputs, 1)  # (B, T, H)


def scan_parallel(a, b, h0=None):
    """The same recurrence as `scan_sequential` by a Hillis-Steele associative scan.

    The operator (a1, b1) + (a2, b2) = (a2*a1, a2*b1 + b2) is associative, so
    log2(T) doubling rounds give every prefix. We stay in linear space: products
    of many a_t in (0, 1) underflow to 0 only when their true value is below
    float's range, which is the right answer for the decayed contribution, and
    there is no division by a running product (which overflows) and no log of
    b (which can be negative). h0 enters as an extra term a_0*h0 in b_0.
    Work is O(T log T) instead of O(T), in log2(T) vectorised steps.
    """
    if h0 is not None:
        b = torch.cat([torch.addcmul(b[:, :1], a[:, :1], h0.unsqueeze(1)), b[:, 1:]], 1)
    T, shift = a.size(1), 1
    while shift < T:
        # combine each position t with the prefix ending at t - shift
        a_prev, b_prev = a[:, :-shift], b[:, :-shift]
        b = torch.cat([b[:, :shift], torch.addcmul(b[:, shift:], a[:, shift:], b_prev)], 1)
        a = torch.cat([a[:, :shift], a[:, shift:] * a_prev], 1)
        shift *= 2
    return b  # (B, T, H)


SCAN_MODES = {"parallel": scan_parallel, "sequential": scan_sequential}


def check_scan_mode(scan_mode):
    """LabError unless `scan_mode` names one of the two scans."""
    if not isinstance(scan_mode, str) or scan_mode not in SCAN_MODES:
        raise LabError(f"scan_mode must be one of {sorted(SCAN_MODES)}, got {scan_mode!r}")


class ScanLayer(nn.Module):
    """Selective linear recurrence, seed 004 (Mamba-style input-dependent gates):

        [A_t, B_t] = sigmoid(gate(e_t))         # gate: H -> gate_hidden (GELU) -> 2H
        h_t = A_t * h_{t-1} + B_t * e_t          # h_{-1} = 0 gives seed's h_0 = B_0 e_0

    e_t is the input, projected to H features when input_size != H. The gates
    depend on the input only, never on h, so the recurrence is an associative
    scan and runs either as a loop (`scan_mode="sequential"`) or in parallel
    (`"parallel"`, see `scan_parallel`). A_t is the keep gate.
    """

    cell = "scan"
    gate_names = ("A", "B", "h")
    gates_read_state = False

    def __init__(self, input_size, hidden_size, gate_hidden=None, scan_mode="parallel"):
        super().__init__()
        check_scan_mode(scan_mode)
        self.input_size, self.hidden_size, self.scan_mode = input_size, hidden_size, scan_mode
        gate_hidden = gate_hidden or 4 * hidden_size  # seed 004: 128 -> 512 -> 256
        self.in_proj = nn.Linear(input_size, hidden_size) if input_size != hidden_size else nn.Identity()
        self.gate = nn.Sequential(
            nn.Linear(hidden_size, gate_hidden), nn.GELU(), nn.Linear(gate_hidden, 2 * hidden_size)
        )

    def forward(self, x, state=None, trace=None):
        e = self.in_proj(x)  # (B, T, H)
        A, B = torch.sigmoid(self.gate(e)).chunk(2, -1)  # (B, T, H) each
        h = SCAN_MODES[self.scan_mode](A, B * e, state)
        if trace is not None:
            trace.update(A=A, B=B, h=h)
        return h, h[:, -1]


# ---------------------------------------------------------------------------
# minimal gated cells (Feng, Tung, Ahmed, Bengio and Hajimirsadeghi 2024, "Were RNNs All We Needed?"):
# a GRU and an LSTM whose gates read x_t alone. Without h in the gates the update is the scan's
# h_t = a_t * h_{t-1} + b_t, so the fast backend (lab/nets/kernels.py) runs a whole sequence as one scan.


class MinGRULayer(RecurrentLayer):
    """minGRU: the GRU with its gates and candidate computed from x_t alone, one bias per gate:

        z_t = sigmoid(W_z x_t + b_z)
        n_t = W_h x_t + b_h                        # the candidate h~_t, no tanh
        h_t = (1 - z_t) * h_{t-1} + z_t * n_t

    z_t overwrites, as in the seeds' GRU: z -> 0 keeps the memory, so the remember-more bias is
    b_z = -keep_bias. Weights stack [z; h]; there is no U.
    """

    cell = "min_gru"
    n_gates = 2
    gates_read_state = False
    gate_names = ("z", "n", "h")

    def reset_parameters(self, generator=None):
        super().reset_parameters(generator)
        H = self.hidden_size
        with torch.no_grad():
            self.bias[:H] = -chrono_bias(H, self.chrono_tmax, generator) if self.chrono_tmax else -self.keep_bias

    def forward(self, x, state=None, trace=None):
        W_z, W_h = self.weight_ih.chunk(2)  # (H, I) each
        b_z, b_h = self.bias.chunk(2)  # (H,) each
        h = self._zeros(x) if state is None else state  # (B, H)
        steps = []
        for x_t in x.unbind(1):  # (B, I)
            z = torch.sigmoid(x_t @ W_z.T + b_z)
            n = x_t @ W_h.T + b_h
            h = (1 - z) * h + z * n
            steps.append((z, n, h))
        return self._outputs(steps, trace), h


class MinLSTMLayer(RecurrentLayer):
    """minLSTM: the LSTM's forget and input gates from x_t alone, normalised to share one update:

        f_t = sigmoid(W_f x_t + b_f)
        i_t = sigmoid(W_i x_t + b_i)
        n_t = W_h x_t + b_h                        # the candidate h~_t, no tanh
        h_t = (f_t * h_{t-1} + i_t * n_t) / (f_t + i_t)

    Dividing by f_t + i_t makes the two shares sum to 1, so the state stays on the candidates' scale
    without an output gate or a separate cell state: the keep factor is f_t / (f_t + i_t). b_f starts
    at keep_bias. Weights stack [f; i; h]; there is no U.
    """

    cell = "min_lstm"
    n_gates = 3
    gates_read_state = False
    gate_names = ("f", "i", "n", "h")

    def reset_parameters(self, generator=None):
        super().reset_parameters(generator)
        H = self.hidden_size
        with torch.no_grad():
            self.bias[:H] = chrono_bias(H, self.chrono_tmax, generator) if self.chrono_tmax else self.keep_bias

    def forward(self, x, state=None, trace=None):
        W_f, W_i, W_h = self.weight_ih.chunk(3)  # (H, I) each
        b_f, b_i, b_h = self.bias.chunk(3)  # (H,) each
        h = self._zeros(x) if state is None else state  # (B, H)
        steps = []
        for x_t in x.unbind(1):  # (B, I)
            f = torch.sigmoid(x_t @ W_f.T + b_f)
            i = torch.sigmoid(x_t @ W_i.T + b_i)
            n = x_t @ W_h.T + b_h
            h = (f * h + i * n) / (f + i)
            steps.append((f, i, n, h))
        return self._outputs(steps, trace), h


# ---------------------------------------------------------------------------
# stacking and state


class RecurrentStack(nn.Module):
    """L recurrent layers (of any backend) with dropout, and optionally LayerNorm, between them.

        x -> layer_1 -> dropout -> [LayerNorm] -> layer_2 -> ... -> layer_L -> out

    `state` is a list with one entry per layer; `trace` a list of dicts, each
    filled by its layer and given the layer's input as "x" (B, T, I): what every
    gate of that layer read (lab.instruments.stepping shows it beside the gates). The
    stack's output is the last layer's raw output; the model adds its own
    dropout -> LayerNorm -> head after it.

    With `weight_dropout` p, each training forward pass zeroes a fraction p of every
    layer's hidden-to-hidden weights (DropConnect, as AWD-LSTM regularises its LSTMs):
    one mask for the whole sequence, so the recurrence itself is regularised while
    the cell's kernel, fused or not, runs unchanged.
    """

    def __init__(self, layers, dropout=0.0, norm_between_layers=False, weight_dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        inner = [layer.hidden_size for layer in layers[:-1]]
        self.norms = nn.ModuleList(nn.LayerNorm(h) for h in inner) if norm_between_layers else None
        self.dropout = Dropout(dropout)
        self.weight_dropout = weight_dropout

    def _run_layer(self, layer, x, state, trace):
        if not (self.training and self.weight_dropout):
            return layer(x, state, trace)
        # the hidden-to-hidden matrix is weight_hh in reference and fast layers, rnn.weight_hh_l0 in fused ones
        dropped = {
            name: dropout(w, self.weight_dropout)
            for name, w in layer.named_parameters()
            if name.rsplit(".", 1)[-1].startswith("weight_hh")
        }
        return torch.func.functional_call(layer, dropped, (x, state, trace))

    def forward(self, x, state=None, trace=None):
        state = state if state is not None else [None] * len(self.layers)
        new_state = []
        for l, layer in enumerate(self.layers):
            if l > 0:
                x = self.dropout(x)
                if self.norms is not None:
                    x = self.norms[l - 1](x)
            if trace is not None:
                trace[l]["x"] = x
            x, s = self._run_layer(layer, x, state[l], None if trace is None else trace[l])
            new_state.append(s)
        return x, new_state


def detach_state(state):
    """Cut the graph between truncated-BPTT windows (tensors, tuples, lists)."""
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, (list, tuple)):
        return type(state)(detach_state(s) for s in state)
    return state  # None, or a position counter


def sigmoid_time_constant(bias):
    """Retention sigmoid(b) of a keep gate, its time constant 1/(1-sigmoid(b)) and half-life.

    A keep gate held at g for k steps retains g**k of the old state (seed 002's
    0.99999**100); the half-life solves g**k = 1/2.

    Computed from -log g = softplus(-b) and 1/(1-g) = 1 + e^b rather than from g, so that a
    saturated bias gives limits instead of errors: b = 40 rounds g to 1.0 (1/(1-g) would divide
    by zero), b = -1000 overflows exp(-b); here they give tau ~2e17 and half-life 0.0007.
    """
    decay = max(-bias, 0.0) + math.log1p(math.exp(-abs(bias)))  # -log g, never overflows
    g = math.exp(-decay)
    try:
        tau = 1 + math.exp(bias)
    except OverflowError:  # b > 709: the gate never forgets in float64
        tau = math.inf
    half_life = math.log(2) / decay if decay > 0 else math.inf
    return g, tau, half_life
