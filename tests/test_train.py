"""lab.training.train: the seeds' recipe, events, reproducibility, background jobs and bad input. Tiny and CPU-only.

Long (over 400 lines) because the engine's promises (events, resume, devices, refusals, jobs) are
tested over the same tiny task and config, made once.
"""

import errno
import logging
import math
import re
import threading
import time

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

import lab.server.capacity
import lab.training.train
from lab.data import CharTokenizer, DataError, load_bundled_corpus, random_windows, split_text
from lab.nets.families import FAMILIES
from lab.nets.models import ClassifierConfig, LMConfig, RecurrentLM, build_model
from lab.server.capacity import Budget, CapacityError
from lab.server.jobs import TrainingJob
from lab.training.checkpoints import load_checkpoint, save_checkpoint
from lab.training.tasks import ClassificationTask, LMTask, load_corpus
from lab.training.train import TrainConfig, cosine_lr, resolve_device, train

STEP_KEYS = {"type", "step", "epoch", "train_loss", "lr", "grad_norm", "tokens_per_s", "elapsed", "eta", "progress"}


@pytest.fixture(scope="module")
def text():
    return load_bundled_corpus()[:20_000]


@pytest.fixture(scope="module")
def char_task(text):
    return LMTask.from_text(text, "char")


def tiny_lm(vocab_size, seed=0, cls=RecurrentLM, hidden_size=16, **model_options):
    torch.manual_seed(seed)
    return cls(LMConfig(vocab_size=vocab_size, embed_dim=8, hidden_size=hidden_size), **model_options)


def tiny_config(**overrides):
    options = dict(batch_size=4, block_size=16, max_steps=6, eval_interval=3, eval_windows=8, lr=1e-2)
    return TrainConfig(**{**options, **overrides})


def run(model, task, config, should_stop=None):
    events = []
    result = train(model, task, config, events.append, should_stop)
    return result, events


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def tensors_of(state):
    """All tensors in a (nested) recurrent state, in order."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, (list, tuple)):
        return [t for s in state for t in tensors_of(s)]
    return []


class PoisonedLM(RecurrentLM):
    """After `good_steps` training forwards, the loss (or only its gradient) becomes NaN."""

    def __init__(self, config, good_steps, where="loss"):
        super().__init__(config)
        self.good_steps, self.where, self.calls = good_steps, where, 0

    def forward(self, idx, targets=None, state=None, trace=None, label_smoothing=0.0):
        logits, loss, state = super().forward(idx, targets, state, trace, label_smoothing)
        if self.training and targets is not None:
            self.calls += 1
            if self.calls > self.good_steps:
                if self.where == "loss":
                    loss = loss * math.nan
                else:  # the value stays finite, d sqrt(|w - w|) / dw = inf and 0 * inf = nan
                    w = self.head.weight
                    loss = loss + 0.0 * torch.sqrt((w - w.detach()).abs()).sum()
        return logits, loss, state


class SpyLM(RecurrentLM):
    """Records what every training forward received and returned."""

    def __init__(self, config):
        super().__init__(config)
        self.calls = []

    def forward(self, idx, targets=None, state=None, trace=None, label_smoothing=0.0):
        logits, loss, new_state = super().forward(idx, targets, state, trace, label_smoothing)
        if self.training:
            self.calls.append({"x": idx.clone(), "y": targets.clone(), "state": state, "new_state": new_state})
        return logits, loss, new_state


@pytest.fixture
def no_jobs_left():
    """Every job a test starts must be over when it ends, and its share of the server's budget given back."""
    jobs = []
    yield jobs
    for job in jobs:
        job.stop()
        job.wait(30)
    assert lab.server.capacity.server_budget().snapshot()[2:] == (0, 0)


# ---------------------------------------------------------------------------
# the seeds' recipe


def test_defaults_are_the_seeds_recipe():
    config = TrainConfig()
    assert config.weight_decay == 0.01 and config.grad_clip == 1.0
    assert config.label_smoothing == 0.0 and config.min_lr == 0.0 and config.stateful is False


def test_optimiser_is_adamw_with_decoupled_weight_decay(text):
    # an embedding row of a token that never occurs gets a zero gradient; AdamW still shrinks it by
    # exactly (1 - lr * weight_decay) in one step, while Adam's L2 (or no decay) would not
    unseen = "¤§"  # two printable characters the text never holds
    assert not set(unseen) & set(text)
    tokenizer = CharTokenizer("".join(sorted(set(text))) + unseen)
    task = LMTask(*split_text(text), tokenizer)
    model = tiny_lm(task.vocab_size)
    unused = model.embedding.weight[-2:].detach().clone()
    used = model.embedding.weight[:-2].detach().clone()
    config = tiny_config(max_steps=1, lr=0.1, weight_decay=0.5)
    result, _ = run(model, task, config)
    assert result.steps == 1
    torch.testing.assert_close(model.embedding.weight[-2:].detach(), unused * (1 - 0.1 * 0.5), rtol=1e-6, atol=0)
    assert not torch.allclose(model.embedding.weight[:-2].detach(), used * (1 - 0.1 * 0.5))  # real updates too


