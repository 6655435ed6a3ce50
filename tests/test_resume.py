"""Resumable runs: a run stopped, saved and resumed takes the steps it would have taken in one go;
the training state in a checkpoint is checked whole; `python -m lab train --resume`. Tiny and CPU-only."""

import dataclasses
import json
import re

import pytest
import torch
from helpers import TINY_CLI_MODEL, assert_one_line_error, run
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from lab.data import load_bundled_corpus
from lab.nets.models import LMConfig, RecurrentLM
from lab.server.jobs import TrainingJob
from lab.training.checkpoints import (
    CheckpointError,
    checkpoint_bytes,
    load_checkpoint,
    save_checkpoint,
    why_not_resumable,
)
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig, resume_training_state, run_metrics, train

K = 5  # steps before and after the save


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:20_000], "char")


def tiny_lm(vocab_size, dropout=0.0):
    torch.manual_seed(0)
    return RecurrentLM(LMConfig(vocab_size=vocab_size, embed_dim=8, hidden_size=16, num_layers=2, dropout=dropout))


def config(**overrides):
    return TrainConfig(
        **{"max_steps": 2 * K, "batch_size": 4, "block_size": 16, "eval_interval": 3, "device": "cpu", **overrides}
    )


def stop_after(k):
    """(emit, should_stop) that stop a run once it has taken k steps."""
    steps = []
    return (lambda event: steps.append(event["step"]) if event["type"] == "step" else None), lambda: len(steps) >= k


def stopped_run(task, tmp_path, dropout=0.0):
    """K steps of a 2K-step run, then saved as resumable: (path, result)."""
    model = tiny_lm(task.vocab_size, dropout)
    result = train(model, task, config(), *stop_after(K))
    assert result.reason == "stopped" and result.steps == K
    return save_checkpoint(
        tmp_path, "run", model, task.tokenizer, run_metrics(result, config()), None, result.training_state
    ), result


@pytest.mark.parametrize("dropout", [0.0, 0.3])  # dropout on: the restored generator gives the same masks
def test_k_steps_then_save_and_resume_then_k_steps_equals_2k_steps_in_one_go(task, tmp_path, dropout):
    whole = tiny_lm(task.vocab_size, dropout)
    one_go = train(whole, task, config())
    path, _ = stopped_run(task, tmp_path, dropout)
    checkpoint = load_checkpoint(path, "cpu")
    resumed = train(checkpoint.model, task, config(), resume=resume_training_state(checkpoint, config()))
    assert resumed.steps == 2 * K and resumed.reason == "finished"
    for a, b in zip(whole.parameters(), checkpoint.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert resumed.last_train_loss == pytest.approx(one_go.last_train_loss, abs=1e-6)
    # the history goes on from the saved one, which ends with the evaluation made when the run stopped
    assert [e["step"] for e in resumed.history] == [3, K, 6, 9, 10] and [e["step"] for e in one_go.history] == [
        3,
        6,
        9,
        10,
    ]
    assert [e["val_loss"] for e in resumed.history if e["step"] != K] == pytest.approx(
        [e["val_loss"] for e in one_go.history], abs=1e-6
    )


def test_without_the_optimizer_state_the_resumed_run_differs(task, tmp_path):
    """The comparison above can fail: a run restarted with fresh AdamW moments ends elsewhere."""
    whole = tiny_lm(task.vocab_size)
    train(whole, task, config())
    path, _ = stopped_run(task, tmp_path)
    checkpoint = load_checkpoint(path, "cpu")
    state = resume_training_state(checkpoint, config())
    state.optimizer = {}
    train(checkpoint.model, task, config(), resume=state)
    assert max((a - b).abs().max().item() for a, b in zip(whole.parameters(), checkpoint.model.parameters())) > 1e-4


def test_the_saved_state_round_trips(task, tmp_path):
    path, result = stopped_run(task, tmp_path)
    saved, loaded = result.training_state, load_checkpoint(path, "cpu").training_state
    assert (loaded.step, loaded.elapsed, loaded.train_loss) == (saved.step, saved.elapsed, saved.train_loss)
    assert loaded.hyperparameters == saved.hyperparameters and loaded.hyperparameters["weight_decay"] == 0.01
    assert set(loaded.optimizer) == {name for name, _ in tiny_lm(task.vocab_size).named_parameters()}
    for name, moments in saved.optimizer.items():
        for key, tensor in moments.items():
            assert torch.equal(loaded.optimizer[name][key], tensor), (name, key)
    assert all(torch.equal(loaded.rng[k], saved.rng[k]) for k in ("torch", "data"))
    assert [e["step"] for e in loaded.history] == [3, 5]


def test_a_checkpoint_without_training_state_loads_and_cannot_be_resumed(task, tmp_path):
    model = tiny_lm(task.vocab_size)
    path = save_checkpoint(tmp_path, "plain", model, task.tokenizer, {})
    checkpoint = load_checkpoint(path)
    assert checkpoint.training_state is None
    with pytest.raises(ValueError, match="has no training state"):
        resume_training_state(checkpoint, config())


def test_resuming_with_other_settings_or_no_budget_left_is_refused(task, tmp_path):
    checkpoint = load_checkpoint(stopped_run(task, tmp_path)[0], "cpu")
    with pytest.raises(ValueError, match="resume: lr is 0.01 but the run being resumed used 0.003"):
        resume_training_state(checkpoint, config(lr=0.01))
    with pytest.raises(ValueError, match=r"already spent its budget \(5 steps"):
        resume_training_state(checkpoint, config(max_steps=K))
    assert resume_training_state(checkpoint, config(max_steps=4 * K, eval_interval=7)).step == K


def tampered(data, tensors=None, state=None):
    """The checkpoint `data` with its tensors and training_state header changed by the given functions."""
    header_len = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8 : 8 + header_len])["__metadata__"]
    loaded = load_bytes(data)
    if tensors:
        tensors(loaded)
    if state:
        entry = json.loads(metadata["training_state"])
        state(entry)
        metadata["training_state"] = json.dumps(entry)
    return save_bytes(loaded, metadata)


