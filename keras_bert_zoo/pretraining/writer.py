"""Pretraining records: fast ``tf.train.Example`` encoding and atomic sharded writing.

``encode_pretraining_examples`` serializes a batch of dense instances into the exact
``tf.train.Example`` wire format of create_pretraining_data.py (feature names, order,
dtypes and padding), with numpy: building ``tf.train.Example`` messages in Python
costs about 150 us per record, more than everything else the creator does per
instance, while this costs a few microseconds. The bytes parse with
``tf.io.parse_example`` under the original feature spec and with
``tf.train.Example.FromString``.

``ShardedRecordWriter`` writes records round-robin over the output files, as the
original does (``shard_of``: the rule ``beam_pipeline`` follows too), each to a
temporary file beside its final name; only when every record is written are the files
moved into place (``utils.atomic.atomic_path``), so a crash or an error leaves no
half-written shard under a final name. ``statistics_path`` names the run's statistics
file.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence

import numpy as np

from keras_bert_zoo.utils import atomic
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "ShardedRecordWriter",
    "encode_pretraining_examples",
    "expand_output_files",
    "shard_of",
    "split_records",
    "statistics_path",
]

# Reading records back is the records reader's: `data.pretraining_records`.
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.data.pretraining_records"],
    only=("verify_pretraining_records",),
)

# Record feature name, model name, kind; in the original's order.
_FEATURES = (
    ("input_ids", "input_word_ids", "int"),
    ("input_mask", "input_mask", "int"),
    ("segment_ids", "input_type_ids", "int"),
    ("masked_lm_positions", "masked_lm_positions", "int"),
    ("masked_lm_ids", "masked_lm_ids", "int"),
    ("masked_lm_weights", "masked_lm_weights", "float"),
    ("next_sentence_labels", "next_sentence_labels", "int"),
)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Protobuf varints of non-negative ints ``[N, L]``: bytes ``[N, wL]`` and a keep mask.

    ``w`` is the byte count of the largest value, so ids of a 30k vocabulary take 3
    slots and positions or 0/1 flags one (then every byte is kept: mask ``None``).
    """
    values = np.asarray(values)
    largest = int(values.max()) if values.size else 0
    if values.size and (values.min() < 0 or largest >= 1 << 35):
        raise ValueError("varint values must be in [0, 2**35)")
    width = max(1, (largest.bit_length() + 6) // 7)
    if width == 1:
        return values.astype(np.uint8), None
    values = values.astype(np.int64 if width > 4 else np.int32)
    rows, columns = values.shape
    data = np.empty((rows, columns, width), np.uint8)
    keep = np.empty((rows, columns, width), bool)
    keep[..., 0] = True
    for i in range(width):
        group = (values >> (7 * i)) & 0x7F
        if i + 1 < width:
            more = values >= (1 << (7 * (i + 1)))
            keep[..., i + 1] = more
            group = group | (more.astype(values.dtype) << 7)
        data[..., i] = group
    return data.reshape(rows, columns * width), keep.reshape(rows, columns * width)


class _Row:
    """Pieces of one record per row, concatenated left to right, and their byte count."""

    def __init__(self, rows: int):
        self.rows = rows
        self.data: list[np.ndarray] = []
        self.keep: list[np.ndarray | None] = []  # None: every byte kept
        self.total = np.zeros([rows], np.int64)

    def _append(self, data: np.ndarray, keep: np.ndarray | None):
        self.data.append(data)
        self.keep.append(keep)
        self.total += data.shape[1] if keep is None else keep.sum(axis=1)

    def constant(self, raw: bytes):
        piece = np.frombuffer(raw, np.uint8)
        self._append(np.broadcast_to(piece, (self.rows, len(piece))), None)

    def varint(self, values: np.ndarray):
        self._append(*_varints(np.asarray(values).reshape(self.rows, -1)))

    def raw(self, data: np.ndarray):
        self._append(data, None)

    def extend(self, other: _Row):
        self.data.extend(other.data)
        self.keep.extend(other.keep)
        self.total += other.total

    def length(self) -> np.ndarray:
        return self.total


def _length_delimited(tag: int, body: _Row) -> _Row:
    out = _Row(body.rows)
    out.constant(bytes([tag]))
    out.varint(body.length()[:, np.newaxis])
    out.extend(body)
    return out


def encode_pretraining_examples(
    features: Mapping[str, np.ndarray],
    batch_size: int = 2048,
    order: np.ndarray | None = None,
) -> tuple[bytes, np.ndarray]:
    """Serialized ``tf.train.Example`` records of dense instances.

    Args:
        features: dict of numpy arrays with the model's names (as
            ``instances.create_pretraining_instances`` returns them):
            ``input_word_ids``, ``input_mask``, ``input_type_ids`` ``[N, S]``,
            ``masked_lm_positions``, ``masked_lm_ids``, ``masked_lm_weights``
            ``[N, P]``, ``next_sentence_labels`` ``[N]``.
        batch_size: records encoded per numpy pass (bounds the temporary memory).
        order: optional row indices: the records of these rows, in this order (a
            permutation shuffles them; gathering batch by batch saves a pass over
            every feature).

    Returns:
        ``(blob, lengths)``: the records back to back and their byte lengths
        (``split_records`` cuts them apart).
    """
    arrays = {name: np.asarray(value) for name, value in features.items()}
    count = len(arrays["input_word_ids"]) if order is None else len(order)
    blobs, lengths = [], []
    for start in range(0, count, batch_size):
        if order is None:
            part = {k: v[start : start + batch_size] for k, v in arrays.items()}
        else:
            rows = order[start : start + batch_size]
            part = {k: v[rows] for k, v in arrays.items()}
        blob, length = _encode_batch(part)
        blobs.append(blob)
        lengths.append(length)
    if not blobs:
        return b"", np.zeros([0], np.int64)
    return b"".join(blobs), np.concatenate(lengths)


def _encode_batch(features: Mapping[str, np.ndarray]) -> tuple[bytes, np.ndarray]:
    rows = len(features["input_word_ids"])
    entries = _Row(rows)
    for record_name, model_name, kind in _FEATURES:
        values = np.asarray(features[model_name])
        if values.ndim == 1:
            values = values[:, np.newaxis]
        packed = _Row(rows)
        if kind == "int":
            packed.varint(values)
            feature_tag = 0x1A  # Feature.int64_list = 3
        else:
            packed.raw(np.ascontiguousarray(values, "<f4").view(np.uint8).reshape(rows, -1))
            feature_tag = 0x12  # Feature.float_list = 2
        value_list = _length_delimited(0x0A, packed)  # {Int64,Float}List.value = 1, packed
        feature = _length_delimited(feature_tag, value_list)
        entry = _Row(rows)
        key = record_name.encode()
        entry.constant(bytes([0x0A, len(key)]) + key)  # FeatureEntry.key = 1
        entry.extend(_length_delimited(0x12, feature))  # FeatureEntry.value = 2
        entries.extend(_length_delimited(0x0A, entry))  # Features.feature = 1 (map)
    example = _length_delimited(0x0A, entries)  # Example.features = 1
    data = np.concatenate(example.data, axis=1)
    keep = np.concatenate(
        [
            np.ones(d.shape, bool) if k is None else k
            for d, k in zip(example.data, example.keep, strict=True)
        ],
        axis=1,
    )
    return data[keep].tobytes(), example.total


def split_records(blob: bytes, lengths: np.ndarray) -> list[bytes]:
    """The records of ``encode_pretraining_examples``' output."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return [blob[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]


_SHARD_SPEC = re.compile(r"(.+)@(\d+)\Z")


def expand_output_files(spec: str | Sequence[str]) -> list[str]:
    """Output paths: comma-separated paths, or ``path@N`` for N shards.

    ``out/wiki.tfrecord@4`` -> ``out/wiki.tfrecord-00000-of-00004`` ... ``-00003-of-00004``.
    """
    parts = _output_specs(spec)
    if not parts:
        raise UserError("No output file given (--output_file is empty)")
    paths: list[str] = []
    for part in parts:
        match = _SHARD_SPEC.match(part)
        if match:
            base, count = match.group(1), int(match.group(2))
            if count < 1:
                raise UserError(f"Shard count must be >= 1 in {part!r}")
            paths.extend(f"{base}-{i:05d}-of-{count:05d}" for i in range(count))
        else:
            paths.append(part)
    duplicates = sorted({p for p in paths if paths.count(p) > 1})
    if duplicates:
        raise UserError(f"Output files repeat: {duplicates}")
    return paths


def _output_specs(spec: str | Sequence[str]) -> list[str]:
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    return [p.strip() for p in parts if p and p.strip()]


_RECORD_EXTENSIONS = (".tfrecords", ".tfrecord", ".tfr")


def statistics_path(spec: str | Sequence[str]) -> str:
    """The statistics file of a run writing `spec` (``expand_output_files``' argument).

    The first output's name without ``@N`` and a records extension, plus
    ``.stats.json``: ``out/train.tfrecord@4`` -> ``out/train.stats.json``, so that the
    usual globs of the records (``train.tfrecord*``, ``train.tfrecord-*``) never match it.
    """
    parts = _output_specs(spec)
    if not parts:
        raise UserError("No output file given (--output_file is empty)")
    match = _SHARD_SPEC.match(parts[0])
    base = match.group(1) if match else parts[0]
    for extension in _RECORD_EXTENSIONS:
        if base.endswith(extension) and len(base) > len(extension):
            base = base[: -len(extension)]
            break
    return base + ".stats.json"


def shard_of(record_index: int, num_shards: int) -> int:
    """The output file of a run's `record_index`-th record (0-based, in chunk order).

    Round-robin, as the original: both engines place records by this rule.
    """
    return record_index % num_shards


class ShardedRecordWriter:
    """Writes records round-robin over TFRecord files, committed all at once on success.

    Use as a context manager. Each file is written under a temporary name in its own
    directory; on a clean exit every file is fsynced and renamed to its final name
    (``utils.atomic.atomic_path``); on an exception every temporary file is removed
    and no final name is touched.

    Args:
        paths: output files.
        compression_type: ``None``, ``"GZIP"`` or ``"ZLIB"``.

    Example:

    ```python
    with ShardedRecordWriter(["a.tfrecord", "b.tfrecord"]) as writer:
        writer.write_all([record1, record2, record3])  # a: 1, 3; b: 2
    ```
    """

    def __init__(self, paths: Sequence[str], compression_type: str | None = None):
        if not paths:
            raise UserError("ShardedRecordWriter needs at least one output path")
        self.paths = [os.fspath(p) for p in paths]
        self.compression_type = compression_type or ""
        self.counts = [0] * len(self.paths)
        self._written = 0
        self._stack: contextlib.ExitStack | None = None
        self._writers = []

    def __enter__(self):
        import tensorflow as tf

        stack = contextlib.ExitStack()
        try:
            for path in self.paths:
                temporary = stack.enter_context(atomic.atomic_path(path))
                writer = tf.io.TFRecordWriter(
                    temporary, tf.io.TFRecordOptions(compression_type=self.compression_type)
                )
                # Closed before atomic_path renames (callbacks run last-in first-out).
                stack.callback(writer.close)
                self._writers.append(writer)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def write(self, record: bytes) -> None:
        shard = shard_of(self._written, len(self._writers))
        self._writers[shard].write(record)
        self.counts[shard] += 1
        self._written += 1

    def write_all(self, records) -> int:
        count = 0
        for record in records:
            self.write(record)
            count += 1
        return count

    def __exit__(self, exc_type, exc, traceback):
        stack, self._stack = self._stack, None
        self._writers = []
        return stack.__exit__(exc_type, exc, traceback)