def test_adamw_is_the_optimiser_built(char_task, monkeypatch):
    built = []

    class Recording(torch.optim.AdamW):
        def __init__(self, params, **options):
            super().__init__(params, **options)
            built.append(options)

    monkeypatch.setattr(torch.optim, "AdamW", Recording)
    model = tiny_lm(char_task.vocab_size)
    run(model, char_task, tiny_config(max_steps=1, weight_decay=0.03))
    assert built == [{"lr": 1e-2, "weight_decay": 0.03}]


def test_learning_rate_follows_the_cosine_curve(char_task):
    config = tiny_config(max_steps=40, lr=1e-2, min_lr=1e-4, eval_interval=100)
    _, events = run(tiny_lm(char_task.vocab_size), char_task, config)
    lrs = [e["lr"] for e in of_type(events, "step")]
    assert len(lrs) == 40 and lrs[0] == config.lr
    assert all(b < a for a, b in zip(lrs, lrs[1:]))  # strictly decreasing
    assert lrs[-1] < config.min_lr + 0.01 * (config.lr - config.min_lr)  # ~min_lr at the end of the budget
    for i, lr in enumerate(lrs):
        expected = config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * i / 40))
        assert lr == pytest.approx(expected, rel=1e-9)
    assert cosine_lr(config, 1.0) == config.min_lr and cosine_lr(config, 0.5) == pytest.approx(5.05e-3)


# ---------------------------------------------------------------------------
# reproducibility and events


@pytest.mark.parametrize("stateful", [False, True])
def test_same_seed_same_losses_different_seed_different(text, stateful):
    task = LMTask.from_text(text, "char")  # one task reused by every run, as a UI would

    def losses(seed):
        _, events = run(tiny_lm(task.vocab_size), task, tiny_config(seed=seed, stateful=stateful, max_steps=5))
        return [e["train_loss"] for e in of_type(events, "step")]

    first = losses(1)
    assert len(first) == 5
    assert losses(1) == first
    if stateful:  # consecutive windows do not depend on the seed; a different block size must be honoured
        _, events = run(tiny_lm(task.vocab_size), task, tiny_config(stateful=True, block_size=8, max_steps=2))
        assert [e["step"] for e in of_type(events, "step")] == [1, 2]
        assert losses(1) == first
    else:
        assert losses(2) != first


def test_step_eval_and_done_events(char_task, capsys):
    config = tiny_config(max_steps=7, eval_interval=3)
    result, events = run(tiny_lm(char_task.vocab_size), char_task, config)
    steps, evals = of_type(events, "step"), of_type(events, "eval")
    assert [e["step"] for e in steps] == list(range(1, 8))
    for e in steps:
        assert set(e) == STEP_KEYS
        assert math.isfinite(e["train_loss"]) and e["grad_norm"] > 0 and e["tokens_per_s"] > 0
        assert e["elapsed"] > 0 and e["eta"] >= 0 and 0 < e["progress"] <= 1
        assert e["epoch"] == pytest.approx(e["step"] / char_task.items_per_epoch(config))
    assert steps[-1]["progress"] == 1.0 and steps[-1]["eta"] == 0
    # every eval_interval steps, and once more at the end
    assert [e["step"] for e in evals] == [3, 6, 7]
    for e in evals:
        assert {"val_loss", "val_nats_per_char", "train_loss", "epoch", "elapsed"} <= set(e)
        assert "val_accuracy" not in e and math.isfinite(e["val_loss"])
    assert events[-1] == {"type": "done", "reason": "finished", "step": 7, "elapsed": events[-1]["elapsed"]}
    assert result.reason == "finished" and result.steps == 7 and result.history == evals
    assert result.last_train_loss == steps[-1]["train_loss"]
    assert capsys.readouterr() == ("", "")  # train() never prints


def test_classification_task_reports_accuracy(capsys):
    torch.manual_seed(0)
    x = torch.randn(40, 12, 1)
    y = (x.sum((1, 2)) > 0).long()
    dataset = torch.utils.data.TensorDataset(x, y)
    # a TensorDataset for training, and any indexable dataset of (x, y) items for testing
    task = ClassificationTask(
        torch.utils.data.TensorDataset(x[:30], y[:30]), torch.utils.data.Subset(dataset, range(30, 40))
    )
    model = build_model(ClassifierConfig(hidden_size=8, num_classes=2))
    result, events = run(model, task, tiny_config(batch_size=8, max_steps=4, eval_interval=2))
    evals = of_type(events, "eval")
    assert [e["step"] for e in evals] == [2, 4]
    for e in evals:
        assert 0 <= e["val_accuracy"] <= 1 and math.isfinite(e["val_loss"]) and "val_nats_per_char" not in e
        assert e["val_accuracy"] * 10 == pytest.approx(round(e["val_accuracy"] * 10))  # 10 test items
    assert of_type(events, "step")[0]["tokens_per_s"] > 0 and events[-1]["type"] == "done"
    assert task.tokenizer is None and result.steps == 4
    assert capsys.readouterr() == ("", "")


