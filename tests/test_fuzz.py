"""Property-based fuzzing of everything a hostile user can hand RNN Lab (issue 14).

Property, for checkpoint metadata, configs, sampling settings, the CLI's every verb
and uploaded bytes: the call either succeeds or raises the lab's own error, a
LabError (DataError, CheckpointError, CostError, SamplingError, config errors) with
a one-line message naming the field or value; the CLI exits 0, or non-zero with one line on stderr and
never a traceback. Nothing else is raised, no example runs past the deadline, and
no partial (.tmp) file is left behind.

Profiles (Hypothesis settings), chosen with the HYPOTHESIS_PROFILE variable:

    python -m pytest tests/test_fuzz.py                             # "default": 30 examples a property
    HYPOTHESIS_PROFILE=long python -m pytest tests/test_fuzz.py     # "long": 500 a property, by hand
    ... --hypothesis-show-statistics                                # examples tried, per property

Every CLI call runs in-process (lab.__main__.main) with tiny budgets: a small
corpus, `--steps 3` last on the line (argparse keeps the last value), and cost
limits of 2,000,000 parameters and 128 MB per training run. Each CLI example is a
valid command line with up to a few options replaced by hostile values, so that
examples reach training and sampling and not only argparse.

Long (over 400 lines) because each entry point a hostile user reaches has its own strategy of inputs
beside its property; split, the shared oracle would be imported between test modules.
"""

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lab.__main__ import main
from lab.data import CharTokenizer, DataError, load_bundled_corpus, read_text
from lab.errors import LabError
from lab.instruments.sampling import STRATEGIES, SamplingConfig, generate
from lab.nets.cost import parameter_count, training_memory_bytes
from lab.nets.families import CELLS
from lab.nets.models import MODEL_FAMILIES, LMConfig, build_model
from lab.training.checkpoints import CheckpointError, checkpoint_bytes, load_checkpoint, read_info, save_checkpoint
from lab.training.presets import PRESETS
from lab.training.train import TrainConfig

settings.register_profile(
    "default",
    max_examples=30,
    deadline=timedelta(seconds=30),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=500,
    deadline=timedelta(seconds=60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

LIMITS = {"RNNLAB_MAX_PARAMS": "2000000", "RNNLAB_MAX_TRAIN_MEMORY_MB": "128"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
numbers = st.integers() | st.floats() | st.sampled_from([0, -1, 1, 2**63, 2**64, 10**12, 1e-45, 5e-324, 1e308])


# a refusal names what it refuses: "field: ...", "prompt: ...", "uploaded file: ..."
NAMES_THE_FIELD = re.compile(r"^[^:\n]{1,120}: \S")


def assert_lab_error(error):
    """Only the lab's own error, one line, naming the field or value: any other exception (a ValueError
    from PyTorch, a KeyError) is a bug that a student would have mistaken for their own mistake."""
    assert isinstance(error, LabError), f"{type(error).__name__} is not the lab's error: {error}"
    assert len(str(error).splitlines()) <= 1, f"not one line: {error!r}"
    assert NAMES_THE_FIELD.match(str(error)), f"names no field or value: {error}"


@contextlib.contextmanager
def lab_errors_only():
    """The block may succeed or raise a LabError with a one-line message naming the field; anything else fails."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 - the property is about which exceptions escape
        assert_lab_error(error)


def assert_no_partial_files(folder):
    leftovers = [p.name for p in Path(folder).rglob("*.tmp")]
    assert not leftovers, leftovers


@pytest.fixture(scope="module", autouse=True)
def cost_limits():
    saved = {k: os.environ.get(k) for k in LIMITS}
    os.environ.update(LIMITS)
    yield
    for key, value in saved.items():
        os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A corpus, a valid checkpoint's bytes and path, and files a hostile user would pass instead."""
    root = tmp_path_factory.mktemp("fuzz")
    text = load_bundled_corpus()[:6000]
    (root / "corpus.txt").write_text(text, encoding="utf-8")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 20)
    tokenizer = CharTokenizer.from_text(text)
    torch.manual_seed(0)
    model = build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8))
    data = checkpoint_bytes(model, tokenizer, {"history": [{"type": "eval", "step": 1, "val_loss": 2.0}]}, "tiny", 1)
    checkpoint = save_checkpoint(root / "runs", "tiny", model, tokenizer)
    return {"root": root, "text": text, "tokenizer": tokenizer, "model": model, "data": data, "checkpoint": checkpoint}


