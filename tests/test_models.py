"""The model families, presets, summaries and configuration errors."""

import dataclasses

import pytest
import torch

from lab.nets.backends import BACKENDS, FUSED_MODULES, default_backend
from lab.nets.families import CELLS, FAMILIES
from lab.nets.models import (
    ClassifierConfig,
    LMConfig,
    ScanMarkovConfig,
    build_model,
    config_from_dict,
    config_to_dict,
    count_parameters,
    model_summary,
    recurrent_layers,
    to_reference,
)
from lab.training.presets import PRESETS, get_preset


@pytest.mark.parametrize("name", sorted(p.name for p in PRESETS.values() if p.expected_params))
def test_preset_parameter_counts_match_the_seeds(name):
    preset = PRESETS[name]
    assert count_parameters(build_model(preset.model)) == preset.expected_params


def seed_002_parameters(V, E=768, H=1024, layers=3):
    """Seed 002's MyLSTMModel counted from its code: per layer 4 gates x (W_x, W_h without bias, one
    bias vector b), an embedding, LayerNorm(H) and a linear head with bias."""
    lstm = sum(4 * (n_in * H + H * H + H) for n_in in [E] + [H] * (layers - 1))
    return V * E + lstm + 2 * H + H * V + V


def test_leviathan_is_seed_002s_architecture():
    from lab.nets.cost import parameter_count

    preset = get_preset("leviathan-lstm")
    # seed 002 trains on Tiny Shakespeare's 65 characters; the bundled plays have 83 (test_bundled_scale)
    assert seed_002_parameters(65) == 24_248_129 == preset.expected_params
    assert preset.model.vocab_size == 65
    bundled = dataclasses.replace(preset.model, vocab_size=83)
    assert parameter_count(bundled) == seed_002_parameters(83) == 24_280_403  # lab.nets.cost's count, not built
    assert preset.train_config().lr == 1e-3 and preset.train_config().block_size == 128
    assert preset.epoch_budget(preset.seed_epochs) == {"max_steps": 6 * 200, "max_epochs": None}


@pytest.mark.parametrize(
    "name, epochs, lr, dropout",
    [("scribe-alpha", 10, 2e-3, 0.10), ("scribe-beta", 15, 1.5e-3, 0.10), ("scribe-gamma", 20, 1e-3, 0.15)],
)
def test_scribe_recipes_are_seed_000s(name, epochs, lr, dropout):
    preset = get_preset(name)
    recipe = preset.train_config(**preset.epoch_budget(preset.seed_epochs))
    assert (recipe.max_epochs, recipe.max_steps, recipe.lr, recipe.weight_decay, recipe.min_lr) == (
        epochs,
        None,
        lr,
        0.01,
        0.0,
    )  # cosine to 0, CosineAnnealingLR's default
    assert preset.model.dropout == dropout


def test_scan_markov_is_about_340k_at_65_characters():
    assert 330_000 <= count_parameters(build_model(get_preset("scan-markov").model)) <= 350_000


def test_seed_003_count_is_the_same_for_both_backends():
    for backend in BACKENDS:
        assert count_parameters(build_model(ClassifierConfig(backend=backend))) == 101_732


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_lm_contract_and_state_carry(cell):
    torch.manual_seed(0)
    model = build_model(LMConfig(cell=cell, vocab_size=11, embed_dim=6, hidden_size=8, num_layers=2)).eval()
    idx = torch.randint(0, 11, (3, 10))
    logits, loss, state = model(idx, idx)
    assert logits.shape == (3, 10, 11) and loss.ndim == 0 and len(state) == 2
    # running the sequence in two halves with the state carried gives the same logits
    first, _, mid = model(idx[:, :4])
    second, _, _ = model(idx[:, 4:], state=mid)
    torch.testing.assert_close(torch.cat([first, second], 1), logits, atol=1e-5, rtol=0)


def test_scan_markov_contract_and_positions():
    model = build_model(ScanMarkovConfig(vocab_size=20, max_positions=8)).eval()
    idx = torch.randint(0, 20, (2, 12))  # longer than the positional table
    logits, loss, (h, position) = model(idx, idx)
    assert logits.shape == (2, 12, 20) and position == 12 and torch.isfinite(loss)
    first, _, mid = model(idx[:, :5])
    second, _, _ = model(idx[:, 5:], state=mid)
    torch.testing.assert_close(torch.cat([first, second], 1), logits, atol=1e-5, rtol=0)


