"""scripts/build_checkpoints.py: early stopping, a build continued after a crash, float16 export."""

import dataclasses

import pytest
import torch
from safetensors import safe_open

import scripts.build_checkpoints as build
from lab.data import load_bundled_corpus
from lab.nets.models import LMConfig, build_model, config_from_dict
from lab.training.checkpoints import BUNDLED_DIR, checkpoint_bytes, load_checkpoint, read_info
from lab.training.presets import get_preset
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig, TrainingState, cosine_lr, train


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:30_000], "char")


def tiny(task):
    return LMConfig(vocab_size=task.vocab_size, embed_dim=8, hidden_size=24)


def config(**overrides):
    return TrainConfig(
        **{
            **dict(batch_size=8, block_size=16, max_steps=12, eval_interval=3, eval_windows=16, lr=1e-2, device="cpu"),
            **overrides,
        }
    )


def test_plateau_counts_evaluations_since_the_best_and_keeps_its_step():
    plateau = build.Plateau(patience=2)
    assert plateau.update(2.0, 10) and plateau.update(1.5, 20)
    assert not plateau.update(1.6, 30) and not plateau.reached
    assert not plateau.update(1.5, 40) and plateau.reached  # equal is no improvement
    assert (plateau.best, plateau.best_step) == (1.5, 20)


def test_a_build_that_crashed_continues_from_its_progress_to_the_same_weights(task, tmp_path, monkeypatch):
    whole, _ = build.train_until_plateau("whole", tiny(task), config(), task, tmp_path / "whole", log=print)
    real_train, calls = build.train, []

    def crash_on_the_third_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the machine went down mid-build
        return real_train(*args, **kwargs)

    monkeypatch.setattr(build, "train", crash_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):  # chunk_seconds=0: a chunk of one step, progress saved after each
        build.train_until_plateau("split", tiny(task), config(), task, tmp_path / "split", chunk_seconds=0)
    assert load_checkpoint(tmp_path / "split" / "progress.safetensors").training_state.step == 2
    monkeypatch.setattr(build, "train", real_train)
    lines = []
    split, metrics = build.train_until_plateau(
        "split", tiny(task), config(), task, tmp_path / "split", chunk_seconds=0, log=lines.append
    )
    assert lines[0].startswith("split: continuing from step 2")
    assert metrics["steps"] == 12 and metrics["done"]
    for (name, a), b in zip(whole.state_dict().items(), split.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # run again once finished: nothing trains, the best weights come back
    again, _ = build.train_until_plateau("split", tiny(task), config(), task, tmp_path / "split")
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), split.state_dict().values()))


def test_the_best_weights_are_kept_not_the_last(task, tmp_path, monkeypatch):
    """Validation that gets worse after the second evaluation (over-fitting): the build returns the
    weights evaluated second, and stops once `patience` evaluations brought nothing better."""
    scores, seen = iter([3.0, 2.0, 2.5, 2.6, 2.7, 2.8]), []

    def evaluate(model, config, device):
        seen.append({k: v.clone() for k, v in model.state_dict().items()})
        score = next(scores)
        return {"val_loss": score, "val_nats_per_char": score}

    monkeypatch.setattr(task, "evaluate", evaluate)
    model, metrics = build.train_until_plateau("overfit", tiny(task), config(max_steps=30), task, tmp_path, patience=3)
    assert metrics["plateau"]["best_step"] == 6 and metrics["reason"] == "early stopping"
    assert metrics["steps"] == 15  # three evaluations after the best, then no more steps
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), seen[1].values()))
    # rerun with more patience: the stopped build continues from its step, with its best so far
    scores = iter([2.9, 1.5, 2.0, 2.1, 2.2])
    lines = []
    model, metrics = build.train_until_plateau(
        "overfit", tiny(task), config(max_steps=30), task, tmp_path, patience=5, log=lines.append
    )
    assert lines[0].startswith("overfit: continuing from step 15 (best 2.0000 at step 6)")
    assert metrics["plateau"]["best_step"] == 21 and metrics["steps"] == 30 and metrics["reason"] != "early stopping"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), seen[-4].values()))


def test_float16_weights_change_the_validation_loss_by_less_than_0_005_nats_per_char(task, tmp_path):
    trained, metrics = build.train_until_plateau("half", tiny(task), config(max_steps=60), task, tmp_path / "work")
    path = tmp_path / "half_latest.safetensors"
    exported = build.export_float16(trained, task, config(), {"steps": metrics["steps"]}, "half", {}, path)
    assert abs(exported["val_nats_per_char"] - exported["float32_val_nats_per_char"]) < 0.005
    loaded = load_checkpoint(path, device="cpu")
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    assert task.evaluate(loaded.model, config(), torch.device("cpu"))["val_nats_per_char"] == pytest.approx(
        exported["val_nats_per_char"], abs=1e-6
    )
    assert path.stat().st_size < 0.6 * sum(p.numel() * 4 for p in trained.parameters()) + 20_000