def header(data):
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])["__metadata__"]


# ---------------------------------------------------------------------------
# checkpoint metadata: any JSON value in any field


METADATA_KEYS = ["config", "tokenizer", "metrics", "extra", "conventions"]
TEXT_KEYS = ["format", "format_version", "name", "version", "timestamp", "lab_version"]


@st.composite
def edited_metadata(draw):
    """Changes to a valid header: a whole field, one config field, or one metrics history entry."""
    where = draw(st.sampled_from(["field", "text", "config", "history", "missing"]))
    if where == "field":
        return {draw(st.sampled_from(METADATA_KEYS)): json.dumps(draw(json_values))}
    if where == "text":
        return {draw(st.sampled_from(TEXT_KEYS)): draw(st.text(max_size=20))}
    if where == "config":
        config = {"family": "lm", "vocab_size": 62, "embed_dim": 4, "hidden_size": 8}
        config[draw(st.sampled_from([*config, *(f.name for f in dataclasses.fields(LMConfig))]))] = draw(
            json_values | numbers
        )
        return {"config": json.dumps(config)}
    if where == "history":
        event = draw(
            st.dictionaries(
                st.sampled_from(["step", "type", "val_loss", "train_loss", "epoch", "x"]), json_values, max_size=4
            )
        )
        return {
            "metrics": json.dumps(
                {"history": [event], draw(st.sampled_from(["steps", "elapsed", "reason"])): draw(json_values)}
            )
        }
    return {draw(st.sampled_from(METADATA_KEYS + TEXT_KEYS)): None}


@given(changes=edited_metadata())
def test_fuzz_checkpoint_metadata_loads_fully_or_is_refused_in_one_line(workspace, changes):
    from safetensors.torch import load, save

    metadata = {**header(workspace["data"]), **changes}
    bad = save(load(workspace["data"]), {k: v for k, v in metadata.items() if v is not None})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "edited.safetensors"
        path.write_bytes(bad)
        for call in (lambda: load_checkpoint(bad), lambda: load_checkpoint(path), lambda: read_info(path)):
            try:
                call()
            except CheckpointError as error:
                assert_lab_error(error)
        code, out, err = run_cli(["list", "--dir", folder])
        assert code == 0 and "Traceback" not in err


# ---------------------------------------------------------------------------
# configs: any integers and floats in every field of every config dataclass


CONFIG_CLASSES = [cls for cls, _ in MODEL_FAMILIES.values()] + [TrainConfig, SamplingConfig]


@given(cls=st.sampled_from(CONFIG_CLASSES), data=st.data())
def test_fuzz_configs_are_valid_or_refused_and_cost_is_arithmetic(cls, data):
    fields = [f.name for f in dataclasses.fields(cls)]
    values = data.draw(st.dictionaries(st.sampled_from(fields), numbers, max_size=3))
    with lab_errors_only():
        config = cls(**values)
        if cls in (TrainConfig, SamplingConfig):
            return
        count = parameter_count(config)  # pure arithmetic, whatever the numbers
        assert count > 0 and training_memory_bytes(config, 64, 128) > 4 * count
        if count < 20_000:
            build_model(config)  # within the limits it builds; beyond them it raises CostError


# ---------------------------------------------------------------------------
# sampling settings


SAMPLING_HOSTILE = {
    "strategy": st.text(max_size=8),
    "temperature": numbers,
    "top_k": numbers,
    "top_p": numbers,
    "max_new_tokens": st.integers(-3, 30) | st.sampled_from([5001, 10**20]),
    "seed": numbers,
    "stateful": st.sampled_from([0, 1, None]),
}


