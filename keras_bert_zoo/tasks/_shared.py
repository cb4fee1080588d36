"""Helpers the task families share: split files, tensorflow-datasets, serving texts and
the strided windows of a long text.

Private to `keras_bert_zoo.tasks`: each family imports them from here, never from
another family.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Sequence

from keras_bert_zoo.utils.errors import UserError


def find_split_file(data_dir: str, candidates: Sequence[str], split: str) -> str:
    """The first of `candidates` (file names) that exists in `data_dir`.

    Raises:
        FileNotFoundError: naming the split and every candidate, when none exists.
    """
    for name in candidates:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"No {split} file in {data_dir}: looked for {', '.join(candidates)}")


def split_file_path(task, split: str, files: str) -> str:
    """The file of `split` in `task.data_dir`: the first of `task.split_files[split]`
    that exists (`find_split_file`).

    Args:
        task: a task that reads its splits from files: `task_name`, `data_dir` and
            `split_files` (split -> candidate file names).
        split: the split's name.
        files: what the task's files are (`"column files"`), for the message when
            there is no `data_dir`.

    Raises:
        UserError: no `data_dir`, or a split that has no files.
        FileNotFoundError: none of the split's files exists.
    """
    if task.data_dir is None:
        raise UserError(f"{task.task_name}: data_dir with the {files} is required")
    if split not in task.split_files:
        raise UserError(
            f"{task.task_name}: unknown split {split!r}; splits: {sorted(task.split_files)}"
        )
    return find_split_file(task.data_dir, task.split_files[split], split)


def check_sequence_length(max_seq_length: int, encoder) -> None:
    """Refuses a `max_seq_length` beyond the encoder's position embeddings, in one line.

    Raises:
        UserError: `max_seq_length` exceeds `encoder.max_position_embeddings`.
    """
    max_positions = getattr(encoder, "max_position_embeddings", None)
    if max_positions is not None and max_seq_length > max_positions:
        raise UserError(
            f"max_seq_length={max_seq_length} exceeds the encoder's "
            f"max_position_embeddings={max_positions}"
        )


def prepared_tfds_builder(
    name: str, data_dir: str | None, not_prepared: Callable[..., str] | None = None
):
    """A tensorflow-datasets builder for `name` already prepared in `data_dir`.

    A registered builder is used as is; otherwise the newest prepared version found
    under `data_dir/name/` is read without its builder code (`builder_from_directory`).
    Nothing is downloaded.

    Args:
        name: str. The tensorflow-datasets name, with its config (`"glue/mrpc"`).
        data_dir: str or None. Where it was prepared; None for `~/tensorflow_datasets`.
        not_prepared: callable, the registered builder -> the message of the
            `FileNotFoundError` raised when it is not prepared (what the caller's user
            can do instead); None for a generic message.

    Returns:
        A prepared `tfds.core.DatasetBuilder`.

    Raises:
        FileNotFoundError: when no prepared copy is found.

    Example:

    ```python
    from keras_bert_zoo.data import tfds_dataset
    from keras_bert_zoo.tasks._shared import prepared_tfds_builder

    builder = prepared_tfds_builder("conll2003", "/data/tensorflow_datasets")
    records = tfds_dataset(builder, "dev").as_numpy_iterator()
    ```
    """
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        root = os.path.join(data_dir or os.path.expanduser("~/tensorflow_datasets"), name)
        found = sorted(
            glob.glob(os.path.join(root, "**", "dataset_info.json"), recursive=True),
            key=lambda path: (os.path.getmtime(path), path),
        )
        if not found:
            raise FileNotFoundError(
                f"tensorflow-datasets {name!r}: no prepared copy under {root}; prepare it "
                "first or pass data_dir with the official files"
            ) from None
        return tfds.builder_from_directory(os.path.dirname(found[-1]))
    if not builder.is_prepared():
        if not_prepared is not None:
            raise FileNotFoundError(not_prepared(builder))
        raise FileNotFoundError(
            f"tensorflow-datasets {name!r} is not prepared in {builder.data_dir}; nothing is "
            "downloaded here: prepare it first (`tfds build`) or pass data_dir with the "
            "official files"
        )
    return builder


def as_text(value) -> str:
    """A tensorflow-datasets string (numpy bytes, UTF-8) or any value as `str`."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def named_texts(text_fields, args, kwargs) -> list:
    """The serving function's texts in `text_fields` order, given by position or name."""
    if args and kwargs:
        raise UserError(f"Pass the texts {list(text_fields)} all by position or all by name")
    if args:
        if len(args) != len(text_fields):
            raise UserError(
                f"Expected {len(text_fields)} texts {list(text_fields)}, got {len(args)}"
            )
        return list(args)
    if set(kwargs) != set(text_fields):
        raise UserError(f"Expected the texts {list(text_fields)}, got {sorted(kwargs)}")
    return [kwargs[name] for name in text_fields]