@pytest.fixture(scope="module")
def resumable_bytes(task):
    model = tiny_lm(task.vocab_size)
    result = train(model, task, config(max_steps=2))
    return checkpoint_bytes(model, task.tokenizer, run_metrics(result, config()), "run", 1, None, result.training_state)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(tensors=lambda t: t.pop("optim.head.weight.exp_avg")),
            "training state entry 'optim.head.weight.exp_avg' is missing",
        ),
        (
            dict(tensors=lambda t: t.update({"optim.head.weight.exp_avg_sq": t["optim.head.weight.exp_avg_sq"][:2]})),
            "'optim.head.weight.exp_avg_sq' has shape",
        ),
        (
            dict(tensors=lambda t: t["optim.head.bias.exp_avg"].fill_(float("nan"))),
            "'optim.head.bias.exp_avg' is not finite",
        ),
        (dict(tensors=lambda t: t["optim.head.bias.exp_avg_sq"].fill_(-1.0)), "negative second moment"),
        (dict(tensors=lambda t: t.update({"optim.head.bias.step": torch.tensor(2)})), "has type torch.int64"),
        (dict(tensors=lambda t: t.update({"rng.data": t["rng.data"][:10]})), "'rng.data' has shape (10,)"),
        (
            dict(tensors=lambda t: t.update({"optim.extra.exp_avg": torch.zeros(1)})),
            "'optim.extra.exp_avg' is not listed in its header",
        ),
        (dict(state=lambda s: s.pop("step")), "checkpoint training_state step: is missing"),
        (
            dict(state=lambda s: s.update(step=-1)),
            "training_state step: input should be greater than or equal to 0, got -1",
        ),
        (
            dict(state=lambda s: s.update(elapsed=1e308)),
            "training_state elapsed: input should be less than or equal to 1000000000",
        ),
        (
            dict(state=lambda s: s.update(optimizer=["head.weight", "nowhere"])),
            "names 'nowhere', which is not a parameter",
        ),
        (
            dict(state=lambda s: s.update(hyperparameters={"betas": ["a"]})),
            "training_state hyperparameters.lr: is missing",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(betas=["a", 0.9])),
            "hyperparameters.betas.0: input should be a valid number, got 'a'",
        ),
        # the hostile battery's edits: each once raised a KeyError, a RuntimeError or an AssertionError on --resume,
        # or trained uphill without a word
        (
            dict(state=lambda s: s["hyperparameters"].update(amsgrad=True)),
            "hyperparameters.amsgrad: input should be False, got True",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(maximize=True)),
            "hyperparameters.maximize: input should be False, got True",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(capturable=True)),
            "hyperparameters.capturable: input should be False, got True",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(betas=[[0.9, 0.1], 0.99])),
            "hyperparameters.betas.0: input should be a valid number, got [0.9, 0.1]",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(eps=0)),
            "hyperparameters.eps: input should be greater than 0, got 0",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(weight_decay=1e30)),
            "hyperparameters.weight_decay: input should be less than or equal to 1, got 1e+30",
        ),
        (
            dict(state=lambda s: s["hyperparameters"].update(bogus=1)),
            "training_state hyperparameters.bogus: unknown field",
        ),
        (
            dict(
                tensors=lambda t: t.update(
                    {"optim.head.bias.exp_avg": t["optim.head.bias.exp_avg"].to(torch.float8_e4m3fn)}
                )
            ),
            "'optim.head.bias.exp_avg' has type torch.float8_e4m3fn",
        ),
        (
            dict(state=lambda s: s.update(rng=["torch"])),
            "training_state rng must name the generators 'torch' and 'data', got ['torch']",
        ),
    ],
)
def test_a_corrupt_or_missing_training_state_entry_is_refused_in_one_line(resumable_bytes, change, message):
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tampered(resumable_bytes, **change))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_training_state_header_that_is_not_json_is_refused(resumable_bytes):
    header_len = int.from_bytes(resumable_bytes[:8], "little")
    metadata = json.loads(resumable_bytes[8 : 8 + header_len])["__metadata__"]
    metadata["training_state"] = "{not json"
    with pytest.raises(CheckpointError, match="'training_state' is not valid JSON"):
        load_checkpoint(save_bytes(load_bytes(resumable_bytes), metadata))


