"""lab.data: input validation, tokenizers, batching, corpora and sequence datasets. Offline and fast.

Long (over 400 lines) because it holds every promise of lab.data's four modules, each test a few
lines, where a reader of lab.data looks for them.
"""

import hashlib
import http.server
import json
import os
import re
import socket
import threading
from pathlib import Path

import pytest
import torch
from helpers import cifar_fixture

from lab.data import (
    BUNDLED_CORPUS,
    MAX_CORPUS_BYTES,
    SEQUENCE_DATASETS,
    TOKENIZERS,
    CharTokenizer,
    ConsecutiveWindows,
    DataError,
    FlattenSequence,
    SentencePieceTokenizer,
    build_tokenizer,
    chars_per_token,
    check_long_enough,
    download_tiny_shakespeare,
    encode_to_tensor,
    load_bundled_corpus,
    load_cifar10,
    load_digits_sequences,
    load_sequence_dataset,
    ngram_samples,
    random_windows,
    read_at_most,
    read_text,
    split_train_val,
    tokenizer_from_state,
)


@pytest.fixture(scope="module")
def corpus():
    return load_bundled_corpus()


@pytest.fixture(scope="module")
def sample(corpus):
    return corpus[:50_000]  # enough for a 200-piece sentencepiece model in well under a second


# -----------------------------------------------------------------------------
# user text


