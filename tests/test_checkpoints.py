"""lab.training.checkpoints: round trips, versions, atomic saves, and files refused without running code.

Long (over 400 lines) because every file a hostile upload can be (some forty refusals) has its own
short test, beside the round trips, in the one place a reader of the format looks.
"""

import errno
import io
import json
import math
import os
import pickle
import random
import shlex
import signal
import struct
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes

import lab
import lab.training.checkpoints
from lab.data import CharTokenizer, SentencePieceTokenizer, load_bundled_corpus
from lab.nets.models import ClassifierConfig, LMConfig, ScanMarkovConfig, build_model, conventions
from lab.training.checkpoints import (
    CheckpointError,
    checkpoint_bytes,
    delete_checkpoint,
    list_checkpoints,
    load_checkpoint,
    read_info,
    sanitize_name,
    save_checkpoint,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def text():
    return load_bundled_corpus()[:20_000]


@pytest.fixture(scope="module")
def char_tokenizer(text):
    return CharTokenizer.from_text(text)


def trained_looking(model, seed=1):
    """Move every weight away from its initial value, so a load that forgot the weights shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator))
    return model.eval()


def tiny_lm(vocab_size, seed=0, **options):
    torch.manual_seed(seed)
    return trained_looking(build_model(LMConfig(vocab_size=vocab_size, embed_dim=8, hidden_size=16, **options)), seed)


def header(data):
    """The metadata dict of safetensors bytes."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])["__metadata__"]


def rebuild(data, tensors=None, **metadata):
    """The same checkpoint with some metadata entries (or the tensors) replaced, written by safetensors."""
    return save_safetensors_bytes(
        tensors if tensors is not None else load_safetensors_bytes(data), {**header(data), **metadata}
    )


@pytest.fixture(scope="module")
def valid(char_tokenizer):
    """(model, bytes) of a small char LM checkpoint."""
    model = tiny_lm(char_tokenizer.vocab_size)
    return model, checkpoint_bytes(model, char_tokenizer, {"history": [{"step": 1, "val_loss": 2.0}]}, "tiny", 1)


# ---------------------------------------------------------------------------
# round trips


def _lm_char(text, char_tokenizer):
    return tiny_lm(char_tokenizer.vocab_size, cell="gru_seed", num_layers=2, norm="every"), char_tokenizer


def _lm_sentencepiece(text, char_tokenizer):
    tokenizer = SentencePieceTokenizer.train(text, vocab_size=120)
    return tiny_lm(tokenizer.vocab_size, cell="lstm", backend="fused"), tokenizer


def _scan_markov(text, char_tokenizer):
    torch.manual_seed(0)
    config = ScanMarkovConfig(
        vocab_size=char_tokenizer.vocab_size, embed_dim=16, gate_hidden=32, decoder_hidden=32, max_positions=8
    )
    return trained_looking(build_model(config)), char_tokenizer


def _classifier(text, char_tokenizer):
    torch.manual_seed(0)
    return trained_looking(build_model(ClassifierConfig(hidden_size=8, num_classes=3, input_size=2))), None


@pytest.mark.parametrize(
    "make",
    [_lm_char, _lm_sentencepiece, _scan_markov, _classifier],
    ids=["lm-char", "lm-sentencepiece", "scan-markov", "classifier"],
)
def test_round_trip_keeps_the_function_and_everything_needed_to_use_it(make, text, char_tokenizer, tmp_path):
    model, tokenizer = make(text, char_tokenizer)
    metrics = {"history": [{"type": "eval", "step": 3, "val_loss": 1.5}], "steps": 3}
    path = save_checkpoint(tmp_path, "model", model, tokenizer, metrics, {"preset": "test"})
    assert path == tmp_path / "model_v1.safetensors"
    if tokenizer is None:
        x = torch.randn(2, 7, 2)  # (B, T, input_size) pixels
    else:
        x = torch.tensor([tokenizer.encode(text[:12])])  # (1, T)
    expected = model(x)[0]
    for source in (path, path.read_bytes()):  # a file, and an upload's bytes
        loaded = load_checkpoint(source)
        assert not loaded.model.training
        torch.testing.assert_close(loaded.model(x)[0], expected, rtol=0, atol=0)
        assert loaded.config == model.config and type(loaded.model) is type(model)
        assert conventions(loaded.model) == conventions(model)
        if tokenizer is None:
            assert loaded.tokenizer is None
        else:
            assert loaded.tokenizer.to_state() == tokenizer.to_state()
            assert loaded.tokenizer.encode(text[:200]) == tokenizer.encode(text[:200])
        assert loaded.metrics == metrics
        assert loaded.meta["name"] == "model" and loaded.meta["version"] == "1"
        assert loaded.meta["lab_version"] == lab.__version__ and loaded.meta["extra"] == {"preset": "test"}
        saved_at = datetime.fromisoformat(loaded.meta["timestamp"])
        assert abs((datetime.now(timezone.utc) - saved_at).total_seconds()) < 600
        assert loaded.path == (path if isinstance(source, Path) else None)
    with safe_open(str(path), framework="pt") as f:  # the header carries what a listing shows
        metadata = f.metadata()
    assert json.loads(metadata["conventions"]) == conventions(model) and conventions(model)
    assert json.loads(metadata["config"])["family"] == model.config.family
    assert metadata["format"] == "rnnlab-checkpoint" and metadata["lab_version"] == lab.__version__


def test_saving_three_times_makes_versions_and_latest(valid, char_tokenizer, tmp_path):
    model, _ = valid
    (tmp_path / "run_vx.safetensors").write_bytes(b"not a version")  # ignored when numbering
    (tmp_path / "runner_v9.safetensors").write_bytes(b"another name")
    paths = [save_checkpoint(tmp_path, "run", model, char_tokenizer, {"steps": i}) for i in (1, 2, 3)]
    assert paths == [tmp_path / f"run_v{i}.safetensors" for i in (1, 2, 3)]
    latest = tmp_path / "run_latest.safetensors"
    assert latest.read_bytes() == paths[2].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()
    loaded = load_checkpoint(latest)
    assert loaded.meta["version"] == "3" and loaded.metrics == {"steps": 3}
    assert load_checkpoint(paths[0]).metrics == {"steps": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["run_vx.safetensors", "runner_v9.safetensors", "run_latest.safetensors"] + [p.name for p in paths]
    )


def test_a_files_header_is_read_once_per_version_and_a_new_save_is_read_anew(valid, char_tokenizer, tmp_path):
    """Every page lists the models on every visit: a file's header is read once per version of it, and the name a
    save replaces (name_latest) gives the new save's header at once."""
    model, _ = valid
    save_checkpoint(tmp_path, "run", model, char_tokenizer, {"steps": 1})
    latest = tmp_path / "run_latest.safetensors"
    first = read_info(latest)
    assert read_info(latest) is first and first.metrics == {"steps": 1}
    save_checkpoint(tmp_path, "run", model, char_tokenizer, {"steps": 2})
    assert read_info(latest).metrics == {"steps": 2} and read_info(latest).version == 2
    latest.unlink()
    with pytest.raises(CheckpointError, match="run_latest"):
        read_info(latest)


# ---------------------------------------------------------------------------
# atomic save: a writer killed mid-save leaves the previous checkpoint intact

CHILD = r'''
import os, signal, sys, time
signal.alarm(120)  # never outlive a failed test
import torch
from lab.training import checkpoints
from lab.nets.models import LMConfig, build_model

torch.set_num_threads(1)
folder = sys.argv[1]
config = LMConfig(vocab_size=40, embed_dim=32, hidden_size=128)  # ~0.3 MB of weights
torch.manual_seed(1)
checkpoints.save_checkpoint(folder, "run", build_model(config), metrics={"steps": 1})
print("READY", flush=True)

real_fdopen, opened = os.fdopen, []


class HangingFile:
    """Writes the first half of the data in small chunks, then hangs: the parent kills us there."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.f.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def write(self, data):
        half = len(data) // 2
        for start in range(0, half, 4096):
            self.f.write(data[start:min(start + 4096, half)])
            self.f.flush()
            time.sleep(0.001)
        print("HALFWAY", flush=True)
        time.sleep(600)


def fdopen(fd, *args, **kwargs):
    opened.append(real_fdopen(fd, *args, **kwargs))
    return HangingFile(opened[-1]) if len(opened) == 1 else opened[-1]  # the one write of save 2


os.fdopen = fdopen
torch.manual_seed(2)
checkpoints.save_checkpoint(folder, "run", build_model(config), metrics={"steps": 2})
print("SAVED", flush=True)
'''


def kill_after(child, wait_for):
    """Run wait_for() (it reads the child's output), then kill -9 the child; it is reaped whatever happens."""
    try:
        wait_for()
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def test_a_save_killed_midway_leaves_the_previous_checkpoint(tmp_path):
    script, folder = tmp_path / "child.py", tmp_path / "runs"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, str(script), str(folder)],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    latest = folder / "run_latest.safetensors"
    seen = {}

    def halfway():
        assert child.stdout.readline() == "READY\n", child.stderr.read()
        seen["before"] = latest.read_bytes()
        assert child.stdout.readline() == "HALFWAY\n", child.stderr.read()
        seen["partial"] = list(folder.glob(".run~*.tmp"))
        assert len(seen["partial"]) == 1  # the new file, half written:
        assert 0 < seen["partial"][0].stat().st_size < len(seen["before"])

    kill_after(child, halfway)
    before, partial = seen["before"], seen["partial"]
    assert latest.read_bytes() == before  # not replaced by a partial file
    assert load_checkpoint(latest).metrics == {"steps": 1}
    assert not (folder / "run_v2.safetensors").exists()  # a version is published only once complete
    names = sorted(info.name for info in list_checkpoints(folder, bundled_dir=None))
    assert names == ["run_latest", "run_v1"]
    assert not partial[0].exists()  # the listing removed the dead save's temporary file
    # the next save carries on as usual
    path = save_checkpoint(folder, "run", load_checkpoint(latest).model, metrics={"steps": 3})
    assert path.name == "run_v2.safetensors" and load_checkpoint(latest).metrics == {"steps": 3}


