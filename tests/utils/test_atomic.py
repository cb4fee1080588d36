"""utils/atomic.py: a failed or killed write never replaces or half-writes a file."""

import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from keras_bert_zoo.utils import (
    atomic_directory,
    atomic_open,
    atomic_path,
    write_json_atomically,
    write_text_atomically,
)


def _entries(directory):
    return sorted(os.listdir(directory))


# === Files ===


def test_text_and_binary_writes_replace_the_file(tmp_path):
    path = tmp_path / "sub" / "out.txt"  # the directory is created
    assert write_text_atomically(path, "first\n") == os.fspath(path)
    write_text_atomically(path, "naïve 中\n")
    assert path.read_bytes() == "naïve 中\n".encode()
    with atomic_open(tmp_path / "out.bin", "wb") as f:
        f.write(b"\x00\xff")
    assert (tmp_path / "out.bin").read_bytes() == b"\x00\xff"
    assert _entries(path.parent) == ["out.txt"]


def test_text_mode_writes_unix_newlines(tmp_path):
    with atomic_open(tmp_path / "lines.txt") as f:
        f.write("a\nb\n")
    assert (tmp_path / "lines.txt").read_bytes() == b"a\nb\n"


def test_exception_mid_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "vocab.txt"
    write_text_atomically(path, "old\n")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_open(path) as f:
            f.write("new and half")
            f.flush()
            # The half-written data is on disk, but under another name.
            assert path.read_text() == "old\n"
            raise RuntimeError("disk on fire")
    assert path.read_text() == "old\n"
    assert _entries(tmp_path) == ["vocab.txt"]


def test_exception_before_the_first_write_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(tmp_path / "new.txt"):
            raise KeyboardInterrupt
    assert _entries(tmp_path) == []


@pytest.mark.slow
def test_killed_writer_leaves_the_old_file_intact(tmp_path):
    """SIGKILL mid-write: the old content survives; only a dot-named temp file is left."""
    path = tmp_path / "config.json"
    write_json_atomically(path, {"version": 1})
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from keras_bert_zoo.utils import atomic_open
        with atomic_open({os.fspath(path)!r}) as f:
            f.write('{{"version": 2, "padding": "' + 'x' * 100000)
            f.flush()
            os.fsync(f.fileno())
            print("written", flush=True)
            time.sleep(60)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout.readline().strip() == "written"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
        process.stdout.close()
    assert json.loads(path.read_text()) == {"version": 1}
    leftovers = [name for name in _entries(tmp_path) if name != "config.json"]
    assert len(leftovers) == 1
    assert leftovers[0].startswith(".config.json.") and leftovers[0].endswith(".tmp")


def test_json(tmp_path):
    path = tmp_path / "out.json"
    write_json_atomically(path, {"b": "é", "a": [1, 2]})
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.index('"a"') < text.index('"b"')  # sorted keys
    assert "é" in text  # UTF-8, not \u escapes
    assert json.loads(text) == {"a": [1, 2], "b": "é"}