def test_every_bundled_float16_file_lost_less_than_0_005_nats_per_char_to_its_rounding():
    """What each shipped float16 file recorded when it was built: its loss on the weights it holds
    against the float32 weights it was rounded from."""
    halves = [read_info(p, bundled=True) for p in sorted(BUNDLED_DIR.glob("*_latest.safetensors"))]
    halves = [info for info in halves if info.metrics.get("weights") == "float16"]
    assert halves, "no bundled model is stored in float16 (scripts/build_checkpoints.py writes them so)"
    for info in halves:
        metrics = info.metrics
        assert abs(metrics["val_nats_per_char"] - metrics["float32_val_nats_per_char"]) < 0.005, info.path
        loaded = load_checkpoint(info.path, device="cpu")
        assert all(p.dtype == torch.float32 for p in loaded.model.parameters())


def test_the_recipes_not_bundled_have_no_bundled_file():
    """A recipe leaves NOT_BUNDLED when its file is bundled, so that the test below checks that file."""
    assert build.NOT_BUNDLED <= set(build.RECIPES)
    assert not [name for name in build.NOT_BUNDLED if (BUNDLED_DIR / f"{name}_latest.safetensors").exists()]


@pytest.mark.parametrize("name", sorted(set(build.RECIPES) - build.NOT_BUNDLED))
def test_every_bundled_file_is_what_its_recipe_builds(name):
    """RECIPES is the record of how each shipped model was made: the file's config is its preset's
    with the recipe's overrides (the backend is the build machine's fastest, the vocabulary the
    tokenizer's)."""
    preset_name, model_overrides, _ = build.RECIPES[name]
    shipped = config_from_dict(read_info(BUNDLED_DIR / f"{name}_latest.safetensors", bundled=True).config)
    expected = dataclasses.replace(
        get_preset(preset_name).model,
        **model_overrides,
        **{k: getattr(shipped, k) for k in ("vocab_size", "backend", "scan_mode") if hasattr(shipped, k)},
    )
    assert shipped == expected


def test_the_command_line_sets_a_recipes_budget_batch_and_peak_learning_rate_over_its_own():
    cpu = torch.device("cpu")
    recipe = build.recipe_train_config("scribe-gamma", build.parse_args([]), cpu)
    options = build.parse_args(["--steps", "700", "--batch-size", "32", "--lr", "2e-4"])
    continued = build.recipe_train_config("scribe-gamma", options, cpu)
    assert recipe.lr == 1e-3 and recipe.max_epochs == 20  # seed 000's Scribe-gamma
    assert (continued.lr, continued.max_steps, continued.batch_size) == (2e-4, 700, 32)
    assert dataclasses.replace(continued, lr=recipe.lr, max_steps=recipe.max_steps, batch_size=recipe.batch_size) == (
        recipe
    )


def test_the_command_line_sets_a_recipes_regularisers_over_its_own_and_nothing_else():
    """Issue 52: the Leviathan and Scribe-gamma over-fit the 31 plays; a build tries stronger regularisers."""
    cpu = torch.device("cpu")
    recipe = build.recipe_model_config("leviathan-lstm", build.parse_args([]), 83, cpu)
    options = build.parse_args(["--dropout", "0.35", "--weight-dropout", "0.4"])
    stronger = build.recipe_model_config("leviathan-lstm", options, 83, cpu)
    assert (recipe.dropout, recipe.weight_dropout, recipe.embed_dropout) == (0.25, 0.25, 0.1)  # the recipe's
    assert (stronger.dropout, stronger.weight_dropout, stronger.embed_dropout) == (0.35, 0.4, 0.1)
    assert dataclasses.replace(stronger, dropout=0.25, weight_dropout=0.25) == recipe


def test_the_command_line_sets_a_recipes_mixed_precision():
    """Issue 52: Scribe-gamma trains on a CPU in bfloat16 (--amp bf16); the recipe's own is auto."""
    cpu = torch.device("cpu")
    assert build.recipe_train_config("scribe-gamma", build.parse_args([]), cpu).amp == "auto"
    assert build.recipe_train_config("scribe-gamma", build.parse_args(["--amp", "bf16"]), cpu).amp == "bf16"
    with pytest.raises(SystemExit):
        build.parse_args(["--amp", "fp8"])


