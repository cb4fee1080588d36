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

Serving (`serving_outputs`, the exported model): raw sentences in; their words, tags
and entities out, with character offsets (the schema: `serving`).

The task holds the settings, the tag set and the contract; each step's work lives
beside it: `options`, `reader` (the column files), `features` (sentences -> labelled
windows), `answers` (window logits -> a tag per word), `metrics` (conlleval's entity
F1), `prediction_file` (conlleval's input) and `serving`.

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
import tensorflow as tf

from keras_bert_zoo.tasks._shared import split_file_path
from keras_bert_zoo.tasks.distillation import (
    SOFT_TOKEN_CLASSES,
    TRANSFER_EXAMPLE_ID,
    SoftTargetKind,
)
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.tagging.answers import word_tags
from keras_bert_zoo.tasks.tagging.features import all_tagged, tagged_windows
from keras_bert_zoo.tasks.tagging.metrics import (
    IGNORED_LABEL,
    OUTSIDE,
    TAG_SCHEMES,
    LabelledTokenAccuracy,
    conll_report,
    detect_tag_scheme,
)
from keras_bert_zoo.tasks.tagging.options import TOKEN_CLASSIFICATION_OPTIONS
from keras_bert_zoo.tasks.tagging.prediction_file import write_conll_predictions
from keras_bert_zoo.tasks.tagging.preprocessor import TaggingPreprocessor, split_words
from keras_bert_zoo.tasks.tagging.reader import (
    TaggedSentence,
    read_column_file,
    split_blank_separated,
)
from keras_bert_zoo.tasks.tagging.serving import answer_fn
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

# Names that moved to the modules of their concept (docs/api-changes.md); the old
# names warn for one release.
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.tasks.tagging.options", "keras_bert_zoo.tasks.tagging.features"],
    only=("TAG_SCHEME_OPTION", "WINDOW_STRIDE_OPTION", "FEATURE_BATCH_SIZE"),
)


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
    options = TOKEN_CLASSIFICATION_OPTIONS

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
        return split_file_path(self, split, "column files")

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
        """One element per window (`features.tagged_windows`): the model inputs,
        `word_index`, `example_index` and, when every sentence is tagged, `label`."""
        tags = self.tags if all_tagged(examples) else None
        return tagged_windows(examples, preprocessor, tags)

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
        """One tag per original word (`answers.word_tags`)."""
        return word_tags(
            outputs,
            meta["example_index"],
            meta["word_index"],
            examples,
            self.tags,
            task_name=self.task_name,
        )

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
        """Writes `predictions_{split}.txt`: conlleval's input, one line per original
        word, `word gold predicted` (see `prediction_file`)."""
        path = os.path.join(output_dir, f"predictions_{split}.txt")
        return [write_conll_predictions(answers, examples, path)]

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
        """`fn(sentence)`: raw sentences (string `[batch]`) -> words, tags and entities
        (`serving.answer_fn`, which gives the output schema)."""
        return answer_fn(
            model,
            preprocessor,
            text_fields=self.text_fields,
            input_names=self.model_input_names(),
            tags=self.tags,
            tag_scheme=self.training_tag_scheme,
        )
