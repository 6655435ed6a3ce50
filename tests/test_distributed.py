"""Under torchrun (lab.training.distributed): two CPU processes over gloo train the run one process trains, rank 0
alone saves, a failing rank fails the job in one line; the ablation study's runs are spread over the ranks
and give the files one process writes. Each torchrun costs ~10 s."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import TINY_CLI_MODEL, TINY_STUDY_CLI, run, without_timing

from lab.experiments.ablation import RESULTS_FILE, load_results
from lab.training.checkpoints import load_checkpoint

REPO = Path(__file__).resolve().parent.parent
TINY = [*TINY_CLI_MODEL, "--eval-interval", "3", "--steps", "6"]


def torchrun(*argv, script=None, timeout=120):
    """`python -m torch.distributed.run --nproc_per_node=2 -m lab ...` (or a script) on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = [str(script)] if script else ["-m", "lab"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={port}",
            *target,
            *map(str, argv),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_two_ranks_train_what_one_process_trains_and_rank_0_saves(corpus, tmp_path):
    two = torchrun("train", "--corpus", corpus, *TINY, "--resumable", "--out", tmp_path / "two")
    assert two.returncode == 0, two.stderr[-3000:]
    assert "data-parallel over 2 ranks: global batch 4 = 2 per rank x 2" in two.stdout
    assert two.stdout.count("saved ") == 1  # rank 0 alone reports and saves
    assert {p.name for p in (tmp_path / "two").iterdir()} == {
        "astra-alpha_v1.safetensors",
        "astra-alpha_latest.safetensors",
    }
    code, _, err = run(["train", "--corpus", corpus, *TINY, "--out", tmp_path / "one"])
    assert code == 0, err
    ddp = load_checkpoint(tmp_path / "two" / "astra-alpha_v1.safetensors")
    single = load_checkpoint(tmp_path / "one" / "astra-alpha_v1.safetensors")
    ddp_history, single_history = ddp.metrics["history"], single.metrics["history"]
    assert [e["step"] for e in ddp_history] == [e["step"] for e in single_history] == [3, 6]
    for a, b in zip(ddp_history, single_history):  # float32: the gradients are summed in another order
        assert abs(a["train_loss"] - b["train_loss"]) < 1e-4 and abs(a["val_loss"] - b["val_loss"]) < 1e-4
    for name, weight in single.model.state_dict().items():
        assert (weight - ddp.model.state_dict()[name]).abs().max() < 1e-4, name
    assert ddp.training_state.rng["torch"].shape[0] == 2  # each rank's dropout generator, to resume them all
    code, out, err = run(["sample", tmp_path / "two" / "astra-alpha_v1.safetensors", "--length", "20"])
    assert code == 0 and len(out.strip()) > 0, err


FAILING_RANK = """
    import sys
    import lab.training.tasks
    from lab.__main__ import main
    from lab.data import DataError

    if {rank!r} == __import__("os").environ["RANK"]:
        draw, calls = lab.training.tasks.{task}.batches, []

        def failing(self, config, generator):  # as a corrupt shard or a full disk would, mid-run
            for batch in draw(self, config, generator):
                calls.append(1)  # counted over the process's runs
                if len(calls) == 3:
                    raise DataError("the batch could not be read")
                yield batch

        lab.training.tasks.{task}.batches = failing
    sys.exit(main())
"""


def test_a_rank_that_fails_fails_the_job_with_a_one_line_message(corpus, tmp_path):
    script = tmp_path / "failing_rank.py"
    script.write_text(textwrap.dedent(FAILING_RANK.format(rank="1", task="LMTask")))
    result = torchrun("train", "--corpus", corpus, *TINY, "--out", tmp_path / "runs", script=script)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert "error: rank 1: the batch could not be read" in errors, result.stderr[-3000:]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())  # nothing half-saved


def test_the_batch_must_split_evenly_over_the_ranks(monkeypatch):
    import lab.training.tasks
    import lab.training.train
    from lab.data import load_bundled_corpus
    from lab.nets.models import LMConfig, build_model

    monkeypatch.setattr(lab.training.distributed, "rank_and_world", lambda: (0, 2))  # refused before any collective
    task = lab.training.tasks.LMTask.from_text(load_bundled_corpus()[:2000], "char")
    model = build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=4, hidden_size=4))
    with pytest.raises(ValueError, match="batch_size: 3 windows cannot be split evenly over 2 ranks; give a multiple"):
        lab.training.train.train(model, task, lab.training.train.TrainConfig(batch_size=3, block_size=8, max_steps=1))


