"""Recurrent cells written from tensor ops, one sequence at a time.

Glossary: B batch, T time, I input features, H hidden units.

Every layer has the same contract, so one stack, one trainer, one sampler and
one introspection path serve them all:

    out, state = layer(x, state, trace=None)     # x (B, T, I) -> out (B, T, H)

* `state` is explicit: a tensor (B, H), or a tuple (h, c) for the LSTM; None
  means zeros. Carry it between calls for stateful generation or truncated BPTT.
* The input projections of all T steps are one matmul outside the time loop;
  the loop walks `x.unbind(1)` because indexing `x[:, t]` inside the loop makes
  autograd accumulate a full-size gradient buffer per step (quadratic in T).
  The LSTM and the PyTorch-convention GRU, the cells the speed benchmark
  measures against torch.nn, go one step further: their loop runs inside an
  autograd.Function with backpropagation through time written by hand
  (_LSTMFunction, _TorchGRUFunction), checked by gradcheck and against torch.nn.
* Pass a dict as `trace` and the layer fills it with every gate, (B, T, H) each,
  for the gate heatmaps and memory-decay measurements.

Cells (registry `CELLS`):
    rnn        vanilla RNN (seed 001 A.1)
    gru_seed   GRU, the seeds' own convention (seed 001 A.2, seed 000): z overwrites
    gru_torch  GRU, PyTorch's convention (seed 003, torch.nn.GRU): z keeps
    lstm       LSTM (seed 001 A.3, seed 002), forget-gate bias 1
    scan       selective linear recurrence (seed 004, Mamba-style)

Backends: `scratch` (these classes) and `fused` (torch.nn.RNN/GRU/LSTM, cuDNN on
a GPU) with the same API, as seed 003 does for speed.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

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
        raise ValueError(f"chrono_tmax must be an integer >= 3, got {t_max!r}")
    u = torch.rand(hidden_size, generator=generator) * (t_max - 2) + 1
    return torch.log(u)


class RecurrentLayer(nn.Module):
    """Shared plumbing: input projection, init, state handling, tracing."""

    n_gates = 1  # gate blocks stacked in weight_ih / weight_hh
    two_biases = False  # PyTorch's GRU needs b_hh apart from b_ih (it sits inside r * (...))
    gate_names = ()  # keys this layer writes into `trace`
    convention = ""  # one line naming the equations, shown in every summary

    def __init__(self, input_size, hidden_size, keep_bias=1.0, chrono_tmax=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.keep_bias = keep_bias
        self.chrono_tmax = chrono_tmax
        G, H = self.n_gates, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(G * H, input_size))
        self.weight_hh = nn.Parameter(torch.empty(G * H, H))
        self.bias = nn.Parameter(torch.zeros(G * H))
        self.bias_hh = nn.Parameter(torch.zeros(G * H)) if self.two_biases else None
        self.reset_parameters()

    def reset_parameters(self):
        _init_blocks(self.weight_ih, self.n_gates, nn.init.xavier_uniform_)
        _init_blocks(self.weight_hh, self.n_gates, nn.init.orthogonal_)
        with torch.no_grad():
            self.bias.zero_()
            if self.bias_hh is not None:
                self.bias_hh.zero_()

    def init_state(self, batch_size, device=None, dtype=None):
        return torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)

    def _state_or_zeros(self, x, state):
        return self.init_state(x.size(0), x.device, x.dtype) if state is None else state

    def _start(self, x, state):
        """Project every time step at once: (B, T, I) -> T tensors of (B, G*H)."""
        xw = F.linear(x, self.weight_ih, self.bias)  # (B, T, G*H)
        return xw.unbind(1), self._state_or_zeros(x, state)

    @staticmethod
    def _finish(outputs, trace, steps):
        if trace is not None:
            for name, values in steps.items():
                trace[name] = torch.stack(values, 1)  # (B, T, H)
        return torch.stack(outputs, 1)  # (B, T, H)


class RNNLayer(RecurrentLayer):
    """Vanilla RNN, seed 001 A.1:

        h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h)
    """

    gate_names = ("h",)
    convention = "vanilla RNN: h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h)"

    def forward(self, x, state=None, trace=None):
        xw, h = self._start(x, state)
        w_hh = self.weight_hh.t()
        outputs, steps = [], {"h": []}
        for xw_t in xw:
            h = torch.tanh(torch.addmm(xw_t, h, w_hh))
            outputs.append(h)
        steps["h"] = outputs
        return self._finish(outputs, trace, steps), h


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

    n_gates = 3
    gate_names = ("r", "z", "n", "h")
    convention = "GRU, seed convention: h_t = (1-z)*h_{t-1} + z*n_t, reset before U_h (z overwrites)"

    def reset_parameters(self):
        super().reset_parameters()
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                self.bias[H : 2 * H] = -chrono_bias(H, self.chrono_tmax)
            else:
                self.bias[H : 2 * H] = -self.keep_bias

    def forward(self, x, state=None, trace=None):
        xw, h = self._start(x, state)
        H = self.hidden_size
        u_rz, u_h = self.weight_hh[: 2 * H].t(), self.weight_hh[2 * H :].t()
        outputs, steps = [], {"r": [], "z": [], "n": []}
        for xw_t in xw:
            rz = torch.sigmoid(torch.addmm(xw_t[:, : 2 * H], h, u_rz))
            r, z = rz.chunk(2, 1)
            n = torch.tanh(torch.addmm(xw_t[:, 2 * H :], r * h, u_h))
            h = torch.lerp(h, n, z)  # (1-z)*h + z*n
            outputs.append(h)
            if trace is not None:
                steps["r"].append(r), steps["z"].append(z), steps["n"].append(n)
        steps["h"] = outputs
        return self._finish(outputs, trace, steps), h


# ---------------------------------------------------------------------------
# pieces shared by the hand-written BPTT Functions (_TorchGRUFunction, _LSTMFunction)


def _tanh_by_sigmoid(x, out):
    """tanh(x) = 2 sigmoid(2x) - 1, into `out` (may be x): PyTorch's CPU sigmoid
    is several times faster than its tanh."""
    return torch.mul(x, 2, out=out).sigmoid_().mul_(2).sub_(1)


def _project_time_major(x, weight_ih, bias):
    """Every step's input projection as one matmul: x (T, B, I) -> x (T*B, I), W x + b (T, B, G*H)."""
    T, B = x.size(0), x.size(1)
    x = x.reshape(T * B, -1)
    return x, torch.addmm(bias, x, weight_ih.t()).view(T, B, -1)


