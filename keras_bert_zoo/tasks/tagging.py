"""Token tagging: CoNLL-2003 NER (`conll2003`) and any CoNLL-like column file
(`token_classification`).

Words come as given by the data (one per line in the column files). Each word is
split into WordPieces; only its first piece is labelled and predicted, and a word
that normalizes to nothing (a lone control or format character, a bare combining
accent on an uncased vocabulary) is given one `[UNK]` piece so it still gets a
prediction.

Long sentences are split, not truncated: the pieces of a sentence of P pieces are
cut into windows of L = `max_seq_length - 2` pieces (plus `[CLS]` and `[SEP]`) whose
starts are `window_stride` pieces apart, the last one aligned to the sentence end so
that every window holds L pieces. A word is labelled in training and read at
prediction in exactly one window: the one where its first piece has the most context,
`min(pieces to its left, pieces to its right)` in the window, as google-research/
bert's SQuAD `_check_is_max_context` chooses (its `0.01 * length` term is the same
for windows of equal length; ties go to the earlier window). With equal windows that
is the window whose centre is nearest, so each window owns a contiguous range of
piece positions, computed in closed form inside `TaggingPreprocessor`.

Metric: entity-level precision/recall/F1 with conlleval semantics (`f1` is primary;
see `entity_metrics.conll_report`, which also reports seqeval's strict IOB2 mode and
per-type figures). Predictions are written as CoNLL columns `word gold predicted`
(conlleval's input), one predicted tag per original word.

State (`state()`, saved with a fine-tuned model so that it predicts and exports
without the data): `{"tags": [...], "tag_scheme": "IOB1" | "IOB2" | "raw"}`, the tag
set in label order (`conll2003`: its nine fixed tags; `token_classification`: read
from the training file or the `tag_set` option) and the scheme of the training data
(the `tag_scheme` option, else detected from the training file).

Serving (`serving_outputs`, the exported model): `text_fields = ("sentence",)`, raw
UTF-8 sentences `[batch]`. Each is split into words by `split_words` (whitespace
separates words; punctuation and CJK ideographs are words of their own; invalid UTF-8
becomes U+FFFD), the words go through the same `TaggingPreprocessor` windows as in
training (long sentences are windowed, never truncated), each word gets the argmax
tag of its logits (what `postprocess` answers), and the entities are read from the
tags as the task's metric reads them (`entity_metrics.entities`, conlleval: `I-X`
after `O` or another type starts an entity; for `raw` tags every word not tagged `O`
is one). Offsets are CHARACTER (code point) offsets into the sentence, end exclusive:
Python's `sentence[start:end]` (for a request holding invalid UTF-8, indices into
`raw.decode("utf-8", errors="replace")`). Outputs, all plain dense tensors:

| name           | dtype   | shape                   | padding |
|----------------|---------|-------------------------|---------|
| `word_count`   | int32   | `[batch]`               |         |
| `words`        | string  | `[batch, max_words]`    | `""`    |
| `word_start`   | int32   | `[batch, max_words]`    | -1      |
| `word_end`     | int32   | `[batch, max_words]`    | -1      |
| `word_tags`    | string  | `[batch, max_words]`    | `""`    |
| `word_score`   | float32 | `[batch, max_words]`    | 0       |
| `entity_count` | int32   | `[batch]`               |         |
| `entity_type`  | string  | `[batch, max_entities]` | `""`    |
| `entity_start` | int32   | `[batch, max_entities]` | -1      |
| `entity_end`   | int32   | `[batch, max_entities]` | -1      |
| `entity_text`  | string  | `[batch, max_entities]` | `""`    |
| `entity_score` | float32 | `[batch, max_entities]` | 0       |

`max_words` and `max_entities` are the largest counts in the batch (0 when there
are none). `word_score` is the softmax probability of the word's tag;
`entity_score` the mean of `word_score` over the entity's words. Entities come in
sentence order; `entity_text` is `sentence[entity_start:entity_end]`, and its type
is the tag's type (`PER`), or the whole tag for raw tags.

Example:

```python
from keras_bert_zoo import tasks

task = tasks.create_task("conll2003", data_dir="conll2003/")  # eng.train / train.txt ...
examples = task.read("dev")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(encoder)
answers = tasks.predict(task, model, examples, preprocessor)  # one tag per word
print(task.evaluate(answers, examples)["f1"])
task.write_predictions(answers, examples, "out/", "dev")  # out/predictions_dev.txt
```
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import logging
import os
import re
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.tasks import entity_metrics
from keras_bert_zoo.tasks.base import Task, TaskOption, register_task
from keras_bert_zoo.text.offsets import char_offsets, valid_utf8
from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.utils.atomic import atomic_open

DOCUMENT_START = "-DOCSTART-"
CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
IGNORED_LABEL = -1

# === Preprocessing (a Keras layer: training, evaluation and the exported model) ===


def split_words(sentences):
    """Raw sentences -> words with CHARACTER offsets, for tagging text not yet split.

    Words are separated at whitespace, and each punctuation character and CJK
    ideograph is a word of its own (CoNLL-2003's tokenization keeps `Germany` and
    `.` apart), with BERT's character classes (`text.unicode_tables`, Python's
    `unicodedata`). A run made only of characters BERT's cleaning drops (control and
    format characters, NUL, U+FFFD) is no word: it holds no text to tag. Invalid
    UTF-8 is first replaced by U+FFFD (`valid_utf8`), so it never stops a request.

    Args:
        sentences: string tensor `[batch]`.

    Returns:
        `(words, starts, ends)`: ragged `[batch, (words)]` strings (valid UTF-8) and
        int64 character offsets: `valid_utf8(sentence)` decoded, `text[start:end]`
        is the word. For valid UTF-8 these are Python string indices into the
        sentence itself.
    """
    from keras_bert_zoo.text.unicode_tables import unicode_tables

    classes = unicode_tables().classes
    text = valid_utf8(tf.convert_to_tensor(sentences))
    # regex_split_with_offsets stops at a NUL byte; U+0001 is as long and, like NUL,
    # a character BERT's cleaning drops, so the split and its offsets are unchanged.
    _, byte_starts, byte_ends = tf_text.regex_split_with_offsets(
        tf.strings.regex_replace(text, "\\x00", "\x01"),
        delim_regex_pattern=classes["split_any"],
        keep_delim_regex_pattern=classes["split_keep"],
    )
    words = tf.strings.substr(
        tf.gather(text, byte_starts.value_rowids()),
        byte_starts.flat_values,
        byte_ends.flat_values - byte_starts.flat_values,
    )
    words = byte_starts.with_flat_values(words)
    keep = ~tf.strings.regex_full_match(words.flat_values, classes["control"] + "+")
    words, byte_starts, byte_ends = (
        tf.ragged.boolean_mask(value, words.with_flat_values(keep))
        for value in (words, byte_starts, byte_ends)
    )
    return (words, *char_offsets(text, byte_starts, byte_ends))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TaggingPreprocessor(keras.layers.Layer):
    """Words of sentences -> windows of WordPieces, with the word read at each position.

    Every word is tokenized on its own (so piece boundaries never cross words); a word
    with no piece gets `[UNK]`. Sentences longer than the window are split into
    overlapping windows (see the module docstring for the rule), so one input row may
    give several output rows.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Packed length, `[CLS]` and `[SEP]` included (>= 3).
        window_stride: int. Pieces between the starts of consecutive windows of a long
            sentence; values above the window's `sequence_length - 2` pieces mean
            adjacent windows without overlap.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        words: string `tf.RaggedTensor` `[batch, (words)]`.

    Returns:
        dict, one row per window: `input_word_ids`, `input_mask`, `input_type_ids`
        (int32 `[windows, sequence_length]`), `sentence_index` (int32 `[windows]`: the
        input row of the window) and `word_index` (int32 `[windows,
        sequence_length]`: the index, in its sentence, of the word whose prediction
        is read at that position, i.e. the word's first piece in its chosen window;
        -1 elsewhere). Each word appears exactly once in `word_index`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.tagging import TaggingPreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "##s"]
    layer = TaggingPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=8)
    out = layer(tf.ragged.constant([["EU", "rejects", "Germans"]]))
    out["input_word_ids"].numpy()  # [[2, 5, 6, 7, 8, 3, 0, 0]]
    out["word_index"].numpy()  # [[-1, 0, 1, 2, -1, -1, -1, -1]]
    ```
    """

    def __init__(self, tokenizer, sequence_length: int = 128, window_stride: int = 64, **kwargs):
        kwargs.setdefault("dtype", "int32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if isinstance(tokenizer, dict):  # from a serialized config
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if int(sequence_length) < 3:
            raise ValueError(f"sequence_length must be >= 3 to hold a piece, got {sequence_length}")
        if int(window_stride) < 1:
            raise ValueError(f"window_stride must be >= 1, got {window_stride}")
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self.window_stride = int(window_stride)
        self.packer = BertPacker(self.sequence_length, dtype="int32")
        # A tokenizer loaded from a .keras archive (or a config) gets its vocabulary
        # after this constructor; the special ids are then taken when the layer runs.
        if tokenizer.has_vocabulary:
            self._take_special_ids()
        # No weights: nothing for build() to create.
        self.built = True

    def _take_special_ids(self):
        # BertTokenizer itself refuses a vocabulary without its unknown token.
        packer = self.packer
        packer.start_value, packer.end_value, packer.pad_value = self.tokenizer.packing_token_ids()

    @property
    def window_length(self) -> int:
        """Pieces per window (`sequence_length` minus `[CLS]` and `[SEP]`)."""
        return self.sequence_length - 2

    # === Layers ===

    def _word_pieces(self, flat_words):
        """`[words, (pieces)]` int32; an empty word becomes one `[UNK]`."""
        pieces = self.tokenizer.tokenize(flat_words)
        empty = tf.equal(pieces.row_lengths(), 0)
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], self.tokenizer.unknown_token_id),
            tf.cast(empty, tf.int64),
        )
        return tf.concat([pieces, tf.cast(unknown, pieces.dtype)], axis=1)

    def call(self, words):
        if not isinstance(words, tf.RaggedTensor):
            words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words))
        self._take_special_ids()
        length = self.window_length
        stride = min(self.window_stride, length)

        # Pieces of every word, and where each word's first piece sits.
        pieces = self._word_pieces(words.flat_values)  # [words, (pieces)]
        piece_counts = pieces.row_lengths()  # int64, >= 1
        word_sentence = words.value_rowids()  # [words]
        word_in_sentence = tf.cast(
            tf.range(tf.size(word_sentence, out_type=tf.int64))
            - tf.gather(words.row_starts(), word_sentence),
            tf.int32,
        )
        first_piece_global = tf.cumsum(piece_counts, exclusive=True)  # over the batch
        sentence_pieces = tf.RaggedTensor.from_row_lengths(
            pieces.flat_values, tf.reduce_sum(words.with_flat_values(piece_counts), axis=1)
        )
        total = sentence_pieces.row_lengths()  # P per sentence
        sentence_first_piece = sentence_pieces.row_starts()
        first_piece = first_piece_global - tf.gather(sentence_first_piece, word_sentence)

        # Windows: n = 1 when P <= L, else ceil((P - L) / S) + 1; start_k = min(k S, P - L).
        overflow = tf.maximum(total - length, 0)
        num_windows = 1 + (overflow + stride - 1) // stride
        window_k = tf.ragged.range(num_windows)  # [sentences, (windows)]
        window_sentence = window_k.value_rowids()
        window_start = tf.minimum(
            window_k.flat_values * stride, tf.gather(overflow, window_sentence)
        )
        window_size = tf.gather(tf.minimum(total, length), window_sentence)
        piece_index = tf.ragged.range(
            tf.gather(sentence_first_piece, window_sentence) + window_start,
            tf.gather(sentence_first_piece, window_sentence) + window_start + window_size,
        )
        window_pieces = tf.gather(sentence_pieces.flat_values, piece_index)
        packed = self.packer(window_pieces)

        # The window that reads each word: window k+1 owns first pieces p with
        # 2p > start_k + start_{k+1} + L - 1 (nearest window centre, ties earlier).
        starts = window_k.with_flat_values(window_start)
        thresholds = starts[:, :-1] + starts[:, 1:] + (length - 1)  # [sentences, (n-1)]
        word_thresholds = tf.gather(thresholds, word_sentence)  # [words, (n-1)]
        later = tf.cast(2 * first_piece[:, tf.newaxis] > word_thresholds, tf.int64)
        word_window_k = tf.reduce_sum(later, axis=1)
        word_window = tf.gather(window_k.row_starts(), word_sentence) + word_window_k
        position = first_piece - tf.gather(window_start, word_window) + 1  # after [CLS]
        word_index = tf.tensor_scatter_nd_update(
            tf.fill([tf.size(window_sentence), self.sequence_length], -1),
            tf.stack([word_window, position], axis=1),
            word_in_sentence,
        )
        return {
            **packed,
            "sentence_index": tf.cast(window_sentence, tf.int32),
            "word_index": word_index,
        }

    def compute_output_spec(self, words):
        spec = keras.KerasTensor([None, self.sequence_length], dtype="int32")
        return {
            "input_word_ids": spec,
            "input_mask": spec,
            "input_type_ids": spec,
            "sentence_index": keras.KerasTensor([None], dtype="int32"),
            "word_index": spec,
        }

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
                "window_stride": self.window_stride,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)


# === Serving: windows -> words -> entities, in TF ops ===

_OUTSIDE_PREFIX, _BEGIN_PREFIX, _INSIDE_PREFIX, _OTHER_PREFIX = 0, 1, 2, 3


def _tag_tables(tags: Sequence[str]):
    """Per tag id: conlleval's prefix code and type id; and the type names (id 0: "").

    The prefix and type are `entity_metrics.split_tag`'s, so the TF chunker below
    compares exactly what `entity_metrics.entities` compares.
    """
    prefix_codes = {"O": _OUTSIDE_PREFIX, "B": _BEGIN_PREFIX, "I": _INSIDE_PREFIX}
    type_names = [""]  # the type of `O`, and the "previous type" at a sentence start
    prefixes, types = [], []
    for tag in tags:
        prefix, entity_type = entity_metrics.split_tag(tag)
        prefixes.append(prefix_codes.get(prefix, _OTHER_PREFIX))
        if entity_type not in type_names:
            type_names.append(entity_type)
        types.append(type_names.index(entity_type))
    return prefixes, types, type_names


def entity_spans(tag_ids, tags: Sequence[str], tag_scheme: str):
    """The entities of tagged sentences, in TF ops, as `entity_metrics` reads them.

    For the IOB schemes this is `entity_metrics.entities` (conlleval's reading: a
    chunk starts at `B-X`, at `I-X` after `O` or another type, ...); for `raw` it
    is `entity_metrics.raw_entities` (every word not tagged `O` is a one-word
    entity of its tag), the same readings the task's metric uses.

    Args:
        tag_ids: int `tf.RaggedTensor` `[sentences, (words)]` of indices into `tags`.
        tags: the tag set.
        tag_scheme: `"IOB1"`, `"IOB2"` or `"raw"`.

    Returns:
        dict of flat tensors, one entry per entity in sentence then word order:
        `sentence` (int64), `first_word` and `last_word` (int64, inclusive, indices
        in the sentence) and `type` (string).
    """
    if tag_scheme not in entity_metrics.TAG_SCHEMES:
        raise ValueError(
            f"tag_scheme must be one of {entity_metrics.TAG_SCHEMES}, got {tag_scheme!r}"
        )
    flat = tag_ids.flat_values
    word_sentence = tag_ids.value_rowids()
    sentence_start = tf.gather(tag_ids.row_starts(), word_sentence)
    positions = tf.range(tf.size(flat, out_type=tf.int64), dtype=tf.int64)
    if tag_scheme == "raw":
        tag_names = tf.constant(list(tags), tf.string, shape=[len(tags)])
        chosen = tf.where(tf.not_equal(tf.gather(tag_names, flat), entity_metrics.OUTSIDE))[:, 0]
        sentence = tf.gather(word_sentence, chosen)
        word = chosen - tf.gather(sentence_start, chosen)
        return {
            "sentence": sentence,
            "first_word": word,
            "last_word": word,
            "type": tf.gather(tag_names, tf.gather(flat, chosen)),
        }
    prefix_table, type_table, type_names = _tag_tables(tags)
    prefix = tf.gather(tf.constant(prefix_table, tf.int32, shape=[len(tags)]), flat)
    entity_type = tf.gather(tf.constant(type_table, tf.int32, shape=[len(tags)]), flat)
    first = tf.equal(positions, sentence_start)
    last = tf.equal(positions, tf.gather(tag_ids.row_limits(), word_sentence) - 1)
    # Neighbours within the sentence; outside it, conlleval's sentinel `O` (type "").
    previous_prefix = tf.where(first, _OUTSIDE_PREFIX, tf.roll(prefix, 1, axis=0))
    previous_type = tf.where(first, 0, tf.roll(entity_type, 1, axis=0))
    next_prefix = tf.where(last, _OUTSIDE_PREFIX, tf.roll(prefix, -1, axis=0))
    next_type = tf.where(last, 0, tf.roll(entity_type, -1, axis=0))
    outside = tf.equal(prefix, _OUTSIDE_PREFIX)
    begin_or_inside = tf.equal(prefix, _BEGIN_PREFIX) | tf.equal(prefix, _INSIDE_PREFIX)
    # entity_metrics._start_of_chunk(previous, this) and _end_of_chunk(this, next).
    starts = (
        tf.equal(prefix, _BEGIN_PREFIX)
        | (tf.equal(previous_prefix, _OUTSIDE_PREFIX) & tf.equal(prefix, _INSIDE_PREFIX))
        | (~outside & tf.not_equal(previous_type, entity_type))
    )
    ends = (
        begin_or_inside
        & (tf.equal(next_prefix, _BEGIN_PREFIX) | tf.equal(next_prefix, _OUTSIDE_PREFIX))
    ) | (~outside & tf.not_equal(entity_type, next_type))
    start_positions = tf.where(starts)[:, 0]
    end_positions = tf.where(ends)[:, 0]
    # A chunk runs from the last start at or before its end; with none in the
    # sentence, from the sentence's first word (conlleval's `start` variable).
    latest = tf.searchsorted(start_positions[tf.newaxis], end_positions[tf.newaxis], "right")[0] - 1
    latest_start = tf.gather(
        tf.concat([[-1], start_positions], axis=0), tf.cast(latest, tf.int64) + 1
    )
    end_sentence_start = tf.gather(sentence_start, end_positions)
    return {
        "sentence": tf.gather(word_sentence, end_positions),
        "first_word": tf.maximum(latest_start, end_sentence_start) - end_sentence_start,
        "last_word": end_positions - end_sentence_start,
        "type": tf.gather(
            tf.constant(type_names, tf.string), tf.gather(entity_type, end_positions)
        ),
    }


def word_logits(windows, logits, words):
    """The logits of each word, read where `TaggingPreprocessor` reads it.

    Args:
        windows: `TaggingPreprocessor` output for `words`.
        logits: float `[windows, sequence_length, tags]`.
        words: the `[sentences, (words)]` ragged tensor the windows come from.

    Returns:
        `[sentences, (words), tags]`: one row of logits per word.
    """
    word_index = windows["word_index"]
    read = tf.where(word_index >= 0)  # [words, 2]: (window, position)
    sentence = tf.gather(tf.cast(windows["sentence_index"], tf.int64), read[:, 0])
    global_word = tf.gather(words.row_starts(), sentence) + tf.cast(
        tf.gather_nd(word_index, read), tf.int64
    )
    num_words = tf.size(words.flat_values, out_type=tf.int64)
    values = tf.gather_nd(logits, read)
    num_tags = tf.shape(logits, out_type=tf.int64)[-1]
    # Each word is read in exactly one window, so the scatter writes each row once.
    flat = tf.scatter_nd(global_word[:, tf.newaxis], values, tf.stack([num_words, num_tags]))
    return words.with_flat_values(flat)


# === Examples and reading ===


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a column file.

    Attributes:
        example_id: `"{split}-{index}"`.
        words: the words, as in the file.
        tags: one tag per word, or None for an unlabelled file.
        documents_before: `-DOCSTART-` lines between the previous sentence and this one
            (written back with the predictions).
        source: `"path:line"` of the sentence's first word (`"tfds:split[index]"` for
            tensorflow-datasets).
    """

    example_id: str
    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    documents_before: int = 0
    source: str = ""


_BLANKS = re.compile(r"[ \t]+")


def _blank_fields(line: str) -> list[str]:
    """Columns split at runs of spaces and tabs (conlleval's separators), and nothing
    else: a word may hold a no-break or ideographic space, which `str.split()` cuts."""
    line = line.strip(" \t")
    return _BLANKS.split(line) if line else []


def _fields(line: str, delimiter: str) -> list[str]:
    if delimiter == "tab":
        return [field.strip() for field in line.split("\t")]
    return _blank_fields(line)


def _is_document_start(line: str) -> bool:
    """A `-DOCSTART-` line, whatever separates its columns (allennlp's CoNLL-2003
    copy writes them with spaces among tab-separated words)."""
    fields = _blank_fields(line)
    return bool(fields) and fields[0] == DOCUMENT_START


def _detect_delimiter(lines: Sequence[tuple[int, str]]) -> tuple[str, int | None]:
    """`("tab", line)` when the tabs matter: the first word line holds a tab, and a
    line (the one returned) has as many tab-separated fields as it, but one holds a
    space or is empty (a word with spaces, an empty column), so only tabs separate
    columns. Otherwise `("space", None)`: any run of spaces and tabs, so each line
    may use either (as conlleval reads)."""
    word_lines = [(n, line) for n, line in lines if line.strip() and not _is_document_start(line)]
    if not word_lines or "\t" not in word_lines[0][1]:
        return "space", None
    count = len(_fields(word_lines[0][1], "tab"))
    for number, line in word_lines:
        if "\t" in line:
            fields = _fields(line, "tab")
            if len(fields) == count and fields != _blank_fields(line):
                return "tab", number
    return "space", None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _layout(count: int, word: int, tag: int | None) -> str:
    """The file's columns, e.g. `word ... tag` (`...`: the other columns)."""
    slots = ["..."] * count
    slots[word] = "word"
    if tag is not None:
        slots[tag] = "tag"
    return " ".join(s for i, s in enumerate(slots) if s != "..." or i == 0 or slots[i - 1] != "...")


def _column_count_error(
    path, number, line, fields, tabs_reason, expected_columns, word_column, tag_column
) -> ValueError:
    """The error for a line whose column count differs from the file's, naming what
    is missing: `path:58: the word 'EU' has no tag: 1 column where the file's lines
    have 4 (word ... tag, as on line 3)`."""
    count, first = expected_columns
    word = word_column % count
    tag = None if tag_column is None else tag_column % count
    columns = (
        f"{_plural(len(fields), 'column')} where the file's lines have {count} "
        f"({_layout(count, word, tag)}, as on line {first})"
    )
    shown = f": {line!r}"
    if len(fields) > count:
        problem = columns + ", a column too many"
    elif word >= len(fields):
        problem = "a column is missing: " + columns
    elif tag is not None and tag > word and len(fields) == word + 1:
        problem = f"the word {fields[word]!r} has no tag: " + columns
        if line.strip() == fields[word]:
            shown = ""  # the line is the word
    else:
        problem = f"the word {fields[word]!r} is missing a column: " + columns
    if tabs_reason and fields != _blank_fields(line):
        problem += f"; columns are split at tabs alone ({tabs_reason})"
    return ValueError(f"{path}:{number}: {problem}{shown}")


def _read_lines(path: str, encoding: str) -> list[tuple[int, str]]:
    """`(line number, text)` pairs; undecodable bytes raise naming the line."""
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}:{number}: not valid {encoding} ({e.reason} at byte {e.start}); "
                    "pass the file's encoding (Task(encoding=...))"
                ) from e
            lines.append((number, text.rstrip("\r\n")))
    return lines


def read_column_file(
    path: str,
    split: str,
    *,
    word_column: int = 0,
    tag_column: int = -1,
    delimiter: str = "auto",
    encoding: str = "utf-8",
    allow_unlabelled: bool = False,
    known_tags: Sequence[str] | None = None,
    known_tags_source: str = "",
) -> list[TaggedSentence]:
    """Sentences of a CoNLL-style column file.

    One word per line with space- or tab-separated columns, blank lines between
    sentences, `-DOCSTART-` lines between documents (counted, not kept as words; seen
    whatever their separator). Every line must have as many columns as the file's first
    word line.

    Args:
        path: the file.
        split: split name, for the example ids.
        word_column: index of the word column (negative counts from the end).
        tag_column: index of the tag column.
        delimiter: `"space"` (any run of spaces or tabs, as conlleval: each line may
            use either), `"tab"` (exactly one tab, so words may hold spaces) or
            `"auto"`: tab when the first word line holds one and the tabs matter (a
            line with as many tab-separated fields has one holding a space, or an
            empty one), space otherwise, so a file of tab-separated words and
            space-separated `-DOCSTART-` lines reads as the same file with spaces.
        encoding: the file's text encoding.
        allow_unlabelled: a file whose lines hold one column is read as words without
            tags (a test file to tag); otherwise a tag column is required.
        known_tags: when given, every tag must be one of these.
        known_tags_source: where `known_tags` come from, for the error message.

    Raises:
        ValueError: naming the file and line, for a line with another number of
            columns (a word with no tag names the word: `eng.train:58: the word 'EU'
            has no tag: 1 column where the file's lines have 4 (word ... tag, as on
            line 3)`), a missing tag column or a tag outside `known_tags`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    lines = _read_lines(path, encoding)
    if delimiter not in ("auto", "space", "tab"):
        raise ValueError(f"delimiter must be 'auto', 'space' or 'tab', got {delimiter!r}")
    tabs_reason = "delimiter='tab'" if delimiter == "tab" else ""  # for the errors
    if delimiter == "auto":
        delimiter, tabs_line = _detect_delimiter(lines)
        if tabs_line is not None:
            tabs_reason = f"a field of line {tabs_line} holds a space or is empty"
    known = None if known_tags is None else frozenset(known_tags)
    sentences: list[TaggedSentence] = []
    expected_columns = None  # (count, line number that set it)
    labelled = True
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    documents_before = 0

    def close_sentence():
        nonlocal words, tags, documents_before
        if words:
            sentences.append(
                TaggedSentence(
                    example_id=f"{split}-{len(sentences)}",
                    words=tuple(words),
                    tags=tuple(tags) if labelled else None,
                    documents_before=documents_before,
                    source=f"{path}:{first_line}",
                )
            )
            words, tags, documents_before = [], [], 0

    for number, line in lines:
        if not line.strip():
            close_sentence()
            continue
        if _is_document_start(line):
            close_sentence()
            documents_before += 1
            continue
        fields = _fields(line, delimiter)
        if expected_columns is None:
            if len(fields) == 1 and allow_unlabelled:
                labelled = False
            elif len(fields) < 2:
                raise ValueError(
                    f"{path}:{number}: expected a word and a tag column, found 1 column: {line!r}"
                )
            needed = 1
            if labelled:  # an unlabelled file holds the words alone
                needed = max(
                    word_column + 1 if word_column >= 0 else -word_column,
                    tag_column + 1 if tag_column >= 0 else -tag_column,
                )
            if len(fields) < needed:
                raise ValueError(
                    f"{path}:{number}: {len(fields)} columns, but word_column={word_column} "
                    f"and tag_column={tag_column} need {needed}: {line!r}"
                )
            expected_columns = (len(fields), number)
        elif len(fields) != expected_columns[0]:
            raise _column_count_error(
                path,
                number,
                line,
                fields,
                tabs_reason,
                expected_columns,
                word_column if labelled else 0,
                tag_column if labelled else None,
            )
        if not words:
            first_line = number
        words.append(fields[word_column] if labelled else fields[0])
        if labelled:
            tag = fields[tag_column]
            if known is not None and tag not in known:
                raise ValueError(
                    f"{path}:{number}: unknown tag {tag!r}; the tags are {sorted(known)}"
                    + (f" ({known_tags_source})" if known_tags_source else "")
                )
            tags.append(tag)
    close_sentence()
    return sentences


def _find_split_file(data_dir: str, candidates: Sequence[str], split: str) -> str:
    for name in candidates:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"No {split} file in {data_dir}: looked for {', '.join(candidates)}")


def _prepared_tfds_builder(name: str, data_dir: str | None):
    """A tensorflow-datasets builder for `name` already prepared in `data_dir`.

    A registered builder is used as is; otherwise the newest prepared version found
    under `data_dir/name/` is read without its builder code (`builder_from_directory`).
    Nothing is downloaded.
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
        raise FileNotFoundError(
            f"tensorflow-datasets {name!r} is not prepared in {builder.data_dir}; nothing is "
            "downloaded here: prepare it first (`tfds build`) or pass data_dir with the "
            "official files"
        )
    return builder


def _as_text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# === Keras pieces ===


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class LabelledTokenAccuracy(keras.metrics.Metric):
    """Accuracy over the positions that carry a label (label != `ignored_label`).

    For progress bars: the tagging labels sit on each word's first piece only; the
    official figure is `evaluate`'s entity F1.
    """

    def __init__(self, name="word_accuracy", ignored_label=IGNORED_LABEL, **kwargs):
        super().__init__(name=name, **kwargs)
        self.ignored_label = int(ignored_label)
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.total = self.add_variable((), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        labelled = tf.not_equal(y_true, self.ignored_label)
        if sample_weight is not None:
            labelled &= tf.cast(sample_weight, tf.bool)
        predicted = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        right = labelled & tf.equal(predicted, y_true)
        self.correct.assign_add(tf.reduce_sum(tf.cast(right, self.dtype)))
        self.total.assign_add(tf.reduce_sum(tf.cast(labelled, self.dtype)))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.total)

    def get_config(self):
        return {**super().get_config(), "ignored_label": self.ignored_label}


# === Tasks ===

TAG_SCHEME_OPTION = TaskOption(
    "tag_scheme",
    "auto",
    "Tag scheme of the data for the strict-IOB2 figures: IOB1, IOB2, raw (tags without "
    "B-/I- prefixes) or auto (detected from the gold tags).",
    choices=("auto", "IOB1", "IOB2", "raw"),
)
WINDOW_STRIDE_OPTION = TaskOption(
    "window_stride",
    64,
    "WordPieces between the starts of consecutive windows of a sentence longer than "
    "max_seq_length - 2 pieces (capped at that length: no overlap).",
)
FEATURE_BATCH_SIZE = 64  # sentences tokenized per preprocessor call


@register_task("token_classification")
class TokenClassificationTask(Task):
    """Tagging of any CoNLL-like column file (`token_classification`).

    Files in `data_dir`: `train.txt`, `dev.txt` (or `valid.txt`, `validation.txt`),
    `test.txt` (`.conll`/`.tsv` also found). One word per line, blank lines between
    sentences, `-DOCSTART-` lines kept as document marks. The tag set is read from the
    training file (`O` first, then sorted) unless `tag_set` lists it; a dev or test tag
    outside it is an error. A test file of one column is read as untagged words.

    Answers: one tag per original word (tuple of str).
    """

    text_fields = ("sentence",)
    primary_metric = "f1"
    higher_is_better = True
    label_keys = ("label",)
    default_max_seq_length = 128
    options = (
        TAG_SCHEME_OPTION,
        WINDOW_STRIDE_OPTION,
        TaskOption("word_column", 0, "Column of the word (0-based; negative from the end)."),
        TaskOption("tag_column", -1, "Column of the tag (0-based; negative from the end)."),
        TaskOption(
            "column_delimiter",
            "auto",
            "Column separator: space (runs of spaces and tabs; lines may mix them), tab, "
            "or auto (tab if the first word line holds one and a field holds a space).",
            choices=("auto", "space", "tab"),
        ),
        TaskOption(
            "tag_set",
            None,
            "Comma-separated tags in label order; default: those of the training file.",
        ),
    )

    split_files = {
        "train": ("train.txt", "train.conll", "train.tsv"),
        "dev": (
            "dev.txt",
            "valid.txt",
            "validation.txt",
            "dev.conll",
            "valid.conll",
            "dev.tsv",
        ),
        "test": ("test.txt", "test.conll", "test.tsv"),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.option_values["window_stride"] < 1:
            raise ValueError(
                f"window_stride must be >= 1, got {self.option_values['window_stride']}"
            )
        self._examples_cache: dict[str, list[TaggedSentence]] = {}
        self._tags: tuple[str, ...] | None = None
        self._tag_scheme: str | None = None  # of the training data, once known
        tag_set = self.option_values.get("tag_set")
        if tag_set:
            tags = tuple(tag.strip() for tag in tag_set.split(",") if tag.strip())
            if len(set(tags)) != len(tags):
                raise ValueError(f"tag_set lists a tag twice: {tag_set!r}")
            self._tags = tags

    # === Data ===

    def _column_options(self) -> dict:
        return {
            "word_column": self.option_values["word_column"],
            "tag_column": self.option_values["tag_column"],
            "delimiter": self.option_values["column_delimiter"],
        }

    def split_path(self, split: str) -> str:
        if self.data_dir is None:
            raise ValueError(f"{self.task_name}: data_dir with the column files is required")
        if split not in self.split_files:
            raise ValueError(
                f"{self.task_name}: unknown split {split!r}; splits: {sorted(self.split_files)}"
            )
        return _find_split_file(self.data_dir, self.split_files[split], split)

    def _read_file(self, split: str, known_tags, known_tags_source: str) -> list[TaggedSentence]:
        return read_column_file(
            self.split_path(split),
            split,
            encoding=self.encoding,
            allow_unlabelled=split != "train",
            known_tags=known_tags,
            known_tags_source=known_tags_source,
            **self._column_options(),
        )

    @property
    def tags(self) -> tuple[str, ...]:
        """The tag set in label order (label id = position)."""
        if self._tags is None:
            training = self._read_file("train", None, "")
            found = {tag for sentence in training for tag in sentence.tags}
            if not found:
                raise ValueError(f"{self.split_path('train')}: no tagged words")
            # Rejects IOBES; the scheme is kept for the state.
            scheme = entity_metrics.detect_tag_scheme([s.tags for s in training])
            if self._tag_scheme is None:
                self._tag_scheme = scheme
            ordered = sorted(found - {entity_metrics.OUTSIDE})
            if entity_metrics.OUTSIDE in found:
                ordered.insert(0, entity_metrics.OUTSIDE)
            self._tags = tuple(ordered)
            self._examples_cache["train"] = training
        return self._tags

    def _tags_source(self) -> str:
        if self.option_values.get("tag_set"):
            return "the tag_set option"
        return f"read from {self.split_path('train')}"

    def read(self, split: str) -> list[TaggedSentence]:
        if split not in self._examples_cache:
            tags = self.tags
            self._examples_cache[split] = self._read_file(split, tags, self._tags_source())
        return list(self._examples_cache[split])

    # === Features ===

    def make_preprocessor(self, tokenizer) -> TaggingPreprocessor:
        return TaggingPreprocessor(
            tokenizer,
            sequence_length=self.max_seq_length,
            window_stride=self.option_values["window_stride"],
        )

    def features(self, examples, preprocessor, *, training: bool) -> tf.data.Dataset:
        labelled = bool(examples) and all(example.tags is not None for example in examples)
        lengths = [len(example.words) for example in examples]
        flat_words = [word for example in examples for word in example.words]
        columns = {
            "words": tf.RaggedTensor.from_row_lengths(
                tf.constant(flat_words, tf.string, shape=[len(flat_words)]),
                tf.constant(lengths, tf.int64, shape=[len(lengths)]),
            ),
            "example_index": tf.range(len(examples), dtype=tf.int32),
        }
        if labelled:
            tag_to_id = {tag: index for index, tag in enumerate(self.tags)}
            flat_ids = []
            for example in examples:
                for word_number, tag in enumerate(example.tags):
                    if tag not in tag_to_id:
                        raise ValueError(
                            f"{example.source} (word {word_number}): unknown tag {tag!r}; "
                            f"the tags are {list(self.tags)}"
                        )
                    flat_ids.append(tag_to_id[tag])
            columns["tags"] = tf.RaggedTensor.from_row_lengths(
                tf.constant(flat_ids, tf.int32, shape=[len(flat_ids)]),
                tf.constant(lengths, tf.int64, shape=[len(lengths)]),
            )
        dataset = tf.data.Dataset.from_tensor_slices(columns).batch(FEATURE_BATCH_SIZE)
        dataset = dataset.map(
            functools.partial(_window_features, preprocessor=preprocessor),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return dataset.unbatch()

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertTokenClassifier

        return BertTokenClassifier(encoder, num_classes=len(self.tags))

    def loss(self):
        # Labels are -1 except on each word's first piece in its chosen window:
        # `ignore_class` averages over the labelled positions only.
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORED_LABEL
        )

    def metrics(self) -> list:
        return [LabelledTokenAccuracy()]

    # === Answers ===

    def postprocess(self, outputs, meta, examples) -> list[tuple[str, ...]]:
        logits = np.asarray(outputs)
        example_index = np.asarray(meta["example_index"])
        word_index = np.asarray(meta["word_index"])
        lengths = np.array([len(example.words) for example in examples], np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        rows, positions = np.nonzero(word_index >= 0)
        words = offsets[example_index[rows]] + word_index[rows, positions]
        predicted = np.full(offsets[-1], -1, np.int64)
        predicted[words] = logits[rows, positions].argmax(axis=-1)
        counts = np.bincount(words, minlength=offsets[-1])
        if offsets[-1] and (counts.min() != 1 or counts.max() != 1):
            missing = int(np.argmin(counts))
            raise RuntimeError(
                f"{self.task_name}: word {missing} of the batch was read "
                f"{counts[missing]} times; features and examples do not match"
            )
        tags = np.array(self.tags, dtype=object)
        return [
            tuple(tags[predicted[offsets[i] : offsets[i + 1]]].tolist())
            for i in range(len(examples))
        ]

    def tag_scheme(self, examples) -> str:
        """The scheme `evaluate` reads `examples` with: the option, else detected."""
        scheme = self.option_values["tag_scheme"]
        if scheme != "auto":
            return scheme
        return entity_metrics.detect_tag_scheme([example.tags for example in examples])

    @property
    def training_tag_scheme(self) -> str:
        """The tag scheme of the training data: the `tag_scheme` option, else the
        restored state, else detected from the training file. `raw` makes the served
        entities one word each (`entity_spans`)."""
        option = self.option_values["tag_scheme"]
        if option != "auto":
            return option
        if self._tag_scheme is None:
            training = self.read("train")
            self._tag_scheme = entity_metrics.detect_tag_scheme([s.tags for s in training])
        return self._tag_scheme

    def evaluate(self, answers, examples) -> dict[str, float]:
        if len(answers) != len(examples):
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
        unlabelled = [example.source for example in examples if example.tags is None]
        if unlabelled:
            raise ValueError(f"Cannot evaluate unlabelled sentences (first: {unlabelled[0]})")
        gold = [list(example.tags) for example in examples]
        predicted = [list(answer) for answer in answers]
        return entity_metrics.conll_report(gold, predicted, self.tag_scheme(examples))

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_{split}.txt`: conlleval's input.

        One line per original word, `word gold predicted` (`word predicted` for an
        unlabelled split), space-separated (tab-separated when a word holds a space),
        a blank line after each sentence, and each `-DOCSTART-` line of the input
        written back as `-DOCSTART- O O` followed by a blank line. Score it with
        `conlleval < predictions_dev.txt` (add `-d "\\t"` for a tab-separated file).
        """
        if len(answers) != len(examples):
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
        labelled = all(example.tags is not None for example in examples)
        spaced = any(" " in word for example in examples for word in example.words)
        delimiter = "\t" if spaced else " "
        outside = [entity_metrics.OUTSIDE] * (2 if labelled else 1)
        path = os.path.join(output_dir, f"predictions_{split}.txt")
        with atomic_open(path, encoding="utf-8") as f:
            for example, answer in zip(examples, answers, strict=True):
                if len(answer) != len(example.words):
                    raise ValueError(
                        f"{example.source}: {len(answer)} predicted tags for "
                        f"{len(example.words)} words"
                    )
                for _ in range(example.documents_before):
                    f.write(delimiter.join([DOCUMENT_START, *outside]) + "\n\n")
                for index, (word, predicted) in enumerate(zip(example.words, answer, strict=True)):
                    columns = (
                        [word, example.tags[index], predicted] if labelled else [word, predicted]
                    )
                    f.write(delimiter.join(columns) + "\n")
                f.write("\n")
        return [path]

    # === Raw text ===

    def examples_from_texts(self, texts: Sequence[str | bytes], split: str = "input"):
        """Untagged `TaggedSentence`s from raw sentences, split into words as the
        exported model splits them (`split_words`)."""
        texts = list(texts)
        words, _, _ = split_words(tf.constant(texts, tf.string, shape=[len(texts)]))
        return [
            TaggedSentence(
                example_id=f"{split}-{index}",
                words=tuple(word.decode("utf-8") for word in row),
                tags=None,
                source=f"{split} item {index}",
            )
            for index, row in enumerate(words.to_list())
        ]

    # === State ===

    def state(self) -> dict:
        """`{"tags": [...], "tag_scheme": "IOB1" | "IOB2" | "raw"}`: the label order of
        the head and the scheme of the training data (`training_tag_scheme`)."""
        return {"tags": list(self.tags), "tag_scheme": self.training_tag_scheme}

    def load_state(self, state) -> None:
        state = dict(state)
        if not state:
            return
        tags = tuple(state.get("tags") or ())
        if not tags or not all(isinstance(tag, str) and tag for tag in tags):
            raise ValueError(f"{self.task_name}: the saved state has no valid tags: {state}")
        if len(set(tags)) != len(tags):
            raise ValueError(f"{self.task_name}: the saved tags list a tag twice: {list(tags)}")
        if self._tags is not None and self._tags != tags:
            raise ValueError(
                f"{self.task_name}: the saved model's tags {list(tags)} differ from this "
                f"task's {list(self._tags)} (a model fine-tuned on another tag set?)"
            )
        scheme = state.get("tag_scheme")
        if scheme not in entity_metrics.TAG_SCHEMES:
            raise ValueError(
                f"{self.task_name}: the saved tag_scheme {scheme!r} is not one of "
                f"{entity_metrics.TAG_SCHEMES}"
            )
        option = self.option_values["tag_scheme"]
        if option != "auto" and option != scheme:
            raise ValueError(
                f"{self.task_name}: tag_scheme={option} but the saved model was trained "
                f"on {scheme} tags"
            )
        self._tags, self._tag_scheme = tags, scheme

    # === Serving ===

    def serving_outputs(self, model, preprocessor):
        """`fn(sentence)`: raw sentences (string `[batch]`) -> words, tags and entities.

        See the module docstring for the output schema. The words are those of
        `split_words`; their tags are what `postprocess` answers for them, and the
        entities those `entity_metrics` reads from the tags (`entity_spans`).
        """
        tags = list(self.tags)
        tag_scheme = self.training_tag_scheme
        input_names = self.model_input_names()

        def serve(*args, **kwargs):
            (sentence,) = _named_texts(self.text_fields, args, kwargs)
            text = valid_utf8(tf.convert_to_tensor(sentence))
            words, starts, ends = split_words(text)
            windows = preprocessor(words)
            logits = model({name: windows[name] for name in input_names}, training=False)
            logits = word_logits(windows, tf.cast(logits, tf.float32), words)
            tag_ids = tf.argmax(logits.flat_values, axis=-1, output_type=tf.int32)
            tag_probability = tf.reduce_max(tf.nn.softmax(logits.flat_values, axis=-1), axis=-1)
            tag_ids = words.with_flat_values(tag_ids)
            batch = tf.shape(text, out_type=tf.int64)[0]

            entities = entity_spans(tag_ids, tags, tag_scheme)
            first = tf.gather(words.row_starts(), entities["sentence"]) + entities["first_word"]
            last = tf.gather(words.row_starts(), entities["sentence"]) + entities["last_word"]
            entity_start = tf.gather(starts.flat_values, first)
            entity_end = tf.gather(ends.flat_values, last)
            entity_words = tf.ragged.range(first, last + 1)
            entity_score = tf.reduce_mean(
                entity_words.with_flat_values(tf.gather(tag_probability, entity_words.flat_values)),
                axis=1,
            )
            entity_text = tf.strings.substr(
                tf.gather(text, entities["sentence"]),
                entity_start,
                entity_end - entity_start,
                unit="UTF8_CHAR",
            )

            def per_entity(values, padding):
                return tf.RaggedTensor.from_value_rowids(
                    values, entities["sentence"], nrows=batch
                ).to_tensor(padding)

            def per_word(ragged, padding):
                return ragged.to_tensor(padding)

            return {
                "word_count": tf.cast(words.row_lengths(), tf.int32),
                "words": per_word(words, ""),
                "word_start": per_word(tf.cast(starts, tf.int32), -1),
                "word_end": per_word(tf.cast(ends, tf.int32), -1),
                "word_tags": per_word(tf.gather(tf.constant(tags), tag_ids), ""),
                "word_score": per_word(words.with_flat_values(tag_probability), 0.0),
                "entity_count": tf.math.bincount(
                    tf.cast(entities["sentence"], tf.int32),
                    minlength=tf.cast(batch, tf.int32),
                    maxlength=tf.cast(batch, tf.int32),
                    dtype=tf.int32,
                ),
                "entity_type": per_entity(entities["type"], ""),
                "entity_start": per_entity(tf.cast(entity_start, tf.int32), -1),
                "entity_end": per_entity(tf.cast(entity_end, tf.int32), -1),
                "entity_text": per_entity(entity_text, ""),
                "entity_score": per_entity(entity_score, 0.0),
            }

        return serve


def _named_texts(text_fields, args, kwargs) -> list:
    """The serving function's texts in `text_fields` order, given by position or name."""
    if args and kwargs:
        raise ValueError(f"Pass the texts {list(text_fields)} all by position or all by name")
    if args:
        if len(args) != len(text_fields):
            raise ValueError(
                f"Expected {len(text_fields)} texts {list(text_fields)}, got {len(args)}"
            )
        return list(args)
    if set(kwargs) != set(text_fields):
        raise ValueError(f"Expected the texts {list(text_fields)}, got {sorted(kwargs)}")
    return [kwargs[name] for name in text_fields]


