"""The speed benchmark's seed-002 baselines compute the same function as lab's
cells (so benchmarks/cells.py compares like with like)."""
import torch

from benchmarks.cells import (E, Scratch, Seed002GRUCell, Seed002Layer, Seed002LSTMCell, TidySeedGRUCell,
                              TidySeedLSTMCell, TidySeedStack)


def _copy_gates(layer, weights_x, weights_h, biases):
    """Stack per-gate (x-side, h-side, bias) blocks into a lab layer's weight_ih, weight_hh, bias."""
    with torch.no_grad():
        layer.weight_ih.copy_(torch.cat([w.weight for w in weights_x]))
        layer.weight_hh.copy_(torch.cat([w.weight for w in weights_h]))
        layer.bias.copy_(torch.cat(list(biases)))


def _random_biases(module):
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.normal_()


def test_seed002_lstm_as_published_matches_lab_lstm():
    torch.manual_seed(0)
    seed = Seed002Layer(Seed002LSTMCell)
    _random_biases(seed)
    lab = Scratch("lstm").double()
    for cell, layer in zip(seed.layers, lab.rnn.layers):
        _copy_gates(layer, [cell.W_i_x, cell.W_f_x, cell.W_g_x, cell.W_o_x],
                    [cell.W_i_h, cell.W_f_h, cell.W_g_h, cell.W_o_h], [cell.b_i, cell.b_f, cell.b_g, cell.b_o])
    x = torch.randn(3, 7, E, dtype=torch.double)
    torch.testing.assert_close(seed.double()(x), lab(x), rtol=1e-10, atol=1e-10)


def test_seed002_gru_as_published_matches_lab_seed_convention_gru():
    torch.manual_seed(0)
    seed = Seed002Layer(Seed002GRUCell)
    _random_biases(seed)
    lab = Scratch("gru_seed").double()
    for cell, layer in zip(seed.layers, lab.rnn.layers):
        _copy_gates(layer, [cell.W_r_x, cell.W_z_x, cell.W_h_x], [cell.W_r_h, cell.W_z_h, cell.W_h_h],
                    [cell.b_r, cell.b_z, cell.b_h])
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
                    w_x, u_h = (t_cell.W[k], t_cell.U[k]) if lstm else (getattr(t_cell, f"W_{gate}"),
                                                                        getattr(t_cell, f"U_{gate}"))
                    w_x.weight.copy_(getattr(p_cell, f"W_{gate}_x").weight)
                    w_x.bias.copy_(getattr(p_cell, f"b_{gate}"))
                    u_h.weight.copy_(getattr(p_cell, f"W_{gate}_h").weight)
        torch.testing.assert_close(published(x), tidy(x), rtol=1e-10, atol=1e-10)