def _projection_grads(grad_pre, x, weight_ih, needs_grad_x):
    """Gradients of _project_time_major's x, W and b, one matmul or sum each over all steps,
    given grad_pre (T, B, G*H), the loss's gradient at W x + b."""
    T, B = grad_pre.size(0), grad_pre.size(1)
    grad_pre = grad_pre.view(T * B, -1)
    grad_x = (grad_pre @ weight_ih).view(T, B, -1) if needs_grad_x else None
    return grad_x, grad_pre.t() @ x, grad_pre.sum(0)


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

    n_gates = 3
    two_biases = True
    gate_names = ("r", "z", "n", "h")
    convention = "GRU, PyTorch convention: h_t = (1-z)*n_t + z*h_{t-1}, r*(W_hn h + b_hn) (z keeps)"

    def reset_parameters(self):
        super().reset_parameters()
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                self.bias[H : 2 * H] = chrono_bias(H, self.chrono_tmax)
            else:
                self.bias[H : 2 * H] = self.keep_bias

    def forward(self, x, state=None, trace=None):
        h0 = self._state_or_zeros(x, state)
        # time-major inside, as the LSTM (see there)
        out, gates = _TorchGRUFunction.apply(x.transpose(0, 1), h0, self.weight_ih, self.weight_hh,
                                             self.bias, self.bias_hh)
        if trace is not None:
            for name, value in zip("rzn", gates.chunk(3, 2)):
                trace[name] = value.transpose(0, 1)  # (B, T, H)
            trace["h"] = out.detach()
        return out, out[:, -1]