def test_read_text_accepts_bytes_and_paths_and_normalises(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\n")  # BOM + Windows line endings
    assert read_text(path) == "line one\nline two\n"
    assert read_text(str(path)) == "line one\nline two\n"
    assert read_text("caf\u00e9\n".encode()) == "caf\u00e9\n"


@pytest.mark.parametrize(
    "raw, word",
    [
        (b"", "empty"),
        (b"  \n\t \r\n", "empty"),
        (b"abc\x00def", "UTF-8"),
        (b"\xff\xfe\x00\xd8", "not valid UTF-16"),  # a UTF-16 byte order mark, then half a surrogate pair
        ("hello".encode("utf-16-le"), "UTF-16 text without a byte order mark"),
        ("caf\u00e9".encode("latin-1"), "UTF-8"),
    ],
)
def test_read_text_rejects_bad_bytes(raw, word):
    with pytest.raises(DataError, match=word):
        read_text(raw)


def test_read_text_size_limit_names_sizes_in_mb(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (3 * 2**20 + 1))
    with pytest.raises(DataError, match=r"3\.0 MB, larger than the 3 MB limit"):
        read_text(path, max_bytes=3 * 2**20)
    assert MAX_CORPUS_BYTES == 20 * 2**20


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_read_text_decodes_utf16_and_utf32_with_a_byte_order_mark(encoding, tmp_path):
    text = "ROMEO.\r\nBut soft, what light — é€😀\n"
    raw = text.encode(encoding)
    if encoding[-3:] not in ("-le", "-be"):  # Python writes the mark itself; the others need one
        assert raw[:2] in (b"\xff\xfe", b"\xfe\xff")
    else:
        raw = "\ufeff".encode(encoding) + raw
    path = tmp_path / "unicode.txt"
    path.write_bytes(raw)
    for source in (raw, path):
        assert read_text(source) == text.replace("\r\n", "\n")


def test_read_text_bounds_what_it_reads_not_what_stat_claims(tmp_path, monkeypatch):
    """/proc files report st_size 0 and files can grow: only limit + 1 bytes are ever read."""
    path = tmp_path / "growing.txt"
    path.write_bytes(b"a" * 5000)
    real_stat = Path.stat

    def lying_stat(self, *args, **kwargs):
        result = real_stat(self, *args, **kwargs)
        return os.stat_result((*result[:6], 0, *result[7:])) if self == path else result  # st_size 0, like /proc

    monkeypatch.setattr(Path, "stat", lying_stat)
    with pytest.raises(DataError, match="larger than"):
        read_text(path, max_bytes=1000)
    assert len(read_at_most(path, 1000)) == 1001 and read_at_most(path, 10_000) == b"a" * 5000
    if Path("/proc/self/environ").is_file():
        with pytest.raises(DataError):
            read_text("/proc/self/environ", max_bytes=16)


def test_read_text_missing_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        read_text(tmp_path / "nope.txt")
    with pytest.raises(DataError, match="not a file"):
        read_text(tmp_path)


def test_check_long_enough():
    check_long_enough(65, 64)
    with pytest.raises(DataError, match="corpus has 64 tokens, shorter than one training window of 65 tokens"):
        check_long_enough(64, 64)


# -----------------------------------------------------------------------------
# tokenizers


def test_char_tokenizer_round_trip_and_unknown_characters():
    tok = CharTokenizer.from_text("hello world\n")
    assert tok.vocab_size == len(set("hello world\n"))
    assert tok.chars == "".join(sorted(set("hello world\n")))
    assert tok.decode(tok.encode("low\nrole")) == "low\nrole"
    assert tok.unknown("hey! whale") == ["!", "a", "y"]
    with pytest.raises(DataError, match=r"unknown characters.*'!'.*'a'.*'y'"):
        tok.encode("hey! whale")


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_sentencepiece_trains_in_memory_and_round_trips(sample, model_type, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # any file sentencepiece wrote would land here
    tok = SentencePieceTokenizer.train(sample, vocab_size=200, model_type=model_type)
    assert list(tmp_path.iterdir()) == []
    assert tok.kind == "sentencepiece" and tok.vocab_size == 200
    text = sample[20_000:22_000] + "\n\n  two spaces, then\nnew lines\n"
    assert "\n" in text
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert 1.2 < chars_per_token(tok, text) < len(text)  # subwords are longer than characters
    assert "\n" in {tok.id_to_piece(i) for i in ids}
    assert tok.unknown(text) == []
    assert tok.unknown("Hamlet \u00e9\u4e2d") == ["\u00e9", "\u4e2d"]

    state = json.loads(json.dumps(tok.to_state()))
    assert state["kind"] == "sentencepiece" and state["model_type"] == model_type and state["vocab_size"] == 200
    assert tokenizer_from_state(state).encode(text) == ids


def test_char_state_round_trips_through_json(sample):
    tok = build_tokenizer("char", sample)
    state = json.loads(json.dumps(tok.to_state()))
    assert state == {"kind": "char", "chars": tok.chars}
    assert tokenizer_from_state(state).encode(sample[:500]) == tok.encode(sample[:500])


@pytest.mark.parametrize("chunk_chars", [1, 7, 2**20])
def test_encode_to_tensor_gives_the_tokenizers_ids_whatever_the_chunk(sample, chunk_chars):
    # chunks also cut between multi-byte characters; subword chunks only where no token crosses the cut
    text = sample[:5000] + "é€\n  two  spaces,\ttab \n\n end " + "x" * 40
    char = build_tokenizer("char", text)
    ids = encode_to_tensor(char, text, chunk_chars=chunk_chars)
    assert ids.dtype == torch.long and ids.tolist() == char.encode(text)
    with pytest.raises(DataError, match="unknown characters"):
        encode_to_tensor(char, text + "Ω", chunk_chars=chunk_chars)
    subword = build_tokenizer("sentencepiece", sample, vocab_size=200)
    assert encode_to_tensor(subword, text, chunk_chars=chunk_chars).tolist() == subword.encode(text)


def test_sentencepiece_vocab_size_is_validated(sample):
    with pytest.raises(DataError, match="too small"):
        build_tokenizer("sentencepiece", sample, vocab_size=40)
    with pytest.raises(DataError, match="too large for this corpus"):
        build_tokenizer("sentencepiece", sample[:2000], vocab_size=3000, model_type="unigram")
    with pytest.raises(DataError, match="model_type"):
        build_tokenizer("sentencepiece", sample, vocab_size=200, model_type="wordpiece")


def test_registry_and_bad_states():
    assert set(TOKENIZERS) == {"char", "sentencepiece"}
    with pytest.raises(ValueError, match="valid kinds: char, sentencepiece"):
        build_tokenizer("bytes", "abc")
    with pytest.raises(DataError, match="unknown tokenizer kind"):
        tokenizer_from_state({"kind": "wordpiece"})
    with pytest.raises(DataError, match="tokenizer chars: is missing"):
        tokenizer_from_state({"kind": "char"})
    with pytest.raises(DataError, match="tokenizer model_b64: not a sentencepiece model"):
        tokenizer_from_state(
            {"kind": "sentencepiece", "model_b64": "bm90IGEgbW9kZWw=", "model_type": "bpe", "vocab_size": 3}
        )
    with pytest.raises(DataError, match="tokenizer comment: unknown field"):
        tokenizer_from_state({"kind": "char", "chars": "ab", "comment": ""})
    with pytest.raises(DataError, match=r"text: contains U\+000C"):  # a form feed: no tokenizer is made with one
        build_tokenizer("char", "page one\x0cpage two")


def test_chars_per_token():
    assert chars_per_token(CharTokenizer.from_text("abc"), "abcabc") == 1.0


# -----------------------------------------------------------------------------
# splits and batches


def test_split_train_val():
    ids = torch.arange(1000)
    train, val = split_train_val(ids)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), ids)


