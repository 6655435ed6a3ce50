"""lab.nets.cost: parameter counts and training memory from a config alone, and the limits a server sets."""

import dataclasses

import pytest
import torch

from lab.errors import LabError
from lab.nets.backends import BACKENDS, FUSED_MODULES
from lab.nets.cost import (
    CostError,
    activation_floats_per_token,
    check_model_size,
    check_training_memory,
    parameter_count,
    training_memory_bytes,
)
from lab.nets.families import CELLS
from lab.nets.models import ClassifierConfig, LMConfig, ScanMarkovConfig, build_model, count_parameters
from lab.training.presets import PRESETS

BACKENDS_OF = {cell: [b for b in BACKENDS if b != "fused" or cell in FUSED_MODULES] for cell in CELLS}
CELL_BACKENDS = [(cell, backend) for cell in sorted(CELLS) for backend in BACKENDS_OF[cell]]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_parameter_count_of_every_preset_equals_the_built_model(name):
    config = PRESETS[name].model
    with torch.device("meta"):
        assert parameter_count(config) == count_parameters(build_model(config))


@pytest.mark.parametrize("cell, backend", CELL_BACKENDS)
@pytest.mark.parametrize("family", ["lm", "classifier"])
def test_parameter_count_of_every_cell_and_backend_equals_the_built_model(cell, backend, family):
    for layers, norm in [(1, "last"), (3, "every")]:
        if family == "lm":
            config = LMConfig(
                cell=cell, backend=backend, vocab_size=37, embed_dim=5, hidden_size=7, num_layers=layers, norm=norm
            )
        else:
            config = ClassifierConfig(
                cell=cell, backend=backend, input_size=3, hidden_size=7, num_layers=layers, num_classes=4
            )
        assert parameter_count(config) == count_parameters(build_model(config)), config


def test_parameter_count_of_scan_markov_equals_the_built_model():
    config = ScanMarkovConfig(vocab_size=11, embed_dim=6, gate_hidden=9, decoder_hidden=13, max_positions=5)
    assert parameter_count(config) == count_parameters(build_model(config))


def saved_floats_per_token(model, x, y):
    """float32 values autograd keeps for backward in one forward pass (parameters excluded), per token."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model.train()(x, y)
    return sum(storages.values()) / 4 / (x.shape[0] * x.shape[1])


@pytest.mark.parametrize("cell, backend", CELL_BACKENDS)
def test_the_activation_estimate_is_between_1x_and_3x_what_autograd_saves(cell, backend):
    torch.manual_seed(0)
    for hidden in (16, 48):
        config = LMConfig(
            cell=cell, backend=backend, vocab_size=50, embed_dim=8, hidden_size=hidden, num_layers=2, dropout=0.1
        )
        x = torch.randint(50, (4, 24))
        measured = saved_floats_per_token(build_model(config), x, x)
        assert measured <= activation_floats_per_token(config) <= 3 * measured, (config, measured)
    classifier = ClassifierConfig(cell=cell, backend=backend, hidden_size=16)
    x, y = torch.randn(4, 24, 1), torch.randint(10, (4,))
    measured = saved_floats_per_token(build_model(classifier), x, y)
    assert measured <= activation_floats_per_token(classifier) <= 3 * measured
    markov = ScanMarkovConfig(vocab_size=50, embed_dim=16, gate_hidden=32, decoder_hidden=32)
    x = torch.randint(50, (4, 16))
    measured = saved_floats_per_token(build_model(markov), x, x)
    assert measured <= activation_floats_per_token(markov) <= 3 * measured


def test_training_memory_counts_five_copies_of_the_weights_and_scales_with_the_batch():
    config = LMConfig(vocab_size=65)
    one = training_memory_bytes(config, 1, 1)
    assert one == 4 * (5 * parameter_count(config) + activation_floats_per_token(config))
    assert training_memory_bytes(config, 64, 128) - one == 4 * (64 * 128 - 1) * activation_floats_per_token(config)


def test_absurd_configs_are_refused_by_arithmetic_before_anything_is_built(monkeypatch):
    ui_maximum = LMConfig(vocab_size=65, embed_dim=2048, hidden_size=4096, num_layers=8)  # the Train page's limits
    assert parameter_count(ui_maximum) > 700_000_000
    for config in [
        ui_maximum,
        LMConfig(hidden_size=10**12),
        ScanMarkovConfig(vocab_size=10**9),
        ClassifierConfig(num_classes=10**10),
        LMConfig(hidden_size=1, embed_dim=1, num_layers=100_000),
        LMConfig(embed_dim=10**400),  # weights too many MB for a float (a crafted header's, found by the fuzz)
    ]:
        with pytest.raises(CostError, match="limit"):
            check_model_size(config)
        with pytest.raises(CostError, match="limit"):
            build_model(config)  # the same check, before a single module is made
    monkeypatch.setenv("RNNLAB_MAX_PARAMS", "1000")
    with pytest.raises(CostError, match="1,000 \\(RNNLAB_MAX_PARAMS\\)"):
        build_model(LMConfig(vocab_size=65, hidden_size=16, embed_dim=8))
    monkeypatch.setenv("RNNLAB_MAX_PARAMS", "lots")
    with pytest.raises(LabError, match=r"^RNNLAB_MAX_PARAMS: 'lots' is not a whole number from 1 to "):
        check_model_size(LMConfig())


def test_training_memory_limit_comes_from_the_environment(monkeypatch):
    config = PRESETS["astra-alpha"].model
    need = check_training_memory(config, 32, 64)
    monkeypatch.setenv("RNNLAB_MAX_TRAIN_MEMORY_MB", str(need // 2**20 - 1))
    with pytest.raises(CostError, match="RNNLAB_MAX_TRAIN_MEMORY_MB"):
        check_training_memory(config, 32, 64)
    leviathan = PRESETS["leviathan-lstm"]
    monkeypatch.delenv("RNNLAB_MAX_TRAIN_MEMORY_MB")
    with pytest.raises(CostError, match="training: needs about 2,"):  # GPU-sized: refused on a 1 GB default
        check_training_memory(leviathan.model, 64, 128)
    check_training_memory(dataclasses.replace(leviathan.model, vocab_size=65), 8, 32)
