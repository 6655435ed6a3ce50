"""lab.spaces: every session's files in a folder of its own, swept when unseen or over the bound."""
import os
import time

import pytest

from lab.spaces import is_space_key, mark_seen, new_space_key, space_dir, sweep

DAY = 86400


def write(path, n_bytes, mtime):
    path.write_bytes(b"x" * n_bytes)
    os.utime(path, (mtime, mtime))


def set_seen(folder, when):
    os.utime(folder, (when, when))


def test_keys_are_random_and_only_real_keys_make_folders(tmp_path):
    keys = {new_space_key() for _ in range(100)}
    assert len(keys) == 100 and all(is_space_key(k) for k in keys)
    for bad in ["", "..", "../" + new_space_key()[:19], new_space_key() + "/x", "a" * 21, None, 7]:
        assert not is_space_key(bad)
        with pytest.raises(ValueError):
            space_dir(tmp_path, bad)
    key = new_space_key()
    assert space_dir(tmp_path, key) == tmp_path / key and (tmp_path / key).is_dir()


def test_sweep_deletes_unseen_spaces_and_keeps_recent_ones(tmp_path):
    now = time.time()
    old, recent = space_dir(tmp_path, new_space_key()), space_dir(tmp_path, new_space_key())
    write(old / "a.safetensors", 10, now - 3 * DAY)
    write(recent / "b.safetensors", 10, now - 3 * DAY)
    set_seen(old, now - 3 * DAY)
    mark_seen(tmp_path, recent.name, now=now - 60)
    legacy = tmp_path / "before-spaces.safetensors"  # not in a space folder: never touched
    write(legacy, 10, now - 30 * DAY)
    assert sweep(tmp_path, keep_seconds=2 * DAY, max_bytes=10**9, now=now) == [old]
    assert not old.exists() and (recent / "b.safetensors").is_file() and legacy.is_file()


def test_sweep_keeps_the_user_directory_under_its_bound_oldest_files_first(tmp_path):
    now = time.time()
    spaces = [space_dir(tmp_path, new_space_key()) for _ in range(3)]
    for n, folder in enumerate(spaces):
        for m in range(4):  # 12 files of 100 bytes; file age decreases with n*4+m
            write(folder / f"f{m}.safetensors", 100, now - 1000 + 10 * (4 * n + m))
        set_seen(folder, now - 5)
    removed = sweep(tmp_path, keep_seconds=DAY, max_bytes=750, now=now)
    left = sorted((p.parent, p.name) for folder in spaces for p in folder.iterdir())
    assert len(removed) == 5 and len(left) == 7  # 1200 -> 700 bytes
    assert set(removed) == {spaces[0] / f"f{m}.safetensors" for m in range(4)} | {spaces[1] / "f0.safetensors"}
    assert all(abs(folder.stat().st_mtime - (now - 5)) < 1 for folder in spaces)  # eviction is not a visit