def test_a_build_continued_from_weights_warms_up_then_resumes_the_recipes_cosine_at_its_step(
    task, tmp_path, monkeypatch
):
    """Issue 52: a fresh optimizer at the peak undid what the continued weights had learned. Continued at step 6
    of 12 with a warm-up of 3 steps, the rate climbs to the cosine's value there, then follows the cosine."""
    first, _ = build.train_until_plateau("first", tiny(task), config(max_steps=6), task, tmp_path / "first")
    init = tmp_path / "first.safetensors"
    init.write_bytes(checkpoint_bytes(first, task.tokenizer))
    rates, real_train = [], build.train

    def recording(model, task_, train_config, on_event, *args):
        def both(event):
            on_event(event)
            if event["type"] == "step":
                rates.append(event["lr"])

        return real_train(model, task_, train_config, both, *args)

    monkeypatch.setattr(build, "train", recording)
    continued = config(warmup_steps=3)
    _, metrics = build.train_until_plateau(
        "continued", tiny(task), continued, task, tmp_path / "continued", init=init, continue_at=6
    )
    assert metrics["steps"] == 12  # the schedule's 12 steps, 6 of them taken here
    expected = [cosine_lr(continued, s / 12) * min(1.0, (s - 6 + 1) / 3) for s in range(6, 12)]
    assert rates == pytest.approx(expected)
    assert rates[0] < rates[1] < rates[2] and rates[3] < rates[2]  # up through the warm-up, then the cosine down


@pytest.mark.parametrize(("warmup", "steps", "reason"), [(9, 15, "finished"), (0, 12, "early stopping")])
def test_a_continuations_warm_up_does_not_count_as_a_plateau(task, tmp_path, monkeypatch, warmup, steps, reason):
    """Issue 52: Scribe-γ's continuation stopped early at step 4,500 because its fresh optimizer's warm-up lifted the
    loss for ten evaluations. Here every evaluation is worse than the first: with patience 1 a build stops at the
    second one, unless it falls in the warm-up."""
    first, _ = build.train_until_plateau("first", tiny(task), config(max_steps=6), task, tmp_path / "first")
    init = tmp_path / "first.safetensors"
    init.write_bytes(checkpoint_bytes(first, task.tokenizer))
    real_train = build.train

    def worsening(model, task_, train_config, on_event, *args):
        def worse(event):
            on_event({**event, "val_nats_per_char": 10.0 + event["step"]} if event["type"] == "eval" else event)

        return real_train(model, task_, train_config, worse, *args)

    monkeypatch.setattr(build, "train", worsening)
    _, metrics = build.train_until_plateau(
        "continued",
        tiny(task),
        config(max_steps=15, warmup_steps=warmup),
        task,
        tmp_path / "c",
        1,
        init=init,
        continue_at=6,
    )
    assert (metrics["steps"], metrics["reason"]) == (steps, reason)


def test_plateau_leaves_uncounted_evaluations_out_of_its_patience():
    plateau = build.Plateau(patience=1)
    assert plateau.update(2.0, 10) and not plateau.update(2.5, 20, counted=False) and not plateau.reached
    assert plateau.update(1.9, 30, counted=False) and plateau.best_step == 30  # a new best is a new best
    assert not plateau.update(2.0, 40) and plateau.reached


def test_the_optimizers_start_is_saved_so_a_resumed_warm_up_goes_on_where_it_was(task):
    model = build_model(tiny(task))
    result = train(model, task, config(max_steps=8, warmup_steps=4), resume=TrainingState.from_weights_at(5, 0))
    assert result.training_state.optimizer_start == 5 and result.steps == 8
    saved = load_checkpoint(checkpoint_bytes(model, task.tokenizer, {}, "x", 0, None, result.training_state))
    assert saved.training_state.optimizer_start == 5


def test_a_stretch_leaves_the_weights_it_reached_in_float16_with_their_step_to_continue_from(task, tmp_path):
    """Issue 52: a stretch's end is committed, so that the next continues on any machine: the weights it reached
    (not its best), rounded to float16, with the step of the schedule they reached."""
    continued = tmp_path / "continued" / "tiny.safetensors"
    best, metrics = build.train_until_plateau(
        "tiny",
        tiny(task),
        config(max_steps=400, eval_interval=1),
        task,
        tmp_path / "w",
        400,
        stretch_seconds=1e-9,
        continued=continued,
    )
    assert metrics["reason"] == "stretch ended" and 1 <= metrics["steps"] < 400
    progress = load_checkpoint(tmp_path / "w" / "progress.safetensors", device="cpu")
    assert progress.training_state.step == metrics["steps"]
    saved = load_checkpoint(continued, device="cpu")
    assert saved.metrics["steps"] == metrics["steps"] and saved.metrics["reason"] == "stretch ended"
    with safe_open(continued, "pt") as file:
        assert {file.get_tensor(k).dtype for k in file.keys()} == {torch.float16}
    for name, reached in progress.model.state_dict().items():
        assert torch.equal(saved.model.state_dict()[name], reached.half().float()), name
