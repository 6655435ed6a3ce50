"""A crafted checkpoint costs what an honest one does (issue 50, item 1): a header of millions of unknown keys or
evaluations, in any entry, is refused in one line after bounded work. The cost is measured here by the peak of
Python's allocations while loading (deterministic, unlike time: BENCHMARKS.md has the CPU seconds,
`python -m benchmarks.crafted_headers`); it stays flat as the crafted part grows a thousandfold. Before the bound
a 48 MB file of 2.3 million keys took 2.6 GB."""

import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.training.checkpoints import BUNDLED_DIR, CheckpointError, load_checkpoint, read_info
from lab.training.checkpoints.header import MAX_HEADER_BYTES, MAX_LIST_ITEMS, MAX_OBJECT_KEYS, MAX_TENSORS

SOURCE = (BUNDLED_DIR / "char-rnn_latest.safetensors").read_bytes()
FLAT_MB = 64  # the most a refusal may allocate beyond the file's own bytes, whatever their size


def layout(data):
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def with_layout(data, header):
    n = int.from_bytes(data[:8], "little")
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


def crafted(entry, shape, n):
    """The bundled vanilla RNN's file with `entry` of its header made of n crafted parts: unknown keys, list items
    of the wrong kind, or (entry "tensors") tensors listed in the header."""
    header = layout(SOURCE)
    metadata = header["__metadata__"]
    if entry == "tensors":
        first = next(k for k in header if k != "__metadata__")
        header.update({f"t{i}": header[first] for i in range(n)})
    elif entry == "metadata":
        metadata.update({f"k{i}": "0" for i in range(n)})
    elif entry == "history":
        metrics = json.loads(metadata["metrics"])
        metrics["history"] = [{"step": "one"}] * n if shape == "list" else [{f"k{i}": 0 for i in range(n)}]
        metadata["metrics"] = json.dumps(metrics)
    else:
        value = json.loads(metadata[entry]) if metadata.get(entry) not in (None, "null") else {}
        keys = {f"k{i}": 0 for i in range(n)}
        if shape == "keys":
            value = {**value, **keys} if isinstance(value, dict) else keys
        else:
            value = {**value, "junk": list(range(n))} if isinstance(value, dict) else list(range(n))
        metadata[entry] = json.dumps(value)
    return with_layout(SOURCE, header)


def peak_while(read):
    """-> (what `read()` raised, the peak MB of Python allocations meanwhile)."""
    tracemalloc.start()
    try:
        read()
        raised = None
    except CheckpointError as error:
        raised = error
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return raised, peak


ENTRIES = ["metadata", "config", "tokenizer", "metrics", "extra", "conventions", "history", "tensors"]


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entry=st.sampled_from(ENTRIES),
    shape=st.sampled_from(["keys", "list"]),
    n=st.sampled_from([300, 3_000, 30_000, 300_000]),
)
def test_a_crafted_header_of_any_size_is_refused_in_one_line_at_a_flat_cost(entry, shape, n, tmp_path_factory):
    data = crafted(entry, shape, n)
    raised, peak = peak_while(lambda: load_checkpoint(data, "cpu"))
    assert raised is not None, f"{entry} with {n:,} crafted {shape} was accepted"
    message = str(raised)
    assert len(message.splitlines()) == 1 and message.isprintable() and len(message) < 400, message
    assert peak < len(data) / 2**20 + FLAT_MB, f"{entry} {shape} x{n:,}: {peak:.0f} MB for a {len(data) >> 20} MB file"
    path = tmp_path_factory.mktemp("crafted") / "crafted.safetensors"  # listing a folder reads headers too
    path.write_bytes(data)
    raised, peak = peak_while(lambda: read_info(path))
    if raised is not None:  # read_info checks the header only: crafted weights' names pass it
        assert len(str(raised).splitlines()) == 1
    assert peak < FLAT_MB


def test_the_reported_upload_is_refused_before_its_header_is_read():
    """2.3 million unknown keys in `extra`: 48 MB refused by its header's stated length alone."""
    data = crafted("extra", "keys", 2_300_000)
    raised, peak = peak_while(lambda: load_checkpoint(data, "cpu"))
    assert str(raised).endswith("not a checkpoint RNN Lab can read: its header is damaged or too large")
    assert peak < 1


@pytest.mark.parametrize(
    "entry, shape, n, said",
    [
        ("extra", "keys", MAX_OBJECT_KEYS + 1, f"checkpoint extra has an object of {MAX_OBJECT_KEYS + 3:,} fields"),
        ("metrics", "list", MAX_LIST_ITEMS + 1, f"checkpoint metrics has a list of {MAX_LIST_ITEMS + 1:,} items"),
        ("tensors", "keys", MAX_TENSORS, "tensors, more than the"),
        ("history", "list", 4_000, "history.0.step: input should be a valid integer"),
    ],
)
def test_each_bound_names_the_entry_it_refuses(entry, shape, n, said):
    with pytest.raises(CheckpointError, match=said.replace(".", r"\.")):
        load_checkpoint(crafted(entry, shape, n), "cpu")


def test_a_history_of_bad_evaluations_is_refused_at_the_first_and_counts_no_more():
    """fail_fast: the first bad evaluation ends validation, so the message names one problem."""
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(crafted("history", "list", 4_000), "cpu")
    assert "more problem" not in str(error.value)


def test_a_header_just_under_the_limit_that_the_lab_could_write_still_loads():
    """The bounds sit above what the lab writes: a history of 5,000 evaluations of every figure loads."""
    from lab.training.checkpoints.entries import MAX_HISTORY

    header = layout(SOURCE)
    metrics = json.loads(header["__metadata__"]["metrics"])
    event = {**metrics["history"][-1], **{f"val_loss_n{n}": 1.0 for n in range(2, 6)}}
    event.update({f"val_accuracy_n{n}": 0.5 for n in range(2, 6)})
    metrics["history"] = [{**event, "step": i} for i in range(MAX_HISTORY)]
    header["__metadata__"]["metrics"] = json.dumps(metrics)
    data = with_layout(SOURCE, header)
    assert int.from_bytes(data[:8], "little") < MAX_HEADER_BYTES
    assert len(load_checkpoint(data, "cpu").metrics["history"]) == MAX_HISTORY


def test_a_longer_history_is_thinned_on_writing_its_first_and_last_kept():
    from lab.training.checkpoints import checkpoint_bytes
    from lab.training.checkpoints.entries import MAX_HISTORY

    checkpoint = load_checkpoint(SOURCE, "cpu")
    history = [{"type": "eval", "step": i, "val_loss": 2.0} for i in range(3 * MAX_HISTORY + 7)]
    data = checkpoint_bytes(checkpoint.model, checkpoint.tokenizer, {"history": history}, "long")
    kept = [event["step"] for event in load_checkpoint(data, "cpu").metrics["history"]]
    assert len(kept) == MAX_HISTORY and kept[0] == 0 and kept[-1] == history[-1]["step"]
    assert kept == sorted(set(kept))