def test_a_failed_write_removes_its_temporary_file_and_keeps_the_old_one(valid, tmp_path, monkeypatch):
    model, data = valid
    target = tmp_path / "x.safetensors"
    lab.training.checkpoints.atomic_write_bytes(target, data)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(lab.training.checkpoints.store.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        lab.training.checkpoints.atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == data and sorted(tmp_path.iterdir()) == [target]


# ---------------------------------------------------------------------------
# files that are not loadable checkpoints


class Payload:
    """Unpickling this runs a shell command that creates `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def test_the_malicious_payload_is_live(tmp_path):
    """The control for the tests below: unpickling really would run the command."""
    marker = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


def _torch_save(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "make",
    [
        lambda marker: pickle.dumps(Payload(marker), protocol=2),
        lambda marker: pickle.dumps(Payload(marker), protocol=pickle.HIGHEST_PROTOCOL),
        lambda marker: _torch_save({"state_dict": Payload(marker)}),
    ],
    ids=["pickle-2", "pickle-5", "torch.save"],
)
def test_a_malicious_pickle_is_refused_and_never_runs(make, tmp_path):
    marker = tmp_path / "marker"
    data = make(marker)
    path = tmp_path / "evil.safetensors"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(CheckpointError, match="pickle or torch.save file, which could run code"):
            load_checkpoint(source)
    assert list_checkpoints(tmp_path, bundled_dir=None) == []
    assert not marker.exists()


def test_an_old_protocol_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "marker"
    data = pickle.dumps(Payload(marker), protocol=0)
    with pytest.raises(CheckpointError, match="not a checkpoint RNN Lab can read"):
        load_checkpoint(data)
    assert not marker.exists()


def _random(data):
    return random.Random(0).randbytes(4096)


def _truncated(data):
    return data[: len(data) // 2]


def _empty(data):
    return b""


def _foreign(data):
    return save_safetensors_bytes({"weight": torch.zeros(3, 4)})


def _foreign_with_metadata(data):
    return save_safetensors_bytes({"weight": torch.zeros(3, 4)}, {"format": "pt"})


def _with_config(**changes):
    def make(data):
        return rebuild(data, config=json.dumps({**json.loads(header(data)["config"]), **changes}))

    return make


def _with_metadata(**changes):
    return lambda data: rebuild(data, **changes)


def _missing_weight(data):
    tensors = load_safetensors_bytes(data)
    del tensors["head.bias"]
    return rebuild(data, tensors)


BAD_FILES = {
    "random-bytes": (_random, "not a checkpoint RNN Lab can read: its header is damaged or too large$"),
    "truncated": (_truncated, "not a checkpoint RNN Lab can read: it is cut short or its weights are damaged$"),
    "empty": (_empty, "not a checkpoint RNN Lab can read: its header is damaged or too large$"),
    "foreign-safetensors": (_foreign, "a safetensors file, but not an RNN Lab checkpoint"),
    "foreign-with-metadata": (_foreign_with_metadata, "a safetensors file, but not an RNN Lab checkpoint"),
    "other-hidden-size": (
        _with_config(hidden_size=24),
        r"weights do not match the architecture in its config \(wrong shape: ",
    ),
    "other-cell": (_with_config(cell="lstm"), "weights do not match the architecture in its config"),
    "huge-hidden-size": (_with_config(hidden_size=1_000_000), "more than this server's limit"),
    "absurd-hidden-size": (_with_config(hidden_size=10**12), "more than this server's limit"),
    "100000-layers": (_with_config(num_layers=100_000), "num_layers: 100,000 layers is more than"),
    "config-wrong-types": (_with_config(dropout="0.1"), "dropout: input should be a valid number, got '0.1'"),
    "config-list-cell": (_with_config(cell=["gru"]), r"cell: input should be a valid string, got \['gru'\]"),
    "unknown-family": (_with_config(family="transformer"), "unknown model family 'transformer'"),
    "invalid-config-value": (_with_config(hidden_size=-4), "config or tokenizer is invalid: hidden_size"),
    "unknown-config-field": (_with_config(heads=4), "heads: unknown field"),
    "config-not-a-dict": (_with_metadata(config="null"), "metadata 'config' must be an object, not null"),
    "config-not-json": (_with_metadata(config="{not json"), "metadata 'config' is not valid JSON"),
    "tokenizer-too-small": (
        _with_metadata(tokenizer=json.dumps({"kind": "char", "chars": "abc"})),
        "vocab_size: the model expects .* tokens but the tokenizer has 3",
    ),
    "unknown-tokenizer": (_with_metadata(tokenizer=json.dumps({"kind": "magic"})), "unknown tokenizer kind 'magic'"),
    "metrics-not-json": (_with_metadata(metrics="[1, 2"), "metadata 'metrics' is not valid JSON"),
    "deeply-nested-json": (_with_metadata(extra="[" * 100_000 + "]" * 100_000), "metadata 'extra' is not valid JSON"),
    "not-finite-weights": (
        lambda data: rebuild(
            data, {k: v.fill_(math.nan) if k == "head.bias" else v for k, v in load_safetensors_bytes(data).items()}
        ),
        r"weights are not finite \(NaN or infinite values in head\.bias\)",
    ),
    "missing-weight": (_missing_weight, r"missing: head\.bias"),
    # the hostile battery's dtypes: float8 once raised "isfinite not implemented"; bool, complex and int loaded
    **{
        f"{dtype}-weights".replace("torch.", ""): (
            lambda data, dtype=dtype: rebuild(
                data, {k: v.to(dtype) if k == "head.bias" else v for k, v in load_safetensors_bytes(data).items()}
            ),
            rf"weight 'head\.bias' has type {dtype}; weights must be float32, float16, bfloat16, float64",
        )
        for dtype in (torch.float8_e4m3fn, torch.bool, torch.complex64, torch.int64, torch.uint8)
    },
    "float64-beyond-float32": (
        lambda data: rebuild(
            data,
            {k: v.double().fill_(1e300) if k == "head.bias" else v for k, v in load_safetensors_bytes(data).items()},
        ),
        r"weights are not finite \(NaN or infinite values in head\.bias\)",
    ),
    "history-entry-without-step": (
        _with_metadata(metrics=json.dumps({"history": [{"type": "eval", "val_loss": 1.0}]})),
        "checkpoint metrics history.0.step: is missing",
    ),
}


@pytest.mark.parametrize("make, message", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_refused_with_a_clear_message(make, message, valid, tmp_path):
    _, data = valid
    bad = make(data)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(bad)
    for source, label in ((path, "bad.safetensors: "), (bad, "uploaded file: ")):
        with pytest.raises(CheckpointError, match=message) as error:
            load_checkpoint(source)  # a huge config is refused from shapes alone, without allocating the model
        assert str(error.value).startswith(label) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "broken, what",
    [
        (struct.pack("<Q", 2**40) + b"{}", "its header is damaged or too large"),  # safetensors: "header too large"
        (b"\x01\x00", "its header is damaged or too large"),  # "header too small"
        (struct.pack("<Q", 100) + b"{}", "its header is damaged or too large"),  # "invalid header length"
        (b"\x04\x00\x00\x00\x00\x00\x00\x00\xff\xfe{}", "its header is damaged or too large"),  # "invalid UTF-8"
        (b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!", "its header is damaged or too large"),  # "invalid JSON"
        ("truncated", "it is cut short or its weights are damaged"),  # "incomplete metadata, file not fully covered"
        ("bad offset", "it is cut short or its weights are damaged"),  # "invalid shape, data type, or offset"
    ],
)
def test_a_damaged_file_is_refused_in_plain_words_without_the_librarys(broken, what, valid, tmp_path):
    """What safetensors says of a broken file ("Error while deserializing: header too large") is its own
    internal wording: the student reads what is broken, in one line, from an upload and a folder alike."""
    _, data = valid
    broken = {"truncated": data[:-4], "bad offset": data.replace(b'"data_offsets":[0,', b'"data_offsets":[1,', 1)}.get(
        broken, broken
    )
    path = tmp_path / "broken.safetensors"
    path.write_bytes(broken)
    for source, label in ((broken, "uploaded file"), (path, "broken.safetensors")):
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(source)
        assert str(error.value) == f"{label}: not a checkpoint RNN Lab can read: {what}"
    with pytest.raises(CheckpointError) as error:
        read_info(path)  # the listing's header-only read says the same
    assert str(error.value) == f"broken.safetensors: not a checkpoint RNN Lab can read: {what}"


def test_the_valid_bytes_load(valid):
    model, data = valid
    assert load_checkpoint(data).meta["name"] == "tiny"


def test_a_missing_file_and_a_too_large_file_are_refused(valid, tmp_path, monkeypatch):
    _, data = valid
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path / "nothing.safetensors")
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path)  # a folder
    monkeypatch.setattr(lab.training.checkpoints.format, "MAX_CHECKPOINT_BYTES", len(data) - 1)
    with pytest.raises(CheckpointError, match="larger than the 0 MB limit"):
        load_checkpoint(data)


def test_a_too_large_file_on_disk_is_refused_before_it_is_read(valid, tmp_path, monkeypatch):
    _, data = valid
    path = tmp_path / "big.safetensors"
    path.write_bytes(data)
    monkeypatch.setattr(lab.training.checkpoints.format, "MAX_CHECKPOINT_BYTES", len(data) - 1)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read a file over the size limit"))
    with pytest.raises(CheckpointError, match="big.safetensors: 0 MB is larger than the 0 MB limit"):
        load_checkpoint(path)


def test_a_build_opens_its_own_progress_file_over_the_apps_limit(valid, tmp_path, monkeypatch):
    _, data = valid
    path = tmp_path / "progress.safetensors"
    path.write_bytes(data)
    monkeypatch.setattr(lab.training.checkpoints.format, "MAX_CHECKPOINT_BYTES", len(data) - 1)
    with pytest.raises(CheckpointError, match="larger than the 0 MB limit"):
        load_checkpoint(path)
    assert load_checkpoint(path, "cpu", max_bytes=len(data)).meta["name"] == "tiny"
    assert load_checkpoint(data, "cpu", max_bytes=len(data)).meta["name"] == "tiny"


# ---------------------------------------------------------------------------
# names and paths


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "a/b", "..", "", "   ", "名前", "/abs/path", "a\\b", ".hidden", "x" * 300, "run v1!"]
)
def test_sanitize_name_gives_a_safe_name_or_refuses(name, tmp_path):
    try:
        cleaned = sanitize_name(name)
    except ValueError as e:
        assert str(e).startswith("name: ") and "no usable characters" in str(e)
        assert name.strip(" ./") == "" or not name.isascii()
        return
    assert cleaned and len(cleaned) <= 64 and "/" not in cleaned and "\\" not in cleaned
    assert not cleaned.startswith(".") and cleaned not in (".", "..")
    assert (tmp_path / cleaned).resolve().parent == tmp_path.resolve()


def test_sanitize_name_examples():
    assert sanitize_name("../../etc/passwd") == "etc-passwd"
    assert sanitize_name("a/b") == "a-b"
    assert sanitize_name("  astra run 2  ") == "astra-run-2"
    for name in ("..", "", "   ", "名前"):
        with pytest.raises(ValueError, match="name: "):
            sanitize_name(name)


def test_save_checkpoint_never_writes_outside_its_folder(valid, tmp_path):
    model, _ = valid
    folder = tmp_path / "deep" / "runs"
    for name in ("../../escape", "/tmp/escape", "../x/../../y"):
        path = save_checkpoint(folder, name, model)
        assert path.resolve().parent == folder.resolve()
    for name in ("..", "", "名前"):
        with pytest.raises(ValueError):
            save_checkpoint(folder, name, model)
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and folder not in p.parents]
    assert outside == []
    assert {p.name for p in folder.iterdir()} == {
        f"{name}_{version}.safetensors"
        for name in ("escape", "tmp-escape", "x-..-..-y")
        for version in ("v1", "latest")
    }


def test_delete_checkpoint_refuses_paths_outside_the_user_folder(valid, tmp_path):
    model, _ = valid
    user, elsewhere = tmp_path / "user", tmp_path / "bundled"
    mine = save_checkpoint(user, "same", model)
    theirs = save_checkpoint(elsewhere, "same", model)  # same file name in another folder
    (tmp_path / "secret.safetensors").write_bytes(b"keep me")
    link = user / "link.safetensors"
    link.symlink_to(tmp_path / "secret.safetensors")
    for path in (theirs, str(theirs), user / ".." / "secret.safetensors", "../secret.safetensors", link):
        with pytest.raises(ValueError):
            delete_checkpoint(path, user)
    assert mine.is_file() and theirs.is_file() and (tmp_path / "secret.safetensors").read_bytes() == b"keep me"
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        delete_checkpoint(user / "never_saved.safetensors", user)
    delete_checkpoint(mine, user)
    assert not mine.exists() and theirs.is_file()
    delete_checkpoint("same_latest.safetensors", user)  # a bare name is looked up in the user folder
    assert not (user / "same_latest.safetensors").exists()


# ---------------------------------------------------------------------------
# listing


def test_list_checkpoints_reads_headers_only_skips_bad_files_and_marks_bundled(
    valid, char_tokenizer, tmp_path, monkeypatch
):
    model, data = valid
    user, bundled = tmp_path / "user", tmp_path / "bundled"
    save_checkpoint(bundled, "shipped", model, char_tokenizer, {"history": [{"step": 9, "val_loss": 1.0}]})
    save_checkpoint(user, "old", model, char_tokenizer)
    save_checkpoint(user, "new", model, char_tokenizer, {"history": [{"step": 5, "val_nats_per_char": 1.9}]})
    t = time.time()
    for i, name in enumerate(["shipped_v1", "shipped_latest", "old_v1", "old_latest", "new_v1", "new_latest"]):
        folder = bundled if name.startswith("shipped") else user
        os.utime(folder / f"{name}.safetensors", (t + i, t + i))  # later in the list = newer
    marker = tmp_path / "marker"
    junk = {
        "random": _random(data),
        "empty": b"",
        "truncated": _truncated(data),
        "foreign": _foreign(data),
        "pickle": pickle.dumps(Payload(marker), protocol=2),
        "torch": _torch_save(Payload(marker)),
        "bad-version": rebuild(data, version="seven"),
        "bad-config": rebuild(data, config="[1]"),
        "bad-metrics": rebuild(data, metrics='"text"'),
        "no-config": rebuild(data, config="{"),
    }
    for name, content in junk.items():
        (user / f"{name}.safetensors").write_bytes(content)
    (user / "folder.safetensors").mkdir()
    (user / ".new_latest.safetensors.abc123.tmp").write_bytes(data[:100])  # a crashed save's leftover

    def forbidden(*args, **kwargs):
        raise AssertionError("list_checkpoints must read headers only")

    monkeypatch.setattr(lab.training.checkpoints.format, "load_safetensors_bytes", forbidden)
    monkeypatch.setattr(lab.training.checkpoints.format, "build_model", forbidden)
    monkeypatch.setattr(Path, "read_bytes", forbidden)
    infos = list_checkpoints(user, bundled_dir=bundled)
    assert [(i.name, i.bundled) for i in infos] == [
        ("shipped_latest", True),
        ("shipped_v1", True),
        ("new_latest", False),
        ("new_v1", False),
        ("old_latest", False),
        ("old_v1", False),
    ]
    newest = infos[2]
    assert newest.path == user / "new_latest.safetensors" and newest.version == 1
    assert newest.family == "lm" and newest.cell == model.config.cell
    assert newest.config["hidden_size"] == 16 and newest.metrics["history"][-1]["val_nats_per_char"] == 1.9
    assert datetime.fromisoformat(newest.timestamp).tzinfo is not None
    assert [i.name for i in list_checkpoints(user, bundled_dir=bundled, include_versions=False)] == [
        "shipped_latest",
        "new_latest",
        "old_latest",
    ]
    assert list_checkpoints(tmp_path / "no such folder", bundled_dir=None) == []
    assert not marker.exists()
    monkeypatch.undo()
    with pytest.raises(CheckpointError):
        read_info(user / "bad-version.safetensors")


# ---------------------------------------------------------------------------
# issue 14: metadata of the wrong shape or type is refused whole, at load and in listings

WRONG_VALUES = {"string": "abc", "list": [1, 2], "null": None, "number": 7, "object": {"a": 1}}
WRONG_SHAPES = [  # (metadata key, what goes in it): the hostile tester's fields, each wrong kind of value
    *[
        (key, value)
        for key in ("metrics", "extra", "config")
        for kind, value in WRONG_VALUES.items()
        if kind != "object" and not (key == "config" and kind == "object")
    ],
    *[("tokenizer", value) for kind, value in WRONG_VALUES.items() if kind not in ("null", "object")],
    ("tokenizer", {"kind": "char", "chars": 5}),
    ("tokenizer", {"kind": "sentencepiece", "model_b64": 5, "model_type": "bpe", "vocab_size": 62}),
    *[("metrics", {"history": value}) for kind, value in WRONG_VALUES.items() if kind != "list"],
    ("metrics", {"history": ["abc"]}),
    ("metrics", {"history": [{"step": "one", "val_loss": 1.0}]}),
    ("metrics", {"history": [{"step": 1, "val_loss": "low"}]}),
    ("metrics", {"history": [{"step": 1, "train_loss": None}]}),
    ("metrics", {"steps": -1}),
    ("metrics", {"train_config": []}),
    ("conventions", {"a": 1}),
    ("config", {"family": "lm", "hidden_size": 16.5}),
    ("config", {"family": "lm", "keep_bias": None}),
    ("config", {"family": [], "hidden_size": 8}),  # found by tests/test_fuzz.py: TypeError, unhashable list
]


def test_listing_the_bundled_folder_as_the_user_folder_lists_each_file_once(valid, char_tokenizer, tmp_path):
    model, _ = valid
    save_checkpoint(tmp_path, "shipped", model, char_tokenizer)
    infos = list_checkpoints(tmp_path, bundled_dir=tmp_path)  # python -m lab list --dir checkpoints
    assert [(i.name, i.bundled) for i in infos] == [("shipped_latest", True), ("shipped_v1", True)]


@pytest.mark.parametrize("key, value", WRONG_SHAPES, ids=[f"{k}={json.dumps(v)[:40]}" for k, v in WRONG_SHAPES])
def test_metadata_of_the_wrong_shape_is_refused_at_load_and_listed_as_skipped(key, value, valid, tmp_path):
    _, data = valid
    bad = rebuild(data, **{key: json.dumps(value)})
    path = tmp_path / "bad_v1.safetensors"
    path.write_bytes(bad)
    for source in (path, bad):
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(source)
        message = str(error.value)
        assert len(message.splitlines()) == 1 and message.startswith(("bad_v1.safetensors: ", "uploaded file: "))
        assert key in message  # it names the field
    with pytest.raises(CheckpointError):
        read_info(path)
    save_checkpoint(tmp_path, "good", valid[0])
    infos, problems = lab.training.checkpoints.scan_checkpoints(tmp_path, bundled_dir=None)
    assert [i.name for i in infos] == ["good_latest", "good_v1"]  # the listing does not fail whole
    assert len(problems) == 1 and problems[0].startswith("bad_v1.safetensors: ")


def test_cli_list_names_a_bad_file_and_lists_the_rest(valid, tmp_path, capsys):
    from lab.__main__ import main

    _, data = valid
    (tmp_path / "edited-by-hand.safetensors").write_bytes(rebuild(data, metrics=json.dumps({"history": "abc"})))
    save_checkpoint(tmp_path, "good", valid[0])
    assert main(["list", "--dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "good_latest" in out and "edited-by-hand" not in out
    assert err.strip() == (
        "skipped edited-by-hand.safetensors: checkpoint metrics history: input should be a valid list, got 'abc'"
    )


# ---------------------------------------------------------------------------
# issue 14: concurrent saves under one name, and saves killed at random points

SAVER = r"""
import sys, time
import torch
from lab.training import checkpoints
from lab.nets.models import LMConfig, build_model

torch.set_num_threads(1)
folder, tag, count, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
model = build_model(LMConfig(vocab_size=20, embed_dim=4, hidden_size=8))
time.sleep(max(0.0, start_at - time.time()))  # every process starts saving at the same moment
for i in range(count):
    checkpoints.save_checkpoint(folder, "run", model, metrics={"reason": f"writer {tag}", "steps": i})
    print("SAVED", flush=True)
"""


def versions_in(folder):
    """version -> (writer, i) of every run_vN, checking that the header's version is the file's."""
    found = {}
    for path in Path(folder).glob("run_v*.safetensors"):
        loaded = load_checkpoint(path)
        version = int(path.stem.split("_v")[1])
        assert loaded.meta["version"] == str(version)
        found[version] = (loaded.metrics["reason"].removeprefix("writer "), loaded.metrics["steps"])
    return found


def test_concurrent_saves_from_threads_keep_every_version_distinct(valid, tmp_path):
    import threading

    model, _ = valid
    barrier, errors = threading.Barrier(8), []

    def saver(tag):
        barrier.wait()
        try:
            for i in range(3):
                save_checkpoint(tmp_path, "run", model, metrics={"reason": f"writer {tag}", "steps": i})
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=saver, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    found = versions_in(tmp_path)
    assert sorted(found) == list(range(1, 25)) and len(set(found.values())) == 24  # 24 saves, 24 versions
    assert load_checkpoint(tmp_path / "run_latest.safetensors").meta["version"] == "24"
    assert not list(tmp_path.glob(".*.tmp"))


def test_concurrent_saves_from_processes_keep_every_version_distinct(tmp_path):
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    folder, start_at = tmp_path / "runs", time.time() + 3
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen(
            [sys.executable, str(script), str(folder), str(tag), "3", str(start_at)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in range(4)
    ]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    found = versions_in(folder)
    assert sorted(found) == list(range(1, 13)) and len(set(found.values())) == 12
    assert load_checkpoint(folder / "run_latest.safetensors").meta["version"] == "12"
    assert not list(folder.glob(".*.tmp"))


def test_saves_killed_at_random_points_leave_a_loadable_latest_and_no_orphan(tmp_path):
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    folder = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(14)
    for trial in range(4):  # bounded: each trial is one process saving in a loop, killed at a random moment
        child = subprocess.Popen(
            [sys.executable, str(script), str(folder), str(trial), "1000", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def one_save_then_a_random_moment():
            assert child.stdout.readline() == "SAVED\n", child.stderr.read()  # at least one save done
            time.sleep(rng.uniform(0, 0.3))

        kill_after(child, one_save_then_a_random_moment)
        latest = load_checkpoint(folder / "run_latest.safetensors")  # loadable right after the kill
        newest = max(versions_in(folder))
        assert int(latest.meta["version"]) in (newest, newest - 1)  # at most the save that was cut short
    list_checkpoints(folder, bundled_dir=None)  # the next listing tidies up
    assert not list(folder.glob(".*.tmp"))
    assert load_checkpoint(folder / "run_latest.safetensors").meta["version"] == str(max(versions_in(folder)))


def test_a_latest_left_behind_by_a_failed_save_is_moved_to_the_newest_version(valid, tmp_path, monkeypatch):
    model, _ = valid
    save_checkpoint(tmp_path, "run", model, metrics={"steps": 1})
    real_replace = os.replace

    def killed_before_latest(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(lab.training.checkpoints.store.os, "replace", killed_before_latest)
    with pytest.raises(OSError, match=f"Input/output error: '{tmp_path / 'run_latest.safetensors'}'"):
        save_checkpoint(tmp_path, "run", model, metrics={"steps": 2})
    monkeypatch.setattr(lab.training.checkpoints.store.os, "replace", real_replace)
    assert load_checkpoint(tmp_path / "run_latest.safetensors").metrics == {"steps": 1}  # lags behind run_v2
    assert not list(tmp_path.glob(".*.tmp"))
    list_checkpoints(tmp_path, bundled_dir=None)
    assert load_checkpoint(tmp_path / "run_latest.safetensors").metrics == {"steps": 2}


def test_a_full_disk_names_the_file_being_written(valid, tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lab.training.checkpoints.store.os, "fsync", full)
    with pytest.raises(OSError, match=f"No space left on device: '{tmp_path / 'run_v1.safetensors'}'"):
        save_checkpoint(tmp_path, "run", valid[0])
    assert not list(tmp_path.iterdir())


def test_lab_and_the_app_import_without_fcntl():
    """Windows has no fcntl: nothing the app imports may need it (a subprocess where importing it fails)."""
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import lab.training.checkpoints, lab.server.jobs, lab.server.workers, lab.server.spaces\n"
        "import lab.server.capacity, lab.__main__, ui.shared.common\n"
        "print('imported')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-2000:]


def test_deleting_a_runs_latest_deletes_its_versions_and_nothing_else(tmp_path, char_tokenizer):
    model = build_model(LMConfig(vocab_size=char_tokenizer.vocab_size, embed_dim=4, hidden_size=8))
    for name in ("run", "run", "runner"):
        save_checkpoint(tmp_path, name, model, char_tokenizer)
    removed = delete_checkpoint(tmp_path / "run_latest.safetensors", tmp_path)
    assert sorted(p.name for p in removed) == ["run_latest.safetensors", "run_v1.safetensors", "run_v2.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runner_latest.safetensors", "runner_v1.safetensors"]
    assert [p.name for p in delete_checkpoint("runner_v1.safetensors", tmp_path)] == ["runner_v1.safetensors"]


def test_an_upload_is_read_as_one_admitted_job_of_the_budget(valid):
    from lab.server.capacity import Budget, CapacityError
    from lab.server.uploads import UPLOAD_COST_PER_MB, load_upload

    _, data = valid
    budget = Budget(capacity=100, owner_share=1.0)
    assert load_upload(data, "alice", budget).meta["name"] == "tiny"
    assert budget.snapshot()[0] == 0  # released once read
    run = budget.request(100, "bob", "a run that fills the budget")
    assert run.wait()
    with pytest.raises(CapacityError, match=r"^upload: the server's training budget has had no room for 0 s"):
        load_upload(data, "alice", budget, wait_seconds=0.3)  # queued behind the run, then refused
    run.release()
    assert budget.snapshot()[0] == 0 and UPLOAD_COST_PER_MB * len(data) / 2**20 < 100


def test_loading_a_checkpoint_and_its_reference_twin_imports_no_compiler_stack():
    """A fresh server's first page loads checkpoints: PyTorch's compiler stack (torch._dynamo, sympy; about
    1 s) is imported by a few meta-device operations (normal_, zeros_like, Module.to_empty) and must stay out."""
    code = (
        "import sys\n"
        "from lab.training.checkpoints import BUNDLED_DIR, load_checkpoint\n"
        "from lab.nets.models import to_reference\n"
        "for path in sorted(BUNDLED_DIR.glob('*.safetensors')):\n"
        "    to_reference(load_checkpoint(path).model)\n"
        "print(sorted(m for m in ('sympy', 'torch._dynamo') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_weights_stored_in_another_float_type_load_as_float32_trainable_weights(valid, dtype):
    model, data = valid
    loaded = load_checkpoint(rebuild(data, {k: v.to(dtype) for k, v in load_safetensors_bytes(data).items()})).model
    for (name, original), (_, weight) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert weight.dtype == torch.float32, name
        torch.testing.assert_close(weight, original.to(dtype).float(), msg=name)
    assert all(p.requires_grad and isinstance(p, torch.nn.Parameter) for p in loaded.parameters())


def test_one_version_written_in_pyproject_and_recorded_in_checkpoints():
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    (written,) = re.findall(r'^version = "([^"]+)"', pyproject, re.M)
    assert lab.__version__ == written
