"""python -m lab: help texts, a tiny train -> summary -> list -> sample journey, and one-line errors on bad input.

Long (over 400 lines) because it holds one short test per verb and per refusal of the command line,
in one place.
"""

import errno
import math
import os
import pickle
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY_CLI_MODEL, assert_one_line_error, run

from lab.data import load_bundled_corpus
from lab.nets.families import CELLS
from lab.nets.models import ClassifierConfig, build_model, conventions, count_parameters
from lab.training.checkpoints import load_checkpoint, save_checkpoint
from lab.training.presets import PRESETS

REPO = Path(__file__).resolve().parent.parent

OPTIONS = {
    "train": [
        "--preset",
        "--cell",
        "--backend",
        "--embed-dim",
        "--hidden-size",
        "--num-layers",
        "--dropout",
        "--embed-dropout",
        "--weight-dropout",
        "--corpus",
        "--tokenizer",
        "--vocab-size",
        "--steps",
        "--seconds",
        "--epochs",
        "--lr",
        "--weight-decay",
        "--batch-size",
        "--block-size",
        "--eval-interval",
        "--stateful",
        "--seed",
        "--device",
        "--threads",
        "--name",
        "--out",
    ],
    "sample": [
        "checkpoint",
        "--prompt",
        "--strategy",
        "--length",
        "--temperature",
        "--top-k",
        "--top-p",
        "--seed",
        "--stateless",
    ],
    "summary": ["checkpoint"],
    "list": ["--dir"],
}
TINY = [
    "--hidden-size",
    "16",
    "--embed-dim",
    "8",
    "--steps",
    "5",
    "--block-size",
    "16",
    "--batch-size",
    "4",
    "--threads",
    "1",
]


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """One tiny training run through the CLI: (exit code, stdout, stderr, checkpoint folder)."""
    out = tmp_path_factory.mktemp("runs")
    code, stdout, stderr = run(
        ["train", "--corpus", corpus, *TINY, "--eval-interval", "2", "--name", "tiny", "--out", out]
    )
    return code, stdout, stderr, out


# ---------------------------------------------------------------------------
# help


