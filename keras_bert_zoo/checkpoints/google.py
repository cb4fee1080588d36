"""google-research/bert TF1 checkpoints: `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`.

Reading uses `tf.train.load_checkpoint` (name-based TF1 checkpoints); writing uses
`tf.raw_ops.SaveV2` with the real TF1 variable names and empty shape-and-slices, which is
byte-for-byte the layout `tf.compat.v1.train.Saver` produces for unpartitioned
variables, so the original `modeling.py` / `run_classifier.py` can restore it.

Example:

```python
from keras_bert_zoo.checkpoints import google

files = google.find_checkpoint("uncased_L-2_H-128_A-2")
source = google.GoogleTensorSource(files.prefix)
print(files.config_file, len(source.names), source.skipped[:3])
```
"""

from __future__ import annotations

import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf

from keras_bert_zoo.checkpoints._files import TensorSource, copy_vocab
from keras_bert_zoo.checkpoints.naming import CheckpointError, is_google_bookkeeping
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.utils.atomic import atomic_directory
from keras_bert_zoo.utils.errors import UserError

CONFIG_NAME = "bert_config.json"
VOCAB_NAME = "vocab.txt"
CHECKPOINT_PREFIX = "bert_model.ckpt"


@dataclasses.dataclass(frozen=True)
class GoogleCheckpointFiles:
    """Where the parts of a google-research/bert release are.

    Attributes:
        prefix: checkpoint prefix (`.../bert_model.ckpt`), without `.index`.
        config_file: path of `bert_config.json`, or None when absent.
        vocab_file: path of `vocab.txt`, or None when absent.
    """

    prefix: str
    config_file: str | None
    vocab_file: str | None

    @property
    def index_file(self) -> str:
        return self.prefix + ".index"


def is_google_checkpoint(path) -> bool:
    """True when `path` looks like a google-research/bert release dir or prefix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return bool(glob.glob(os.path.join(path, "*.index"))) and os.path.isfile(
            os.path.join(path, CONFIG_NAME)
        )
    return os.path.isfile(path + ".index") or (path.endswith(".index") and os.path.isfile(path))


def find_checkpoint(path) -> GoogleCheckpointFiles:
    """Resolves a release directory or a checkpoint prefix (or `.index` file).

    In a directory: `bert_model.ckpt` if present, else the one named by a `checkpoint`
    state file, else the only `*.index` there.
    """
    path = os.path.abspath(os.fspath(path))
    if path.endswith(".index") and os.path.isfile(path):
        path = path[: -len(".index")]
    if os.path.isdir(path):
        directory = path
        if os.path.isfile(os.path.join(directory, CHECKPOINT_PREFIX + ".index")):
            prefix = os.path.join(directory, CHECKPOINT_PREFIX)
        else:
            prefix = None
            if os.path.isfile(os.path.join(directory, "checkpoint")):
                try:
                    prefix = tf.train.latest_checkpoint(directory)
                except (tf.errors.OpError, ValueError):
                    prefix = None
            if prefix is None:
                indexes = sorted(glob.glob(os.path.join(directory, "*.index")))
                if len(indexes) != 1:
                    raise CheckpointError(
                        f"{directory}: expected one checkpoint (*.index) in a "
                        f"google-research/bert directory, found {len(indexes)}: "
                        f"{[os.path.basename(i) for i in indexes]}. Pass the checkpoint prefix."
                    )
                prefix = indexes[0][: -len(".index")]
    else:
        if not os.path.isfile(path + ".index"):
            raise CheckpointError(f"{path}: neither a directory nor a checkpoint prefix")
        prefix, directory = path, os.path.dirname(path)
    config_file = os.path.join(directory, CONFIG_NAME)
    vocab_file = os.path.join(directory, VOCAB_NAME)
    return GoogleCheckpointFiles(
        prefix=prefix,
        config_file=config_file if os.path.isfile(config_file) else None,
        vocab_file=vocab_file if os.path.isfile(vocab_file) else None,
    )


def read_config(files: GoogleCheckpointFiles) -> BertConfig:
    if files.config_file is None:
        raise CheckpointError(
            f"{os.path.dirname(files.prefix)}: no {CONFIG_NAME} beside the checkpoint "
            f"{files.prefix}"
        )
    try:
        return BertConfig.from_google_json(files.config_file)
    except (ValueError, TypeError, OSError) as error:
        raise CheckpointError(f"{files.config_file}: cannot read the config: {error}") from error


class GoogleTensorSource(TensorSource):
    """The weights of a TF1 name-based checkpoint; optimizer slots and counters skipped."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = os.fspath(prefix)
        index_file = self.prefix + ".index"
        try:
            self._reader = tf.train.load_checkpoint(self.prefix)
            shapes = self._reader.get_variable_to_shape_map()
        except Exception as error:  # DataLossError, NotFoundError, ... all name the file
            raise CheckpointError(
                f"{index_file}: cannot read the checkpoint index (corrupted, truncated or "
                f"not a TensorFlow checkpoint): {type(error).__name__}: {error}"
            ) from error
        object_based = [n for n in shapes if ".ATTRIBUTES" in n]
        if object_based:
            raise CheckpointError(
                f"{index_file}: this is a TF2 object-based checkpoint (names like "
                f"{object_based[0]!r}), not a google-research/bert name-based TF1 checkpoint"
            )
        data_files = sorted(glob.glob(glob.escape(self.prefix) + ".data-*"))
        data_description = ", ".join(data_files) if data_files else self.prefix + ".data-*"
        for name in sorted(shapes):
            if is_google_bookkeeping(name):
                self.skipped.append(name)
                continue
            self._shapes[name] = tuple(int(d) for d in shapes[name])
            self._files[name] = data_description

    def read(self, name) -> np.ndarray:
        try:
            return np.asarray(self._reader.get_tensor(name))
        except Exception as error:
            raise self._unreadable(name, error, "corrupted or truncated checkpoint data") from error


def write_checkpoint(
    path,
    tensors: dict[str, np.ndarray],
    config: BertConfig | None = None,
    vocab_file=None,
    prefix_name: str = CHECKPOINT_PREFIX,
) -> str:
    """Writes a google-research/bert release directory atomically.

    Args:
        path: output directory (created; existing files of the same names replaced).
        tensors: TF1 variable name -> array.
        config: written as `bert_config.json` when given.
        vocab_file: copied as `vocab.txt` when given.
        prefix_name: checkpoint file prefix inside `path`.

    Returns:
        The checkpoint prefix inside `path`.
    """
    if not tensors:
        raise UserError("write_checkpoint: no tensors to write")
    names = sorted(tensors)
    with atomic_directory(path) as temp_dir:
        with tf.device("/cpu:0"):
            tf.raw_ops.SaveV2(
                prefix=os.path.join(temp_dir, prefix_name),
                tensor_names=names,
                shape_and_slices=[""] * len(names),
                tensors=[tf.convert_to_tensor(tensors[name]) for name in names],
            )
        if config is not None:
            config.to_google_json(os.path.join(temp_dir, CONFIG_NAME))
        copy_vocab(vocab_file, temp_dir)
    return os.path.join(os.path.abspath(os.fspath(path)), prefix_name)