def test_loss_falls_on_a_repetitive_text():
    task = LMTask.from_text("the cat sat on the mat.\n" * 200, "char")
    model = tiny_lm(task.vocab_size, hidden_size=32)
    result, events = run(model, task, tiny_config(batch_size=8, max_steps=60, lr=2e-2, eval_interval=1000))
    first_loss = of_type(events, "step")[0]["train_loss"]
    assert first_loss > 2.0  # ~ln(13) at initialisation
    assert result.history[-1]["val_loss"] < 0.5 * first_loss


def test_time_and_epoch_budgets(char_task):
    result, events = run(
        tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=None, max_seconds=0.3, eval_interval=1000)
    )
    assert result.reason == "time budget" and result.steps > 0 and result.elapsed >= 0.3
    config = tiny_config(max_steps=None, max_epochs=0.05, eval_interval=1000)
    result, events = run(tiny_lm(char_task.vocab_size), char_task, config)
    steps_needed = math.ceil(0.05 * char_task.items_per_epoch(config))
    assert result.reason == "finished" and result.steps == steps_needed
    assert of_type(events, "step")[-1]["epoch"] >= 0.05 > of_type(events, "step")[-2]["epoch"]


def test_should_stop_is_checked_before_every_step(char_task):
    counted = []

    def emit(event):
        if event["type"] == "step":
            counted.append(event)

    result = train(
        tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=50), emit, should_stop=lambda: len(counted) >= 3
    )
    assert result.reason == "stopped" and result.steps == 3 and len(counted) == 3
    assert result.history[-1]["step"] == 3  # a stopped run still gets its final evaluation


# ---------------------------------------------------------------------------
# label smoothing, stateful training, nats per character


def test_label_smoothing_changes_the_loss(char_task):
    def first_loss(smoothing):
        _, events = run(tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=1, label_smoothing=smoothing))
        return of_type(events, "step")[0]["train_loss"]

    plain, smoothed = first_loss(0.0), first_loss(0.1)
    assert smoothed != plain
    # the first step's loss is exactly cross-entropy with smoothing on the first batch at initialisation
    config = tiny_config(max_steps=1, label_smoothing=0.1)
    x, y = random_windows(
        char_task.train_ids, config.batch_size, config.block_size, torch.Generator().manual_seed(config.seed)
    )
    logits, _, _ = tiny_lm(char_task.vocab_size)(x)
    expected = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), y.reshape(-1), label_smoothing=0.1
    )
    assert smoothed == pytest.approx(expected.item(), rel=1e-5)


def test_stateful_training_carries_the_state_over_consecutive_windows(text):
    task = LMTask.from_text(text[:2000], "char")  # 1800 train tokens: 4 streams of 450, 28 windows of 16
    model = tiny_lm(task.vocab_size, cls=SpyLM)
    windows_per_pass = (len(task.train_ids) // 4 - 1) // 16
    run(model, task, tiny_config(stateful=True, max_steps=windows_per_pass + 2, eval_interval=1000))
    calls = model.calls
    assert len(calls) == windows_per_pass + 2
    assert calls[0]["state"] is None
    for previous, current in zip(calls[: windows_per_pass - 1], calls[1:windows_per_pass]):
        assert torch.equal(current["x"][:, 1:], current["y"][:, :-1])
        assert torch.equal(current["x"][:, 0], previous["y"][:, -1])  # each row continues its stream
        assert current["state"] is not None
        for received, returned in zip(tensors_of(current["state"]), tensors_of(previous["new_state"])):
            assert torch.equal(received, returned) and not received.requires_grad  # carried, detached
    assert calls[windows_per_pass]["state"] is None  # a new pass over the streams starts afresh
    assert torch.equal(calls[windows_per_pass]["x"], calls[0]["x"])
    assert calls[windows_per_pass + 1]["state"] is not None


def test_stateless_training_never_passes_a_state(char_task):
    model = tiny_lm(char_task.vocab_size, cls=SpyLM)
    run(model, char_task, tiny_config(max_steps=3))
    assert len(model.calls) == 3 and all(call["state"] is None for call in model.calls)


def test_nats_per_char_for_sentencepiece_and_char(text):
    sp_task = LMTask.from_text(text, "sentencepiece", vocab_size=120)
    assert sp_task.vocab_size == 120 and sp_task.chars_per_token > 1.2
    _, events = run(tiny_lm(120), sp_task, tiny_config(max_steps=2, eval_interval=1))
    evals = of_type(events, "eval")
    assert len(evals) == 2
    for e in evals:
        assert e["val_nats_per_char"] == pytest.approx(e["val_loss"] / sp_task.chars_per_token, rel=1e-12)
        assert e["val_nats_per_char"] < e["val_loss"]
    char_task = LMTask.from_text(text, "char")
    assert char_task.chars_per_token == 1.0
    _, events = run(tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=2))
    assert all(e["val_nats_per_char"] == e["val_loss"] for e in of_type(events, "eval"))


# ---------------------------------------------------------------------------
# non-finite loss


def test_validation_scores_the_same_windows_whatever_the_batch_size(char_task):
    model = tiny_lm(char_task.vocab_size).eval()
    scores = [
        char_task.evaluate(model, tiny_config(batch_size=b, eval_windows=10), "cpu")["val_loss"] for b in (2, 3, 64)
    ]
    assert scores[1] == pytest.approx(scores[0], rel=1e-6) and scores[2] == pytest.approx(scores[0], rel=1e-6)
    other = char_task.evaluate(model, tiny_config(eval_windows=11), "cpu")["val_loss"]
    assert other != pytest.approx(scores[0], rel=1e-6)  # the windows are what the score is computed on