@given(
    strategy=st.sampled_from(list(STRATEGIES)),
    stateful=st.booleans(),
    data=st.data(),
    hostile=st.sets(st.sampled_from(sorted(SAMPLING_HOSTILE)), max_size=2),
    prompt=st.text(max_size=12) | st.sampled_from(["", "ROMEO.", "\n"]),
)
def test_fuzz_sampling_settings_generate_or_refuse(workspace, strategy, stateful, data, hostile, prompt):
    settings_ = {
        "strategy": strategy,
        "temperature": data.draw(st.floats(1e-3, 10)),
        "top_k": data.draw(st.integers(1, 100)),
        "top_p": data.draw(st.floats(0.01, 1)),
        "max_new_tokens": 20,
        "seed": 3,
        "stateful": stateful,
    }
    settings_.update({field: data.draw(SAMPLING_HOSTILE[field], label=field) for field in sorted(hostile)})
    with lab_errors_only():
        out = generate(workspace["model"], workspace["tokenizer"], prompt, SamplingConfig(**settings_))
        event("generated")
        assert len(out.token_ids) == settings_["max_new_tokens"] and all(math.isfinite(p) for p in out.probs)


# ---------------------------------------------------------------------------
# the CLI, every verb


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse: usage and one "error:" line, exit 2
            code = e.code
    return code, out.getvalue(), err.getvalue()


def assert_cli_outcome(code, err):
    # --hypothesis-show-statistics lists these: how many examples got through, and what stopped the others
    event(f"exit {code} {err.strip().splitlines()[-1][:60] if code else ''}")
    assert "Traceback" not in err, err
    if code != 0:
        assert code == 2, (code, err)
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1, err  # argparse adds its usage line above; the lab prints the one line


hostile_numbers = st.sampled_from(
    ["0", "-1", "1", "3", "inf", "-inf", "nan", "1e308", "1e-45", "2.5", "x", "", str(2**64), "100000", "4096"]
) | st.integers(-5, 300).map(str)


def valid_or_hostile(*valid):
    """Half the time a value the option accepts, so that examples get past argparse and the checks."""
    return st.sampled_from(valid) | hostile_numbers


TRAIN_OPTIONS = {
    "--preset": st.sampled_from(sorted(PRESETS)) | st.text(max_size=6),
    "--cell": st.sampled_from([*CELLS, "gru"]),  # every family's, and one no family has
    "--backend": st.sampled_from(["reference", "fast", "fused", "scratch", "cuda"]),
    "--embed-dim": valid_or_hostile("4", "8"),
    "--hidden-size": valid_or_hostile("8", "16"),
    "--num-layers": valid_or_hostile("1", "2"),
    "--dropout": valid_or_hostile("0.0", "0.5"),
    "--tokenizer": st.sampled_from(["char", "sentencepiece", "bpe"]),
    "--vocab-size": valid_or_hostile("60", "90"),
    "--seconds": valid_or_hostile("0.5", "30"),
    "--lr": valid_or_hostile("0.01", "1"),
    "--weight-decay": valid_or_hostile("0", "0.1"),
    "--batch-size": valid_or_hostile("2", "8"),
    "--block-size": valid_or_hostile("8", "16"),
    "--eval-interval": valid_or_hostile("1", "2"),
    "--seed": valid_or_hostile("0", "7"),
    "--threads": valid_or_hostile("1"),
    "--device": st.sampled_from(["auto", "cpu", "cuda", "tpu"]),
    "--name": st.text(max_size=12),
}


@given(
    options=st.dictionaries(st.sampled_from(sorted(TRAIN_OPTIONS)), st.none(), max_size=4),
    data=st.data(),
    corpus=st.sampled_from(["corpus.txt", "corpus.txt", "corpus.txt", "binary.bin", "missing.txt", "."]),
    stateful=st.booleans(),
)
def test_fuzz_cli_train(workspace, options, data, corpus, stateful):
    argv = [
        "train",
        "--corpus",
        workspace["root"] / corpus,
        "--hidden-size",
        "8",
        "--embed-dim",
        "4",
        "--batch-size",
        "4",
        "--block-size",
        "16",
        "--threads",
        "1",
    ]  # tiny unless an option replaces it
    for option in options:
        argv += [option, data.draw(TRAIN_OPTIONS[option], label=option)]
    with tempfile.TemporaryDirectory() as out:
        code, _, err = run_cli([*argv, *(["--stateful"] if stateful else []), "--out", out, "--steps", "3"])
        assert_cli_outcome(code, err)
        assert_no_partial_files(out)


