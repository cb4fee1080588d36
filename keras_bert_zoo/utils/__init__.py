"""Small plumbing shared by every part of the package (atomic file writes)."""

from keras_bert_zoo.utils.atomic import (
    atomic_directory,
    atomic_open,
    atomic_path,
    write_json_atomically,
    write_text_atomically,
)

__all__ = [
    "atomic_directory",
    "atomic_open",
    "atomic_path",
    "write_json_atomically",
    "write_text_atomically",
]