def test_json_that_cannot_serialize_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.json"
    write_json_atomically(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomically(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert _entries(tmp_path) == ["out.json"]


def test_atomic_path_for_writers_that_take_a_path(tmp_path):
    path = tmp_path / "records.tfrecord"
    with atomic_path(path) as temp_path:
        assert os.path.dirname(temp_path) == os.fspath(tmp_path)
        with tf.io.TFRecordWriter(temp_path) as writer:
            writer.write(b"one")
            writer.write(b"two")
        assert not path.exists()
    assert [r.numpy() for r in tf.data.TFRecordDataset(os.fspath(path))] == [b"one", b"two"]
    with pytest.raises(ValueError):
        with atomic_path(path) as temp_path:
            with tf.io.TFRecordWriter(temp_path) as writer:
                writer.write(b"three")
            raise ValueError("bad record")
    assert [r.numpy() for r in tf.data.TFRecordDataset(os.fspath(path))] == [b"one", b"two"]
    assert _entries(tmp_path) == ["records.tfrecord"]


def test_atomic_open_rejects_append_and_read_modes(tmp_path):
    for mode in ("a", "r", "w+"):
        with pytest.raises(ValueError, match="mode"):
            with atomic_open(tmp_path / "x", mode):
                pass
    assert _entries(tmp_path) == []


# === Directories ===


def test_new_directory_appears_whole_by_one_rename(tmp_path):
    target = tmp_path / "1"
    with atomic_directory(target) as temp_dir:
        assert os.path.dirname(temp_dir) == os.fspath(tmp_path)
        assert os.path.basename(temp_dir).startswith(".1.tmp-")
        os.makedirs(os.path.join(temp_dir, "variables"))
        with open(os.path.join(temp_dir, "saved_model.pb"), "wb") as f:
            f.write(b"graph")
        inode = os.stat(temp_dir).st_ino
        assert not target.exists()
    # The same directory, renamed: a reader never sees it partly filled.
    assert os.stat(target).st_ino == inode
    assert _entries(target) == ["saved_model.pb", "variables"]
    assert _entries(tmp_path) == ["1"]


def test_merge_into_an_existing_directory_replaces_entries_in_order(tmp_path):
    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "keep.txt").write_text("kept")
    (target / "bert_config.json").write_text("old")
    (target / "assets").mkdir()
    (target / "assets" / "stale.txt").write_text("stale")
    moved = []

    def order(name):
        moved.append(name)
        return {"model.ckpt.data-00000-of-00001": 0, "model.ckpt.index": 1}.get(name, 2)

    with atomic_directory(target, move_order=order) as temp_dir:
        for name in ("bert_config.json", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
            with open(os.path.join(temp_dir, name), "w") as f:
                f.write("new " + name)
        os.makedirs(os.path.join(temp_dir, "assets"))
        with open(os.path.join(temp_dir, "assets", "vocab.txt"), "w") as f:
            f.write("[UNK]\n")
    assert sorted(moved) == sorted(
        ["assets", "bert_config.json", "model.ckpt.index", "model.ckpt.data-00000-of-00001"]
    )
    assert (target / "keep.txt").read_text() == "kept"
    assert (target / "bert_config.json").read_text() == "new bert_config.json"
    assert _entries(target / "assets") == ["vocab.txt"]  # a directory entry is replaced whole
    assert _entries(tmp_path) == ["checkpoint"]


def test_default_merge_order_moves_data_before_index_before_config():
    from keras_bert_zoo.utils.atomic import _default_move_order

    names = ["vocab.txt", "bert_config.json", "bert_model.ckpt.index", "bert_model.ckpt.data-0"]
    assert sorted(names, key=_default_move_order) == [
        "bert_model.ckpt.data-0",
        "bert_model.ckpt.index",
        "bert_config.json",
        "vocab.txt",
    ]


def test_failed_directory_write_leaves_the_target_untouched(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text("old")
    with pytest.raises(OSError, match="out of space"):
        with atomic_directory(target) as temp_dir:
            with open(os.path.join(temp_dir, "config.json"), "w") as f:
                f.write("new")
            raise OSError("out of space")
    assert _entries(tmp_path) == ["model"]
    assert (target / "config.json").read_text() == "old"
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "fresh"):
            raise RuntimeError
    assert _entries(tmp_path) == ["model"]


def test_merge_false_refuses_an_existing_directory(tmp_path):
    target = tmp_path / "2"
    target.mkdir()
    (target / "saved_model.pb").write_bytes(b"old")
    with pytest.raises(FileExistsError, match="already exists"):
        with atomic_directory(target, merge=False):
            pytest.fail("the body must not run when the target exists")
    assert (target / "saved_model.pb").read_bytes() == b"old"
    assert _entries(tmp_path) == ["2"]


def test_merge_false_refuses_a_directory_that_appeared_meanwhile(tmp_path):
    target = tmp_path / "3"
    with pytest.raises(FileExistsError, match="appeared while it was being written"):
        with atomic_directory(target, merge=False) as temp_dir:
            with open(os.path.join(temp_dir, "saved_model.pb"), "wb") as f:
                f.write(b"ours")
            target.mkdir()  # another writer won the race
            (target / "saved_model.pb").write_bytes(b"theirs")
    assert (target / "saved_model.pb").read_bytes() == b"theirs"
    assert _entries(tmp_path) == ["3"]


def test_a_file_in_the_way_is_an_error(tmp_path):
    target = tmp_path / "out"
    target.write_text("a file")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        with atomic_directory(target) as temp_dir:
            open(os.path.join(temp_dir, "x"), "w").close()
    assert target.read_text() == "a file"
    assert _entries(tmp_path) == ["out"]


def test_files_and_directories_get_the_permissions_of_a_plain_write(tmp_path):
    # mkstemp/mkdtemp alone would leave 0600/0700: unreadable to a TF Serving process
    # running as another user.
    old_umask = os.umask(0o022)
    os.umask(old_umask)
    plain_file = tmp_path / "plain.txt"
    plain_file.write_text("x")
    plain_directory = tmp_path / "plain_dir"
    plain_directory.mkdir()

    written = tmp_path / "atomic.txt"
    write_text_atomically(written, "x")
    with atomic_directory(tmp_path / "atomic_dir") as temp_dir:
        (pathlib.Path(temp_dir) / "inside.txt").write_text("x")

    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE(plain_file.stat().st_mode)
    assert stat.S_IMODE((tmp_path / "atomic_dir").stat().st_mode) == stat.S_IMODE(
        plain_directory.stat().st_mode
    )