def _window_features(batch, preprocessor):
    """A batch of sentences -> one row per window, with labels and metadata."""
    windows = dict(preprocessor(batch["words"]))
    sentence = windows.pop("sentence_index")
    word_index = windows["word_index"]
    features = {
        **windows,
        "example_index": tf.gather(batch["example_index"], sentence),
    }
    if "tags" in batch:
        tags = batch["tags"]
        # One IGNORED_LABEL appended so positions without a word gather something.
        flat_tags = tf.concat([tags.flat_values, [IGNORED_LABEL]], axis=0)
        flat_index = tf.where(
            word_index >= 0,
            tf.cast(tf.gather(tags.row_starts(), sentence), tf.int32)[:, tf.newaxis] + word_index,
            tf.size(tags.flat_values),
        )
        features["label"] = tf.gather(flat_tags, flat_index)
    return features


@register_task("conll2003")
class Conll2003Task(TokenClassificationTask):
    """CoNLL-2003 English NER (`conll2003`).

    Reads the official column files `token POS chunk NER` (`eng.train`, `eng.testa`,
    `eng.testb`) or the common copies (`train.txt`, `valid.txt`, `test.txt`), with the
    original IOB1 tags or IOB2 ones (detected for the strict figures, or `tag_scheme`);
    without `data_dir`, the tensorflow-datasets `conll2003` prepared in
    `tfds_data_dir`. Tags: the nine of PER/ORG/LOC/MISC; any other is an error.
    The test split (eng.testb) is labelled, so predict mode also scores it.
    """

    options = (TAG_SCHEME_OPTION, WINDOW_STRIDE_OPTION)
    split_files = {
        "train": ("eng.train", "train.txt"),
        "dev": ("eng.testa", "valid.txt", "dev.txt"),
        "test": ("eng.testb", "test.txt"),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.option_values["tag_scheme"] == "raw":
            raise ValueError("conll2003 tags are IOB1 or IOB2; tag_scheme='raw' does not apply")
        self._tags = CONLL2003_TAGS

    def _column_options(self) -> dict:
        return {"word_column": 0, "tag_column": -1, "delimiter": "auto"}

    def _tags_source(self) -> str:
        return "CoNLL-2003 NER tags"

    def load_state(self, state) -> None:
        scheme = dict(state).get("tag_scheme")
        if state and scheme not in ("IOB1", "IOB2"):
            raise ValueError(f"conll2003: the saved tag_scheme {scheme!r} is not IOB1 or IOB2")
        super().load_state(state)

    def read(self, split: str) -> list[TaggedSentence]:
        if self.data_dir is not None:
            return super().read(split)
        if split not in self._examples_cache:
            self._examples_cache[split] = self._read_tfds(split)
        return list(self._examples_cache[split])

    def _read_tfds(self, split: str) -> list[TaggedSentence]:
        from keras_bert_zoo.data import tfds_dataset

        builder = _prepared_tfds_builder("conll2003", self.tfds_data_dir)
        names = builder.info.features["ner"].feature.names
        unknown = sorted(set(names) - set(CONLL2003_TAGS))
        if unknown:
            raise ValueError(f"tensorflow-datasets conll2003: unknown NER tags {unknown}")
        sentences = []
        for index, record in enumerate(tfds_dataset(builder, split).as_numpy_iterator()):
            sentences.append(
                TaggedSentence(
                    example_id=f"{split}-{index}",
                    words=tuple(_as_text(word) for word in record["tokens"]),
                    tags=tuple(names[tag] for tag in record["ner"]),
                    source=f"tfds conll2003 {split}[{index}]",
                )
            )
        logging.info("Read %d sentences of tfds conll2003 %s", len(sentences), split)
        return sentences
