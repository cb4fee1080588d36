"""Shared plumbing for the checkpoint readers and writers: tensor sources, vocab copies."""

from __future__ import annotations

import os
import shutil

import numpy as np

from keras_bert_zoo.checkpoints.naming import CheckpointError


class TensorSource:
    """Read-only view of the tensors of one checkpoint, by name.

    Subclasses fill `self._shapes` (name -> shape) and `self._files` (name -> file),
    and implement `read` (raising `_unreadable(...)` where the file fails). `skipped`
    lists names present in the files but deliberately not offered (optimizer slots,
    buffers, tied duplicates), for logging.
    """

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

    def _unreadable(self, name, error: Exception, cause: str = "") -> CheckpointError:
        """The error for tensor `name`, which its file failed to give with `error`:
        one message for every format (`cause`: the likely reason, when known)."""
        cause = f" ({cause})" if cause else ""
        return CheckpointError(
            f"{self._files[name]}: cannot read tensor {self.display_name(name)!r}{cause}: "
            f"{type(error).__name__}: {error}"
        )


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
