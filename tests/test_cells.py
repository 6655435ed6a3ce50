"""Numerical checks of the cells: every backend against the others, against torch.nn and the seeds' equations."""

import math
import re

import pytest
import torch
import torch.nn as nn

from lab.nets.backends import BACKENDS, FUSED_MODULES, FusedLayer, check_cell, default_backend, make_layer
from lab.nets.cells import (
    LSTMLayer,
    RecurrentStack,
    ScanLayer,
    SeedGRULayer,
    TorchGRULayer,
    scan_parallel,
    scan_sequential,
    sigmoid_time_constant,
)
from lab.nets.families import CELLS, FAMILIES
from lab.nets.kernels import LSTMFunction, TorchGRUFunction
from lab.nets.models import LMConfig

TORCH_TWINS = {"rnn": nn.RNN, "gru_torch": nn.GRU, "lstm": nn.LSTM}
# every (cell, backend) whose code differs from the reference's
OTHER_BACKENDS = [
    (cell, backend) for backend in ("fast", "fused") for cell in sorted(BACKENDS[backend]) if cell != "scan"
]  # the scan has one implementation (lab.nets.cells.ScanLayer) in every backend


def _perturb(module, generator):
    """Random non-zero values everywhere (biases included) so no term hides."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)


@pytest.mark.parametrize("backend", ["reference", "fast"])
@pytest.mark.parametrize("cell", sorted(TORCH_TWINS))
def test_lab_backends_match_torch_nn_over_three_layers(cell, backend):
    g = torch.Generator().manual_seed(0)
    torch_cls = TORCH_TWINS[cell]
    I, H, L, B, T = 5, 7, 3, 4, 9
    ours = RecurrentStack([make_layer(cell, I if l == 0 else H, H, backend) for l in range(L)]).double()
    ref = torch_cls(I, H, num_layers=L, batch_first=True).double()
    _perturb(ours, g)
    with torch.no_grad():  # copy our weights into torch.nn; one lab bias -> b_ih, b_hh = 0
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


@pytest.mark.parametrize("backend", ["reference", "fast"])
def test_seed_gru_matches_hand_computed_step_from_seed_001(backend):
    g = torch.Generator().manual_seed(1)
    I, H = 3, 4
    layer = make_layer("gru_seed", I, H, backend).double()
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
    torch.testing.assert_close(layer(x, h_prev)[1], expected, atol=1e-12, rtol=0)
    trace = {}
    out, h = layer(x, h_prev, trace)
    torch.testing.assert_close(h, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(trace["z"][:, 0], z, atol=1e-12, rtol=0)
    torch.testing.assert_close(trace["r"][:, 0], r, atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend", ["reference", "fast"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_gradcheck_every_cell(cell, backend):
    torch.manual_seed(0)
    layer = make_layer(cell, 3, 4, backend).double()
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
        function, shapes = LSTMFunction, [(T, B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,)]
    else:
        function, shapes = TorchGRUFunction, [(T, B, I), (B, H), (3 * H, I), (3 * H, H), (3 * H,), (3 * H,)]
    inputs = [torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in shapes]

    assert torch.autograd.gradcheck(function.apply, inputs)  # out (and the LSTM's c_T)


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


@pytest.mark.parametrize("cell", sorted(FUSED_MODULES))
def test_fused_layer_round_trips_the_reference_weights(cell):
    torch.manual_seed(0)
    reference = make_layer(cell, 3, 5, "reference")
    _perturb(reference, torch.Generator().manual_seed(1))
    fused = FusedLayer(cell, 3, 5)
    fused.load_reference(reference)
    x = torch.randn(2, 6, 3)
    torch.testing.assert_close(fused(x)[0], reference(x)[0], atol=1e-5, rtol=0)
    twin = fused.to_reference()
    assert type(twin) is CELLS[cell]
    torch.testing.assert_close(twin(x)[0], reference(x)[0], atol=1e-5, rtol=0)


def _stack(cell, backend, reference_stack):
    """A stack of `backend` layers computing `reference_stack`'s function, weights copied."""
    layers = []
    for ref in reference_stack.layers:
        layer = make_layer(cell, ref.input_size, ref.hidden_size, backend).double()
        if backend == "fused":
            layer.load_reference(ref)
        else:
            layer.load_state_dict(ref.state_dict())  # the fast layers keep the reference's parameters
        layers.append(layer)
    stack = RecurrentStack(layers, norm_between_layers=True).double()
    stack.norms.load_state_dict(reference_stack.norms.state_dict())
    return stack