def test_the_ranks_shares_of_each_batch_put_together_are_the_batch_one_process_draws():
    from lab.data import load_bundled_corpus
    from lab.training.tasks import LMTask
    from lab.training.train import Batches, TrainConfig

    task = LMTask.from_text(load_bundled_corpus()[:2000], "char")
    config, cpu = TrainConfig(batch_size=6, block_size=8, max_steps=1), torch.device("cpu")
    one, ranks = Batches(task, config, cpu), [Batches(task, config, cpu, rank, 3) for rank in range(3)]
    for _ in range(2):  # the generators move on together
        x, y, restart, tokens = next(one)
        shares = [next(batches) for batches in ranks]
        assert x.shape == (6, 8) and [share[0].shape for share in shares] == [(2, 8)] * 3
        assert torch.equal(torch.cat([share[0] for share in shares]), x)
        assert torch.equal(torch.cat([share[1] for share in shares]), y)
        assert restart and [share[3] for share in shares] == [tokens] * 3 == [48] * 3  # the global batch's
    assert one.epoch(3) == 3 / task.items_per_epoch(config)


# 2 arms x 2 seeds of 2 steps each: two rounds of two runs on two ranks
STUDY = ["ablation", *TINY_STUDY_CLI, "--seeds", "0", "1", "--threads", "1"]


@pytest.fixture(scope="module")
def one_process_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("one")
    code, _, err = run([*STUDY, "--out", out])
    assert code == 0, err
    return out


def assert_same_study(folder, one_process_folder):
    """The same runs, numbers, checkpoints and results.csv as the study one process wrote; only the wall-clock
    times (and the folder in the rerun command) differ."""
    two, one = load_results(folder), load_results(one_process_folder)
    assert two["complete"] and two["summary"] == one["summary"]
    assert [without_timing(r) for r in two["runs"]] == [without_timing(r) for r in one["runs"]]
    assert (folder / "results.csv").read_text() == (one_process_folder / "results.csv").read_text()
    assert (
        {p.name for p in folder.iterdir()}
        == {p.name for p in one_process_folder.iterdir()}
        == {RESULTS_FILE, "results.csv", "digits-baseline-seed0.safetensors", "digits-ablated-seed0.safetensors"}
    )
    for name in ("digits-baseline-seed0.safetensors", "digits-ablated-seed0.safetensors"):  # trained on ranks 0, 1
        two_weights, one_weights = (load_checkpoint(f / name).model.state_dict() for f in (folder, one_process_folder))
        assert all(torch.equal(two_weights[k], one_weights[k]) for k in one_weights), name


def test_two_ranks_share_the_ablation_and_write_what_one_process_writes(one_process_study, tmp_path):
    result = torchrun(*STUDY, "--out", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "spread over 2 ranks" in result.stdout and result.stdout.count("results in ") == 1  # rank 0 alone
    epochs = [line.split(" epoch")[0].split() for line in result.stdout.splitlines() if " epoch 1:" in line]
    assert sorted(epochs) == [
        ["ablated", "seed", "0"],
        ["ablated", "seed", "1"],
        ["baseline", "seed", "0"],
        ["baseline", "seed", "1"],
    ], result.stdout  # each run trained once, on one rank or the other
    assert_same_study(tmp_path, one_process_study)


def test_a_rank_whose_run_fails_fails_the_study_and_a_rerun_continues_it(one_process_study, tmp_path):
    script = tmp_path / "failing_rank.py"  # rank 1 fails at its third batch: in its second run, the last round's
    script.write_text(textwrap.dedent(FAILING_RANK.format(rank="1", task="ClassificationTask")))
    out = tmp_path / "study"
    failed = torchrun(*STUDY, "--out", out, script=script)
    assert failed.returncode != 0
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error: ")]
    message = (
        "the ablated run at seed 1 failed on rank 1: DataError: the batch could not be read; the finished "
        f"runs are saved in {out}; the same command continues the study"
    )
    assert sorted(errors) == [f"error: rank 0: {message}", f"error: rank 1: {message}"], failed.stderr[-3000:]
    saved = load_results(out)  # the first round's runs, and the run rank 0 finished in the round that failed
    assert not saved["complete"]
    assert [(r["arm"], r["seed"]) for r in saved["runs"]] == [("baseline", 0), ("ablated", 0), ("baseline", 1)]

    rerun = torchrun(*STUDY, "--out", out)  # one run left: rank 0 trains it, rank 1 waits
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"continuing the study in {out}: 3 of 4 runs already done" in rerun.stdout
    assert [line.split(" epoch")[0].split() for line in rerun.stdout.splitlines() if " epoch 1:" in line] == [
        ["ablated", "seed", "1"]
    ], rerun.stdout  # the finished runs are not trained again
    assert_same_study(out, one_process_study)
    assert load_results(out)["created"] == saved["created"]


def test_without_torchrun_nothing_is_distributed():
    import torch

    from lab.training import distributed

    assert not distributed.launched() or pytest.skip("run under torchrun")
    assert distributed.rank_and_world() == (0, 1)
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap(model, torch.device("cpu")) is model
    assert distributed.from_rank0([0.5, 2.0]) == [0.5, 2.0]
    assert distributed.stack(torch.arange(3)).tolist() == [[0, 1, 2]]
    assert distributed.object_from_rank0({"run": 1}) == {"run": 1} and distributed.gather_to_rank0(3) == [3]
    distributed.check_same_as_rank0([1.0, 2.0], "corpus", "it")
    with distributed.alone(), distributed.first_on_each_machine():
        assert distributed.rank_and_world() == (0, 1)
