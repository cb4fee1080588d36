"""What a set of pretraining input files holds, found before training starts.

`inspect_records` lists the files of comma-separated globs, reads the first record of
each (a real corpus has thousands of shards: one record per file keeps this cheap) and
returns the two lengths the records were written with (`max_seq_length`,
`max_predictions_per_seq`), so a run needs neither flag. `diagnose_records` rescans
every record when `tf.data` failed on one, because `tf.data` names neither the file
nor the record. `list_text_files` is the same listing for raw text input.
`verify_pretraining_records` is that full scan, naming the file and record that cannot be
read (`keras_bert_zoo.pretraining` offers it to check the records it wrote).

Every error of the first four names the flag the files came from (`--input_file`,
`--eval_input_file`), so the command line that passed them can be corrected from the
message alone.

Example:

```python
info = inspect_records("records/train-*.tfrecord")
dataset = pretraining_dataset(info.record_files, 32, max_seq_length=info.max_seq_length,
                              max_predictions_per_seq=info.max_predictions_per_seq)
```
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence

from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

__all__ = [
    "RecordsInfo",
    "diagnose_records",
    "inspect_records",
    "list_input_files",
    "list_text_files",
    "verify_pretraining_records",
]

# The features a google-research/bert pretraining record holds besides input_ids and
# masked_lm_positions (whose lengths are the record's two lengths).
_OTHER_FEATURES = ("input_mask", "segment_ids", "masked_lm_ids", "masked_lm_weights")
_EXPECTED = (
    "input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, "
    "masked_lm_weights, next_sentence_labels"
)


@dataclasses.dataclass(frozen=True)
class RecordsInfo:
    """What `inspect_records` found.

    Attributes:
        files: every file the globs matched, sorted.
        max_seq_length: tokens per record.
        max_predictions_per_seq: masked positions per record.
        empty_files: the files that hold no record.
    """

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int
    empty_files: tuple[str, ...]

    @property
    def record_files(self) -> list[str]:
        """The files that hold records (an empty shard would only slow the reader)."""
        return [path for path in self.files if path not in self.empty_files]


def list_input_files(patterns: str | None, flag: str) -> list[str]:
    """The sorted files of comma-separated globs.

    Args:
        patterns: comma-separated globs.
        flag: the flag they came from, for the messages.

    Raises:
        ValueError: no glob given, or a glob matches a directory.
        FileNotFoundError: a glob matches nothing.
    """
    from keras_bert_zoo.data import pipeline

    if not patterns or not any(part.strip() for part in patterns.split(",")):
        raise UserError(f"--{flag} is empty: give one or more comma-separated globs")
    try:
        files = pipeline.list_files(patterns)
    except ValueError as error:
        raise FileNotFoundError(f"--{flag}={patterns}: {error}") from None
    directories = [path for path in files if os.path.isdir(path)]
    if directories:
        raise UserError(f"--{flag}={patterns} matches directories, not files: {directories}")
    return files


def list_text_files(patterns: str | None, flag: str) -> list[str]:
    """`list_input_files` of raw text input; refuses globs whose files are all empty.

    Args:
        patterns: comma-separated globs.
        flag: the flag they came from, for the messages.
    """
    files = list_input_files(patterns, flag)
    if all(os.path.getsize(path) == 0 for path in files):
        raise UserError(f"--{flag}={patterns}: every file is empty: {files}")
    return files


def _first_record_lengths(path: str, flag: str) -> tuple[int, int] | None:
    """`(max_seq_length, max_predictions_per_seq)` of the file's first record; None for
    an empty file."""
    import tensorflow as tf
    from tensorflow.python.util import deprecation

    try:
        # TensorFlow's record reader, not a tf.data pipeline per file: on the README's
        # 256 shards, building a dataset a file took 5 to 12 s of every run's start, the
        # reader 6 ms. Deprecated for tf.data in graphs; reading one record is its use.
        with deprecation.silence():
            first = next(tf.compat.v1.io.tf_record_iterator(path), None)
    except tf.errors.OpError as error:
        raise UserError(
            f"--{flag}: {path} is not a readable TFRecord file "
            f"({type(error).__name__}: {error.message.strip().splitlines()[0]})"
        ) from None
    if first is None:
        return None
    try:
        feature = tf.train.Example.FromString(first).features.feature
        shape = (
            len(feature["input_ids"].int64_list.value),
            len(feature["masked_lm_positions"].int64_list.value),
        )
        missing = [name for name in _OTHER_FEATURES if name not in feature]
    except Exception as error:  # noqa: BLE001 - any decoding failure means "not ours"
        raise UserError(
            f"--{flag}: {path} does not hold tf.train.Example pretraining records "
            f"({type(error).__name__}: {error})"
        ) from None
    if missing or shape[0] == 0 or "next_sentence_labels" not in feature:
        raise UserError(
            f"--{flag}: the first record of {path} is not a pretraining record (features "
            f"{sorted(feature)}; expected {_EXPECTED})"
        )
    return shape


def inspect_records(
    patterns: str,
    *,
    flag: str = "input_file",
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> RecordsInfo:
    """Checks every file's first record and reads the two lengths from them.

    A file damaged further in is named when training reaches it (`diagnose_records`).

    Args:
        patterns: comma-separated globs of pretraining TFRecord files.
        flag: the flag they came from, for the messages.
        max_seq_length, max_predictions_per_seq: the lengths the caller expects (None:
            whatever the records hold).

    Raises:
        FileNotFoundError: a glob matches nothing.
        ValueError: a file that is not a pretraining TFRecord file (named), records
            of other lengths than given or than the other files', or no record at all.
    """
    files = list_input_files(patterns, flag)
    lengths: dict[tuple[int, int], str] = {}
    empty = []
    for path in files:
        shape = _first_record_lengths(path, flag)
        if shape is None:
            empty.append(path)
        else:
            lengths.setdefault(shape, path)
    if not lengths:
        raise UserError(f"--{flag}={patterns}: the {len(files)} file(s) hold no record: {files}")
    if len(lengths) > 1:
        described = "; ".join(
            f"{path}: max_seq_length={s}, max_predictions_per_seq={p}"
            for (s, p), path in lengths.items()
        )
        raise UserError(f"--{flag}: the files hold records of different lengths ({described})")
    (found_seq, found_predictions), path = next(iter(lengths.items()))
    for name, given, found in (
        ("max_seq_length", max_seq_length, found_seq),
        ("max_predictions_per_seq", max_predictions_per_seq, found_predictions),
    ):
        if given is not None and given != found:
            raise UserError(
                f"--{name}={given}, but the records of --{flag} ({path}) have {name}={found}"
            )
    if empty:
        logger.warning("--%s: %d file(s) hold no record: %s", flag, len(empty), empty)
    return RecordsInfo(tuple(files), found_seq, found_predictions, tuple(empty))


def diagnose_records(
    files: Sequence[str], max_seq_length: int, max_predictions_per_seq: int, flag: str
) -> None:
    """Reads every record of `files`; raises the ValueError naming the damaged file (and
    record) if one is found, else returns (the failure was elsewhere).

    Args:
        files: the record files.
        max_seq_length, max_predictions_per_seq: the lengths they should hold.
        flag: the flag they came from, for the message.
    """
    try:
        verify_pretraining_records(list(files), max_seq_length, max_predictions_per_seq)
    except ValueError as error:
        raise UserError(f"--{flag}: {error}") from None


def verify_pretraining_records(
    file_patterns,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    compression_type: str | None = None,
) -> dict[str, int]:
    """Reads and parses every record of every file; returns the count per file.

    ``tf.data`` reports a damaged file as "corrupted record at <offset>" without the
    file's name, and a record of another shape deep inside a batch; this names both.

    Raises:
        ValueError: naming the file and the record (index and, for a damaged file,
            the byte offset) that cannot be read or does not match the original
            feature spec with these lengths.
    """
    # Imported here, as in the functions above: listing and checking the first
    # records of the files is done before TensorFlow is needed.
    import tensorflow as tf

    from keras_bert_zoo.data import pipeline
    from keras_bert_zoo.data.pretraining import pretraining_feature_spec

    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    counts = {}
    for path in pipeline.list_files(file_patterns):
        count = 0
        records = tf.data.TFRecordDataset(path, compression_type=compression_type or "")
        try:
            for batch in records.batch(1024):
                try:
                    tf.io.parse_example(batch, spec)
                except tf.errors.InvalidArgumentError:
                    for offset, record in enumerate(batch):
                        try:
                            tf.io.parse_single_example(record, spec)
                        except tf.errors.InvalidArgumentError as e:
                            raise UserError(
                                f"{path}: record {count + offset} does not match the "
                                f"pretraining spec (max_seq_length={max_seq_length}, "
                                f"max_predictions_per_seq={max_predictions_per_seq}): "
                                f"{e.message.splitlines()[0]}"
                            ) from None
                count += int(batch.shape[0])
        except tf.errors.DataLossError as e:
            raise UserError(
                f"{path}: damaged TFRecord file after {count} readable records "
                f"({e.message.splitlines()[0]})"
            ) from None
        counts[path] = count
    return counts
