"""The speed benchmark's seed-002 baselines compute the same function as lab's
cells (so benchmarks/cells.py compares like with like)."""

import pytest
import torch

from benchmarks.cells import (
    E,
    Lab,
    Seed002GRUCell,
    Seed002Layer,
    Seed002LSTMCell,
    TidySeedGRUCell,
    TidySeedLSTMCell,
    TidySeedStack,
)


def _copy_gates(layer, cell, gates):
    """Stack a seed-002 cell's per-gate W_<g>_x, W_<g>_h and b_<g> into a lab layer's weight_ih,
    weight_hh and bias, in the lab layer's gate order `gates`."""
    with torch.no_grad():
        layer.weight_ih.copy_(torch.cat([getattr(cell, f"W_{g}_x").weight for g in gates]))
        layer.weight_hh.copy_(torch.cat([getattr(cell, f"W_{g}_h").weight for g in gates]))
        layer.bias.copy_(torch.cat([getattr(cell, f"b_{g}") for g in gates]))


def _random_biases(module):
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.normal_()


@pytest.mark.parametrize(
    "seed_cell, lab_cell, gates",
    [
        (Seed002LSTMCell, "lstm", "ifgo"),  # nn.LSTM's order
        (Seed002GRUCell, "gru_seed", "rzh"),  # seed 001's GRU, z overwrites
    ],
)
def test_seed002_cell_as_published_matches_lab(seed_cell, lab_cell, gates):
    torch.manual_seed(0)
    seed = Seed002Layer(seed_cell)
    _random_biases(seed)
    lab = Lab(lab_cell, "fast").double()
    for cell, layer in zip(seed.layers, lab.rnn.layers):
        _copy_gates(layer, cell, gates)
    x = torch.randn(3, 7, E, dtype=torch.double)
    torch.testing.assert_close(seed.double()(x), lab(x), rtol=1e-10, atol=1e-10)


def test_tidied_seed_cells_match_the_published_ones():
    torch.manual_seed(0)
    x = torch.randn(3, 7, E, dtype=torch.double)
    for published_cls, tidy_cls, lstm, gates in [
        (Seed002LSTMCell, TidySeedLSTMCell, True, "ifgo"),
        (Seed002GRUCell, TidySeedGRUCell, False, "rzh"),
    ]:
        published, tidy = Seed002Layer(published_cls).double(), TidySeedStack(tidy_cls, lstm).double()
        _random_biases(published)
        with torch.no_grad():
            for p_cell, t_cell in zip(published.layers, tidy.cells):
                for k, gate in enumerate(gates):
                    w_x, u_h = (
                        (t_cell.W[k], t_cell.U[k])
                        if lstm
                        else (getattr(t_cell, f"W_{gate}"), getattr(t_cell, f"U_{gate}"))
                    )
                    w_x.weight.copy_(getattr(p_cell, f"W_{gate}_x").weight)
                    w_x.bias.copy_(getattr(p_cell, f"b_{gate}"))
                    u_h.weight.copy_(getattr(p_cell, f"W_{gate}_h").weight)
        torch.testing.assert_close(published(x), tidy(x), rtol=1e-10, atol=1e-10)


def test_the_class_benchmark_reads_each_first_step_from_the_server_log():
    """benchmarks.classroom reads the app's log lines (ui.shared.sessions' format) back with their times."""
    import logging
    import time

    from benchmarks.classroom import first_steps
    from ui.shared.sessions import SERVER_LOG_FORMAT

    record = logging.LogRecord(
        "lab.server.jobs",
        logging.INFO,
        __file__,
        1,
        "%s: first step %.2f s after Start (runs training on this server: %d)",
        ("The run astra-1a2b", 0.42, 3),
        None,
    )
    record.created = time.time()
    record.msecs = int(record.created * 1000) % 1000
    lines = "\n".join(["2026-11-24 03:00:00.000 INFO streamlit: something else", SERVER_LOG_FORMAT.format(record)])
    ((at, after),) = first_steps(lines)
    assert after == 0.42 and abs(at - record.created) < 0.002
