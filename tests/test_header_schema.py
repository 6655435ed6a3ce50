"""The checkpoint header's schema closes every field (issue 44, item 3).

Headers are made by mutating valid ones (bundled checkpoints and freshly saved tiny models) one field
at a time, at any depth, with hostile values: huge, negative or non-finite numbers, wrong types,
strings for numbers, bools for ints, lone surrogates, control characters, unknown and missing keys.
Property: a header is either refused with one LabError line naming the field, or everything the CLI
and the pages do with a checkpoint works on it (load, list, summarise, sample, trace the gates, draw
its history) and prints only printable text.

    python -m pytest tests/test_header_schema.py                     # 100 mutated headers, about 30 s
    HEADER_EXAMPLES=600 python -m pytest tests/test_header_schema.py -k mutated --hypothesis-show-statistics
"""

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import assert_one_line_error, run
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lab.data import CharTokenizer, SentencePieceTokenizer, load_bundled_corpus
from lab.errors import LabError
from lab.instruments.introspect import gate_summary, trace_text
from lab.instruments.race import long_race
from lab.instruments.sampling import SamplingConfig, generate
from lab.nets.models import LMConfig, build_model, model_summary
from lab.schema import unprintable
from lab.training.checkpoints import BUNDLED_DIR, CheckpointError, checkpoint_bytes, load_checkpoint, read_info
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig, train

BUNDLED = {
    "scan-markov": BUNDLED_DIR / "scan-markov_latest.safetensors",  # a long history of n-gram figures
    "scribe-alpha": BUNDLED_DIR / "scribe-alpha_latest.safetensors",  # a SentencePiece tokenizer
    "ablation": BUNDLED_DIR / "ablation" / "digits-chrono-seed0.safetensors",  # a classifier, chrono, a dataset
}


def header(data):
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])["__metadata__"]


def rebuild(data, metadata):
    """The same weights under another header (None values left out). The JSON is written here, not by
    safetensors, so that it may hold what a hand-edited file can: numbers, escaped lone surrogates."""
    n = int.from_bytes(data[:8], "little")
    layout = json.loads(data[8 : 8 + n])
    layout["__metadata__"] = {k: v for k, v in metadata.items() if v is not None}
    text = json.dumps(layout).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


@pytest.fixture(scope="module")
def sources():
    """name -> bytes of a valid checkpoint: the bundled ones above, and two saved here (a resumable char
    model, with its training state, whose characters hold a tab; a SentencePiece model)."""
    found = {name: path.read_bytes() for name, path in BUNDLED.items()}
    torch.manual_seed(0)
    text = load_bundled_corpus()[:20_000]
    task = LMTask.from_text(text + "\tand a tab", "char")  # the pages' default texts are in its vocabulary
    model = build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=4, hidden_size=8, cell="lstm"))
    config = TrainConfig(max_steps=2, batch_size=2, block_size=8, eval_interval=1, eval_windows=2)
    result = train(model, task, config)
    metrics = {"history": result.history, "steps": result.steps, "elapsed": result.elapsed, "reason": result.reason}
    metrics["train_config"] = {k: getattr(config, k) for k in config.__dataclass_fields__}
    extra = {"preset": "astra-alpha", "corpus": "upload:plays.txt", "uploaded": "plays.safetensors"}
    found["fresh"] = checkpoint_bytes(model, task.tokenizer, metrics, "fresh", 1, extra, result.training_state)
    tokenizer = SentencePieceTokenizer.train(text, vocab_size=120)
    model = build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8))
    found["fresh-sentencepiece"] = checkpoint_bytes(model, tokenizer, {"history": []}, "sp", 2)
    return found


# ---------------------------------------------------------------------------
# the reported examples