def test_random_windows_shapes_and_shift():
    data = torch.arange(100)
    x, y = random_windows(data, batch_size=8, block_size=16, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y, x + 1)  # data is arange, so "shifted by one" is "+1"
    x, y = random_windows(data, batch_size=4, block_size=99)  # the tightest fit: 100 tokens, window 99 + 1
    assert torch.equal(x[0], data[:99]) and torch.equal(y[0], data[1:])
    with pytest.raises(DataError, match="shorter than one training window"):
        random_windows(data, batch_size=4, block_size=100)


def test_consecutive_windows_continue_across_batches():
    data = torch.arange(103)  # 103 // 4 = 25 tokens per stream, 3 dropped
    B, T = 4, 6
    windows = ConsecutiveWindows(data, batch_size=B, block_size=T)
    batches = list(windows)
    assert len(batches) == len(windows) == (25 - 1) // T
    for x, y in batches:
        assert x.shape == y.shape == (B, T)
        assert torch.equal(y, x + 1)
    for (x0, _), (x1, _) in zip(batches, batches[1:]):
        assert torch.equal(x1[:, 0], x0[:, -1] + 1)  # stream b of batch i+1 goes on where batch i stopped
    assert torch.equal(batches[0][0][:, 0], torch.arange(B) * 25)  # stream b starts at b * N // B
    with pytest.raises(DataError, match="shorter than one training window"):
        ConsecutiveWindows(torch.arange(20), batch_size=4, block_size=5)


def test_ngram_samples_are_consistent_with_the_source():
    ids = torch.randint(0, 30, (500,), generator=torch.Generator().manual_seed(1))
    pad = 30
    ctx, lengths, targets = ngram_samples(
        ids, num_samples=400, pad_index=pad, n_min=2, n_max=5, generator=torch.Generator().manual_seed(2)
    )
    assert ctx.shape == (400, 4) and lengths.shape == targets.shape == (400,)
    assert set(lengths.tolist()) == {1, 2, 3, 4}  # n = 2..5 all drawn
    for c, k, t in zip(ctx.tolist(), lengths.tolist(), targets.tolist()):
        assert c[: 4 - k] == [pad] * (4 - k) and pad not in c[4 - k :]  # left padding only
        # the context followed by the target occurs in the source, in order
        gram = c[4 - k :] + [t]
        windows = ids.unfold(0, k + 1, 1).tolist()
        assert gram in windows
    with pytest.raises(DataError, match="shorter than one training window"):
        ngram_samples(ids[:4], num_samples=1, pad_index=pad)


# -----------------------------------------------------------------------------
# corpora


def test_bundled_corpus(corpus):
    assert len(corpus) > 900_000
    lower = corpus.lower()
    for boilerplate in ["gutenberg", "etext", "ebook", "small print", "copyright", "http"]:
        assert not re.search(rf"\b{boilerplate}\b", lower), boilerplate  # a word of its own ("pretext" is Timon's)
    assert "\r" not in corpus
    assert "To be, or not to be" in corpus and "MACBETH" in corpus
    assert BUNDLED_CORPUS.stat().st_size < 1_200_000


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_dir(tmp_path):
    """A local HTTP server on 127.0.0.1 serving tmp_path/www; yields (folder, base url)."""
    www = tmp_path / "www"
    www.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **kw: _Quiet(*a, directory=str(www), **kw))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_tiny_shakespeare_download_cache_and_corrupt_cache(http_dir, tmp_path):
    www, base = http_dir
    body = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    (www / "input.txt").write_text(body)
    sha = hashlib.sha256(body.encode()).hexdigest()
    cache = tmp_path / "cache"
    assert download_tiny_shakespeare(cache, url=f"{base}/input.txt", timeout=5, sha256=sha) == body
    cached = cache / "tinyshakespeare.txt"
    assert cached.read_text() == body
    assert [p.name for p in cache.iterdir()] == ["tinyshakespeare.txt"]  # no temporary file left
    # a cache hit needs no server
    assert download_tiny_shakespeare(cache, url=f"{base}/gone.txt", timeout=5, sha256=sha) == body
    # a corrupt cache file is downloaded again
    cached.write_text("truncated")
    assert download_tiny_shakespeare(cache, url=f"{base}/input.txt", timeout=5, sha256=sha) == body
    assert cached.read_text() == body


