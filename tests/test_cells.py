"""Numerical checks of the from-scratch cells against torch.nn and the seeds' equations."""
import math

import pytest
import torch
import torch.nn as nn

from lab.cells import (CELLS, FusedLayer, LSTMLayer, RecurrentStack, RNNLayer, ScanLayer, SeedGRULayer,
                       TorchGRULayer, _LSTMFunction, _TorchGRUFunction, make_layer, scan_parallel, scan_sequential, sigmoid_time_constant)

TORCH_TWINS = {"rnn": (RNNLayer, nn.RNN), "gru_torch": (TorchGRULayer, nn.GRU), "lstm": (LSTMLayer, nn.LSTM)}


def _perturb(module, generator):
    """Random non-zero values everywhere (biases included) so no term hides."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)


@pytest.mark.parametrize("cell", sorted(TORCH_TWINS))
def test_scratch_matches_torch_nn_over_three_layers(cell):
    g = torch.Generator().manual_seed(0)
    scratch_cls, torch_cls = TORCH_TWINS[cell]
    I, H, L, B, T = 5, 7, 3, 4, 9
    ours = RecurrentStack([scratch_cls(I if l == 0 else H, H) for l in range(L)]).double()
    ref = torch_cls(I, H, num_layers=L, batch_first=True).double()
    _perturb(ours, g)
    with torch.no_grad():  # copy our weights into torch.nn; one scratch bias -> b_ih, b_hh = 0
        for l, layer in enumerate(ours.layers):
            getattr(ref, f"weight_ih_l{l}").copy_(layer.weight_ih)
            getattr(ref, f"weight_hh_l{l}").copy_(layer.weight_hh)
            getattr(ref, f"bias_ih_l{l}").copy_(layer.bias)
            hh = layer.bias_hh if layer.bias_hh is not None else torch.zeros_like(layer.bias)
            getattr(ref, f"bias_hh_l{l}").copy_(hh)
    x = torch.randn(B, T, I, generator=g, dtype=torch.float64)
    h0 = torch.randn(L, B, H, generator=g, dtype=torch.float64)
    c0 = torch.randn(L, B, H, generator=g, dtype=torch.float64)
    if cell == "lstm":
        out, state = ours(x, [(h0[l], c0[l]) for l in range(L)])
        ref_out, (ref_h, ref_c) = ref(x, (h0, c0))
        torch.testing.assert_close(torch.stack([s[0] for s in state]), ref_h, atol=1e-5, rtol=0)
        torch.testing.assert_close(torch.stack([s[1] for s in state]), ref_c, atol=1e-5, rtol=0)
    else:
        out, state = ours(x, list(h0))
        ref_out, ref_h = ref(x, h0)
        torch.testing.assert_close(torch.stack(state), ref_h, atol=1e-5, rtol=0)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)

    weights = torch.randn(out.shape, generator=g, dtype=torch.float64)
    (out * weights).sum().backward()
    (ref_out * weights).sum().backward()
    for l, layer in enumerate(ours.layers):
        torch.testing.assert_close(layer.weight_ih.grad, getattr(ref, f"weight_ih_l{l}").grad, atol=1e-5, rtol=0)
        torch.testing.assert_close(layer.weight_hh.grad, getattr(ref, f"weight_hh_l{l}").grad, atol=1e-5, rtol=0)
        torch.testing.assert_close(layer.bias.grad, getattr(ref, f"bias_ih_l{l}").grad, atol=1e-5, rtol=0)
        if layer.bias_hh is not None:
            torch.testing.assert_close(layer.bias_hh.grad, getattr(ref, f"bias_hh_l{l}").grad, atol=1e-5, rtol=0)


def test_seed_gru_matches_hand_computed_step_from_seed_001():
    g = torch.Generator().manual_seed(1)
    I, H = 3, 4
    layer = SeedGRULayer(I, H).double()
    _perturb(layer, g)
    x = torch.randn(2, 1, I, generator=g, dtype=torch.float64)
    h_prev = torch.randn(2, H, generator=g, dtype=torch.float64)
    W_r, W_z, W_h = layer.weight_ih.detach().chunk(3)
    U_r, U_z, U_h = layer.weight_hh.detach().chunk(3)
    b_r, b_z, b_h = layer.bias.detach().chunk(3)
    xt = x[:, 0]
    r = torch.sigmoid(xt @ W_r.T + h_prev @ U_r.T + b_r)
    z = torch.sigmoid(xt @ W_z.T + h_prev @ U_z.T + b_z)
    h_tilde = torch.tanh(xt @ W_h.T + (r * h_prev) @ U_h.T + b_h)
    expected = (1 - z) * h_prev + z * h_tilde
    trace = {}
    out, h = layer(x, h_prev, trace)
    torch.testing.assert_close(h, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(trace["z"][:, 0], z, atol=1e-12, rtol=0)
    torch.testing.assert_close(trace["r"][:, 0], r, atol=1e-12, rtol=0)


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_gradcheck_every_cell(cell):
    torch.manual_seed(0)
    layer = make_layer(cell, 3, 4).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    state = (h0, torch.randn(2, 4, dtype=torch.float64)) if cell == "lstm" else h0
    assert torch.autograd.gradcheck(lambda x, h0: layer(x, state if cell == "lstm" else h0)[0], (x, h0))


@pytest.mark.parametrize("cell", ["lstm", "gru_torch"])
def test_hand_written_bptt_passes_gradcheck_on_every_input(cell):
    """The LSTM's and PyTorch-convention GRU's backward passes are written by
    hand: check them against finite differences for x, the initial state, both
    weight matrices and the biases, through every output and the final cell state."""
    torch.manual_seed(0)
    T, B, I, H = 6, 2, 3, 4
    if cell == "lstm":
        function, shapes = _LSTMFunction, [(T, B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,)]
    else:
        function, shapes = _TorchGRUFunction, [(T, B, I), (B, H), (3 * H, I), (3 * H, H), (3 * H,), (3 * H,)]
    inputs = [torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in shapes]

    def differentiable_outputs(*inputs):
        return function.apply(*inputs)[:2 if cell == "lstm" else 1]  # out (and the LSTM's c_T)

    assert torch.autograd.gradcheck(differentiable_outputs, inputs)


@pytest.mark.parametrize("T", [1, 7, 128, 1024])
def test_parallel_scan_agrees_with_loop_float32(T):
    g = torch.Generator().manual_seed(T)
    a = torch.sigmoid(torch.randn(3, T, 16, generator=g) * 3)  # keep gates from ~0 to ~1
    b = torch.randn(3, T, 16, generator=g)
    h0 = torch.randn(3, 16, generator=g) * 5
    torch.testing.assert_close(scan_parallel(a, b, h0), scan_sequential(a, b, h0), atol=1e-4, rtol=0)
    torch.testing.assert_close(scan_parallel(a, b), scan_sequential(a, b), atol=1e-4, rtol=0)


def test_parallel_scan_survives_long_products_near_zero():
    a = torch.full((1, 1024, 4), 1e-3)  # the product over 1024 steps is 1e-3072: far below float range
    b = -torch.ones(1, 1024, 4)
    out = scan_parallel(a, b, torch.full((1, 4), 1e6))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, scan_sequential(a, b, torch.full((1, 4), 1e6)), atol=1e-4, rtol=1e-6)


def test_scan_layer_modes_agree_and_h0_continues_a_sequence():
    torch.manual_seed(0)
    layer = ScanLayer(8, 8, gate_hidden=16)
    x = torch.randn(2, 20, 8)
    full, h_full = layer(x)
    first, h_mid = layer(x[:, :12])
    second, h_end = layer(x[:, 12:], h_mid)
    torch.testing.assert_close(torch.cat([first, second], 1), full, atol=1e-5, rtol=0)
    layer.scan_mode = "sequential"
    torch.testing.assert_close(layer(x)[0], full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("cell", ["rnn", "gru_torch", "lstm"])
def test_fused_backend_computes_the_scratch_function(cell):
    torch.manual_seed(0)
    scratch = make_layer(cell, 3, 5)
    fused = FusedLayer(cell, 3, 5)
    fused.load_scratch(scratch)
    x = torch.randn(2, 6, 3)
    torch.testing.assert_close(fused(x)[0], scratch(x)[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(fused.to_scratch()(x)[0], scratch(x)[0], atol=1e-5, rtol=0)


def test_initialisation_follows_seed_003():
    H = 6
    gru = TorchGRULayer(2, H)
    assert torch.all(gru.bias[H:2 * H] == 1) and torch.all(gru.bias[:H] == 0) and torch.all(gru.bias_hh == 0)
    u_r = gru.weight_hh[:H].detach()
    torch.testing.assert_close(u_r @ u_r.T, torch.eye(H), atol=1e-5, rtol=0)  # orthogonal block
    seed = SeedGRULayer(2, H)
    assert torch.all(seed.bias[H:2 * H] == -1)  # z overwrites: -1 keeps as much as +1 does in torch's convention
    lstm = LSTMLayer(2, H)
    assert torch.all(lstm.bias[H:2 * H] == 1) and torch.all(lstm.bias[:H] == 0)
    chrono = TorchGRULayer(2, H, chrono_tmax=1024)
    b_z = chrono.bias[H:2 * H]
    assert torch.all(b_z >= 0) and torch.all(b_z <= torch.log(torch.tensor(1023.0))) and b_z.std() > 0


def test_keep_gate_time_constant():
    g, tau, half_life = sigmoid_time_constant(1.0)
    assert abs(g - 0.7310585786) < 1e-9
    assert abs(tau - 1 / (1 - g)) < 1e-12
    assert abs(g ** half_life - 0.5) < 1e-9


@pytest.mark.parametrize("bias", [40.0, 700.0, 1000.0, 1e308, math.inf, -40.0, -1000.0, -1e308, -math.inf])
def test_keep_gate_time_constant_of_a_saturated_bias_is_its_limit(bias):
    """Issue 14: a bias of 40 raised ZeroDivisionError (sigmoid rounds to 1.0), -1000 OverflowError."""
    g, tau, half_life = sigmoid_time_constant(bias)
    if bias > 0:  # the gate (nearly) never forgets
        assert g == 1.0 and tau >= 2e17 and half_life >= 1.6e17
        assert (tau, half_life) == ((math.inf, math.inf) if bias > 710 else (1 + math.exp(bias), half_life))
    else:  # the gate forgets at once
        assert g == pytest.approx(math.exp(bias), abs=1e-300) and tau == pytest.approx(1.0)
        assert half_life == pytest.approx(math.log(2) / -bias) if math.isfinite(bias) else half_life == 0


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_trace_has_documented_gates_and_shapes(cell):
    layer = make_layer(cell, 3, 4)
    trace = {}
    out, _ = layer(torch.randn(2, 5, 3), None, trace)
    assert set(trace) == set(layer.gate_names)
    for name, value in trace.items():
        assert value.shape == (2, 5, 4), name
    torch.testing.assert_close(trace["h"], out)