def test_a_lone_surrogate_in_a_tokenizers_characters_is_refused(sources, tmp_path):
    data = sources["fresh"]
    metadata = header(data)
    state = json.loads(metadata["tokenizer"])
    state["chars"] = state["chars"][:-1] + "\ud800"  # as many characters, one of them unprintable
    path = tmp_path / "surrogate.safetensors"
    path.write_bytes(rebuild(data, {**metadata, "tokenizer": json.dumps(state)}))
    with pytest.raises(CheckpointError, match=r"tokenizer chars: ") as error:
        load_checkpoint(path)
    assert "\ud800" not in str(error.value)  # the refusal itself is printable
    code, out, err = run(["sample", path, "--length", "5"])
    assert_one_line_error(code, err, "tokenizer chars: ")
    with pytest.raises(LabError, match=r"text: contains U\+001B"):  # nor can the lab make such a tokenizer
        CharTokenizer.from_text("a plain text\x1b[31m in red")


@pytest.mark.parametrize("value", [1e308, 10**30, 10**400, -5, True, "1024"])
def test_an_unbounded_chrono_tmax_is_refused_in_one_line(value, sources, tmp_path):
    data = sources["ablation"]
    metadata = header(data)
    config = {**json.loads(metadata["config"]), "chrono_tmax": value}
    path = tmp_path / "chrono.safetensors"
    path.write_bytes(rebuild(data, {**metadata, "config": json.dumps(config)}))
    with pytest.raises(CheckpointError, match="chrono_tmax: "):
        read_info(path)
    code, out, err = run(["summary", path])
    assert_one_line_error(code, err, "chrono_tmax: ")


@pytest.mark.parametrize("entry", ["tokenizer", "metrics", "extra", "training_state", "header"])
def test_unknown_fields_are_refused_in_every_part_of_the_header(entry, sources):
    data = sources["fresh"]
    metadata = header(data)
    if entry == "header":
        metadata["comment"] = "hello"
    else:
        metadata[entry] = json.dumps({**json.loads(metadata[entry]), "comment": "hello"})
    with pytest.raises(CheckpointError, match="comment: unknown field") as error:
        load_checkpoint(rebuild(data, metadata))
    assert entry in str(error.value) or entry == "header"
    nested = {**json.loads(header(data)["metrics"])}
    nested["history"][0]["comment"] = 1
    with pytest.raises(CheckpointError, match=r"metrics history\.0\.comment: unknown field"):
        load_checkpoint(rebuild(data, {**header(data), "metrics": json.dumps(nested)}))


@pytest.mark.parametrize("crafted", ["a\x1eb", "a\u2028b", "a\x1b[31mb", "a\nb"])  # breaks or recolours a line
def test_an_unknown_field_named_with_control_characters_is_refused_in_one_plain_line(crafted, sources):
    data = sources["fresh"]
    metadata = {**header(data), "metrics": json.dumps({**json.loads(header(data)["metrics"]), crafted: 1})}
    with pytest.raises(CheckpointError, match="unknown field") as error:
        load_checkpoint(rebuild(data, metadata))
    assert len(str(error.value).splitlines()) == 1 and str(error.value).isprintable(), repr(str(error.value))


@pytest.mark.parametrize(
    "part, field, value",
    [("tokenizer", "kind", ["char"]), ("tokenizer", "kind", {"char": 1}), ("config", "backend", ["scratch"])],
)
def test_a_name_that_json_makes_a_list_or_a_dict_is_refused_in_one_line(part, field, value, sources, tmp_path):
    """A kind or backend looked up in a table raised TypeError (a list is not hashable) instead of a refusal."""
    data = sources["fresh"]
    metadata = header(data)
    changed = {**json.loads(metadata[part]), field: value}
    path = tmp_path / "named.safetensors"
    path.write_bytes(rebuild(data, {**metadata, part: json.dumps(changed)}))
    with pytest.raises(LabError):
        load_checkpoint(path)
    code, out, err = run(["summary", path])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("version", ["2", "1.0", "01", " 1", "", None])
def test_format_version_is_exactly_what_the_writer_writes(version, sources, tmp_path):
    data = sources["fresh"]
    assert header(data)["format_version"] == "1"
    path = tmp_path / "version.safetensors"
    path.write_bytes(rebuild(data, {**header(data), "format_version": version}))
    with pytest.raises(CheckpointError, match="format_version: "):
        load_checkpoint(path)
    code, out, err = run(["sample", path, "--length", "5"])
    assert_one_line_error(code, err, "format_version: ")