class _TorchGRUFunction(torch.autograd.Function):
    """TorchGRULayer's forward pass, with backpropagation through time written
    by hand, as _LSTMFunction does for the LSTM (see there for why).

    The GRU has one recursive quantity, h, so every gradient at step t is dh_t
    times a factor known after the forward pass (a = pre-activations,
    u_t = W_hn h_{t-1} + b_hn):

        dL/da_r = dh_t * (1-z)(1-n^2) u_t r(1-r)    (same for W_ir x and W_hr h)
        dL/da_z = dh_t * (h_{t-1} - n) z(1-z)       (same for W_iz x and W_hz h)
        dL/d(W_in x_t) = dh_t * (1-z)(1-n^2),  dL/du_t = dh_t * (1-z)(1-n^2) r
        dh_{t-1} = dL/dout_{t-1} + z * dh_t + [dL/da_r, dL/da_z, dL/du_t] @ W_hh

    The factors are computed for all steps before the loop; the loop keeps
    the products with dh and the matmul with W_hh; weight, bias and input
    gradients are one matmul (or sum) each after it. x is time-major (T, B, I).
    Returns out (B, T, H) and, for tracing, the gates r, z, n (T, B, 3H),
    which carry no gradient.
    """

    @staticmethod
    def forward(ctx, x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
        T, B, H = x.size(0), x.size(1), h0.size(1)
        x, gates = _project_time_major(x, weight_ih, bias_ih)  # gates become r, z, n
        hws = x.new_empty(T, B, 3 * H)  # W_hh h_{t-1} + b_hh
        hs = x.new_empty(T + 1, B, H)  # h_0 .. h_T
        hs[0] = h0
        w_hh = weight_hh.t()
        for t in range(T):
            hw = torch.addmm(bias_hh, hs[t], w_hh, out=hws[t])
            g = gates[t]
            r, z = g[:, : 2 * H].add_(hw[:, : 2 * H]).sigmoid_().chunk(2, 1)
            n_pre = g[:, 2 * H :].addcmul_(r, hw[:, 2 * H :])
            n = _tanh_by_sigmoid(n_pre, out=n_pre)
            torch.lerp(n, hs[t], z, out=hs[t + 1])  # (1-z)*n + z*h
        ctx.save_for_backward(x, gates, hws, hs, weight_ih, weight_hh)
        ctx.mark_non_differentiable(gates)
        ctx.set_materialize_grads(False)
        return hs[1:].transpose(0, 1), gates

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, _grad_gates):
        x, gates, hws, hs, weight_ih, weight_hh = ctx.saved_tensors
        T, B, H = hs.size(0) - 1, hs.size(1), hs.size(2)
        r, z, n = gates.chunk(3, 2)
        one_minus_z = 1 - z
        # grad_x_side / grad_h_side start as the factors and are multiplied by dh in the loop
        grad_x_side = torch.empty_like(gates)
        grad_r, grad_z, grad_n = grad_x_side.chunk(3, 2)
        torch.addcmul(one_minus_z, one_minus_z, n * n, value=-1, out=grad_n)  # (1-z)(1-n^2): n's pre-activation
        torch.addcmul(r, r, r, value=-1, out=grad_r).mul_(grad_n).mul_(hws[..., 2 * H :])
        torch.sub(hs[:-1], n, out=grad_z).mul_(z).mul_(one_minus_z)
        grad_h_side = grad_x_side.clone()
        grad_h_side[..., 2 * H :].mul_(r)
        zeros = hs.new_zeros(B, H)
        grad_out = hs.new_zeros(T, B, H) if grad_out is None else grad_out.transpose(0, 1)  # (T, B, H)
        dh = grad_out[T - 1]
        for t in range(T - 1, -1, -1):
            grad_x_side[t].view(B, 3, H).mul_(dh.unsqueeze(1))
            grad_h_side[t].view(B, 3, H).mul_(dh.unsqueeze(1))
            dh = torch.addcmul(grad_out[t - 1] if t else zeros, z[t], dh).addmm_(grad_h_side[t], weight_hh)
        grad_x, grad_w_ih, grad_b_ih = _projection_grads(grad_x_side, x, weight_ih, ctx.needs_input_grad[0])
        grad_h_side = grad_h_side.view(T * B, 3 * H)
        return grad_x, dh, grad_w_ih, grad_h_side.t() @ hs[:-1].reshape(T * B, H), grad_b_ih, grad_h_side.sum(0)


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

    n_gates = 4
    gate_names = ("i", "f", "g", "o", "c", "h")
    convention = "LSTM: c_t = f*c_{t-1} + i*g, h_t = o*tanh(c_t) (f keeps)"

    def reset_parameters(self):
        super().reset_parameters()
        H = self.hidden_size
        with torch.no_grad():
            if self.chrono_tmax:
                b_f = chrono_bias(H, self.chrono_tmax)
                self.bias[H : 2 * H] = b_f
                self.bias[:H] = -b_f  # Tallec & Ollivier: b_i = -b_f
            else:
                self.bias[H : 2 * H] = self.keep_bias

    def init_state(self, batch_size, device=None, dtype=None):
        zeros = super().init_state
        return zeros(batch_size, device, dtype), zeros(batch_size, device, dtype)

    def forward(self, x, state=None, trace=None):
        h0, c0 = self._state_or_zeros(x, state)
        # time-major (T, B, ·) inside, so every step's slice is contiguous; a
        # stack of LSTM layers hands the next one its output time-major at no cost
        out, c, acts, cs = _LSTMFunction.apply(x.transpose(0, 1), h0, c0, self.weight_ih, self.weight_hh, self.bias)
        if trace is not None:
            for name, value in zip("ifgo", acts.chunk(4, 2)):
                trace[name] = value.transpose(0, 1)  # (B, T, H)
            trace["c"], trace["h"] = cs.transpose(0, 1), out.detach()
        return out, (out[:, -1], c)