def test_in_order_validation_equals_one_pass_over_each_stream(char_task):
    """Chunks with the state carried are the same computation as one forward pass per stream, and
    a split shorter than the default streams x chunk is read with fewer streams, then shorter chunks."""
    model = tiny_lm(char_task.vocab_size)
    train(model, char_task, tiny_config(max_steps=40))  # a model whose state carries something
    streams, chunk = 3, 50
    metrics = char_task.evaluate_in_order(model, "cpu", streams=streams, chunk=chunk)
    val = char_task.val_ids
    stream_len = len(val) // streams
    rows = val[: streams * stream_len].view(streams, stream_len)
    n_chunks = (stream_len - 1) // chunk
    x, y = rows[:, : n_chunks * chunk], rows[:, 1 : n_chunks * chunk + 1]
    with torch.no_grad():
        expected = model(x, y)[1].item()  # one pass, state carried inside the layer
        cold = (
            sum(model(x[:, s : s + chunk], y[:, s : s + chunk])[1].item() for s in range(0, n_chunks * chunk, chunk))
            / n_chunks
        )  # every chunk from a zero state
    assert metrics["val_loss_in_order"] == pytest.approx(expected, rel=1e-5)
    # a carried state changes the score (a model trained on short windows may even do worse with it)
    assert abs(metrics["val_loss_in_order"] - cold) > 1e-3
    assert metrics["val_nats_per_char_in_order"] == pytest.approx(expected / char_task.chars_per_token)
    short = LMTask(*split_text(load_bundled_corpus()[:3000]), char_task.tokenizer)  # 300 validation characters
    assert len(short.val_ids) < 16 * 257
    assert math.isfinite(short.evaluate_in_order(model, "cpu")["val_loss_in_order"])


@pytest.mark.parametrize("where", ["loss", "gradient"])
def test_non_finite_loss_stops_and_keeps_the_last_good_weights(char_task, where):
    model = tiny_lm(char_task.vocab_size, cls=PoisonedLM, good_steps=4, where=where)
    snapshots = []

    def emit(event):
        if event["type"] == "step":
            snapshots.append(weights(model))

    events = []
    result = train(model, char_task, tiny_config(max_steps=50, eval_interval=2), lambda e: (events.append(e), emit(e)))
    assert "non-finite" in result.reason and where in result.reason and "step 5" in result.reason
    assert result.steps == 4 and len(snapshots) == 4
    assert events[-1]["type"] == "done" and events[-1]["reason"] == result.reason
    assert [e["step"] for e in of_type(events, "eval")] == [2, 4]  # no evaluation of the bad step
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())
    assert_same_weights(weights(model), snapshots[-1])


def test_weights_made_non_finite_by_a_step_are_restored_and_saved(char_task, tmp_path):
    """lr 1e6 or inf used to leave NaN or 1e21 weights while reporting "kept the weights from step 1"."""
    model = tiny_lm(char_task.vocab_size)
    snapshots, steps_taken = [], []

    def poison_at_step_3(optimizer, args, kwargs):  # a step that blows the weights up, as a huge lr does
        steps_taken.append(1)
        if len(steps_taken) == 3:
            with torch.no_grad():
                next(iter(optimizer.param_groups[0]["params"])).mul_(math.inf)
        else:
            snapshots.append(weights(model))

    handle = register_optimizer_step_post_hook(poison_at_step_3)
    try:
        job = TrainingJob("diverged", model, char_task, tiny_config(max_steps=20), checkpoint_dir=tmp_path)
        job.start()
        assert job.wait(120) == "failed"
    finally:
        handle.remove()
    assert job.result.reason == "non-finite weights after step 3 (diverged); stopped and kept the weights from step 2"
    assert job.result.steps == 2 and len(snapshots) == 2
    assert_same_weights(weights(model), snapshots[-1])
    saved = load_checkpoint(job.checkpoint_path)  # the last finite weights were saved, and they load
    assert_same_weights(weights(saved.model), snapshots[-1])


def test_a_run_over_the_memory_limit_is_refused_before_allocating(char_task, monkeypatch):
    from lab.nets.cost import CostError

    monkeypatch.setenv("RNNLAB_MAX_TRAIN_MEMORY_MB", "1")
    model = tiny_lm(char_task.vocab_size)
    before = weights(model)
    with pytest.raises(CostError, match="RNNLAB_MAX_TRAIN_MEMORY_MB"):
        train(model, char_task, tiny_config(batch_size=256, block_size=64))
    assert_same_weights(weights(model), before)


def test_a_failed_save_keeps_the_weights_in_the_job_and_save_retries(char_task, tmp_path, monkeypatch):
    import lab.training.checkpoints

    real_fsync = lab.training.checkpoints.store.os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lab.training.checkpoints.store.os, "fsync", full)
    job = TrainingJob(
        "full", tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=2), checkpoint_dir=tmp_path / "full"
    )
    assert job.start().wait(120) == "failed" and job.checkpoint_path is None
    assert f"No space left on device: '{tmp_path / 'full' / 'full_v1.safetensors'}'" in job.message
    assert "kept in memory" in job.message
    monkeypatch.setattr(lab.training.checkpoints.store.os, "fsync", real_fsync)
    path = job.save(tmp_path / "elsewhere")
    assert load_checkpoint(path).metrics["steps"] == 2


