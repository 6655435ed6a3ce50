"""The seeds' models at their own scale, bundled (issue 39): Scribe-β and Scribe-γ at seed 000's exact
parameter counts and the Leviathan-LSTM at seed 002's architecture; loading them runs no code; the files'
sizes; a server loads them when a page first picks them, not while it warms up; and the largest samples with
int8 weights, at about the float32 model's loss."""

import pickle

import pytest
import streamlit as st
import torch
from test_models import seed_002_parameters

import ui.app.warm_up
import ui.shared.cached_calls
import ui.shared.checkpoint_picker
from lab.data import load_bundled_corpus
from lab.nets.models import count_parameters, for_device, for_sampling, to_reference
from lab.training.checkpoints import BUNDLED_DIR, list_checkpoints, load_checkpoint, read_info
from lab.training.presets import get_preset

BIG = ["scribe-beta", "scribe-gamma", "leviathan-lstm"]
NEEDED = BIG
MB = 1_000_000


def path(name):
    return BUNDLED_DIR / f"{name}_latest.safetensors"


@pytest.mark.parametrize("name", ["scribe-beta", "scribe-gamma"])
def test_the_bundled_scribes_have_seed_000s_exact_parameter_counts(name):
    model = load_checkpoint(path(name)).model
    assert count_parameters(model) == get_preset(name).expected_params  # 5,102,056 and 14,439,400
    assert model.config.vocab_size == 1000 and model.config.cell == "gru_seed"


def test_the_bundled_leviathan_is_seed_002s_model_at_the_plays_characters():
    """Seed 002 counts 24,248,129 parameters at Tiny Shakespeare's 65 characters; the plays have more, and
    cuDNN's LSTM keeps a second bias vector per gate, which the reference cell (seed 002's) folds into one."""
    model = load_checkpoint(path("leviathan-lstm")).model
    vocab = model.config.vocab_size
    assert vocab == len(set(load_bundled_corpus()))  # every character of the plays, no more
    assert (model.config.num_layers, model.config.hidden_size, model.config.embed_dim) == (3, 1024, 768)
    assert count_parameters(to_reference(model)) == seed_002_parameters(vocab)
    assert count_parameters(model) == seed_002_parameters(vocab) + 3 * 4 * 1024  # b_ih beside b_hh


@pytest.mark.parametrize("name", BIG)
def test_loading_a_big_bundled_model_runs_no_code(name, monkeypatch):
    """A safetensors file: an 8-byte length, a JSON header, raw numbers. No unpickling anywhere on the way."""

    def refused(*args, **kwargs):
        raise AssertionError("a checkpoint must not be unpickled")

    for module, attribute in ((pickle, "load"), (pickle, "loads"), (torch, "load")):
        monkeypatch.setattr(module, attribute, refused)
    raw = path(name).read_bytes()[:9]
    assert raw[8:9] == b"{"
    checkpoint = load_checkpoint(path(name))
    assert read_info(path(name), bundled=True).name == f"{name}_latest"
    assert all(p.dtype == torch.float32 for p in checkpoint.model.parameters())  # float16 on disk


def test_each_bundled_file_is_at_most_50_mb_and_the_bundle_at_most_130_mb():
    sizes = {p.name: p.stat().st_size for p in BUNDLED_DIR.rglob("*") if p.is_file()}
    assert max(sizes.values()) <= 50 * MB, sizes
    assert sum(sizes.values()) <= 130 * MB, sum(sizes.values())


def test_the_server_loads_the_big_models_when_a_page_first_picks_them_not_while_it_warms_up(monkeypatch):
    """The pickers list the bundled models from their headers; the warm-up loads only the pages' default models."""
    loaded = []

    def recording(file, *args, **kwargs):
        loaded.append(str(file))
        return load_checkpoint(file, *args, **kwargs)

    monkeypatch.setattr(ui.shared.checkpoint_picker, "load_checkpoint", recording)  # what every page loads with
    ui.shared.checkpoint_picker.cached_checkpoint.clear()
    st.cache_data.clear()  # what earlier tests sampled and traced: the warm-up computes (and loads) it again
    ui.shared.cached_calls.cached_trace.clear()
    infos = list_checkpoints(include_versions=False)
    assert set(BIG) <= {info.name.removesuffix("_latest") for info in infos}
    assert {info.name: info.config.get("hidden_size") for info in infos}["leviathan-lstm_latest"] == 1024
    ui.app.warm_up.sample_page_defaults()
    ui.app.warm_up.gates_page_defaults()
    assert loaded and not [file for file in loaded if any(name in file for name in BIG)], loaded
    memory_models = ui.app.warm_up.REACH_MODELS + ui.app.warm_up.RETENTION_MODELS + ui.app.warm_up.GRADIENT_MODELS
    assert not [name for name in memory_models if name.removesuffix("_latest") in BIG]
    first = ui.shared.checkpoint_picker.cached_checkpoint(str(path("leviathan-lstm")), 0.0)  # a first pick
    assert loaded[-1] == str(path("leviathan-lstm")) and first.config.hidden_size == 1024


def test_the_leviathan_samples_with_int8_weights_at_its_float32_loss_and_small_models_are_left_as_they_are():
    checkpoint = load_checkpoint(path("leviathan-lstm"))
    sampler = for_sampling(checkpoint.model)
    assert count_parameters(sampler) < count_parameters(checkpoint.model) / 10  # the matrices are int8 buffers now
    text = load_bundled_corpus()[-1500:]
    ids = torch.tensor([checkpoint.tokenizer.encode(text)])
    with torch.no_grad():
        _, exact, _ = for_device(checkpoint.model, "cpu").eval()(ids[:, :-1], ids[:, 1:])
        _, rounded, _ = sampler(ids[:, :-1], ids[:, 1:])
    assert abs(rounded.item() - exact.item()) < 0.02, (rounded.item(), exact.item())
    small = load_checkpoint(path("scribe-beta")).model
    assert for_sampling(small) is small


def test_the_command_line_samples_through_the_pages_own_sampling_model(monkeypatch, capsys):
    """`python -m lab sample` and the Sample page are two clients of one function: the Leviathan in int8 for both."""
    import lab.nets.models
    from lab.__main__ import main

    made, real = [], lab.nets.models.for_sampling

    def recording(model):
        made.append(real(model))
        return made[-1]

    monkeypatch.setattr(lab.nets.models, "for_sampling", recording)
    assert main(["sample", str(path("leviathan-lstm")), "--prompt", "ROMEO:", "--length", "40", "--seed", "1"]) == 0
    assert len(made) == 1 and count_parameters(made[0]) < 1_000_000  # int8: its matrices are buffers
    assert capsys.readouterr().out.startswith("ROMEO:")