class _LSTMFunction(torch.autograd.Function):
    """LSTMLayer's forward pass, with backpropagation through time written by hand.

    Autograd would record ~10 small ops per step and replay ~25 in the
    backward pass, with a small (4H x B) @ (B x H) matmul per step for the
    weight gradient. Here the input projection of all steps is one matmul
    straight into the gate buffer, the forward loop writes into preallocated
    buffers, and the backward loop keeps only what is truly recursive
    (a_t = the four gates' pre-activations, W_ih x_t + W_hh h_{t-1} + b):

        dh_t    = dL/dout_t + dL/da_{t+1} @ W_hh
        dc_t    = dh_t * o_t * (1 - tanh(c_t)^2) + dc_{t+1} * f_{t+1}
        dL/da_t = [dc_t * g_t i_t (1 - i_t),  dc_t * c_{t-1} f_t (1 - f_t),
                   dc_t * i_t (1 - g_t^2),    dh_t * tanh(c_t) o_t (1 - o_t)]

    The factors that do not depend on dh or dc are computed for all steps at
    once before the loop; the gradients of W_hh, W_ih, b and x are one matmul
    (or sum) each over all steps after it. BENCHMARKS.md has the speed-up;
    tests/test_cells.py checks the gradients against nn.LSTM and gradcheck.
    x is time-major (T, B, I). Returns out (B, T, H), c_T (B, H), and for
    tracing the activated gates (T, B, 4H) and cell states (T, B, H), which
    carry no gradient.
    """

    @staticmethod
    def forward(ctx, x, h0, c0, weight_ih, weight_hh, bias):
        T, B, H = x.size(0), x.size(1), h0.size(1)
        x, acts = _project_time_major(x, weight_ih, bias)  # acts become i, f, g, o
        cs = x.new_empty(T + 1, B, H)  # c_0 .. c_T
        hs = x.new_empty(T + 1, B, H)  # h_0 .. h_T
        tanh_cs = x.new_empty(T, B, H)  # tanh(c_1) .. tanh(c_T), reused by the backward pass
        cs[0], hs[0] = c0, h0
        w_hh = weight_hh.t()
        for t in range(T):
            a = acts[t].addmm_(hs[t], w_hh)  # (B, 4H)
            # g's tanh as in _tanh_by_sigmoid, so that one sigmoid covers all four gate blocks
            i, f, g, o = a.chunk(4, 1)
            g.mul_(2)
            torch.sigmoid_(a)
            g.mul_(2).sub_(1)
            torch.mul(f, cs[t], out=cs[t + 1]).addcmul_(i, g)
            torch.mul(o, _tanh_by_sigmoid(cs[t + 1], out=tanh_cs[t]), out=hs[t + 1])
        ctx.save_for_backward(x, acts, cs, hs, tanh_cs, weight_ih, weight_hh)
        ctx.mark_non_differentiable(acts, cs)
        ctx.set_materialize_grads(False)
        return hs[1:].transpose(0, 1), cs[T], acts, cs[1:]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, grad_c, _grad_acts, _grad_cs):
        x, acts, cs, hs, tanh_cs, weight_ih, weight_hh = ctx.saved_tensors
        T, B, H = tanh_cs.shape
        i, f, g, o = acts.chunk(4, 2)
        dc_per_dh = torch.addcmul(o, hs[1:], tanh_cs, value=-1)  # o (1 - tanh(c)^2), as h = o tanh(c)
        # grad_a starts as the factors that multiply dc (i, f, g) or dh (o) in the loop
        grad_a = torch.empty_like(acts)
        grad_i, grad_f, grad_g, grad_o = grad_a.chunk(4, 2)
        torch.addcmul(i, i, i, value=-1, out=grad_i).mul_(g)  # g i (1 - i)
        torch.addcmul(f, f, f, value=-1, out=grad_f).mul_(cs[:-1])  # c_{t-1} f (1 - f)
        torch.addcmul(i, i * g, g, value=-1, out=grad_g)  # i (1 - g^2)
        torch.addcmul(o, o, o, value=-1, out=grad_o).mul_(tanh_cs)  # tanh(c) o (1 - o)
        zeros = hs.new_zeros(B, H)
        grad_out = hs.new_zeros(T, B, H) if grad_out is None else grad_out.transpose(0, 1)  # (T, B, H)
        dh, dc_carry = grad_out[T - 1], zeros if grad_c is None else grad_c
        for t in range(T - 1, -1, -1):
            dc = torch.addcmul(dc_carry, dh, dc_per_dh[t])
            grad_a[t, :, : 3 * H].view(B, 3, H).mul_(dc.unsqueeze(1))
            grad_a[t, :, 3 * H :].mul_(dh)
            dc_carry = dc * f[t]
            dh = torch.addmm(grad_out[t - 1] if t else zeros, grad_a[t], weight_hh)
        grad_x, grad_w_ih, grad_b = _projection_grads(grad_a, x, weight_ih, ctx.needs_input_grad[0])
        grad_w_hh = grad_a.view(T * B, 4 * H).t() @ hs[:-1].reshape(T * B, H)
        return grad_x, dh, dc_carry, grad_w_ih, grad_w_hh, grad_b