def test_tiny_shakespeare_wrong_hash_caches_nothing(http_dir, tmp_path, monkeypatch):
    www, base = http_dir
    (www / "input.txt").write_text("not the real thing\n")
    monkeypatch.setenv("RNNLAB_CACHE", str(tmp_path / "cache"))  # the default cache dir
    with pytest.raises(DataError, match="expected 86c4e6aa") as err:
        download_tiny_shakespeare(url=f"{base}/input.txt", timeout=5)
    assert hashlib.sha256(b"not the real thing\n").hexdigest() in str(err.value)
    assert not (tmp_path / "cache" / "tinyshakespeare.txt").exists()


def test_tiny_shakespeare_offline_and_http_errors(http_dir, tmp_path):
    _, base = http_dir
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(DataError, match="could not download Tiny Shakespeare.*probably offline"):
        download_tiny_shakespeare(tmp_path, url=f"http://127.0.0.1:{closed}/input.txt", timeout=5)
    with pytest.raises(DataError, match="404"):
        download_tiny_shakespeare(tmp_path, url=f"{base}/missing.txt", timeout=5)


# -----------------------------------------------------------------------------
# sequence datasets


def test_digits_sequences():
    train = load_digits_sequences(size=32, train=True)
    test = load_digits_sequences(size=32, train=False)
    x, y = train.tensors
    assert x.shape == (len(train), 1024, 1) and x.dtype == torch.float32
    assert y.dtype == torch.long and set(y.tolist()) == set(range(10))
    assert x.min() >= -1 and x.max() <= 1 and x.min() < -0.99 and x.max() > 0.9
    assert len(train) + len(test) == 1797 and len(test) == pytest.approx(0.2 * 1797, abs=1)
    assert torch.equal(load_digits_sequences(size=32, train=False).tensors[0], test.tensors[0])  # deterministic
    x8, _ = load_sequence_dataset("digits", train=True, size=8).tensors
    assert x8.shape == (len(train), 64, 1)


def test_cifar10_loads_from_its_on_disk_format(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10

    md5, labels = cifar_fixture(tmp_path)
    # torchvision checks every file against a table of md5s of the real data.
    # Pointing that table at our files keeps its integrity check running for
    # real (a corrupted fixture would still fail), unlike stubbing the check out.
    monkeypatch.setattr(CIFAR10, "train_list", [[name, md5[name]] for name, _ in CIFAR10.train_list])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", md5["test_batch"]]])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": md5["batches.meta"]})

    train = load_cifar10(tmp_path, train=True)
    test = load_sequence_dataset("cifar10", train=False, root=tmp_path)
    assert len(train) == 10 and len(test) == 3
    x, label = test[1]
    assert x.shape == (1024, 1) and x.dtype == torch.float32
    assert -1 <= x.min() and x.max() <= 1
    assert [test[i][1] for i in range(3)] == labels["test_batch"]
    assert [train[i][1] for i in range(2)] == labels["data_batch_1"]


def test_cifar10_missing_and_offline(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10

    with pytest.raises(DataError, match="CIFAR-10 not found in .*pass download=True"):
        load_cifar10(tmp_path / "empty", train=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setattr(CIFAR10, "url", f"http://127.0.0.1:{closed}/cifar-10-python.tar.gz")
    with pytest.raises(DataError, match="could not download CIFAR-10.*offline"):
        load_cifar10(tmp_path / "dl", train=True, download=True)


def test_flatten_sequence_and_registry():
    img = torch.arange(2 * 3 * 4.0).reshape(2, 3, 4)  # (C, H, W)
    seq = FlattenSequence()(img)
    assert seq.shape == (12, 2) and torch.equal(seq[:, 1], img[1].flatten())
    assert set(SEQUENCE_DATASETS) == {"digits", "cifar10"}
    with pytest.raises(ValueError, match="valid names"):
        load_sequence_dataset("mnist", train=True)