@given(
    target=st.sampled_from(["checkpoint", "binary.bin", "missing", "corpus.txt", "runs"]),
    strategy=st.sampled_from(list(STRATEGIES) + ["beam"]),
    stateless=st.booleans(),
    numbers=st.tuples(
        valid_or_hostile("20"),
        valid_or_hostile("0.8", "1e-45"),
        valid_or_hostile("5"),
        valid_or_hostile("0.9"),
        valid_or_hostile("0"),
    ),
    prompt=st.text(max_size=10) | st.sampled_from(["ROMEO.", ""]),
)
def test_fuzz_cli_sample_and_summary(workspace, target, strategy, numbers, prompt, stateless):
    path = workspace["checkpoint"] if target == "checkpoint" else workspace["root"] / target
    length = "30" if numbers[0].isdigit() and 30 < int(numbers[0]) <= 5000 else numbers[0]  # valid ones kept short
    argv = [
        "sample",
        path,
        "--strategy",
        strategy,
        "--length",
        length,
        "--temperature",
        numbers[1],
        "--top-k",
        numbers[2],
        "--top-p",
        numbers[3],
        "--seed",
        numbers[4],
        "--prompt",
        prompt,
    ]
    assert_cli_outcome(*run_cli(argv + (["--stateless"] if stateless else []))[::2])
    assert_cli_outcome(*run_cli(["summary", path])[::2])


@given(where=st.sampled_from(["runs", "corpus.txt", "missing", "."]), junk=st.binary(max_size=200))
def test_fuzz_cli_list(workspace, where, junk):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "junk.safetensors").write_bytes(junk)
        for target in (folder, workspace["root"] / where):
            code, _, err = run_cli(["list", "--dir", target])
            assert code == 0 and "Traceback" not in err


ABLATION_VALID = {
    "--epochs": "1",
    "--size": "3",
    "--limit-train": "16",
    "--limit-test": "8",
    "--backend": "fused",
    "--lr": "0.01",
    "--min-lr": "0.0001",
    "--weight-decay": "0.01",
    "--hidden-size": "8",
    "--batch-size": "8",
    "--gate-batch": "4",
    "--seeds": "0",
    "--arms": "baseline",
}


SMALL_ENOUGH = {"--size": "4", "--epochs": "2", "--limit-train": "32", "--limit-test": "16", "--gate-batch": "16"}


@given(
    hostile=st.dictionaries(st.sampled_from(sorted(ABLATION_VALID)), hostile_numbers, max_size=2),
    seeds=st.lists(numbers | st.integers(0, 9), min_size=0, max_size=3),
    arms=st.sampled_from([["baseline"], ["baseline", "ablated"], ["nope"], ["baseline", "baseline"]]),
)
def test_fuzz_cli_ablation(hostile, seeds, arms):
    options = {**ABLATION_VALID, **hostile}
    with tempfile.TemporaryDirectory() as out:
        argv = ["ablation", "--dataset", "digits", "--threads", "1", "--out", out]
        for option, value in options.items():
            cap = SMALL_ENOUGH.get(option)
            if cap and value.isdigit() and int(value) > int(cap):
                value = cap  # a valid but long study (300 epochs are a real request) is cut to the test's budget
            argv += [option, value]
        argv += ["--seeds", *map(str, seeds)] if seeds else []
        argv += ["--arms", *arms]
        assert_cli_outcome(*run_cli(argv)[::2])
        assert_no_partial_files(out)


# ---------------------------------------------------------------------------
# uploads: any bytes as text or as a checkpoint


texts = st.text(max_size=200).flatmap(
    lambda t: st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "utf-32-be"]).map(
        lambda enc: t.encode(enc, errors="surrogatepass")
    )
)


@given(raw=st.binary(max_size=400) | texts, limit=st.sampled_from([0, 10, 10**6]))
def test_fuzz_upload_bytes_as_text_or_checkpoint(raw, limit):
    try:
        text = read_text(raw, max_bytes=limit)
        assert text.strip() and "\r" not in text
    except DataError as error:
        assert_lab_error(error)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "upload.txt"
        path.write_bytes(raw)
        with lab_errors_only():
            read_text(path, max_bytes=limit)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(raw)
    assert_lab_error(error.value)


@given(cut=st.integers(0, 10**6), flip=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_fuzz_damaged_checkpoint_bytes(workspace, cut, flip, byte):
    data = bytearray(workspace["data"][: cut % (len(workspace["data"]) + 1)])
    if data:
        data[flip % len(data)] = byte
    with lab_errors_only():
        load_checkpoint(bytes(data))