def test_scan_markov_decoder_is_tied_to_the_embedding():
    """Seed 004 ties the output projection to the token embedding: one (V, E) tensor serves both."""
    torch.manual_seed(0)
    V, E = 20, 16
    model = build_model(ScanMarkovConfig(vocab_size=V, embed_dim=E, gate_hidden=8, decoder_hidden=8))
    assert [name for name, p in model.named_parameters() if p.shape == (V, E)] == ["embedding.weight"]
    idx = torch.randint(0, V // 2, (4, 6))  # tokens V/2.. are never read: only the output projection uses their rows
    _, loss, _ = model(idx, torch.randint(0, V, (4, 6)))
    loss.backward()
    grad = model.embedding.weight.grad
    assert grad[V // 2 :].abs().sum(1).min() > 0 and grad[: V // 2].abs().sum() > 0  # both uses reach one storage
    before = model.embedding.weight.detach().clone()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    moved = (model.embedding.weight.detach() - before).abs().sum(1)
    assert moved.min() > 0  # one step moved the rows read as inputs and the rows only the decoder uses


def test_classifier_reads_the_final_state():
    model = build_model(ClassifierConfig(hidden_size=9))
    x = torch.randn(4, 30, 1)
    logits, loss, state = model(x, torch.randint(0, 10, (4,)))
    assert logits.shape == (4, 10) and loss.ndim == 0 and state[0].shape == (4, 9)


@pytest.mark.parametrize(
    "backend, cell",
    [("fused", cell) for cell in sorted(FUSED_MODULES)] + [("fast", cell) for cell in ("gru_seed", "lstm")],
)
def test_to_reference_keeps_the_function_and_traces(backend, cell):
    torch.manual_seed(0)
    model = build_model(
        LMConfig(cell=cell, backend=backend, vocab_size=7, embed_dim=4, hidden_size=5, num_layers=2, norm="every")
    ).eval()
    twin = to_reference(model)
    assert all(type(layer) is CELLS[cell] for layer in twin.rnn.layers)
    assert not any(type(layer) is CELLS[cell] for layer in model.rnn.layers)  # the model itself is untouched
    idx = torch.randint(0, 7, (2, 9))
    trace = [{}, {}]
    torch.testing.assert_close(twin(idx, trace=trace)[0], model(idx)[0], atol=1e-5, rtol=0)
    assert trace[1]["h"].shape == (2, 9, 5)


@pytest.mark.parametrize(
    "backend, cell",
    [(backend, cell) for backend in BACKENDS for cell in BACKENDS[backend] if FAMILIES[cell].gates_read_state],
)
def test_weight_dropout_masks_the_hidden_weights_while_training_only(backend, cell):
    """DropConnect: in training, the layer runs with F.dropout(weight_hh) (one mask for the
    whole sequence); in evaluation, with its own weights."""
    torch.manual_seed(0)
    config = LMConfig(cell=cell, backend=backend, vocab_size=7, embed_dim=4, hidden_size=5, weight_dropout=0.5)
    model = build_model(config)
    plain = build_model(dataclasses.replace(config, weight_dropout=0.0))
    plain.load_state_dict(model.state_dict())
    idx = torch.randint(0, 7, (2, 9))
    torch.testing.assert_close(model.eval()(idx)[0], plain.eval()(idx)[0])
    model.train()
    torch.manual_seed(1)
    logits = model(idx)[0]
    ((name, weight),) = [(n, w) for n, w in model.rnn.layers[0].named_parameters() if "weight_hh" in n]
    torch.manual_seed(1)  # the same draw: the mask model.train() used
    masked = torch.nn.functional.dropout(weight.detach(), 0.5)
    assert (masked == 0).any() and (masked != 0).any()
    plain.rnn.layers[0].get_parameter(name).data.copy_(masked)
    torch.testing.assert_close(logits, plain(idx)[0], atol=1e-5, rtol=0)
    logits.sum().backward()
    assert weight.grad is not None and (weight.grad[masked == 0] == 0).all()  # a dropped weight learns nothing


def test_embedding_dropout_acts_while_training_only():
    torch.manual_seed(0)
    model = build_model(LMConfig(vocab_size=7, embed_dim=16, hidden_size=5, embed_dropout=0.5))
    idx = torch.randint(0, 7, (2, 9))
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0])
    model.eval()
    assert torch.equal(model(idx)[0], model(idx)[0])