def _run(stack, x, state, out_weights, state_weights):
    """out, final state (flattened), and the gradients of a loss reading both, for x and the initial state."""
    x = x.clone().requires_grad_()
    state = [tuple(s.clone().requires_grad_() for s in layer) for layer in state]
    inputs = [x] + [s for layer in state for s in layer]
    out, final = stack(x, [layer if len(layer) == 2 else layer[0] for layer in state])
    final = [s for layer in final for s in (layer if isinstance(layer, tuple) else (layer,))]  # h (and c) per layer
    loss = (out * out_weights).sum() + sum((s * w).sum() for s, w in zip(final, state_weights))
    loss.backward()
    return out, final, [t.grad for t in inputs]


def _parameter_grads(stack, backend):
    """Each layer's gradients in the reference's names: weight_ih, weight_hh, bias (and bias_hh)."""
    grads = []
    for layer in stack.layers:
        if backend == "fused":
            rnn = layer.rnn
            named = {"weight_ih": rnn.weight_ih_l0, "weight_hh": rnn.weight_hh_l0, "bias": rnn.bias_ih_l0}
            if layer.cell == "gru_torch":
                named["bias_hh"] = rnn.bias_hh_l0
            else:  # the reference's one bias b = b_ih + b_hh gets both of torch.nn's gradients, which are equal
                torch.testing.assert_close(rnn.bias_hh_l0.grad, rnn.bias_ih_l0.grad, atol=1e-12, rtol=0)
        else:
            named = {name: p for name, p in layer.named_parameters() if "bias" in name or "weight" in name}
        grads.append({name: p.grad for name, p in named.items()})
    return grads


@pytest.mark.parametrize("cell, backend", OTHER_BACKENDS)
def test_backends_agree_with_the_reference_in_float64(cell, backend):
    """Outputs, final states, and the gradients of every parameter, of the input and of the
    initial state agree with the reference over three stacked layers (LayerNorm between them)
    from a non-zero initial state."""
    g = torch.Generator().manual_seed(2)
    I, H, L, B, T = 4, 6, 3, 3, 11
    reference = RecurrentStack(
        [make_layer(cell, I if l == 0 else H, H, "reference") for l in range(L)], norm_between_layers=True
    ).double()
    _perturb(reference, g)
    other = _stack(cell, backend, reference)
    n_state = 2 if cell == "lstm" else 1
    x = torch.randn(B, T, I, generator=g, dtype=torch.float64)
    state = [tuple(torch.randn(B, H, generator=g, dtype=torch.float64) for _ in range(n_state)) for _ in range(L)]
    out_weights = torch.randn(B, T, H, generator=g, dtype=torch.float64)
    state_weights = [torch.randn(B, H, generator=g, dtype=torch.float64) for _ in range(L * n_state)]
    expected = _run(reference, x, state, out_weights, state_weights)
    got = _run(other, x, state, out_weights, state_weights)
    for name, e, o in zip(("output", "final states", "input and initial-state gradients"), expected, got):
        torch.testing.assert_close(o, e, atol=1e-10, rtol=1e-10, msg=lambda m: f"{name}: {m}")
    for l, (e, o) in enumerate(zip(_parameter_grads(reference, "reference"), _parameter_grads(other, backend))):
        assert set(e) == set(o)
        for name in e:
            torch.testing.assert_close(
                o[name], e[name], atol=1e-10, rtol=1e-10, msg=lambda m: f"layer {l} {name}.grad: {m}"
            )
    for e_norm, o_norm in zip(reference.norms, other.norms):  # the LayerNorms between layers see the same gradient
        torch.testing.assert_close(o_norm.weight.grad, e_norm.weight.grad, atol=1e-10, rtol=1e-10)