def test_sentencepiece_decodes_as_sentencepiece_does(sources):
    """The tokenizer decodes from its checked pieces: the same text as sentencepiece's own decode."""
    tokenizer = load_checkpoint(sources["scribe-alpha"]).tokenizer
    ids = tokenizer.encode(load_bundled_corpus()[:5000])
    assert tokenizer.decode(ids) == tokenizer.sp.decode(ids)
    generator = torch.Generator().manual_seed(0)
    random_ids = torch.randint(0, tokenizer.vocab_size, (2000,), generator=generator).tolist()
    assert tokenizer.decode(random_ids) == tokenizer.sp.decode(random_ids)  # <unk> included


# ---------------------------------------------------------------------------
# the property

HOSTILE = [
    *[0, -1, 1, 2, 2**31, 2**63, 2**64, 10**30, 10**400, -(10**9)],
    *[1e308, -1e308, 1e-320, 0.5, -0.5, math.nan, math.inf, -math.inf],
    *[True, False, None, "", "1", "1.0", "2", "nan", "abc", "x" * 5000],
    *["\ud800", "a\udfffb", "\x1b[31mred", "\u202egnp.exe", "\x00", "\n", "\t", "\r", "\x85", "ok"],
    *[[], [1, 2], {}, {"x": 1}, [{"step": 1}]],
]
hostile = st.sampled_from(HOSTILE) | st.integers() | st.floats() | st.text(max_size=6) | st.booleans()


def paths_in(value, prefix=()):
    """Every (path, value) inside a decoded JSON value, the value itself first."""
    yield prefix, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in list(items)[:40]:  # a long history: its first entries stand for the rest
        yield from paths_in(child, (*prefix, key))


def at(value, path):
    for key in path:
        value = value[key]
    return value


@st.composite
def mutations(draw, sources):
    """(source name, mutated metadata, what was changed): one field changed, removed or added."""
    name = draw(st.sampled_from(sorted(sources)))
    metadata = header(sources[name])
    key = draw(st.sampled_from(sorted(metadata) + ["unknown"]))
    how = draw(st.sampled_from(["replace", "remove", "add"]))
    try:
        decoded = json.loads(metadata.get(key, "null"))
    except ValueError:
        decoded = None
    if key == "unknown" or not isinstance(decoded, (dict, list)):  # a string entry, or a new one
        metadata[key] = None if how == "remove" else draw(hostile)
        return name, metadata, key
    path = draw(st.sampled_from(list(paths_in(decoded))))[0]
    parent, leaf = (at(decoded, path[:-1]), path[-1]) if path else (None, None)
    if how == "replace" and parent is None:  # the whole entry
        metadata[key] = draw(st.sampled_from([json.dumps(draw(hostile)), "{", "[" * 5000]))
        return name, metadata, key
    if how == "add" or parent is None:
        target = at(decoded, path)
        if isinstance(target, dict):
            target[draw(st.sampled_from(["x", "comment", "lr", "chars", ""]))] = draw(hostile)
        elif isinstance(target, list):
            target.append(draw(hostile))
        else:
            parent[leaf] = draw(hostile)
    elif how == "remove":
        del parent[leaf]
    else:
        parent[leaf] = draw(hostile)
    metadata[key] = json.dumps(decoded)
    return name, metadata, ".".join(str(p) for p in (key, *path))


def assert_printable(text):
    assert not unprintable(text, "\n\t"), repr(text)


def names_the_field(message, changed):
    """A refusal names the entry or one of the keys on the way to what changed (or says which file is
    not a checkpoint at all)."""
    words = {part for part in changed.split(".") if not part.isdigit()} | {changed.split(".")[0].replace("_", " ")}
    return any(word and word in message for word in words) or "not an RNN Lab checkpoint" in message


