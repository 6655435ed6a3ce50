"""A run is a function of its settings and seed (issue 49, item 1): the same settings and seed give the same loss
curve bit for bit, alone or beside other runs in the same process (threads drawing from torch's process-wide
generator meanwhile), from the command line or the app's training process, in one go or resumed.

Every random draw of a run is covered: initial weights (lab.nets.randomness.seeded_build), the batches' order
(the run's own sampler) and dropout, embedding dropout and DropConnect masks (the run's own generator).
"""

import threading

import pytest
import torch
from helpers import TINY_CLI_MODEL, run

from lab.data import load_bundled_corpus
from lab.nets.backends import BACKENDS
from lab.nets.models import MODEL_FAMILIES, ClassifierConfig, LMConfig, ScanMarkovConfig, build_model
from lab.server.jobs import TrainingJob
from lab.training.checkpoints import load_checkpoint
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig, TrainingState, train

# every kind of mask a model draws while it trains
NOISY = dict(embed_dim=8, hidden_size=16, num_layers=2, cell="lstm", dropout=0.3, embed_dropout=0.2, weight_dropout=0.3)


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:20_000], "char")


def settings(**overrides):
    return TrainConfig(
        **{"max_steps": 12, "batch_size": 4, "block_size": 16, "eval_interval": 4, "device": "cpu", **overrides}
    )


def curve(task, config, resume=None, model=None):
    """-> (the training losses of every step, the validation losses): the run's whole curve."""
    model = model or build_model(LMConfig(vocab_size=task.vocab_size, **NOISY), seed=config.seed)
    losses = []
    result = train(model, task, config, lambda e: e["type"] == "step" and losses.append(e["train_loss"]), None, resume)
    return losses, [e["val_loss"] for e in result.history]


def test_the_same_settings_and_seed_give_the_same_curve_bit_for_bit_and_another_seed_another(task):
    first, again = curve(task, settings()), curve(task, settings())
    assert first == again  # exact: not approximately
    assert curve(task, settings(seed=7)) != first


def test_a_build_leaves_the_process_generator_as_it_was_and_depends_on_its_seed_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = build_model(LMConfig(vocab_size=10, **NOISY), seed=5)
    assert torch.equal(torch.rand(3), expected)  # nothing drawn from the process's generator
    torch.rand(100)  # whatever the process drew before
    b = build_model(LMConfig(vocab_size=10, **NOISY), seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


CONFIGS = [
    *(
        LMConfig(vocab_size=11, embed_dim=6, hidden_size=8, num_layers=2, cell=cell, backend=backend, chrono_tmax=tmax)
        for backend, cells in BACKENDS.items()
        for cell in cells
        for tmax in (None, 40)
    ),
    LMConfig(vocab_size=11, embed_dim=6, hidden_size=8, num_layers=3, norm="every"),
    ClassifierConfig(input_size=3, num_classes=4, hidden_size=8, cell="gru_torch", backend="fused"),
    ScanMarkovConfig(vocab_size=11, embed_dim=8, gate_hidden=16, decoder_hidden=16, max_positions=4),
]


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: f"{c.family}-{getattr(c, 'cell', '')}-{getattr(c, 'backend', '')}"
)
def test_a_seeded_build_draws_the_weights_its_constructors_draw_in_a_quiet_process(config):
    """Every parameter of every family, backend and initialisation: drawn from the run's own generator, the
    same values as `torch.manual_seed(seed)` then the constructor (the initialisation the cells document)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        quiet = MODEL_FAMILIES[config.family][1](config).state_dict()
    seeded = build_model(config, seed=5).state_dict()
    assert seeded.keys() == quiet.keys()
    assert all(torch.equal(seeded[name], quiet[name]) for name in quiet), config
    other = build_model(config, seed=6).state_dict()
    assert not all(torch.equal(other[name], quiet[name]) for name in quiet)


def test_a_run_beside_other_runs_and_other_draws_in_the_same_process_gives_its_curve_alone(task):
    alone = curve(task, settings())
    results, stop = {}, threading.Event()

    def noise():  # another part of the server drawing from torch's own generator all along
        while not stop.is_set():
            torch.rand(64)
            torch.manual_seed(torch.randint(1000, ()).item())

    def runner(name, seed):
        results[name] = curve(task, settings(seed=seed))

    threads = [threading.Thread(target=noise)] + [
        threading.Thread(target=runner, args=(f"run{seed}", seed)) for seed in (1337, 1, 2, 1337, 3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads[1:]:
        thread.join()
    stop.set()
    threads[0].join()
    assert results["run1337"] == alone


def test_a_run_resumed_from_its_state_gives_the_curve_of_one_go(task):
    """Stopped after 5 of 12 steps and continued from its TrainingState: the same 12 losses."""
    one_go = curve(task, settings())
    model = build_model(LMConfig(vocab_size=task.vocab_size, **NOISY), seed=1337)
    losses = []
    first = train(
        model,
        task,
        settings(),
        lambda e: e["type"] == "step" and losses.append(e["train_loss"]),
        lambda: len(losses) >= 5,
    )
    rest, _ = curve(task, settings(), resume=first.training_state, model=model)
    assert losses + rest == one_go[0]


def test_a_run_in_the_training_process_gives_the_curve_of_the_same_run_in_this_one(task, tmp_path):
    here = curve(task, settings())
    config = LMConfig(vocab_size=task.vocab_size, **NOISY)
    job = TrainingJob(
        "twin", build_model(config, seed=1337), task, settings(), checkpoint_dir=tmp_path, in_process=True
    )
    assert job.start().wait(300) == "finished"
    steps = [e["train_loss"] for e in job.events() if e["type"] == "step"]
    assert steps == here[0]


def test_the_command_line_trains_the_same_curve_twice(tmp_path):
    """Two command-line runs of the same settings: the same saved history, value for value."""
    histories = []
    for folder in ("a", "b"):
        options = ["--steps", "6", "--eval-interval", "2", "--dropout", "0.3", "--out", tmp_path / folder]
        code, _, err = run(["train", *TINY_CLI_MODEL, *options])
        assert code == 0, err
        saved = load_checkpoint(tmp_path / folder / "astra-alpha_latest.safetensors")
        histories.append([(e["step"], e["val_loss"], e["train_loss"]) for e in saved.metrics["history"]])
    assert histories[0] == histories[1]


def test_a_continuation_from_weights_alone_is_a_function_of_its_settings_too(task):
    model = build_model(LMConfig(vocab_size=task.vocab_size, **NOISY), seed=3)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    first = curve(task, settings(warmup_steps=3), TrainingState.from_weights_at(4, 0), model)
    model.load_state_dict(start)
    assert curve(task, settings(warmup_steps=3), TrainingState.from_weights_at(4, 0), model) == first