def test_backend_registry_names_the_valid_choices():
    assert list(BACKENDS) == ["reference", "fast", "fused"]
    with pytest.raises(ValueError, match=r"valid backends are \['reference', 'fast', 'fused'\]"):
        check_cell("lstm", "scratch")  # the legacy name is mapped where configs are read, not here
    with pytest.raises(ValueError, match="'fused' exists only for cells"):
        make_layer("gru_seed", 3, 4, "fused")
    assert type(make_layer("lstm", 3, 4, "reference")) is LSTMLayer
    assert type(make_layer("lstm", 3, 4, "fast")) is not LSTMLayer and isinstance(make_layer("lstm", 3, 4), LSTMLayer)


def test_default_backend_is_cudnn_on_cuda_and_the_fastest_measured_on_cpu():
    assert {cell: default_backend(cell, "cpu") for cell in CELLS} == {**dict.fromkeys(CELLS, "fast"), "lstm": "fused"}
    on_cuda = {cell: default_backend(cell, torch.device("cuda")) for cell in CELLS}
    assert on_cuda == {cell: "fused" if FAMILIES[cell].fused else "fast" for cell in CELLS}
    assert [c for c in CELLS if on_cuda[c] == "fused"] == ["rnn", "gru_torch", "lstm"]


def test_initialisation_follows_seed_003():
    H = 6
    gru = TorchGRULayer(2, H)
    assert torch.all(gru.bias[H : 2 * H] == 1) and torch.all(gru.bias[:H] == 0) and torch.all(gru.bias_hh == 0)
    u_r = gru.weight_hh[:H].detach()
    torch.testing.assert_close(u_r @ u_r.T, torch.eye(H), atol=1e-5, rtol=0)  # orthogonal block
    seed = SeedGRULayer(2, H)
    assert torch.all(seed.bias[H : 2 * H] == -1)  # z overwrites: -1 keeps as much as +1 does in torch's convention
    lstm = LSTMLayer(2, H)
    assert torch.all(lstm.bias[H : 2 * H] == 1) and torch.all(lstm.bias[:H] == 0)
    chrono = TorchGRULayer(2, H, chrono_tmax=1024)
    b_z = chrono.bias[H : 2 * H]
    assert torch.all(b_z >= 0) and torch.all(b_z <= torch.log(torch.tensor(1023.0))) and b_z.std() > 0


def test_keep_gate_time_constant():
    g, tau, half_life = sigmoid_time_constant(1.0)
    assert abs(g - 0.7310585786) < 1e-9
    assert abs(tau - 1 / (1 - g)) < 1e-12
    assert abs(g**half_life - 0.5) < 1e-9


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


