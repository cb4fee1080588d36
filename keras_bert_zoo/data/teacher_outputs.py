"""A distillation teacher's outputs over the training features, computed once and read
back in feature order (`run_distillation --cache_teacher_outputs`).

With a large transfer set the teacher's forward pass is most of a distillation step,
and it is the same at every epoch: the teacher is frozen and runs in inference mode.
The cache runs it once over the (unshuffled) training features and writes one
`tf.train.Example` per feature to `teacher_outputs.tfrecord` (a float feature per
output: `outputs`, or the output's name for a dict of outputs such as SQuAD's span
heads), then `teacher_outputs.json`: the row count, each output's shape, and the
SHA-256 of the features' model inputs in order. A run that finds both, with the same
digest, reads them back instead of running the teacher again (a resumed run); any other
file is replaced. `attach` zips the cache with the features before the training
pipeline shuffles, so each feature carries its own teacher's outputs.

Example:

```python
cache = TeacherOutputsCache("/tmp/student")
if not cache.matches(features, input_names):
    cache.write(batches, input_names, num_rows)  # (features, outputs) numpy batches
features = cache.attach(features)                 # each row gains "teacher_outputs"
```
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.inputs import TEACHER_OUTPUTS
from keras_bert_zoo.utils.atomic import atomic_path, write_json_atomically
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

RECORDS_FILE = "teacher_outputs.tfrecord"
META_FILE = "teacher_outputs.json"
# The feature name of a model with a single (non-dict) output.
_SINGLE = "outputs"
_LOG_EVERY_SECONDS = 10.0


def _named_leaves(outputs) -> dict[str, Any]:
    """`{name: array}` of a model's outputs: one tensor, or a flat dict by output."""
    if isinstance(outputs, dict):
        return {str(name): value for name, value in outputs.items()}
    return {_SINGLE: outputs}


class _Digest:
    """SHA-256 of the model inputs of a stream of feature batches, in order, whatever
    the batch size: one hash per input, then one of those."""

    def __init__(self, input_names: Sequence[str]):
        self.hashes = {name: hashlib.sha256() for name in input_names}
        self.rows = 0

    def update(self, batch) -> None:
        for name, hash_of_input in self.hashes.items():
            hash_of_input.update(np.ascontiguousarray(np.asarray(batch[name])).tobytes())
        self.rows += len(np.asarray(batch[next(iter(self.hashes))]))

    def hexdigest(self) -> str:
        whole = hashlib.sha256()
        for name, hash_of_input in self.hashes.items():
            whole.update(f"{name}:{hash_of_input.hexdigest()};".encode())
        return whole.hexdigest()


class TeacherOutputsCache:
    """The teacher-output files of one run directory (see the module docstring).

    Args:
        directory: where `teacher_outputs.tfrecord` and `teacher_outputs.json` live.
    """

    def __init__(self, directory: str):
        self.directory = directory
        self.records_path = os.path.join(directory, RECORDS_FILE)
        self.meta_path = os.path.join(directory, META_FILE)

    def meta(self) -> dict[str, Any] | None:
        """The written cache's description, or None when there is no complete cache."""
        if not (os.path.isfile(self.meta_path) and os.path.isfile(self.records_path)):
            return None
        with open(self.meta_path, encoding="utf-8") as f:
            return json.load(f)

    def matches(self, features: tf.data.Dataset, input_names: Sequence[str]) -> bool:
        """Whether the written cache is of exactly these features (their model inputs,
        in this order): one pass over `features`, no model."""
        meta = self.meta()
        if meta is None:
            return False
        digest = _Digest(input_names)
        for batch in features.batch(1024).as_numpy_iterator():
            digest.update(batch)
        return meta.get("rows") == digest.rows and meta.get("features_sha256") == digest.hexdigest()

    def write(
        self,
        batches: Iterable[tuple[Any, Any]],
        input_names: Sequence[str],
        num_rows: int | None = None,
    ) -> dict[str, Any]:
        """Writes the outputs of `batches`, `(feature batch, model outputs)` as numpy in
        feature order, with a progress line (rows/s, ETA of `num_rows`) every 10 s; the
        records first, then the description, each under a temporary name until complete.
        Returns the description."""
        # The old description goes first: it must never describe the new records.
        if os.path.exists(self.meta_path):
            os.remove(self.meta_path)
        digest = _Digest(input_names)
        shapes: dict[str, list[int]] | None = None
        start = last_log = time.monotonic()
        # The rate counts from the first batch: before it, the input pipeline fills its
        # sorted windows, and a rate over that wait made the first ETAs far too long.
        first: tuple[float, int] | None = None
        with atomic_path(self.records_path) as temp_path, tf.io.TFRecordWriter(temp_path) as out:
            for batch, outputs in batches:
                digest.update(batch)
                leaves = {
                    name: np.asarray(value, np.float32)
                    for name, value in _named_leaves(outputs).items()
                }
                if shapes is None:
                    shapes = {name: list(value.shape[1:]) for name, value in leaves.items()}
                for row in range(len(next(iter(leaves.values())))):
                    feature = {
                        name: tf.train.Feature(
                            float_list=tf.train.FloatList(value=value[row].ravel())
                        )
                        for name, value in leaves.items()
                    }
                    out.write(
                        tf.train.Example(
                            features=tf.train.Features(feature=feature)
                        ).SerializeToString()
                    )
                now = time.monotonic()
                if first is None:
                    first = (now, digest.rows)
                elif now - last_log >= _LOG_EVERY_SECONDS:
                    last_log = now
                    rate = (digest.rows - first[1]) / max(now - first[0], 1e-9)
                    _log_progress(digest.rows, num_rows, rate)
        if shapes is None:
            raise UserError("no training features to compute the teacher's outputs on")
        meta = {
            "rows": digest.rows,
            "outputs": shapes,
            "single_output": list(shapes) == [_SINGLE],
            "features_sha256": digest.hexdigest(),
        }
        write_json_atomically(self.meta_path, meta)
        logger.info(
            "Teacher outputs of %d training features written to %s (%.1f s)",
            digest.rows,
            self.records_path,
            time.monotonic() - start,
        )
        return meta

    def dataset(self) -> tf.data.Dataset:
        """The cached outputs, one element per feature in order: a float32 tensor, or a
        dict by output name."""
        meta = self.meta()
        if meta is None:
            raise FileNotFoundError(f"{self.meta_path}: no teacher outputs were written here")
        spec = {
            name: tf.io.FixedLenFeature(shape, tf.float32)
            for name, shape in meta["outputs"].items()
        }
        single = meta["single_output"]

        def parse(records):
            parsed = tf.io.parse_example(records, spec)
            return parsed[_SINGLE] if single else parsed

        return (
            tf.data.TFRecordDataset(self.records_path)
            .batch(1024)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
            .unbatch()
        )

    def attach(self, features: tf.data.Dataset) -> tf.data.Dataset:
        """`features` (unbatched dicts, in the order the cache was written), each with
        its teacher's outputs under `TEACHER_OUTPUTS`."""
        return tf.data.Dataset.zip((features, self.dataset())).map(
            lambda feature, outputs: {**feature, TEACHER_OUTPUTS: outputs}
        )


def _log_progress(rows: int, total: int | None, rate: float) -> None:
    if total and rows <= total:
        eta = max(total - rows, 0) / rate if rate else float("nan")
        logger.info(
            "Teacher outputs: %d of %d training features (%.0f/s), ETA %.0f s",
            rows,
            total,
            rate,
            eta,
        )
    else:
        logger.info("Teacher outputs: %d training features (%.0f/s)", rows, rate)