def test_to_reference_returns_a_reference_model_itself():
    model = build_model(LMConfig(cell="lstm", backend="reference", vocab_size=7, embed_dim=4, hidden_size=5))
    assert to_reference(model) is model
    markov = build_model(ScanMarkovConfig(vocab_size=7, embed_dim=4, gate_hidden=8, decoder_hidden=8))
    assert to_reference(markov) is markov and recurrent_layers(markov)[0].cell == markov.config.cell == "scan"


def test_legacy_scratch_backend_loads_as_fast():
    """Checkpoints saved before the reference/fast split (the bundled ones too) say "scratch"."""
    stored = {**config_to_dict(LMConfig(cell="lstm")), "backend": "scratch"}
    assert config_from_dict(stored) == LMConfig(cell="lstm", backend="fast")
    with pytest.raises(ValueError, match="backend"):
        LMConfig(backend="scratch")  # only the stored name is mapped, not new configs


def test_config_round_trip_and_unknown_fields():
    for config in (
        LMConfig(cell="lstm", embed_dropout=0.1, weight_dropout=0.3),
        ClassifierConfig(),
        ScanMarkovConfig(),
    ):
        assert config_from_dict(config_to_dict(config)) == config
    older = {k: v for k, v in config_to_dict(LMConfig()).items() if k not in ("embed_dropout", "weight_dropout")}
    assert config_from_dict(older) == LMConfig()  # files saved before these fields load without them
    with pytest.raises(ValueError, match="family"):
        config_from_dict({"family": "transformer"})
    with pytest.raises(ValueError, match="colour"):
        config_from_dict({"family": "lm", "colour": "red"})


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_layers": -1}, "num_layers"),
        ({"dropout": -0.1}, "dropout"),
        ({"dropout": 1.0}, "dropout"),
        ({"cell": "transformer"}, "cell"),
        ({"backend": "quantum"}, "backend"),
        ({"cell": "gru_seed", "backend": "fused"}, "backend"),
        ({"norm": "sometimes"}, "norm"),
        ({"chrono_tmax": 1}, "chrono_tmax"),
        ({"embed_dropout": 1.0}, "embed_dropout"),
        ({"weight_dropout": -0.5}, "weight_dropout"),
        ({"cell": "scan", "weight_dropout": 0.3}, "weight_dropout"),
    ],
)
def test_bad_configuration_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LMConfig(**kwargs)


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(ValueError, match="scribe-alpha"):
        get_preset("scribe-omega")


def test_summary_names_convention_size_and_every_parameter():
    model = build_model(get_preset("scribe-alpha").model)
    summary = model_summary(model, "Scribe-alpha")
    assert summary.total == 1_075_688
    assert round(summary.size_mb, 2) == 4.10  # seed 000's table
    assert any(c.startswith("GRU (z overwrites): h_t = (1 − z_t)") for c in summary.conventions)
    assert {row[0] for row in summary.rows} == {n for n, _ in model.named_parameters()}
    text = summary.format()
    assert "1,075,688" in text and "z overwrites" in text
    torch_summary = model_summary(build_model(dataclasses.replace(get_preset("scribe-alpha").model, cell="gru_torch")))
    assert any(c.startswith("GRU (z keeps): h_t = (1 − z_t) ⊙ n_t") for c in torch_summary.conventions)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_recipe_is_a_train_config(name):
    preset = PRESETS[name]
    config = preset.train_config(max_seconds=5.0)
    assert config.lr == preset.train["lr"] and config.max_seconds == 5.0


@pytest.mark.parametrize(
    "cell, backend",
    [("gru_torch", "fused"), ("lstm", "fused"), ("rnn", "fused"), ("gru_seed", "fast"), ("scan", "fast")],
)
def test_for_device_computes_the_same_function_in_the_cpus_fastest_form(cell, backend):
    """A GPU-trained model (cuDNN layers, the parallel scan) shipped for CPUs: same outputs, same mode."""
    from lab.nets.models import for_device

    torch.manual_seed(0)
    model = build_model(LMConfig(cell=cell, backend=backend, vocab_size=11, hidden_size=12, num_layers=2)).eval()
    shipped = for_device(model, "cpu")
    assert (shipped.config.backend, shipped.config.scan_mode) == (default_backend(cell, "cpu"), "sequential")
    assert not shipped.training
    x = torch.randint(0, 11, (2, 9))
    assert torch.allclose(model(x)[0], shipped(x)[0], atol=1e-5)
