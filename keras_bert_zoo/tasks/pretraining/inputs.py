"""The pretraining input: its files and the lengths of the sequences made from them.

Static records (`records`, `remask_records`) carry their lengths; raw text
(`dynamic_text`) takes the lengths asked for, or 128 tokens and 20 predictions.

Example:

```python
from keras_bert_zoo.tasks.pretraining.inputs import resolve_training_input

train = resolve_training_input("data128/train.tfrecord-*", "records")
train.max_seq_length, train.max_predictions_per_seq  # read from the records
```
"""

from __future__ import annotations

import dataclasses

from keras_bert_zoo.data import pretraining_records

INPUT_MODES = ("records", "remask_records", "dynamic_text")
DEFAULT_DYNAMIC_MAX_SEQ_LENGTH = 128
DEFAULT_DYNAMIC_MAX_PREDICTIONS = 20


@dataclasses.dataclass(frozen=True)
class PretrainingInput:
    """Input files and the lengths of the sequences made from them.

    Attributes:
        files: the files to read (record files that hold records, or text files).
        max_seq_length: tokens per sequence.
        max_predictions_per_seq: masked positions per sequence.
    """

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int


def resolve_training_input(
    input_file: str | None,
    input_mode: str,
    *,
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> PretrainingInput:
    """The training input: for records, the lengths read from them (given lengths must
    match); for `dynamic_text`, the given lengths or 128 and 20.

    Args:
        input_file: comma-separated globs (`--input_file`).
        input_mode: one of `INPUT_MODES`.
        max_seq_length, max_predictions_per_seq: the lengths asked for (None: default).
    """
    if input_mode == "dynamic_text":
        return PretrainingInput(
            tuple(pretraining_records.list_text_files(input_file, "input_file")),
            max_seq_length or DEFAULT_DYNAMIC_MAX_SEQ_LENGTH,
            max_predictions_per_seq or DEFAULT_DYNAMIC_MAX_PREDICTIONS,
        )
    return resolve_record_input(
        input_file,
        flag="input_file",
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )


def resolve_record_input(
    patterns: str | None,
    *,
    flag: str = "eval_input_file",
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> PretrainingInput:
    """Static pretraining records, their lengths read from them
    (`data.pretraining_records.inspect_records`).

    Args:
        patterns: comma-separated globs of pretraining TFRecords.
        flag: the flag they came from, for the messages.
        max_seq_length, max_predictions_per_seq: the lengths the records must have
            (None: theirs).
    """
    info = pretraining_records.inspect_records(
        patterns,
        flag=flag,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )
    return PretrainingInput(
        tuple(info.record_files), info.max_seq_length, info.max_predictions_per_seq
    )