def test_top_level_help():
    result = subprocess.run(
        [sys.executable, "-m", "lab", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stderr == ""
    for command in OPTIONS:
        assert re.search(rf"^\s+{command}\s", result.stdout, re.M), command
    assert "python -m lab train --preset astra-alpha" in result.stdout  # the usage examples


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_subcommand_help_mentions_every_option(command):
    code, out, err = run([command, "--help"])
    assert code == 0 and err == ""
    for option in OPTIONS[command]:
        assert re.search(rf"(^|\s){option}(\s|,|$)", out), option


def test_train_help_lists_the_presets_and_cells():
    _, out, _ = run(["train", "--help"])
    flat = " ".join(out.split())
    for name in (*PRESETS, *CELLS):  # the registries' names, every one
        assert name in flat


# ---------------------------------------------------------------------------
# train -> summary -> list -> sample


def test_train_takes_the_regularisers_into_the_saved_config(corpus, tmp_path):
    code, _, err = run(
        [
            "train",
            "--corpus",
            corpus,
            *TINY,
            "--cell",
            "lstm",
            "--weight-dropout",
            "0.3",
            "--embed-dropout",
            "0.1",
            "--name",
            "reg",
            "--out",
            tmp_path,
        ]
    )
    assert code == 0, err
    config = load_checkpoint(tmp_path / "reg_v1.safetensors").config
    assert (config.cell, config.weight_dropout, config.embed_dropout) == ("lstm", 0.3, 0.1)


def test_train_saves_a_checkpoint_and_prints_the_final_val_loss(trained):
    code, out, err, folder = trained
    assert code == 0, err
    assert {p.name for p in folder.iterdir()} == {"tiny_v1.safetensors", "tiny_latest.safetensors"}
    checkpoint = load_checkpoint(folder / "tiny_v1.safetensors")
    last = checkpoint.metrics["history"][-1]
    assert last["step"] == 5 and checkpoint.metrics["reason"] == "finished"
    assert [e["step"] for e in checkpoint.metrics["history"]] == [2, 4, 5]
    assert checkpoint.config.hidden_size == 16 and checkpoint.config.embed_dim == 8
    assert checkpoint.metrics["train_config"]["block_size"] == 16 and checkpoint.meta["extra"] == {
        "preset": "astra-alpha"
    }
    printed = re.search(r"^finished: 5 steps in .*val loss (\S+) \((\S+) nats/char\)$", out, re.M)
    assert printed, out
    assert float(printed[1]) == pytest.approx(last["val_loss"], abs=1e-4) and math.isfinite(float(printed[1]))
    assert f"saved {folder / 'tiny_v1.safetensors'}" in out
    in_order = re.search(r"^validation split read in order, state carried: (\S+) \((\S+) nats/char\)$", out, re.M)
    assert in_order and math.isfinite(float(in_order[2])), out
    assert f"tiny: {count_parameters(checkpoint.model):,} parameters" in out
    assert f"(char, vocab {checkpoint.tokenizer.vocab_size}, 1.00 chars/token)" in out
    assert checkpoint.tokenizer.vocab_size == len(set(load_bundled_corpus()[:20_000]))  # the text's characters


def test_summary_prints_the_parameter_count_and_convention(trained):
    *_, folder = trained
    path = folder / "tiny_latest.safetensors"
    code, out, err = run(["summary", path])
    assert code == 0 and err == ""
    checkpoint = load_checkpoint(path)
    assert f"Trainable params : {count_parameters(checkpoint.model):,}" in out
    assert f"Cell convention  : {conventions(checkpoint.model)[0]}" in out
    assert f"Tokenizer        : char, {checkpoint.tokenizer.vocab_size} tokens" in out
    assert "Version          : v1" in out
    assert "Final metrics    : step 5" in out


def test_list_shows_the_checkpoints(trained):
    *_, folder = trained
    code, out, err = run(["list", "--dir", folder])
    assert code == 0 and err == ""
    lines = {line.split()[0]: line for line in out.splitlines() if " user " in line}
    assert set(lines) == {"tiny_latest", "tiny_v1"}
    last = load_checkpoint(folder / "tiny_v1.safetensors").metrics["history"][-1]
    assert f"final val {last['val_nats_per_char']:.4f}" in lines["tiny_v1"] and " lm " in lines["tiny_v1"]
    code, out, _ = run(["list", "--dir", folder / "empty"])
    assert code == 0 and ("no checkpoints found" in out or " bundled " in out)


def test_sample_prints_text_starting_with_the_prompt(trained):
    *_, folder = trained
    path = folder / "tiny_latest.safetensors"
    code, out, err = run(["sample", path, "--prompt", "HAMLET", "--length", "25", "--seed", "3"])
    assert code == 0, err
    assert out.startswith("HAMLET") and len(out) == len("HAMLET") + 25 + 1  # 25 characters and a newline
    assert run(["sample", path, "--prompt", "HAMLET", "--length", "25", "--seed", "3"])[1] == out  # seeded
    code, out, err = run(["sample", path, "--prompt", "Ham", "--strategy", "greedy", "--length", "30"])
    assert code == 0 and out.startswith("Ham") and "[repetition]" in err


def test_train_with_sentencepiece_stateful_and_scan_markov(corpus, tmp_path):
    code, out, err = run(
        [
            "train",
            "--corpus",
            corpus,
            *TINY,
            "--tokenizer",
            "sentencepiece",
            "--vocab-size",
            "120",
            "--stateful",
            "--steps",
            "2",
            "--name",
            "sp",
            "--out",
            tmp_path,
        ]
    )
    assert code == 0, err
    assert "(sentencepiece, vocab 120," in out
    checkpoint = load_checkpoint(tmp_path / "sp_latest.safetensors")
    assert checkpoint.tokenizer.kind == "sentencepiece" and checkpoint.metrics["train_config"]["stateful"] is True
    scan_markov = ["train", "--preset", "scan-markov", "--corpus", corpus, "--steps", "2", "--out", tmp_path]
    assert_one_line_error(*run([*scan_markov, *TINY])[::2], "hidden-size: the scan-markov preset has no such setting")
    tiny = TINY[2:]  # ScanMarkov has an embedding width but no hidden size
    assert_one_line_error(*run([*scan_markov, *tiny])[::2], "block-size: the scan-markov preset trains on 2-5-gram")
    code, out, err = run([*scan_markov[:-2], "--out", tmp_path / "windows", *tiny, "--preset", "scan-markov-windows"])
    assert code == 0, err
    assert load_checkpoint(tmp_path / "windows/scan-markov-windows_v1.safetensors").config.max_positions == 16
    # seed 004's recipe: --epochs alone is its 10 epochs (cut short by --steps here), evaluated per n
    code, out, err = run(
        [*scan_markov, "--embed-dim", "8", "--batch-size", "4", "--threads", "1", "--epochs", "--eval-interval", "2"]
    )
    assert code == 0, err
    assert re.search(r"n=2 \d\.\d+ \d+% \| n=3 .* \| n=5 ", out + err)
    checkpoint = load_checkpoint(tmp_path / "scan-markov_v1.safetensors")
    assert checkpoint.config.family == "scan_markov" and checkpoint.config.embed_dim == 8
    assert checkpoint.metrics["train_config"]["max_epochs"] == 10 and checkpoint.metrics["steps"] == 2
    assert {f"val_accuracy_n{n}" for n in range(2, 6)} <= set(checkpoint.metrics["history"][-1])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_training_after_a_step_and_saves_what_was_trained(signum, corpus, tmp_path):
    """Ctrl-C (or a shutdown's SIGTERM) an hour into a run must not lose the hour: the run stops
    after its current step, is saved as resumable, and --resume continues it."""
    argv = [
        sys.executable,
        "-m",
        "lab",
        "train",
        "--corpus",
        str(corpus),
        *TINY_CLI_MODEL,
        "--steps",
        "100000",
        "--eval-interval",
        "3",
        "--resumable",
        "--name",
        "long",
        "--out",
        str(tmp_path),
    ]
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:  # the first evaluation: steps have been taken
            if line.startswith("step"):
                break
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert f"{signal.Signals(signum).name}: stopping after this step and saving" in err
    assert "Traceback" not in err
    checkpoint = load_checkpoint(tmp_path / "long_v1.safetensors")
    assert checkpoint.metrics["reason"] == "stopped" and 3 <= checkpoint.metrics["steps"] < 100000
    assert checkpoint.training_state.step == checkpoint.metrics["steps"]
    assert f"continue it with: python -m lab train --resume {tmp_path / 'long_v1.safetensors'}" in out
    steps = checkpoint.metrics["steps"]
    code, out, err = run(
        ["train", "--resume", tmp_path / "long_v1.safetensors", "--steps", steps + 2, "--out", tmp_path]
    )
    assert code == 0, err
    assert load_checkpoint(tmp_path / "long_v2.safetensors").metrics["steps"] == steps + 2


def test_epochs_are_the_seeds_own():
    from lab.train_command import epoch_budget
    from lab.training.presets import get_preset

    assert epoch_budget(get_preset("scribe-beta"), "seed") == {"max_steps": None, "max_epochs": 15}
    assert epoch_budget(get_preset("scribe-gamma"), 2.5) == {"max_steps": None, "max_epochs": 2.5}
    # seed 002's epoch is 200 batches of 64 x 128 characters
    assert epoch_budget(get_preset("leviathan-lstm"), "seed") == {"max_steps": 1200, "max_epochs": None}
    with pytest.raises(ValueError, match="epochs: the astra-alpha preset's seed gives no number"):
        epoch_budget(get_preset("astra-alpha"), "seed")


# ---------------------------------------------------------------------------
# bad input: exit code 2 and one line


def _corpus_file(tmp_path, content):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "file not found"),
        (b"", "is empty"),
        (b"  \n\n ", "is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 50, "looks binary"),
        (b"caf\xe9 au lait\n" * 50, "not UTF-8"),
        (b"To be, or not to be.\n", "shorter than one training window"),
    ],
    ids=["missing", "empty", "whitespace", "binary", "latin-1", "too-short"],
)
def test_bad_corpus_exits_2_with_one_line(content, message, tmp_path):
    path = tmp_path / "nope.txt" if content is None else _corpus_file(tmp_path, content)
    code, _, err = run(["train", "--corpus", path, *TINY, "--out", tmp_path / "runs"])
    assert_one_line_error(code, err, message)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--vocab-size", "100"], "vocab-size: only a sentencepiece tokenizer"),
        (["--steps", "0"], "max_steps: input should be greater than or equal to 1"),
        (["--lr", "-1"], "lr: input should be greater than 0"),
        (["--weight-decay", "-0.1"], "weight_decay: input should be greater than or equal to 0"),
        (["--hidden-size", "0"], "hidden_size: input should be greater than or equal to 1"),
        (["--weight-dropout", "1"], "weight_dropout: input should be less than 1"),
        (["--weight-dropout", "nan"], "weight_dropout: input should be a finite number, got nan"),
        (["--embed-dropout", "inf"], "embed_dropout: input should be a finite number, got inf"),
        (["--cell", "scan", "--weight-dropout", "0.2"], "weight_dropout: the selective scan has no hidden-to-hidden"),
        (["--preset", "seq-cifar-gru"], "for the sequence-classification preset"),
        (["--name", ".."], "name: '..' has no usable characters"),
        # issue 14's hostile values: each used to hang, be ignored, or fail after training or with a traceback
        (["--seconds", "inf"], "max_seconds: input should be a finite number"),
        (["--seconds", "nan"], "max_seconds: input should be a finite number"),
        (["--lr", "inf"], "lr: input should be a finite number"),
        (["--lr", "1e6"], "lr: input should be less than or equal to 1"),
        (["--seed", "-1"], "seed: input should be greater than or equal to 0"),
        (["--tokenizer", "sentencepiece", "--vocab-size", "0"], "vocab_size=0 is too small"),
        (["--hidden-size", "100000"], "more than this server's limit"),
        (["--num-layers", "100000"], "num_layers: 100,000 layers is more than this server's limit"),
        (["--batch-size", "4096", "--block-size", "4096"], "training: needs about"),
    ],
)
def test_bad_train_options_exit_2_with_one_line(extra, message, corpus, tmp_path):
    code, _, err = run(["train", "--corpus", corpus, *TINY, "--out", tmp_path, *extra])
    assert_one_line_error(code, err, message)
    assert not list(tmp_path.iterdir())  # refused before anything was trained or written