# ---------------------------------------------------------------------------
# selective linear recurrence (seed 004)


def scan_sequential(a, b, h0=None):
    """h_t = a_t * h_{t-1} + b_t, one step at a time. a, b (B, T, H); h0 (B, H)."""
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    outputs = []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):
        h = torch.addcmul(b_t, a_t, h)
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


class ScanLayer(nn.Module):
    """Selective linear recurrence, seed 004 (Mamba-style input-dependent gates):

        [A_t, B_t] = sigmoid(gate(e_t))         gate: H -> gate_hidden (GELU) -> 2H
        h_t = A_t * h_{t-1} + B_t * e_t          (h_{-1} = 0 gives seed's h_0 = B_0 e_0)

    e_t is the input, projected to H features when input_size != H. The gates
    depend on the input only, never on h, so the recurrence is an associative
    scan and runs either as a loop (`scan_mode="sequential"`) or in parallel
    (`"parallel"`, see `scan_parallel`). A_t is the keep gate.
    """

    gate_names = ("A", "B", "h")
    convention = "selective scan: [A,B] = sigmoid(gate(e_t)), h_t = A*h_{t-1} + B*e_t (A keeps)"

    def __init__(self, input_size, hidden_size, gate_hidden=None, scan_mode="parallel"):
        super().__init__()
        if scan_mode not in SCAN_MODES:
            raise ValueError(f"scan_mode must be one of {sorted(SCAN_MODES)}, got {scan_mode!r}")
        self.input_size, self.hidden_size, self.scan_mode = input_size, hidden_size, scan_mode
        gate_hidden = gate_hidden or 4 * hidden_size  # seed 004: 128 -> 512 -> 256
        self.in_proj = nn.Linear(input_size, hidden_size) if input_size != hidden_size else nn.Identity()
        self.gate = nn.Sequential(
            nn.Linear(hidden_size, gate_hidden), nn.GELU(), nn.Linear(gate_hidden, 2 * hidden_size)
        )

    def init_state(self, batch_size, device=None, dtype=None):
        return torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x, state=None, trace=None):
        e = self.in_proj(x)  # (B, T, H)
        A, B = torch.sigmoid(self.gate(e)).chunk(2, -1)  # (B, T, H) each
        h = SCAN_MODES[self.scan_mode](A, B * e, state)
        if trace is not None:
            trace.update(A=A, B=B, h=h)
        return h, h[:, -1]