# ---------------------------------------------------------------------------
# bad configuration and data


@pytest.mark.parametrize(
    "field, overrides",
    [
        ("batch_size", {"batch_size": 0}),
        ("block_size", {"block_size": -3}),
        ("lr", {"lr": -1}),
        ("lr", {"lr": math.nan}),
        ("eval_interval", {"eval_interval": 0}),
        ("max_steps", {"max_steps": None}),
        ("max_steps", {"max_steps": 0}),
        ("max_seconds", {"max_seconds": -1.0}),
        ("min_lr", {"min_lr": 1.0}),
        ("weight_decay", {"weight_decay": -0.1}),
        ("grad_clip", {"grad_clip": 0.0}),
        ("label_smoothing", {"label_smoothing": 1.0}),
        ("device", {"device": "tpu"}),
        # issue 14: values that used to be accepted and then hung, diverged or raised deep inside torch
        ("lr", {"lr": math.inf}),
        ("lr", {"lr": 1e6}),
        ("max_seconds", {"max_seconds": math.inf}),
        ("max_epochs", {"max_epochs": math.nan}),
        ("grad_clip", {"grad_clip": math.inf}),
        ("weight_decay", {"weight_decay": math.inf}),
        ("batch_size", {"batch_size": 2.5}),
        ("batch_size", {"batch_size": True}),
        ("block_size", {"block_size": 10**9}),
        ("eval_windows", {"eval_windows": 10**9}),
        ("seed", {"seed": 2**64}),
        ("seed", {"seed": -1}),
        ("stateful", {"stateful": "yes"}),
    ],
)
def test_bad_config_raises_naming_the_field(field, overrides):
    with pytest.raises(ValueError) as error:
        TrainConfig(**overrides)
    assert str(error.value).startswith(f"{field}:")
    if overrides == {"max_steps": None}:
        assert "budget" in str(error.value)


