"""lab.server.spaces: every session's files in a folder of its own under a key the server issued, with a quota of
its own; swept when unseen."""

import functools
import multiprocessing
import os
import threading
import time

import pytest

from lab.server.spaces import (
    MIN_KEEP_SECONDS,
    SpaceFullError,
    folder_bytes,
    is_space_key,
    mark_seen,
    new_space_key,
    reserve_room,
    space_dir,
    sweep,
)
from lab.training.checkpoints import save_checkpoint

DAY = 86400


@pytest.fixture(scope="module")
def tiny_model():
    import torch

    from lab.data import CharTokenizer
    from lab.nets.models import LMConfig, build_model

    torch.manual_seed(0)
    tokenizer = CharTokenizer.from_text("abc")
    return build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8)), tokenizer


def write(path, n_bytes, mtime):
    path.write_bytes(b"x" * n_bytes)
    os.utime(path, (mtime, mtime))


def set_seen(folder, when):
    os.utime(folder, (when, when))


def test_keys_are_random_and_only_keys_this_server_issued_make_folders(tmp_path):
    keys = {new_space_key(tmp_path) for _ in range(100)}
    assert len(keys) == 100 and all(is_space_key(tmp_path, k) for k in keys)
    other_server = tmp_path / "elsewhere"
    forged = ["A" * 38, new_space_key(tmp_path)[:22] + "A" * 16, new_space_key(other_server)]
    for bad in [
        "",
        "..",
        "../" + new_space_key(tmp_path)[:35],
        new_space_key(tmp_path) + "/x",
        "a" * 21,
        None,
        7,
        *forged,
    ]:
        assert not is_space_key(tmp_path, bad)
        with pytest.raises(ValueError):
            space_dir(tmp_path, bad)
    key = new_space_key(tmp_path)
    assert space_dir(tmp_path, key) == tmp_path / key and (tmp_path / key).is_dir()


def test_sweep_deletes_unseen_spaces_and_keeps_recent_ones(tmp_path):
    now = time.time()
    old, recent = space_dir(tmp_path, new_space_key(tmp_path)), space_dir(tmp_path, new_space_key(tmp_path))
    write(old / "a.safetensors", 10, now - 3 * DAY)
    write(recent / "b.safetensors", 10, now - 3 * DAY)
    set_seen(old, now - 3 * DAY)
    mark_seen(tmp_path, recent.name, now=now - 60)
    legacy = tmp_path / "before-spaces.safetensors"  # not in a space folder: never touched
    write(legacy, 10, now - 30 * DAY)
    assert sweep(tmp_path, keep_seconds=2 * DAY, now=now) == [old]
    assert not old.exists() and (recent / "b.safetensors").is_file() and legacy.is_file()


def test_a_quota_counts_a_file_with_two_names_once_and_temporary_files_too(tmp_path):
    folder = space_dir(tmp_path, new_space_key(tmp_path))
    write(folder / "run_v1.safetensors", 1000, time.time())
    os.link(folder / "run_v1.safetensors", folder / "run_latest.safetensors")  # as save_checkpoint publishes
    assert folder_bytes(folder) == 1000
    write(folder / ".run~dead.tmp", 300, time.time())  # a save killed mid-write: on disk until swept
    assert folder_bytes(folder) == 1300


def test_a_save_over_quota_is_refused_and_never_deletes_another_students_file(tmp_path, tiny_model):
    now = time.time()
    alice, bob = (space_dir(tmp_path, new_space_key(tmp_path)) for _ in range(2))
    model, tokenizer = tiny_model
    size = folder_bytes(save_checkpoint(alice, "alice", model, tokenizer).parent)
    for folder in (alice, bob):
        set_seen(folder, now - 5)
    room = functools.partial(reserve_room, tmp_path, bob, space_bytes=3 * size, total_bytes=10 * size)
    for _ in range(3):
        save_checkpoint(bob, "bob", model, tokenizer, room=room)
    with pytest.raises(SpaceFullError, match=r"^saving: your files use .* MB of your .* MB"):
        save_checkpoint(bob, "bob", model, tokenizer, room=room)
    everyone = functools.partial(reserve_room, tmp_path, bob, space_bytes=10 * size, total_bytes=4 * size)
    with pytest.raises(SpaceFullError, match="this server's disk for students' files is full"):
        save_checkpoint(bob, "bob", model, tokenizer, room=everyone)
    sweep(tmp_path, keep_seconds=DAY, now=now)
    assert sorted(p.name for p in alice.iterdir()) == ["alice_latest.safetensors", "alice_v1.safetensors"]
    assert len(list(bob.glob("*.safetensors"))) == 4  # three versions and latest: nothing evicted


def test_sweep_removes_a_killed_saves_temporary_file_once_it_is_an_hour_old(tmp_path):
    now = time.time()
    folder = space_dir(tmp_path, new_space_key(tmp_path))
    write(folder / ".run~old.tmp", 10, now - 2 * 3600)
    write(folder / ".run~new.tmp", 10, now - 60)  # a save that may still be running
    set_seen(folder, now - 5)
    assert sweep(tmp_path, keep_seconds=DAY, now=now) == [folder / ".run~old.tmp"]
    assert (folder / ".run~new.tmp").is_file() and abs(folder.stat().st_mtime - (now - 5)) < 1