# ---------------------------------------------------------------------------
# fused backend: torch.nn.RNN / GRU / LSTM (cuDNN on a GPU), same contract

FUSED_MODULES = {"rnn": nn.RNN, "gru_torch": nn.GRU, "lstm": nn.LSTM}


class FusedLayer(nn.Module):
    """One torch.nn.RNN/GRU/LSTM layer behind the scratch contract.

    Initialised exactly like its scratch twin; it cannot trace gates, so the
    introspection tools run `to_scratch()` first, which computes the same function.
    """

    def __init__(self, cell, input_size, hidden_size, keep_bias=1.0, chrono_tmax=None):
        super().__init__()
        if cell not in FUSED_MODULES:
            raise ValueError(f"backend 'fused' supports cells {sorted(FUSED_MODULES)}, not {cell!r}")
        self.cell, self.input_size, self.hidden_size = cell, input_size, hidden_size
        self.rnn = FUSED_MODULES[cell](input_size, hidden_size, batch_first=True)
        twin = self._scratch_class()(input_size, hidden_size, keep_bias, chrono_tmax)
        self.load_scratch(twin)
        self.gate_names, self.convention = twin.gate_names, twin.convention + " [fused torch.nn]"

    def _scratch_class(self):
        return CELLS[self.cell]

    def load_scratch(self, layer):
        """Copy a scratch layer's weights in (one scratch bias -> b_ih, b_hh = 0)."""
        with torch.no_grad():
            self.rnn.weight_ih_l0.copy_(layer.weight_ih)
            self.rnn.weight_hh_l0.copy_(layer.weight_hh)
            self.rnn.bias_ih_l0.copy_(layer.bias)
            self.rnn.bias_hh_l0.copy_(layer.bias_hh if layer.bias_hh is not None else torch.zeros_like(layer.bias))

    def to_scratch(self):
        """The scratch layer computing the same function (b = b_ih + b_hh where it has one bias)."""
        p = next(self.parameters())
        layer = self._scratch_class()(self.input_size, self.hidden_size).to(p.device, p.dtype)
        with torch.no_grad():
            layer.weight_ih.copy_(self.rnn.weight_ih_l0)
            layer.weight_hh.copy_(self.rnn.weight_hh_l0)
            if layer.bias_hh is not None:
                layer.bias.copy_(self.rnn.bias_ih_l0)
                layer.bias_hh.copy_(self.rnn.bias_hh_l0)
            else:
                layer.bias.copy_(self.rnn.bias_ih_l0 + self.rnn.bias_hh_l0)
        return layer

    def init_state(self, batch_size, device=None, dtype=None):
        h = torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)
        return (h, h.clone()) if self.cell == "lstm" else h

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            raise ValueError("fused layers cannot trace gates; trace the scratch twin (to_scratch())")
        if state is None:
            out, state = self.rnn(x)
        elif isinstance(state, tuple):
            out, state = self.rnn(x, tuple(s.unsqueeze(0).contiguous() for s in state))
        else:
            out, state = self.rnn(x, state.unsqueeze(0).contiguous())
        if isinstance(state, tuple):
            return out, tuple(s.squeeze(0) for s in state)
        return out, state.squeeze(0)


