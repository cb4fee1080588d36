"""Token tagging of any CoNLL-like column file (`token_classification`).

Metric: entity-level precision/recall/F1 with conlleval semantics (`f1` is primary;
see `metrics.conll_report`, which also reports seqeval's strict IOB2 mode and
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
tags as the task's metric reads them (`metrics.entities`, conlleval: `I-X` after `O`
or another type starts an entity; for `raw` tags every word not tagged `O` is one).
Offsets are CHARACTER (code point) offsets into the sentence, end exclusive:
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

task = tasks.create_task("token_classification", data_dir="ner/")  # train.txt ...
examples = task.read("dev")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(encoder)
answers = tasks.predict(task, model, examples, preprocessor)  # one tag per word
print(task.evaluate(answers, examples)["f1"])
task.write_predictions(answers, examples, "out/", "dev")  # out/predictions_dev.txt
```
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks._shared import features_in_batches, find_split_file, named_texts
from keras_bert_zoo.tasks.distillation import (
    SOFT_TOKEN_CLASSES,
    TRANSFER_EXAMPLE_ID,
    SoftTargetKind,
)
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.tagging.metrics import (
    IGNORED_LABEL,
    OUTSIDE,
    TAG_SCHEMES,
    LabelledTokenAccuracy,
    conll_report,
    detect_tag_scheme,
)
from keras_bert_zoo.tasks.tagging.preprocessor import TaggingPreprocessor, split_words
from keras_bert_zoo.tasks.tagging.reader import (
    DOCUMENT_START,
    TaggedSentence,
    read_column_file,
    split_blank_separated,
)
from keras_bert_zoo.tasks.tagging.spans import entity_spans, word_logits
from keras_bert_zoo.tasks.task import Task, TaskOption
from keras_bert_zoo.text.offsets import valid_utf8
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

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
            raise UserError(
                f"window_stride must be >= 1, got {self.option_values['window_stride']}"
            )
        self._examples_cache: dict[str, list[TaggedSentence]] = {}
        self._tags: tuple[str, ...] | None = None
        self._tag_scheme: str | None = None  # of the training data, once known
        tag_set = self.option_values.get("tag_set")
        if tag_set:
            tags = tuple(tag.strip() for tag in tag_set.split(",") if tag.strip())
            if len(set(tags)) != len(tags):
                raise UserError(f"tag_set lists a tag twice: {tag_set!r}")
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
            raise UserError(f"{self.task_name}: data_dir with the column files is required")
        if split not in self.split_files:
            raise UserError(
                f"{self.task_name}: unknown split {split!r}; splits: {sorted(self.split_files)}"
            )
        return find_split_file(self.data_dir, self.split_files[split], split)

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
                raise UserError(f"{self.split_path('train')}: no tagged words")
            # Rejects IOBES; the scheme is kept for the state.
            scheme = detect_tag_scheme([s.tags for s in training])
            if self._tag_scheme is None:
                self._tag_scheme = scheme
            ordered = sorted(found - {OUTSIDE})
            if OUTSIDE in found:
                ordered.insert(0, OUTSIDE)
            self._tags = tuple(ordered)
            self._examples_cache["train"] = training
        return self._tags

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """The tags, one per class of the head's output (`tags`) once they are known
        (the `tag_set` option, a restored state or the training file already read),
        else None.

        Serving reads this property; it never reads data, so it never raises.
        """
        return None if self._tags is None else tuple(self._tags)

    def _tags_source(self) -> str:
        if self.option_values.get("tag_set"):
            return "the tag_set option"
        return f"read from {self.split_path('train')}"

    def read(self, split: str) -> list[TaggedSentence]:
        if split not in self._examples_cache:
            tags = self.tags
            self._examples_cache[split] = self._read_file(split, tags, self._tags_source())
        return list(self._examples_cache[split])

    # The file names `read_transfer_file` reads as column files rather than lines.
    transfer_column_suffixes = (".conll",)

    def read_transfer_file(self, path: str) -> list[TaggedSentence]:
        """Untagged sentences for a teacher to tag (distillation's transfer set).

        Either one sentence per line, its words separated by spaces (the single field
        `sentence`: a tab in a line is an error), or (a path ending in `.conll`) a
        column file read as the task's own files are (one word per line, blank lines
        between sentences, `word_column`/`tag_column`; a file of one column is words
        alone), whose tags, if any, are dropped: the teacher gives the targets.
        Example `n` (from 0) is `transfer-{n}`, without tags (`tags` None), as an
        unlabelled test sentence.

        Words are taken as written: to match the training data, write them as it does
        (CoNLL-2003 makes punctuation a word of its own: `EU rejects German call .`).

        Args:
            path: the file.

        Raises:
            FileNotFoundError: `path` does not exist.
            ValueError: naming `path:line`, for a line holding a tab, or a column file's
                malformed line; an empty file (naming it).
        """
        if not path.lower().endswith(self.transfer_column_suffixes):
            return super().read_transfer_file(path)
        sentences = read_column_file(
            path,
            "transfer",
            encoding=self.encoding,
            allow_unlabelled=True,
            **self._column_options(),
        )
        if not sentences:
            raise UserError(f"{path}: no sentences (expected the {self.task_name} transfer file)")
        return [
            TaggedSentence(
                example_id=TRANSFER_EXAMPLE_ID.format(n),
                words=sentence.words,
                tags=None,
                documents_before=sentence.documents_before,
                source=sentence.source,
            )
            for n, sentence in enumerate(sentences)
        ]

    def transfer_example(
        self, example_id: str, fields: tuple[str, ...], source: str
    ) -> TaggedSentence:
        """An untagged `TaggedSentence` of a transfer line: its words are separated by
        runs of spaces (as the column files' fields; a no-break space stays in its
        word).

        Args:
            example_id: `transfer-{n}`.
            fields: `(sentence,)`.
            source: `"path:line"`.
        """
        (sentence,) = fields
        return TaggedSentence(
            example_id=example_id,
            words=tuple(split_blank_separated(sentence)),
            tags=None,
            source=source,
        )

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
                        raise UserError(
                            f"{example.source} (word {word_number}): unknown tag {tag!r}; "
                            f"the tags are {list(self.tags)}"
                        )
                    flat_ids.append(tag_to_id[tag])
            columns["tags"] = tf.RaggedTensor.from_row_lengths(
                tf.constant(flat_ids, tf.int32, shape=[len(flat_ids)]),
                tf.constant(lengths, tf.int64, shape=[len(lengths)]),
            )
        return features_in_batches(columns, _window_features, preprocessor, FEATURE_BATCH_SIZE)

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertTokenClassifier

        return BertTokenClassifier(encoder, num_classes=len(self.tags))

    def soft_targets(self) -> SoftTargetKind:
        """`"token_classes"`: `BertTokenClassifier`'s `[windows, seq_len, num_tags]`
        logits, a softmax over the tags at every real token (`input_mask == 1`), not
        only at the words' first pieces that the hard labels sit on."""
        return SOFT_TOKEN_CLASSES

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
        return detect_tag_scheme([example.tags for example in examples])

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
            self._tag_scheme = detect_tag_scheme([s.tags for s in training])
        return self._tag_scheme

    def evaluate(self, answers, examples) -> dict[str, float]:
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        unlabelled = [example.source for example in examples if example.tags is None]
        if unlabelled:
            raise UserError(f"Cannot evaluate unlabelled sentences (first: {unlabelled[0]})")
        gold = [list(example.tags) for example in examples]
        predicted = [list(answer) for answer in answers]
        return conll_report(gold, predicted, self.tag_scheme(examples))

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_{split}.txt`: conlleval's input.

        One line per original word, `word gold predicted` (`word predicted` for an
        unlabelled split), space-separated (tab-separated when a word holds a space),
        a blank line after each sentence, and each `-DOCSTART-` line of the input
        written back as `-DOCSTART- O O` followed by a blank line. Score it with
        `conlleval < predictions_dev.txt` (add `-d "\\t"` for a tab-separated file).
        """
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        labelled = all(example.tags is not None for example in examples)
        spaced = any(" " in word for example in examples for word in example.words)
        delimiter = "\t" if spaced else " "
        outside = [OUTSIDE] * (2 if labelled else 1)
        path = os.path.join(output_dir, f"predictions_{split}.txt")
        with atomic_open(path, encoding="utf-8") as f:
            for example, answer in zip(examples, answers, strict=True):
                if len(answer) != len(example.words):
                    raise UserError(
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
            raise UserError(f"{self.task_name}: the saved state has no valid tags: {state}")
        if len(set(tags)) != len(tags):
            raise UserError(f"{self.task_name}: the saved tags list a tag twice: {list(tags)}")
        if self._tags is not None and self._tags != tags:
            raise UserError(
                f"{self.task_name}: the saved model's tags {list(tags)} differ from this "
                f"task's {list(self._tags)} (a model fine-tuned on another tag set?)"
            )
        scheme = state.get("tag_scheme")
        if scheme not in TAG_SCHEMES:
            raise UserError(
                f"{self.task_name}: the saved tag_scheme {scheme!r} is not one of {TAG_SCHEMES}"
            )
        option = self.option_values["tag_scheme"]
        if option != "auto" and option != scheme:
            raise UserError(
                f"{self.task_name}: tag_scheme={option} but the saved model was trained "
                f"on {scheme} tags"
            )
        self._tags, self._tag_scheme = tags, scheme

    # === Serving ===

    def serving_outputs(self, model, preprocessor):
        """`fn(sentence)`: raw sentences (string `[batch]`) -> words, tags and entities.

        See the module docstring for the output schema. The words are those of
        `split_words`; their tags are what `postprocess` answers for them, and the
        entities those `metrics.entities` reads from the tags (`entity_spans`).
        """
        tags = list(self.tags)
        tag_scheme = self.training_tag_scheme
        input_names = self.model_input_names()

        def serve(*args, **kwargs):
            (sentence,) = named_texts(self.text_fields, args, kwargs)
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