def test_a_resumable_job_saves_its_state_and_a_job_can_continue_it(task, tmp_path):
    first = TrainingJob("job", tiny_lm(task.vocab_size), task, config(max_steps=K), tmp_path, resumable=True)
    assert first.start().wait(60) == "finished"
    checkpoint = load_checkpoint(first.checkpoint_path, "cpu")
    longer = config(max_steps=2 * K)
    second = TrainingJob(
        "job", checkpoint.model, task, longer, tmp_path, resume=resume_training_state(checkpoint, longer)
    )
    assert second.start().wait(60) == "finished"
    assert second.result.steps == 2 * K and second.result.training_state is None  # not kept unless resumable
    assert load_checkpoint(second.checkpoint_path).training_state is None


def test_an_ended_job_makes_the_job_that_continues_it_for_more_seconds(task, tmp_path):
    first = TrainingJob("job", tiny_lm(task.vocab_size), task, config(max_steps=K), tmp_path, resumable=True)
    assert first.start().wait(60) == "finished"
    with pytest.raises(ValueError, match="more_seconds: input should be greater than 0"):
        first.continuation(0)
    more = first.continuation(0.5)
    assert more.name == "job" and more.resumable and more.resume.step == K
    assert more.config.max_steps is None and more.config.max_seconds == pytest.approx(first.result.elapsed + 0.5)
    assert more.start().wait(60) == "finished"
    steps = [e for e in more.events() if e["type"] == "step"]
    assert steps[0]["step"] == K + 1 and steps[0]["elapsed"] > first.result.elapsed  # a chart's x goes on
    assert more.checkpoint_path.name == "job_v2.safetensors"
    assert load_checkpoint(more.checkpoint_path).training_state.step == more.result.steps > K

    plain = TrainingJob("plain", tiny_lm(task.vocab_size), task, config(max_steps=2), tmp_path)
    assert plain.start().wait(60) == "finished"
    with pytest.raises(ValueError, match="has no training state"):
        plain.continuation(1)