CELLS = {
    "rnn": RNNLayer,
    "gru_seed": SeedGRULayer,
    "gru_torch": TorchGRULayer,
    "lstm": LSTMLayer,
    "scan": ScanLayer,
}
BACKENDS = ("scratch", "fused")


def check_cell(cell, backend="scratch"):
    if cell not in CELLS:
        raise ValueError(f"cell: unknown cell {cell!r}; valid cells are {sorted(CELLS)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend: unknown backend {backend!r}; valid backends are {list(BACKENDS)}")
    if backend == "fused" and cell not in FUSED_MODULES:
        raise ValueError(f"backend: 'fused' exists only for cells {sorted(FUSED_MODULES)}, not {cell!r}")


def make_layer(cell, input_size, hidden_size, backend="scratch", keep_bias=1.0, chrono_tmax=None,
               scan_mode="parallel", gate_hidden=None):
    """Build one recurrent layer from the registry."""
    check_cell(cell, backend)
    if cell == "scan":
        return ScanLayer(input_size, hidden_size, gate_hidden=gate_hidden, scan_mode=scan_mode)
    if backend == "fused":
        return FusedLayer(cell, input_size, hidden_size, keep_bias, chrono_tmax)
    return CELLS[cell](input_size, hidden_size, keep_bias, chrono_tmax)


class RecurrentStack(nn.Module):
    """L recurrent layers with dropout, and optionally LayerNorm, between them.

        x -> layer_1 -> dropout -> [LayerNorm] -> layer_2 -> ... -> layer_L -> out

    `state` is a list with one entry per layer; `trace` a list of dicts. The
    stack's output is the last layer's raw output; the model adds its own
    dropout -> LayerNorm -> head after it.
    """

    def __init__(self, layers, dropout=0.0, norm_between_layers=False):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        inner = [layer.hidden_size for layer in layers[:-1]]
        self.norms = nn.ModuleList(nn.LayerNorm(h) for h in inner) if norm_between_layers else None
        self.dropout = nn.Dropout(dropout)

    def init_state(self, batch_size, device=None, dtype=None):
        return [layer.init_state(batch_size, device, dtype) for layer in self.layers]

    def forward(self, x, state=None, trace=None):
        state = state if state is not None else [None] * len(self.layers)
        new_state = []
        for l, layer in enumerate(self.layers):
            if l > 0:
                x = self.dropout(x)
                if self.norms is not None:
                    x = self.norms[l - 1](x)
            x, s = layer(x, state[l], None if trace is None else trace[l])
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