def test_cuda_without_cuda_is_a_clear_error(char_task, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA was asked for but no CUDA device is available"):
        train(tiny_lm(char_task.vocab_size), char_task, tiny_config(device="cuda"))


def test_text_shorter_than_one_window_fails_when_training_starts():
    task = LMTask.from_text("To be, or not to be: that is the question.", "char")  # built without complaint
    with pytest.raises(DataError, match="shorter than one training window"):
        train(tiny_lm(task.vocab_size), task, tiny_config(block_size=64))


def test_load_corpus(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_corpus(tmp_path / "missing.txt")
    (tmp_path / "mine.txt").write_text("hello there\n", encoding="utf-8")
    assert load_corpus(str(tmp_path / "mine.txt")) == "hello there\n"
    assert load_corpus("bundled").startswith(load_bundled_corpus()[:100])


# ---------------------------------------------------------------------------
# background jobs


def wait_for(condition, timeout=30.0):
    """Poll until `condition()` holds; fail (not sleep-assert) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_job_runs_in_the_background_and_stops_within_one_step(char_task, tmp_path, no_jobs_left):
    job = TrainingJob(
        "bg", tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=10**9), checkpoint_dir=tmp_path
    )
    no_jobs_left.append(job)
    assert job.status == "ready" and not job.running
    job.start()
    wait_for(lambda: len(of_type(job.events(), "step")) >= 3)  # events accumulate while start() has returned
    job.stop()
    assert job.wait(30) == "stopped"
    events = job.events()
    steps = of_type(events, "step")
    assert 3 <= job.result.steps < 10_000 and steps[-1]["step"] == job.result.steps
    assert events[-1] == {
        "type": "done",
        "reason": "stopped",
        "step": job.result.steps,
        "elapsed": events[-1]["elapsed"],
    }
    assert job.events(since=len(events) - 1) == [events[-1]]
    assert job.checkpoint_path is not None and job.checkpoint_path.is_file()  # saved after a stop too
    with pytest.raises(RuntimeError, match="already been started"):
        job.start()


def test_stop_is_honoured_before_the_next_step(char_task, no_jobs_left):
    def sampler(model):  # runs in the training thread after every step event
        if len(of_type(job.events(), "step")) == 4:
            job.stop()
        return ""

    job = TrainingJob(
        "stopper",
        tiny_lm(char_task.vocab_size),
        char_task,
        tiny_config(max_steps=10**9),
        sampler=sampler,
        sample_every_s=0,
    )
    no_jobs_left.append(job)
    assert job.start().wait(30) == "stopped"
    assert job.result.steps == 4 and job.message == "stopped" and job.checkpoint_path is None  # no folder given


def test_job_status_transitions_and_final_checkpoint(char_task, tmp_path, no_jobs_left, monkeypatch):
    gate = threading.Event()

    def sampler(model):
        gate.wait(30)
        return "sampled text"

    saved_while = []
    real_save = lab.training.checkpoints.save_checkpoint

    def recording_save(*args, **kwargs):
        saved_while.append(job.status)
        return real_save(*args, **kwargs)

    monkeypatch.setattr(lab.training.checkpoints, "save_checkpoint", recording_save)
    freed_while = []
    real_release = lab.server.capacity.Ticket.release

    def recording_release(ticket):  # when the job gives its share of the budget back
        freed_while.append(job.status)
        real_release(ticket)

    monkeypatch.setattr(lab.server.capacity.Ticket, "release", recording_release)
    model = tiny_lm(char_task.vocab_size)
    job = TrainingJob(
        "astra",
        model,
        char_task,
        tiny_config(max_steps=5),
        checkpoint_dir=tmp_path,
        extra={"preset": "tiny"},
        sampler=sampler,
        sample_every_s=0,
    )
    no_jobs_left.append(job)
    assert job.status == "ready"
    job.start()
    deadline = time.monotonic() + 30
    while job.status == "queued" and time.monotonic() < deadline:  # admitted at once: the budget is empty
        time.sleep(0.01)
    assert job.status == "running" and job.running and job.wait(0.01) == "running"  # held at the sampler
    gate.set()
    assert job.wait(30) == "finished" and job.message == "finished" and not job.running
    # the status turns final only once the checkpoint is on disk and the slot is free for another job
    assert saved_while == ["running"] and freed_while == ["running"]
    assert lab.server.capacity.server_budget().snapshot()[2:] == (0, 0)
    assert job.checkpoint_path == tmp_path / "astra_v1.safetensors"
    assert (tmp_path / "astra_latest.safetensors").is_file()
    checkpoint = load_checkpoint(job.checkpoint_path)
    x = torch.randint(0, char_task.vocab_size, (2, 10))
    torch.testing.assert_close(checkpoint.model(x)[0], model.eval()(x)[0], rtol=0, atol=0)
    assert checkpoint.metrics["steps"] == 5 and checkpoint.metrics["reason"] == "finished"
    assert checkpoint.metrics["train_config"]["max_steps"] == 5 and checkpoint.meta["extra"] == {"preset": "tiny"}
    assert [e["step"] for e in checkpoint.metrics["history"]] == [3, 5]
    assert checkpoint.tokenizer.to_state() == char_task.tokenizer.to_state()
    samples = of_type(job.events(), "sample")
    assert [e["step"] for e in samples] == [1, 2, 3, 4, 5] and {e["text"] for e in samples} == {"sampled text"}


def test_a_job_logs_when_it_takes_its_first_step_and_when_it_ends(char_task, no_jobs_left, caplog):
    """The server's log tells a teacher (and the class benchmark) how long each run waited to start."""
    caplog.set_level(logging.INFO, logger="lab.server.jobs")
    job = TrainingJob("astra", tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=3))
    no_jobs_left.append(job)
    before = time.time()
    assert job.start().wait(30) == "finished"
    assert 0 < job.first_step_seconds < time.time() - before
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.server.jobs"]
    first = f"The run astra: first step {job.first_step_seconds:.2f} s after Start (runs training on this server: 1)"
    assert lines[0] == first
    assert re.fullmatch(r"The run astra: finished after \d+\.\d s \(finished\)", lines[-1]) and len(lines) == 2


def test_sampler_hook_is_rate_limited_and_sees_the_model(char_task, no_jobs_left):
    seen = []

    def sampler(model):
        seen.append(model)
        return f"sample {len(seen)}"

    model = tiny_lm(char_task.vocab_size)
    job = TrainingJob("samples", model, char_task, tiny_config(max_steps=6), sampler=sampler, sample_every_s=3600)
    no_jobs_left.append(job)
    assert job.start().wait(30) == "finished"
    samples = of_type(job.events(), "sample")
    assert samples == [{"type": "sample", "step": 1, "text": "sample 1"}]  # the first step, then not for an hour
    assert seen == [model]


@pytest.fixture
def two_jobs_on_a_small_budget(char_task, no_jobs_left):
    """A budget of 10, a first job of cost 8 held at its first step until `gate` is set, and a second
    job of cost 5 that cannot fit beside it."""
    budget, gate = Budget(capacity=10, owner_share=1.0), threading.Event()
    first = TrainingJob(
        "first",
        tiny_lm(char_task.vocab_size),
        char_task,
        tiny_config(max_steps=3),
        sampler=lambda model: gate.wait(30) and "",
        sample_every_s=0,
        cost_mb=8,
        budget=budget,
    )
    second = TrainingJob(
        "second", tiny_lm(char_task.vocab_size), char_task, tiny_config(max_steps=3), cost_mb=5, budget=budget
    )
    no_jobs_left.extend([first, second])
    yield budget, gate, first, second
    gate.set()


def test_jobs_queue_for_the_budget_and_start_when_it_frees(char_task, two_jobs_on_a_small_budget):
    budget, gate, first, second = two_jobs_on_a_small_budget
    first.start()
    second.start()  # 8 + 5 > 10: it waits, first in the queue
    assert second.status == "queued" and second.queue_position == 1 and second.running
    gate.set()
    assert first.wait(30) == "finished"
    assert second.wait(30) == "finished" and second.queue_position == 0
    with pytest.raises(CapacityError, match="more than one session may use"):
        TrainingJob("huge", tiny_lm(char_task.vocab_size), char_task, tiny_config(), cost_mb=11, budget=budget).start()


def test_a_queued_job_stopped_before_its_turn_never_trains(two_jobs_on_a_small_budget):
    budget, gate, first, second = two_jobs_on_a_small_budget
    first.start(), second.start()
    second.stop()
    assert second.wait(30) == "stopped" and not of_type(second.events(), "step")
    assert budget.snapshot()[3] == 0  # it left the queue
    gate.set()
    assert first.wait(30) == "finished"


def test_job_with_bad_data_fails_with_a_message(no_jobs_left):
    task = LMTask.from_text("too short", "char")
    job = TrainingJob("short", tiny_lm(task.vocab_size), task, tiny_config(block_size=64))
    no_jobs_left.append(job)
    assert job.start().wait(30) == "failed"
    assert "shorter than one training window" in job.message and not job.message.startswith("DataError")
    assert job.events()[-1] == {"type": "error", "message": job.message}


def test_job_after_non_finite_loss_saves_the_good_weights(char_task, tmp_path, no_jobs_left):
    earlier = tiny_lm(char_task.vocab_size, seed=5)
    save_checkpoint(tmp_path, "run", earlier, char_task.tokenizer, {"reason": "earlier"})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    model = tiny_lm(char_task.vocab_size, cls=PoisonedLM, good_steps=3)
    snapshots = []

    def sampler(m):
        snapshots.append(weights(m))
        return ""

    job = TrainingJob(
        "run", model, char_task, tiny_config(max_steps=50), checkpoint_dir=tmp_path, sampler=sampler, sample_every_s=0
    )
    no_jobs_left.append(job)
    assert job.start().wait(30) == "failed"
    assert "non-finite" in job.message and job.result.steps == 3
    assert job.checkpoint_path == tmp_path / "run_v2.safetensors"
    assert (tmp_path / "run_v1.safetensors").read_bytes() == before["run_v1.safetensors"]  # untouched
    saved = load_checkpoint(job.checkpoint_path)
    assert_same_weights(weights(saved.model), snapshots[-1])
    assert all(torch.isfinite(v).all() for v in saved.model.state_dict().values())
    assert "non-finite" in saved.metrics["reason"]
    assert (tmp_path / "run_latest.safetensors").read_bytes() == job.checkpoint_path.read_bytes()


def test_job_on_a_missing_cuda_device_fails_cleanly(char_task, monkeypatch, no_jobs_left):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    job = TrainingJob("gpu", tiny_lm(char_task.vocab_size), char_task, tiny_config(device="cuda"))
    no_jobs_left.append(job)
    assert job.start().wait(30) == "failed"
    assert job.message.startswith("device: ") and "CUDA" in job.message  # the refusal's own words


def test_jobs_take_turns_to_step_and_both_progress(char_task, no_jobs_left):
    from lab.server.capacity import StepTurns

    turns, steps_seen = StepTurns(concurrent=1), []
    inside = threading.Semaphore(1)  # fails (non-blocking acquire) if two steps ever overlap
    # both jobs wait, their threads alive, until the budget admits them together: on busy cores a thread
    # started second may otherwise begin after the first has finished
    budget = Budget(capacity=100, owner_share=1.0)
    everything = budget.hold(100, "the whole budget")

    def sampler(model):
        assert inside.acquire(blocking=False), "two jobs computed at once"
        steps_seen.append(threading.current_thread().name)
        time.sleep(0.002)
        inside.release()
        return ""

    jobs = [
        TrainingJob(
            f"turn{n}",
            tiny_lm(char_task.vocab_size),
            char_task,
            tiny_config(max_steps=20),
            sampler=sampler,
            sample_every_s=0,
            cost_mb=1,
            budget=budget,
            turns=turns,
        )
        for n in range(2)
    ]
    no_jobs_left.extend(jobs)
    for job in jobs:
        job.start()
    deadline = time.monotonic() + 60
    while budget.snapshot()[3] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    everything.release()
    assert [job.wait(60) for job in jobs] == ["finished", "finished"], [job.message for job in jobs]
    assert len(steps_seen) == 40 and len(set(steps_seen)) == 2
    # first come, first served: once both run, they alternate (a plain semaphore let one take every turn)
    switches = sum(a != b for a, b in zip(steps_seen, steps_seen[1:]))
    assert switches >= 30, steps_seen


# ---------------------------------------------------------------------------
# GPU flags, as far as a CPU can check them


@pytest.mark.parametrize("backend", ["reference", "fast", "fused"])
def test_amp_resolves_to_float32_on_a_cpu_unless_bf16_is_asked_for(backend):
    cpu = torch.device("cpu")
    assert lab.training.train.resolve_amp("auto", cpu, backend) is None
    assert lab.training.train.resolve_amp("off", cpu, backend) is None
    if backend != "fast":
        assert lab.training.train.resolve_amp("bf16", cpu, backend) is torch.bfloat16


def test_amp_auto_on_cuda_is_for_the_fused_backend(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)  # an older GPU
    assert lab.training.train.resolve_amp("auto", cuda, "fused") is torch.float16
    assert (
        lab.training.train.resolve_amp("auto", cuda, "reference")
        is lab.training.train.resolve_amp("auto", cuda, "fast")
        is None
    )
    with pytest.raises(ValueError, match="this GPU has no bfloat16; use --amp fp16"):
        lab.training.train.resolve_amp("bf16", cuda, "fused")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    assert lab.training.train.resolve_amp("auto", cuda, "fused") is torch.bfloat16


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
@pytest.mark.parametrize("cell", sorted(FAMILIES))
def test_mixed_precision_is_refused_for_the_fast_kernels_that_compute_in_float32_only(cell, mode, monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    if FAMILIES[cell].fast_autocasts:  # a plain autograd loop (tests/test_cells.py checks it under autocast)
        assert lab.training.train.resolve_amp(mode, cuda, "fast", cell) in (torch.bfloat16, torch.float16)
    else:
        with pytest.raises(ValueError, match="the fast backend's kernel for this cell .* computes in float32 only"):
            lab.training.train.resolve_amp(mode, cuda, "fast", cell)


def test_a_seed_gru_trains_in_bfloat16_on_a_cpu(char_task):
    """`--amp bf16` on a CPU, for the cells whose fast loop autocasts: the run trains (its held-out loss falls)
    and its weights stay float32."""
    config = LMConfig(cell="gru_seed", vocab_size=char_task.vocab_size, embed_dim=16, hidden_size=32, backend="fast")
    model = build_model(config)
    result, events = run(model, char_task, tiny_config(amp="bf16", device="cpu", max_steps=40, eval_interval=20))
    evals = of_type(events, "eval")
    assert result.reason == "finished" and len(evals) == 2
    assert evals[-1]["val_nats_per_char"] < evals[0]["val_nats_per_char"]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fp16_on_a_cpu_is_refused_in_one_line(char_task):
    config = tiny_config(amp="fp16", device="cpu")
    with pytest.raises(ValueError, match=r"^amp: float16 mixed precision needs a CUDA device [^\n]*or off$"):
        train(tiny_lm(char_task.vocab_size), char_task, config)
    with pytest.raises(ValueError, match="amp: input should be 'auto', 'off', 'bf16' or 'fp16'"):
        tiny_config(amp="fp8")


@pytest.mark.parametrize("backend", ["reference", "fused"])
def test_bf16_autocast_trains_on_a_cpu_and_changes_the_numbers(char_task, backend):
    def first_losses(amp):
        events = []
        torch.manual_seed(0)
        train(
            RecurrentLM(LMConfig(vocab_size=char_task.vocab_size, embed_dim=8, hidden_size=16, backend=backend)),
            char_task,
            tiny_config(amp=amp, max_steps=2, device="cpu"),
            events.append,
        )
        return [e["train_loss"] for e in of_type(events, "step")]

    bf16, fp32 = first_losses("bf16"), first_losses("off")
    assert all(math.isfinite(loss) for loss in bf16) and bf16 != fp32
    assert bf16 == pytest.approx(fp32, abs=0.05)


def test_compile_compiles_the_model_it_trains(char_task, monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda module: compiled.append(module) or module)
    train(tiny_lm(char_task.vocab_size), char_task, tiny_config(compile=True, max_steps=1, device="cpu"))
    assert len(compiled) == 1 and isinstance(compiled[0], RecurrentLM)


def test_eval_seconds_puts_a_validation_point_in_every_such_interval_whatever_the_steps(char_task):
    """The Train page's promise: a slow model still shows a validation point every ~10 s."""

    def slow_steps():  # each step takes 30 ms: 0.1 s between evaluations is ~3 steps
        time.sleep(0.03)
        return False

    events = []
    result = train(
        tiny_lm(char_task.vocab_size),
        char_task,
        tiny_config(max_steps=20, eval_interval=10**6, eval_seconds=0.1),
        events.append,
        slow_steps,
    )
    evals = [e for e in events if e["type"] == "eval"]
    assert result.steps == 20 and len(evals) >= 4  # without eval_seconds: one, at the end
    gaps = [b["elapsed"] - a["elapsed"] for a, b in zip(evals, evals[1:])]
    assert max(gaps) < 0.1 + 0.2  # one step past the interval, and the evaluation itself


def test_a_save_that_succeeds_on_retry_clears_the_runs_failure(text, tmp_path, monkeypatch):
    """A full disk fails the first save; "Try saving it again" then succeeds and the run is no longer failed."""
    import lab.training.checkpoints
    from lab.server.jobs import TrainingJob

    real_save, calls = lab.training.checkpoints.save_checkpoint, []

    def full_disk_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(lab.training.checkpoints, "save_checkpoint", full_disk_once)
    task = LMTask.from_text(text, "char")
    job = TrainingJob(
        "retry",
        tiny_lm(task.vocab_size),
        task,
        TrainConfig(max_steps=2, batch_size=4, block_size=8, eval_interval=2, eval_windows=4, device="cpu"),
        checkpoint_dir=tmp_path,
    ).start()
    assert job.wait(60) == "failed" and "saving failed" in job.message
    path = job.save()
    assert path.is_file() and job.status == "finished" and job.message == "finished"