def test_why_a_run_could_not_be_continued(task, monkeypatch):
    import lab.training.checkpoints

    small = tiny_lm(task.vocab_size).config
    assert why_not_resumable(small, config()) is None
    assert "stateful run carries its hidden state" in why_not_resumable(small, config(stateful=True))
    monkeypatch.setattr(lab.training.checkpoints.format, "MAX_CHECKPOINT_BYTES", 2**20)
    assert why_not_resumable(small, config()) is None
    assert re.fullmatch(
        r"with its optimizer's state this model's checkpoint would be about \d+ MB, over the 1 MB "
        "a checkpoint may have",
        why_not_resumable(dataclasses.replace(small, hidden_size=512), config()),
    )


# ---------------------------------------------------------------------------
# the command line

TINY = [*TINY_CLI_MODEL, "--eval-interval", "2"]


def test_cli_resume_continues_from_the_saved_step(corpus, tmp_path):
    code, _, err = run(["train", "--corpus", corpus, *TINY, "--steps", "4", "--resumable", "--out", tmp_path])
    assert code == 0, err
    code, out, err = run(
        ["train", "--resume", tmp_path / "astra-alpha_latest.safetensors", "--steps", "7", "--out", tmp_path]
    )
    assert code == 0, err
    assert "resuming at step 4" in out and "finished: 7 steps" in out
    resumed = load_checkpoint(tmp_path / "astra-alpha_v2.safetensors")
    assert [e["step"] for e in resumed.metrics["history"]] == [2, 4, 6, 7]
    assert resumed.training_state.step == 7 and resumed.metrics["train_config"]["max_steps"] == 7


@pytest.mark.parametrize(
    "option, message",
    [
        (["--hidden-size", "32"], "resume: --hidden-size 32 differs from the run being resumed (16)"),
        (["--preset", "astra-beta"], "resume: --preset astra-beta differs from the run being resumed (astra-alpha)"),
        (["--batch-size", "8"], "resume: batch_size is 8 but the run being resumed used 4"),
        ([], "resume: the run already spent its budget (3 steps"),
    ],
)
def test_cli_resume_refuses_a_changed_run_in_one_line(corpus, tmp_path, option, message):
    assert run(["train", "--corpus", corpus, *TINY, "--steps", "3", "--resumable", "--out", tmp_path])[0] == 0
    code, _, err = run(["train", "--resume", tmp_path / "astra-alpha_v1.safetensors", *option, "--out", tmp_path])
    assert_one_line_error(code, err, message)


def test_cli_resume_of_a_checkpoint_without_training_state_is_refused(corpus, tmp_path):
    assert run(["train", "--corpus", corpus, *TINY, "--steps", "2", "--out", tmp_path])[0] == 0
    code, _, err = run(["train", "--resume", tmp_path / "astra-alpha_v1.safetensors", "--out", tmp_path])
    assert_one_line_error(code, err, "has no training state")


def test_cli_refuses_a_resumable_run_whose_checkpoint_would_be_over_the_limit(corpus, tmp_path, monkeypatch):
    import lab.training.checkpoints

    monkeypatch.setattr(lab.training.checkpoints.format, "MAX_CHECKPOINT_BYTES", 2**20)
    code, _, err = run(
        ["train", "--corpus", corpus, *TINY, "--hidden-size", "256", "--steps", "2", "--resumable", "--out", tmp_path]
    )
    assert_one_line_error(code, err, "over the 1 MB limit for a checkpoint; train it without --resumable")
    assert not list(tmp_path.iterdir())


def test_train_help_offers_resumable_runs():
    code, out, _ = run(["train", "--help"])
    assert code == 0 and "--resumable" in out and "--resume CHECKPOINT" in out