def test_a_bad_out_folder_is_refused_before_training(corpus, tmp_path, monkeypatch):
    import lab.training.train

    def no_training(*args, **kwargs):
        raise AssertionError("the --out problem must be found before training")

    monkeypatch.setattr(lab.training.train, "train", no_training)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for out in (a_file, a_file / "runs"):
        code, _, err = run(["train", "--corpus", corpus, *TINY, "--out", out])
        assert_one_line_error(code, err, f"not a folder: '{a_file}'")
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    if not os.access(read_only, os.W_OK):  # root may write anywhere
        assert_one_line_error(
            *run(["train", "--corpus", corpus, *TINY, "--out", read_only / "runs"])[::2],
            "cannot write checkpoints in this folder",
        )


def test_a_full_disk_names_the_path_and_keeps_the_trained_weights(corpus, tmp_path, monkeypatch):
    import lab.training.checkpoints

    real_fsync, failures = os.fsync, []

    def full_disk_once(fd):
        if not failures:
            failures.append(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(lab.training.checkpoints.store.os, "fsync", full_disk_once)
    monkeypatch.setenv("RNNLAB_RESCUE_DIR", str(tmp_path / "rescue"))
    out = tmp_path / "runs"
    code, stdout, err = run(["train", "--corpus", corpus, *TINY, "--name", "full", "--out", out])
    assert code == 0 and failures, err
    assert f"No space left on device: '{out / 'full_v1.safetensors'}'" in err  # the path it was writing
    rescued = tmp_path / "rescue" / "full_v1.safetensors"
    assert f"saved to {rescued} instead" in err and f"saved {rescued}" in stdout
    assert load_checkpoint(rescued).metrics["steps"] == 5
    assert not list(out.glob("*.safetensors")) and not list(out.glob(".*.tmp"))  # nothing partial left behind


def test_cuda_without_cuda_exits_2(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run(["train", "--corpus", corpus, *TINY, "--device", "cuda", "--out", tmp_path])
    assert_one_line_error(code, err, "device: CUDA was asked for but no CUDA device is available")


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


@pytest.mark.parametrize("command", ["summary", "sample"])
def test_bad_checkpoints_exit_2_with_one_line(command, tmp_path):
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x13\x37" * 1000)
    code, _, err = run([command, corrupt])
    assert_one_line_error(
        code, err, "corrupt.safetensors: not a checkpoint RNN Lab can read: its header is damaged or too large"
    )
    code, _, err = run([command, tmp_path / "missing.safetensors"])
    assert_one_line_error(code, err, "no such checkpoint file")
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.safetensors"
    evil.write_bytes(pickle.dumps(Payload(marker), protocol=4))
    code, _, err = run([command, evil])
    assert_one_line_error(code, err, "it is a pickle or torch.save file")
    assert not marker.exists()


def test_sample_refusals_exit_2_with_one_line(trained, tmp_path):
    *_, folder = trained
    path = folder / "tiny_latest.safetensors"
    classifier = save_checkpoint(tmp_path, "pixels", build_model(ClassifierConfig(hidden_size=8)))
    code, _, err = run(["sample", classifier])
    assert_one_line_error(code, err, "only language models can generate")
    code, _, err = run(["sample", path, "--prompt", "\u00a7\u00a7"])
    assert_one_line_error(code, err, "not in the model's vocabulary")
    code, _, err = run(["sample", path, "--temperature", "0"])
    assert_one_line_error(code, err, "temperature: input should be greater than 0")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--preset", "no-such-preset"], "invalid choice: 'no-such-preset'"),
        (["train", "--steps", "many"], "invalid int value: 'many'"),
        (["sample", "x.safetensors", "--strategy", "beam"], "invalid choice: 'beam'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "required"),
    ],
)
def test_argparse_errors_exit_2(argv, message):
    code, out, err = run(argv)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_sample_refuses_a_100000_character_prompt(trained):
    *_, folder = trained
    code, _, err = run(["sample", folder / "tiny_latest.safetensors", "--prompt", "a" * 100_000])
    assert_one_line_error(code, err, "prompt: has 100,000 characters, more than the limit of 1,000")
