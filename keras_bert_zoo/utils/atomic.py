"""Atomic writes: the one home for "write to a temporary name, then rename".

Every file or directory the package writes (configs, vocabularies, predictions,
TFRecord shards, checkpoints, SavedModels) goes through these helpers, so a crash or
a kill never leaves a half-written file under its final name, and an existing file
is replaced only once its successor is complete and on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; not every platform lets a directory be opened.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike,
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = "\n",
) -> Iterator[IO]:
    """Opens a temporary file beside `path`; on a clean exit it replaces `path`.

    The data is flushed and fsynced before the rename. On an exception the temporary
    file is removed and `path` keeps its previous content (or stays absent).

    Args:
        path: destination file. Its directory is created if missing.
        mode: `"w"` (text) or `"wb"` (binary).
        encoding: text encoding (text mode only).
        newline: newline translation (text mode only); `"\\n"` writes Unix newlines.

    Example:

    ```python
    with atomic_open("out/predictions.tsv") as f:
        f.write("index\\tprediction\\n")
    ```
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'w' or 'wb', got {mode!r}")
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        if mode == "wb":
            file = os.fdopen(fd, "wb")
        else:
            file = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_path, path)
        _fsync_directory(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp_path)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary path beside `path` for writers that need a file name.

    For writers that open the file themselves (`tf.io.TFRecordWriter`, h5py, ...):
    write to the yielded path and close the writer inside the block; on a clean exit
    the file is fsynced and replaces `path`; on an exception it is removed and `path`
    keeps its previous content (or stays absent).

    Example:

    ```python
    with atomic_path("out/train.tfrecord") as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            writer.write(record)
    ```
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    os.close(fd)
    try:
        yield temp_path
        with open(temp_path, "rb+") as file:
            os.fsync(file.fileno())
        os.replace(temp_path, path)
        _fsync_directory(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp_path)
        raise


def write_text_atomically(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> str:
    """Writes `text` to `path` atomically; returns the path."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)
    return os.fspath(path)


def write_json_atomically(
    path: str | os.PathLike, data: Any, *, indent: int | None = 2, sort_keys: bool = True
) -> str:
    """Writes `data` as JSON (one trailing newline) to `path` atomically; returns the path."""
    with atomic_open(path, "w") as f:
        json.dump(data, f, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
        f.write("\n")
    return os.fspath(path)


def _default_move_order(name: str):
    # Data before indexes before metadata: a reader that finds an index or a config
    # also finds what it points to.
    if name.endswith((".json", ".txt")):
        return (2, name)
    if name.endswith(".index"):
        return (1, name)
    return (0, name)


@contextlib.contextmanager
def atomic_directory(
    path: str | os.PathLike,
    *,
    merge: bool = True,
    move_order: Callable[[str], Any] = _default_move_order,
) -> Iterator[str]:
    """Yields a temporary directory beside `path`; on success its content lands in `path`.

    When `path` does not exist, the whole directory is renamed into place in one step
    (what TF Serving needs: a version directory appears complete or not at all). When
    it exists and `merge` is true, each top-level entry is moved in with `os.replace`
    in `move_order`; with `merge=False` an existing `path` is an error. On failure the
    temporary directory is removed and `path` is untouched.

    The temporary directory's name starts with a dot, so tools that scan the parent
    (TF Serving's version policy reads integer names only) never pick it up.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    if not merge and os.path.exists(path):
        raise FileExistsError(f"{path} already exists")
    temp_dir = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(path)}.tmp-")
    try:
        yield temp_dir
        if not os.path.exists(path):
            os.rename(temp_dir, path)
        elif not merge:
            raise FileExistsError(f"{path} appeared while it was being written")
        elif not os.path.isdir(path):
            raise NotADirectoryError(f"{path} exists and is not a directory")
        else:
            for name in sorted(os.listdir(temp_dir), key=move_order):
                target = os.path.join(path, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target)
                os.replace(os.path.join(temp_dir, name), target)
        _fsync_directory(parent)
    finally:
        if os.path.exists(temp_dir):
            shutil.rmtree(temp_dir, ignore_errors=True)
