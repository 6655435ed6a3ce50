"""The `fast` backend: the cells of lab/nets/cells.py, rewritten for training speed.

Glossary: B batch, T time, I input features, H hidden units, G gate blocks.

Each class here subclasses its reference cell (same parameters, same
initialisation, same checkpoints) and overrides only `forward`, computing the
same function; tests/test_cells.py checks outputs, states and every gradient
against the reference and torch.nn, and gradcheck checks the hand-written
backward passes. Asked for a trace, a fast layer runs the reference forward,
so the gates shown are always the readable code's own.

What makes them fast (BENCHMARKS-HISTORY.md has the measurements):
* The input projections of all T steps are one matmul outside the time loop;
  inside it only the recurrent matmul remains (`addmm`).
* rnn and gru_seed stay autograd loops over `x.unbind(1)` (indexing `x[:, t]`
  in the loop makes autograd accumulate a full-size gradient buffer per step).
  Being plain autograd, they also train under bfloat16 autocast (`--amp bf16`),
  the state kept in float32; the Functions below write into float32 buffers.
* lstm and gru_torch, the cells the speed benchmark measures against torch.nn,
  run their loop inside an autograd.Function with backpropagation through time
  written by hand (LSTMFunction, TorchGRUFunction), time-major (T, B, ·) so
  every step's slice is contiguous.
* scan has no kernel of its own: ScanLayer serves every backend (see lab/nets/cells.py).
* min_gru and min_lstm, whose gates read x_t alone, run as one scan (`_ScannedLayer`): the
  selective scan's loop or parallel scan, whichever `scan_mode` names.
"""

import torch
import torch.nn.functional as F

from lab.nets.cells import (
    SCAN_MODES,
    LSTMLayer,
    MinGRULayer,
    MinLSTMLayer,
    RNNLayer,
    SeedGRULayer,
    TorchGRULayer,
    check_scan_mode,
)


def _hoisted_loop(layer, x, state, step):
    """h_t = step(W x_t + b, h_{t-1}) over time, the input projections of all steps one matmul.
    x (B, T, I) -> out (B, T, H), h_T (B, H). Under bfloat16 autocast the matmuls give bfloat16 and `step`
    returns h in the state's own dtype (`type_as`, a no-op in float32), as the reference keeps it."""
    h = layer._zeros(x) if state is None else state  # (B, H)
    outputs = []
    for xw_t in F.linear(x, layer.weight_ih, layer.bias).unbind(1):  # (B, G*H) each
        h = step(xw_t, h)
        outputs.append(h)
    return torch.stack(outputs, 1), h


class FastRNNLayer(RNNLayer):
    """RNNLayer's function: h_t = tanh(addmm(W_xh x_t + b_h, h_{t-1}, W_hh^T)), the projection hoisted."""

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            return super().forward(x, state, trace)  # the gates of the readable code
        w_hh = self.weight_hh.t()
        return _hoisted_loop(self, x, state, lambda xw_t, h: torch.tanh(torch.addmm(xw_t, h, w_hh)).type_as(h))


class FastSeedGRULayer(SeedGRULayer):
    """SeedGRULayer's function: the projection hoisted, r and z from one addmm, h by lerp."""

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            return super().forward(x, state, trace)
        H = self.hidden_size
        u_rz, u_h = self.weight_hh[: 2 * H].t(), self.weight_hh[2 * H :].t()

        def step(xw_t, h):  # xw_t (B, 3H): W_r x + b_r, W_z x + b_z, W_h x + b_h
            r, z = torch.sigmoid(torch.addmm(xw_t[:, : 2 * H], h, u_rz)).chunk(2, 1)
            n = torch.tanh(torch.addmm(xw_t[:, 2 * H :], r * h, u_h))
            return torch.lerp(h, n.type_as(h), z.type_as(h))  # (1-z)*h + z*n

        return _hoisted_loop(self, x, state, step)


class FastTorchGRULayer(TorchGRULayer):
    """TorchGRULayer's function with hand-written BPTT (TorchGRUFunction)."""

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            return super().forward(x, state, trace)
        h0 = self._zeros(x) if state is None else state
        out = TorchGRUFunction.apply(x.transpose(0, 1), h0, self.weight_ih, self.weight_hh, self.bias, self.bias_hh)
        return out, out[:, -1]


class FastLSTMLayer(LSTMLayer):
    """LSTMLayer's function with hand-written BPTT (LSTMFunction)."""

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            return super().forward(x, state, trace)
        h0, c0 = (self._zeros(x), self._zeros(x)) if state is None else state
        # a stack of LSTM layers hands the next one its output time-major at no cost
        out, c = LSTMFunction.apply(x.transpose(0, 1), h0, c0, self.weight_ih, self.weight_hh, self.bias)
        return out, (out[:, -1], c)


class _ScannedLayer:
    """The fast form of a cell whose gates read x_t alone: every gate of every step in one matmul, then
    h_t = a_t * h_{t-1} + b_t as the selective scan's loop or parallel scan (`scan_mode`)."""

    def __init__(self, input_size, hidden_size, keep_bias=1.0, chrono_tmax=None, scan_mode="parallel"):
        check_scan_mode(scan_mode)
        super().__init__(input_size, hidden_size, keep_bias, chrono_tmax)
        self.scan_mode = scan_mode

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            return super().forward(x, state, trace)
        a, b = self.factors(F.linear(x, self.weight_ih, self.bias).chunk(self.n_gates, -1))
        h = SCAN_MODES[self.scan_mode](a, b, state)
        return h, h[:, -1]


class FastMinGRULayer(_ScannedLayer, MinGRULayer):
    """MinGRULayer's function as one scan: a = 1 - z, b = z * n."""

    def factors(self, gates):
        z, n = torch.sigmoid(gates[0]), gates[1]
        return 1 - z, z * n


class FastMinLSTMLayer(_ScannedLayer, MinLSTMLayer):
    """MinLSTMLayer's function as one scan: a = f / (f + i), b = i * n / (f + i)."""

    def factors(self, gates):
        f, i, n = torch.sigmoid(gates[0]), torch.sigmoid(gates[1]), gates[2]
        total = f + i
        return f / total, i * n / total


# ---------------------------------------------------------------------------
# pieces shared by the hand-written BPTT Functions


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


class TorchGRUFunction(torch.autograd.Function):
    """TorchGRULayer's forward pass, with backpropagation through time written
    by hand, as LSTMFunction does for the LSTM (see there for why).

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
    Returns out (B, T, H).
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
        ctx.set_materialize_grads(False)
        return hs[1:].transpose(0, 1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
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


class LSTMFunction(torch.autograd.Function):
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
    (or sum) each over all steps after it. x is time-major (T, B, I).
    Returns out (B, T, H) and c_T (B, H).
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
        ctx.set_materialize_grads(False)
        return hs[1:].transpose(0, 1), cs[T]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, grad_c):
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