@pytest.mark.parametrize("backend", ["reference", "fast"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_trace_has_documented_gates_and_shapes(cell, backend):
    layer = make_layer(cell, 3, 4, backend)
    x = torch.randn(2, 5, 3)
    trace = {}
    out, _ = layer(x, None, trace)
    assert set(trace) == set(layer.gate_names)
    for name, value in trace.items():
        assert value.shape == (2, 5, 4), name
    torch.testing.assert_close(trace["h"], out)
    torch.testing.assert_close(layer(x)[0], out, atol=1e-6, rtol=0)  # tracing does not change the function


def test_fused_layers_refuse_to_trace():
    with pytest.raises(ValueError, match="to_reference"):
        make_layer("gru_torch", 3, 4, "fused")(torch.randn(1, 2, 3), None, {})


# each cell's stacked parameters unstacked under the names its equations use, in its docstring's order
EQUATION_NAMES = {
    "rnn": {"weight_ih": "W_xh", "weight_hh": "W_hh", "bias": "b_h"},
    "gru_seed": {"weight_ih": "W_r W_z W_h", "weight_hh": "U_r U_z U_h", "bias": "b_r b_z b_h"},
    "gru_torch": {
        "weight_ih": "W_ir W_iz W_in",
        "weight_hh": "W_hr W_hz W_hn",
        "bias": "b_ir b_iz b_in",
        "bias_hh": "b_hr b_hz b_hn",
    },
    "lstm": {"weight_ih": "W_i W_f W_g W_o", "weight_hh": "U_i U_f U_g U_o", "bias": "b_i b_f b_g b_o"},
    "scan": {},
    "min_gru": {"weight_ih": "W_z W_h", "bias": "b_z b_h"},
    "min_lstm": {"weight_ih": "W_f W_i W_h", "bias": "b_f b_i b_h"},
}


def as_statement(text):
    """An equation whose functions are already torch's as a Python statement over one sample's vectors:
    h_{t-1} is h_prev, x_t is x, a matrix before a vector multiplies it."""
    text = re.sub(r"_\{t-1\}", "_prev", text)
    text = re.sub(r"_\{(\w+)\}", r"_\1", text)
    text = re.sub(r"\b([A-Za-z])_t\b", r"\1", text)
    text = re.sub(r"\b([WU]_\w+) (?=[\w(])", r"\1 @ ", text)
    if text.startswith("[A, B] = "):
        text = f"A, B = ({text.removeprefix('[A, B] = ')}).chunk(2, -1)"
    return text


def as_python(latex):
    """One displayed equation as a Python statement: \\sigma and \\tanh are torch's, \\odot is *."""
    text = latex.replace(r"\big", "").replace(r"\tilde h_t", "n_t").replace(r"\mathrm{gate}", "gate")
    text = text.replace(r"\sigma", "torch.sigmoid").replace(r"\tanh", "torch.tanh").replace(r"\odot", "*")
    return as_statement(text)


def perturbed(cell, seed):
    """A reference layer of `cell` (5 -> 5) with every parameter random: no zero bias left to hide a misplaced
    term."""
    torch.manual_seed(seed)
    layer = CELLS[cell](5, 5)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    return layer


def run_statements(layer, cell, statements, x, h_prev, c_prev):
    """Run Python statements over one sample's vectors and the layer's parameters under their equations'
    names -> every name they wrote."""
    names = {"x": x, "e": x, "h_prev": h_prev, "c_prev": c_prev, "torch": torch}
    if cell == "scan":
        names.update(e=layer.in_proj(x), gate=layer.gate)
    for parameter, stacked_names in EQUATION_NAMES[cell].items():
        names.update(zip(stacked_names.split(), getattr(layer, parameter).chunk(len(stacked_names.split()))))
    with torch.no_grad():
        for statement in statements:
            exec(statement, {}, names)
    return names


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_the_equations_a_page_shows_are_what_the_cell_computes(cell):
    layer = perturbed(cell, 0)
    x, h_prev, c_prev = torch.randn(5), torch.randn(5), torch.randn(5)
    names = run_statements(layer, cell, map(as_python, FAMILIES[cell].latex), x, h_prev, c_prev)
    with torch.no_grad():
        trace = {}
        state = (h_prev[None], c_prev[None]) if cell == "lstm" else h_prev[None]
        layer(x[None, None], state, trace)
    for gate in layer.gate_names:
        torch.testing.assert_close(names[gate], trace[gate][0, 0], msg=f"{cell}: {gate}")


def docstring_equations(cell):
    """The equation lines of a reference cell's docstring ("z_t = sigmoid(...)": a value at step t on the
    left), trailing notes cut."""
    lines = [line.split("#")[0].strip() for line in CELLS[cell].__doc__.splitlines()]
    return [line for line in lines if re.match(r"^(\[[^]]*\]|[A-Za-z]_t) = ", line)]


def docstring_as_python(line):
    """A docstring equation as Python over one sample's vectors, as `as_python` reads the LaTeX."""
    return as_statement(line.replace("sigmoid(", "torch.sigmoid(").replace("tanh(", "torch.tanh("))


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_the_docstring_a_student_reads_states_the_same_equations_as_the_record(cell):
    """The docstring's equations, run line by line, compute what the record's LaTeX computes (which the test
    above runs against the cell): the equations are written in two notations and agree."""
    layer = perturbed(cell, 1)
    lines = docstring_equations(cell)
    assert len(lines) == len(FAMILIES[cell].latex), lines
    x, h_prev, c_prev = torch.randn(5), torch.randn(5), torch.randn(5)
    results = [
        run_statements(layer, cell, map(run, equations), x, h_prev, c_prev)
        for run, equations in ((as_python, FAMILIES[cell].latex), (docstring_as_python, lines))
    ]
    for gate in layer.gate_names:
        torch.testing.assert_close(results[1][gate], results[0][gate], msg=f"{cell}: {gate}")


SCANNED = [f.id for f in FAMILIES.values() if not f.gates_read_state and f.fast is not f.reference]


@pytest.mark.parametrize("cell", SCANNED)
def test_the_loop_and_the_parallel_scan_compute_the_same_cell_in_float64(cell):
    """minGRU and minLSTM run as one scan: its loop and its parallel form agree, outputs and every gradient,
    from a non-zero initial state, and with the reference's equations."""
    g = torch.Generator().manual_seed(3)
    layers = {mode: make_layer(cell, 4, 6, "fast", scan_mode=mode).double() for mode in ("sequential", "parallel")}
    reference = make_layer(cell, 4, 6, "reference").double()
    _perturb(reference, g)
    for layer in layers.values():
        layer.load_state_dict(reference.state_dict())
    x = torch.randn(3, 37, 4, generator=g, dtype=torch.float64)
    h0 = torch.randn(3, 6, generator=g, dtype=torch.float64)
    weights = torch.randn(3, 37, 6, generator=g, dtype=torch.float64)
    results = []
    for layer in (reference, *layers.values()):
        xi, hi = x.clone().requires_grad_(), h0.clone().requires_grad_()
        out, last = layer(xi, hi)
        ((out * weights).sum() + last.sum()).backward()
        results.append((out, last, xi.grad, hi.grad, *(p.grad for p in layer.parameters())))
    for other in results[1:]:
        for e, o in zip(results[0], other):
            torch.testing.assert_close(o, e, atol=1e-10, rtol=1e-10)


def test_a_cell_whose_gates_read_only_the_input_has_no_recurrent_matrix_and_no_weight_dropout():
    for cell in SCANNED:
        layer = make_layer(cell, 3, 4)
        assert layer.weight_hh is None and not FAMILIES[cell].gates_read_state
        with pytest.raises(ValueError, match="no hidden-to-hidden weight matrix"):
            LMConfig(cell=cell, weight_dropout=0.1)


@pytest.mark.parametrize("cell", sorted(c for c, family in FAMILIES.items() if family.fast_autocasts))
def test_a_fast_form_that_autocasts_computes_the_references_function_in_bfloat16_and_keeps_its_state_in_float32(cell):
    """`--amp bf16` on a CPU (faster steps for Scribe-γ, BENCHMARKS.md): under autocast the fast loop is as
    close to the float32 function as the reference under the same autocast is (bfloat16's rounding, no more), in
    its output and every gradient; its state and output stay float32."""
    g = torch.Generator().manual_seed(3)
    I, H, L, B, T = 8, 16, 2, 4, 20
    reference = RecurrentStack([make_layer(cell, I if l == 0 else H, H, "reference") for l in range(L)])
    _perturb(reference, g)
    fast = RecurrentStack([make_layer(cell, I if l == 0 else H, H, "fast") for l in range(L)])
    fast.load_state_dict(reference.state_dict())
    x = torch.randn(B, T, I, generator=g)

    def run(stack, dtype):
        stack.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            out, final = stack(x)
        (out.float() ** 2).sum().backward()
        return out, final, torch.cat([p.grad.flatten() for p in stack.parameters()])

    exact_out, _, exact_grads = run(reference, None)
    ref_out, _, ref_grads = run(reference, torch.bfloat16)
    out, final, grads = run(fast, torch.bfloat16)
    assert out.dtype == torch.float32 and all(h.dtype == torch.float32 for h in final)
    rounding, grad_rounding = (ref_out - exact_out).abs().mean(), (ref_grads - exact_grads).abs().mean()
    assert rounding > 1e-4 and grad_rounding > 0  # autocast did compute in bfloat16
    assert (out - exact_out).abs().mean() < 2 * rounding
    assert (grads - exact_grads).abs().mean() < 2 * grad_rounding
