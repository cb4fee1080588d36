"""Atomic writes: the one home for "write to a temporary name, then rename".

Every file or directory the package writes (configs, vocabularies, predictions,
TFRecord shards, checkpoints, SavedModels) goes through these helpers, so a crash or
a kill never leaves a half-written file under its final name, and an existing file
is replaced only once its successor is complete and on disk.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import numpy as np

logger = logging.getLogger(__name__)


def _process_umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp/mkdtemp create owner-only files and directories (0600/0700). What we write is
# meant to be read by others (a TF Serving process running as another user, a colleague
# reading predictions), so it gets the permissions a plain open()/mkdir() would give.
_UMASK = _process_umask()
_FILE_MODE = 0o666 & ~_UMASK
_DIRECTORY_MODE = 0o777 & ~_UMASK


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


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a temporary file path beside `path`; on a clean exit that file replaces `path`.

    For writers that take a path rather than a file object (`tf.io.TFRecordWriter`,
    `tf.raw_ops.SaveV2`, ...): they write the temporary path, which is fsynced and
    renamed over `path` once the block ends without an exception. On an exception the
    temporary file is removed and `path` keeps its previous content (or stays absent).
    The temporary name starts with a dot and ends with `.tmp`.

    Example:

    ```python
    with atomic_path("out/train.tfrecord") as temp_path:
        with tf.io.TFRecordWriter(temp_path) as writer:
            writer.write(example.SerializeToString())
    ```
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    os.close(fd)
    os.chmod(temp_path, _FILE_MODE)
    try:
        yield temp_path
        _fsync_file(temp_path)
        os.replace(temp_path, path)
        _fsync_directory(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp_path)
        raise


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
    text_options = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
    with atomic_path(path) as temp_path, open(temp_path, mode, **text_options) as file:
        yield file


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
    os.chmod(temp_dir, _DIRECTORY_MODE)
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


# === JSON values and what an interrupted write leaves ===

# Names of the temporaries utils.atomic makes (`.name.XXXX.tmp`, `.name.tmp-XXXX`): what a
# kill in the middle of a write leaves behind.
_ATOMIC_TEMPORARY = re.compile(r"^\..+(\.tmp|\.tmp-[A-Za-z0-9_]+)$")


def json_safe(value):
    """`value` with numpy scalars as Python numbers and every non-finite float as None
    (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def remove_stale_temporaries(directory: str) -> list[str]:
    """Removes what an interrupted atomic write left in `directory` (dot-named
    `*.tmp` files and `*.tmp-*` directories, see `utils.atomic`); returns them."""
    removed = []
    if not os.path.isdir(directory):
        return removed
    for name in sorted(os.listdir(directory)):
        if not _ATOMIC_TEMPORARY.match(name):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                continue
        removed.append(path)
    if removed:
        logger.info("Removed %d temporaries of interrupted writes: %s", len(removed), removed)
    return removed
