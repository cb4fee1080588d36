"""Shared plumbing for the checkpoint readers and writers: tensor sources, atomic writes."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import numpy as np


class TensorSource:
    """Read-only view of the tensors of one checkpoint, by name.

    Subclasses fill `self._shapes` (name -> shape) and `self._files` (name -> file),
    and implement `_read`. `skipped` lists names present in the files but deliberately
    not offered (optimizer slots, buffers, tied duplicates), for logging.
    """

    format = ""

    def __init__(self):
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._files: dict[str, str] = {}
        self.skipped: list[str] = []

    @property
    def names(self) -> list[str]:
        return list(self._shapes)

    def __contains__(self, name) -> bool:
        return name in self._shapes

    def shape(self, name) -> tuple[int, ...]:
        return self._shapes[name]

    def file(self, name) -> str:
        return self._files[name]

    def display_name(self, name) -> str:
        """The name as it is spelled in the file (Hugging Face may add `bert.`)."""
        return name

    def read(self, name) -> np.ndarray:
        raise NotImplementedError

    @property
    def files(self) -> list[str]:
        return sorted(set(self._files.values()))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike):
    """Yields a temporary directory beside `path`; on success its files land in `path`.

    When `path` does not exist the whole directory is renamed into place. When it
    exists, each file is moved in with `os.replace` (atomic per file): weight data
    first, then checkpoint indexes, then configs and vocabularies, so no file is ever
    seen half written and a reader never finds an index without its data. On failure
    the temporary directory is removed and `path` is untouched.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    temp_dir = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(path)}.tmp-")
    try:
        yield temp_dir
        if not os.path.exists(path):
            os.rename(temp_dir, path)
            return
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} exists and is not a directory")
        for name in sorted(os.listdir(temp_dir), key=_move_order):
            os.replace(os.path.join(temp_dir, name), os.path.join(path, name))
    finally:
        if os.path.exists(temp_dir):
            shutil.rmtree(temp_dir, ignore_errors=True)


def _move_order(name):
    if name.endswith((".json", ".txt")):
        return (2, name)
    if name.endswith(".index"):
        return (1, name)
    return (0, name)


def copy_vocab(vocab_file, directory) -> None:
    """Copies `vocab_file` to `directory/vocab.txt` (nothing when `vocab_file` is None)."""
    if vocab_file is None:
        return
    vocab_file = os.fspath(vocab_file)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"vocab_file {vocab_file} does not exist")
    shutil.copyfile(vocab_file, os.path.join(directory, "vocab.txt"))


def to_numpy_for_saving(value) -> np.ndarray:
    """A variable's value as a numpy array in a dtype both formats can store."""
    array = np.asarray(value)
    if array.dtype not in (np.float32, np.float16, np.float64):
        array = array.astype(np.float32)  # bfloat16 and friends
    return np.ascontiguousarray(array)