@pytest.mark.parametrize("keep_seconds", [0, -5 * 3600, float("nan"), float("-inf"), 1e-9])
def test_no_keep_time_makes_a_sweep_delete_a_space_seen_within_the_floor_or_one_in_use(tmp_path, keep_seconds):
    """The settings refuse a keep time under an hour (tests/test_settings.py); a sweep called with any other
    keeps a space seen a moment ago or within the hour, and a space of a live session however old its folder."""
    now = time.time()
    just_seen, within_floor, in_use, unused = (space_dir(tmp_path, new_space_key(tmp_path)) for _ in range(4))
    for folder in (just_seen, within_floor, in_use, unused):
        write(folder / "run_v1.safetensors", 10, now - 3 * DAY)
    set_seen(just_seen, now - 1)
    set_seen(within_floor, now - MIN_KEEP_SECONDS + 60)
    set_seen(in_use, now - 3 * DAY)  # a live session's folder, not touched for days
    set_seen(unused, now - MIN_KEEP_SECONDS - 60)
    assert sweep(tmp_path, keep_seconds, now=now, in_use={in_use.name}) == [unused]
    for folder in (just_seen, within_floor, in_use):
        assert (folder / "run_v1.safetensors").is_file()


def save_in_spaces(root, keys, saves, bound, go, results):
    """In a process of its own: a thread per space, each saving `saves` times once `go` is set, each
    outcome put on `results` as (space, "saved", path name) or (space, "refused", message). The disk is
    made slow to count (a few ms per folder, as a busy shared disk is), which widens the moment between a
    save's check and its write: without one reservation across spaces the saves would all pass."""
    import torch

    import lab.server.spaces
    from lab.data import CharTokenizer
    from lab.nets.models import LMConfig, build_model

    counted = lab.server.spaces.folder_bytes

    def slow_folder_bytes(folder):
        time.sleep(0.005)
        return counted(folder)

    lab.server.spaces.folder_bytes = slow_folder_bytes
    torch.manual_seed(0)
    tokenizer = CharTokenizer.from_text("abc")
    model = build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8))

    def one_space(key):
        folder = space_dir(root, key)
        room = functools.partial(reserve_room, root, folder, space_bytes=bound, total_bytes=bound)
        results.put((key, "ready", ""))
        go.wait(120)
        for _ in range(saves):
            try:
                results.put((key, "saved", save_checkpoint(folder, "run", model, tokenizer, room=room).name))
            except SpaceFullError as e:
                results.put((key, "refused", str(e)))

    threads = [threading.Thread(target=one_space, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def space_total(root):
    return sum(folder_bytes(folder) for folder in root.iterdir() if folder.is_dir())


def test_saves_from_many_spaces_threads_and_processes_at_once_never_pass_the_shared_bound(tmp_path, tiny_model):
    """One reservation across spaces: the check and the write happen under the user directory's lock, so
    the saves of 12 spaces (4 processes of 3 threads) landing at once never pass the bound together."""
    model, tokenizer = tiny_model
    probe = space_dir(tmp_path / "probe", new_space_key(tmp_path / "probe"))
    size = folder_bytes(save_checkpoint(probe, "run", model, tokenizer).parent)
    root = tmp_path / "users"
    bound = 6 * size + size // 2  # room for 6 of the 24 saves: the first saves of 12 spaces contend for it
    # fork where there is one (a second each, where spawn imports PyTorch again): the saving is the same
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    go, results = context.Event(), context.Queue()
    keys = [[new_space_key(root) for _ in range(3)] for _ in range(4)]
    workers = [context.Process(target=save_in_spaces, args=(root, k, 2, bound, go, results)) for k in keys]
    for worker in workers:
        worker.start()
    peaks, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            peaks.append(space_total(root) if root.is_dir() else 0)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    ready = [results.get(timeout=300) for _ in range(12)]  # every thread set up: they save at once
    assert {outcome for _, outcome, _ in ready} == {"ready"}
    go.set()
    outcomes = [results.get(timeout=300) for _ in range(24)]
    for worker in workers:
        worker.join(60)
    stop.set()
    watcher.join()
    saved = [o for o in outcomes if o[1] == "saved"]
    refused = [o for o in outcomes if o[1] == "refused"]
    assert max(peaks + [space_total(root)]) <= bound  # never passed, not even for a moment
    assert len(saved) == 6 and len(refused) == 18  # the bound was reached: the test tried to pass it
    assert all(m.startswith("saving: this server's disk for students' files is full") for _, _, m in refused)
    for key in {k for k, _, _ in saved}:  # every file saved is still there: nobody's deleted
        mine = {name for k, _, name in saved if k == key}
        assert mine <= {p.name for p in (root / key).iterdir()}