def features_in_batches(columns, features_fn, preprocessor, batch_size: int):
    """Unbatched features of `columns` (a dict of tensors, one row per example), made
    by `features_fn(batch, preprocessor)` on `batch_size` examples at a time: the
    tokenizer is much faster on a batch than on one example, and one example may give
    several features (windows, choices)."""
    import functools

    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(columns).batch(batch_size)
    dataset = dataset.map(
        functools.partial(features_fn, preprocessor=preprocessor),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return dataset.unbatch()


def strided_windows(lengths, room, stride: int):
    """google-research/bert's SQuAD `doc_spans`, in TF ops, for a batch of texts.

    A text of `P` pieces with room for `L` pieces a window and a stride `S =
    min(stride, L)` gives one window when `P <= L`, else `ceil((P - L) / S) + 1`
    windows starting at `0, S, 2S, ...`; the last one ends at the text's end and may be
    shorter. `SquadPreprocessor` windows contexts with it, `SentenceWindowPreprocessor`
    documents.

    Args:
        lengths: int64 tensor `[batch]`, each text's number of pieces.
        room: int64 tensor `[batch]`, each text's pieces a window holds (>= 1).
        stride: int. Pieces between the starts of consecutive windows.

    Returns:
        int64 tensors `(row_index, window_start, window_length)`, one entry a window,
        texts in batch order: the window's row in the batch, its first piece in its
        text, and its number of pieces.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks._shared import strided_windows

    rows, starts, lengths = strided_windows(
        tf.constant([5, 2], tf.int64), tf.constant([3, 3], tf.int64), stride=2
    )
    # rows [0, 0, 1], starts [0, 2, 0], lengths [3, 3, 2]
    ```
    """
    import tensorflow as tf

    stride = tf.minimum(tf.constant(stride, tf.int64), room)
    num_windows = tf.where(
        lengths > room, (lengths - room + stride - 1) // stride + 1, tf.ones_like(lengths)
    )
    row_index = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), num_windows)
    window_start = tf.ragged.range(num_windows).flat_values * tf.gather(stride, row_index)
    window_length = tf.maximum(
        tf.minimum(tf.gather(room, row_index), tf.gather(lengths, row_index) - window_start),
        0,
    )
    return row_index, window_start, window_length


# The byte order mark some tools (editors, Excel, the MSR paraphrase corpus that MRPC
# comes from) put at the start of UTF-8 files; left in, it glues itself to the first
# field of the first line ("\ufeffQuality").
_BYTE_ORDER_MARK = "\ufeff"


def decode_text(
    data: bytes, path: str, encoding: str, error_class: type[UserError] = UserError
) -> str:
    """`data`, the bytes of the file `path`, decoded with `encoding` (a leading byte
    order mark removed): every task reads its text files through it, so an undecodable
    file gets one message.

    Raises:
        error_class: `data` is not valid `encoding` (the message gives the line and byte
            offset of the first bad byte and the flag to pass).
        UserError: `encoding` is not a known text encoding.
    """
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise error_class(
            f"{path}:{line}: byte {data[error.start]:#04x} at byte offset {error.start} is "
            f"not valid {encoding}; pass --encoding with the file's encoding (for example "
            "--encoding=latin-1)"
        ) from None
    except LookupError:
        raise UserError(f"Unknown text encoding {encoding!r} (--encoding)") from None
    return text.removeprefix(_BYTE_ORDER_MARK)


def read_tab_separated_fields(
    path: str,
    field_names: Sequence[str],
    *,
    encoding: str = "utf-8",
    description: str = "transfer file",
) -> list[tuple[str, tuple[str, ...]]]:
    """`(source, fields)` for every non-blank line of `path`: the line's tab-separated
    fields, which must be exactly one per name of `field_names`.

    Lines end at `\\n` alone (a trailing `\\r` is dropped): `str.splitlines` would also
    break at U+2028, form feeds and other separators that occur inside real texts.
    Fields are kept as written (no stripping), so they are the file's texts exactly.

    Args:
        path: the file.
        field_names: the names of the fields, in line order (for the error messages).
        encoding: the file's text encoding.
        description: what the file should hold, for the error messages.

    Returns:
        `("path:line", fields)` per non-blank line, in file order.

    Raises:
        FileNotFoundError: `path` does not exist (the message names it).
        ValueError: the file holds no non-blank line (naming it), is not valid
            `encoding` (naming the line), or a line has another number of fields
            (`path:line: expected 2 tab-separated fields (question, context), found 1`).

    Example:

    ```python
    from keras_bert_zoo.tasks._shared import read_tab_separated_fields

    rows = read_tab_separated_fields("unlabelled.tsv", ("sentence1", "sentence2"))
    rows[0]  # ("unlabelled.tsv:1", ("A man plays.", "Someone plays."))
    ```
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (expected the {description})")
    with open(path, "rb") as f:
        data = f.read()
    text = decode_text(data, path, encoding)
    names = tuple(field_names)
    expected = (
        f"{len(names)} tab-separated field{'s' if len(names) != 1 else ''} ({', '.join(names)})"
    )
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        fields = tuple(line.split("\t"))
        if len(fields) != len(names):
            raise UserError(
                f"{path}:{number}: expected {expected}, found {len(fields)} (one example "
                "per line, its fields separated by tabs)"
            )
        rows.append((f"{path}:{number}", fields))
    if not rows:
        raise UserError(
            f"{path}: the file is empty (expected the {description}: one example per line, "
            f"{expected})"
        )
    return rows