def everything_a_student_does(path, checkpoint, folder):
    """What the CLI and the pages do with a checkpoint they list, show, sample and trace."""
    info = read_info(path)
    summary = model_summary(checkpoint.model, checkpoint.meta["name"]).format()
    code, out, err = run(["summary", path])
    assert code == 0, err
    shown = [summary, out, *map(str, checkpoint.meta.values()), *map(str, checkpoint.metrics.values())]
    history = checkpoint.metrics.get("history") or []
    frame = pd.DataFrame(history)  # the Checkpoints page's chart
    if history:
        assert len(frame) == len(history) and "step" in frame
    shown.append(f"{checkpoint.metrics.get('elapsed', 0):.0f} s")  # the Checkpoints page's "Ended: ..." line
    long_race([info])  # the Train page's race of the bundled models
    code, out, err = run(["list", "--dir", folder])
    assert code == 0 and "Traceback" not in err
    if checkpoint.tokenizer is not None:
        tokenizer = checkpoint.tokenizer
        prompt = tokenizer.decode([1, 2, 3])
        generation = generate(checkpoint.model, tokenizer, prompt, SamplingConfig(max_new_tokens=4, seed=0))
        trace = trace_text(checkpoint.model, tokenizer, prompt + generation.text, max_tokens=16)
        gate_summary(trace)
        pieces = [tokenizer.id_to_piece(i) for i in range(min(tokenizer.vocab_size, 300))]
        shown += [generation.text, *pieces]
    for text in shown:
        assert_printable(text)


@settings(
    max_examples=int(os.environ.get("HEADER_EXAMPLES", 100)),  # about 30 s; 600 were tried by hand
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_mutated_header_is_refused_in_one_line_or_works_everywhere(sources, tmp_path, data):
    name, metadata, changed = data.draw(mutations(sources))
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    path = folder / "mutated.safetensors"
    path.write_bytes(rebuild(sources[name], metadata))
    try:
        checkpoint = load_checkpoint(path, "cpu")
    except Exception as error:  # noqa: BLE001 - the property is about which exceptions escape
        assert isinstance(error, LabError), f"{type(error).__name__}: {error}"
        message = str(error)
        assert len(message.splitlines()) == 1 and message.startswith("mutated.safetensors: "), message
        assert names_the_field(message, changed), (changed, message)
        assert_printable(message)
        code, out, err = run(["summary", path])
        assert_one_line_error(code, err, message.split(": ", 1)[1][:60])
        event("refused")
        return
    everything_a_student_does(path, checkpoint, folder)
    event("accepted")
    path.unlink()


# ---------------------------------------------------------------------------
# the pages: a refused file in one line, an accepted crafted one shown, sampled and traced

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_the_pages_refuse_a_crafted_file_in_one_line_and_show_an_accepted_one(sources, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "users"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/5_Checkpoints.py").run()
    metadata = header(sources["ablation"])
    config = {**json.loads(metadata["config"]), "chrono_tmax": 10**30}
    refused = rebuild(sources["ablation"], {**metadata, "config": json.dumps(config)})
    at.file_uploader(key="ckpt_upload_0").set_value(("crafted.safetensors", refused, "")).run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [e.value for e in at.error]
    assert "chrono\\_tmax" in error and "\n" not in error
    metadata = header(sources["fresh"])  # accepted: odd but printable text, a tab among the characters
    metrics = {**json.loads(metadata["metrics"]), "reason": "stopped ✓ — “by hand”"}
    accepted = rebuild(sources["fresh"], {**metadata, "name": "crafted", "metrics": json.dumps(metrics)})
    at.file_uploader(key="ckpt_upload_0").set_value(("crafted\x1b.safetensors", accepted, "")).run()
    at.button(key="ckpt_save").click().run()
    at.selectbox(key="ckpt_choice").set_value("yours: crafted_latest").run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    for name, key in (("pages/2_Sample.py", "sample_checkpoint"), ("pages/3_Gates.py", "gates_checkpoint")):
        at.session_state[key] = "yours: crafted_latest"
        at.session_state["sample_tokens"] = 20
        at.switch_page(name).run()
        assert not at.exception and not at.error, (name, [e.value for e in [*at.exception, *at.error]])
        assert at.selectbox(key=key).value == "yours: crafted_latest"
