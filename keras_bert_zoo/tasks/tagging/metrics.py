"""Tagging metrics: entity-level precision, recall and F1 (NER, chunking), and the
word accuracy shown while training.

Restates the CoNLL shared tasks' official scorer, `conlleval` (Tjong Kim Sang, version
2004-01-26), for the tag sets NER uses, and seqeval's strict IOB2 mode beside it.

Tags are `O` or `PREFIX-TYPE` with PREFIX `B` or `I` (the type may itself hold
hyphens: `B-MISC-X` has type `MISC-X`, as conlleval splits at the first hyphen).

* **conlleval semantics** (`entities`): a chunk starts at `B-X`, and at `I-X` when the
  previous tag is `O` or of another type; it ends before `O`, `B-*` or a tag of another
  type. So `I-X` without a preceding `B-X` starts an entity, which reads both IOB1
  (the original CoNLL-2003 files, `B-` only between adjacent entities of one type) and
  IOB2 (`B-` at every entity start) correctly.
* **strict IOB2** (`strict_iob2_entities`): an entity is `B-X` followed by the longest
  run of `I-X`; an `I-X` that does not continue a `B-X`/`I-X` run belongs to no entity.
  This is seqeval's `mode="strict", scheme=IOB2`, and penalises predictions that are
  not well-formed IOB2.
* **raw tags** (`raw_entities`, conlleval `-r`): tags without prefixes (`NN`, `PER`);
  every word not tagged `O` is a one-word chunk of its tag.

Entities never cross sentences. A predicted entity is correct when its type, first
and last word equal a gold entity's. Precision = correct / predicted, recall =
correct / gold, F1 = 2PR / (P + R), each 0 when its denominator is 0, as conlleval
reports them (as fractions here, not percentages). `conll_report` is what the tagging
tasks' `evaluate` returns (`f1` is primary).

`LabelledTokenAccuracy` is the Keras metric of the progress bars: the accuracy over
the positions that carry a label (each word's first piece in its chosen window).

Example:

```python
from keras_bert_zoo.tasks.tagging import metrics

gold = [["B-PER", "I-PER", "O", "I-LOC"]]
predicted = [["B-PER", "I-PER", "O", "O"]]
scores = metrics.entity_scores(gold, predicted)
scores.f1, scores.per_type["PER"].f1  # 0.666..., 1.0
```
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError

OUTSIDE = "O"
TAG_SCHEMES = ("IOB1", "IOB2", "raw")
IGNORED_LABEL = -1  # positions that read no word: the loss and the accuracy skip them

Entity = tuple[str, int, int]  # (type, first word, last word), inclusive

# Prefixes of IOBES / BILOU, which these metrics do not read.
_OTHER_SCHEME_PREFIXES = ("E", "S", "L", "U")


def split_tag(tag: str) -> tuple[str, str]:
    """`(prefix, type)` as conlleval splits a tag: at its first hyphen, if any."""
    prefix, hyphen, entity_type = tag.partition("-")
    return (prefix, entity_type) if hyphen else (tag, "")


def is_prefixed_tag(tag: str) -> bool:
    """True for `O`, `B-X` and `I-X` (and untyped `B`, `I`): the tags of IOB1/IOB2."""
    return tag == OUTSIDE or split_tag(tag)[0] in ("B", "I")


# === Chunking ===


def _end_of_chunk(previous_prefix, prefix, previous_type, entity_type) -> bool:
    # conlleval's endOfChunk restricted to the B/I/O prefixes.
    if previous_prefix in ("B", "I") and prefix in ("B", OUTSIDE):
        return True
    return previous_prefix != OUTSIDE and previous_type != entity_type


def _start_of_chunk(previous_prefix, prefix, previous_type, entity_type) -> bool:
    # conlleval's startOfChunk restricted to the B/I/O prefixes.
    if prefix == "B":
        return True
    if previous_prefix == OUTSIDE and prefix == "I":
        return True
    return prefix != OUTSIDE and previous_type != entity_type


def entities(tags: Sequence[str]) -> list[Entity]:
    """The entities of one sentence with conlleval semantics (`I-X` may start one).

    Args:
        tags: the sentence's tags, `O`, `B-X` or `I-X`.

    Returns:
        list of `(type, first, last)` word indices (inclusive), in order.
    """
    found: list[Entity] = []
    previous_prefix, previous_type = OUTSIDE, ""
    start = 0
    # A trailing "O" closes an entity that reaches the sentence end.
    for index, tag in enumerate([*tags, OUTSIDE]):
        prefix, entity_type = split_tag(tag)
        if _end_of_chunk(previous_prefix, prefix, previous_type, entity_type):
            found.append((previous_type, start, index - 1))
        if _start_of_chunk(previous_prefix, prefix, previous_type, entity_type):
            start = index
        previous_prefix, previous_type = prefix, entity_type
    return found


def strict_iob2_entities(tags: Sequence[str]) -> list[Entity]:
    """The entities of one sentence read as strict IOB2: `B-X` then a run of `I-X`.

    An `I-X` that continues no `B-X`/`I-X` run of type X starts nothing.
    """
    found: list[Entity] = []
    index = 0
    while index < len(tags):
        prefix, entity_type = split_tag(tags[index])
        if prefix != "B":
            index += 1
            continue
        end = index + 1
        while end < len(tags) and split_tag(tags[end]) == ("I", entity_type):
            end += 1
        found.append((entity_type, index, end - 1))
        index = end
    return found


def raw_entities(tags: Sequence[str]) -> list[Entity]:
    """conlleval `-r`: every word not tagged `O` is a one-word entity of its tag."""
    return [(tag, index, index) for index, tag in enumerate(tags) if tag != OUTSIDE]


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """The same entities (conlleval reading) written in IOB2: `B-` at every start."""
    converted = [OUTSIDE] * len(tags)
    for entity_type, first, last in entities(tags):
        converted[first] = f"B-{entity_type}"
        for index in range(first + 1, last + 1):
            converted[index] = f"I-{entity_type}"
    return converted


def detect_tag_scheme(sentences: Sequence[Sequence[str]]) -> str:
    """`"IOB1"`, `"IOB2"` or `"raw"` from the tags of gold sentences.

    Tags without `B-`/`I-` prefixes (POS tags such as `NN` or `-LRB-`) are `raw`.
    Otherwise an entity opened by `I-X` (after `O`, another type or the sentence
    start) is IOB1's mark, and a `B-X` that
    follows no X entity is IOB2's (IOB1 writes `B-X` only between two adjacent X
    entities). Data with neither mark (no entities, or only single `B-X` after `X`)
    read the same under both: IOB2. Data with both (IOB2 with stray `I-` starts)
    take the scheme with more marks, ties IOB2.

    Raises:
        ValueError: for a mix of prefixed and unprefixed non-`O` tags, or a prefix
            other than B/I (IOBES and BILOU are not supported).
    """
    prefixed = unprefixed = 0
    iob1_marks = iob2_marks = 0
    bad: list[str] = []
    for tags in sentences:
        previous_type = None  # type of the previous tag's entity, None after O
        for tag in tags:
            if tag == OUTSIDE:
                previous_type = None
                continue
            prefix, entity_type = split_tag(tag)
            if prefix in ("B", "I"):
                prefixed += 1
                if prefix == "I" and previous_type != entity_type:
                    iob1_marks += 1
                elif prefix == "B" and previous_type != entity_type:
                    iob2_marks += 1
                previous_type = entity_type
            elif prefix in _OTHER_SCHEME_PREFIXES and entity_type:
                bad.append(tag)
            else:
                unprefixed += 1
                previous_type = None
    if bad or (prefixed and unprefixed):
        examples = sorted(set(bad))[:5] or ["prefixed and unprefixed tags mixed"]
        raise UserError(
            f"Unsupported tag scheme: {examples}. Tags must be IOB1/IOB2 (O, B-X, I-X) "
            "or raw tags without prefixes."
        )
    if unprefixed:
        return "raw"
    return "IOB1" if iob1_marks > iob2_marks else "IOB2"


# === Scores ===


@dataclasses.dataclass(frozen=True)
class PrecisionRecallF1:
    """Counts and scores of one entity type, or of all of them."""

    correct: int
    predicted: int
    gold: int

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        precision, recall = self.precision, self.recall
        if precision + recall == 0:
            return 0.0
        return 2 * precision * recall / (precision + recall)


@dataclasses.dataclass(frozen=True)
class EntityScores(PrecisionRecallF1):
    """Overall counts and scores plus `per_type` (type -> `PrecisionRecallF1`)."""

    per_type: dict[str, PrecisionRecallF1] = dataclasses.field(default_factory=dict)


_EXTRACTORS: dict[str, Callable[[Sequence[str]], list[Entity]]] = {
    "conlleval": entities,
    "strict_iob2": strict_iob2_entities,
    "raw": raw_entities,
}


def entity_scores(
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
    mode: str = "conlleval",
) -> EntityScores:
    """Entity precision/recall/F1 of `predicted` against `gold`, overall and per type.

    Args:
        gold: tags per sentence.
        predicted: tags per sentence, the same lengths.
        mode: `"conlleval"` (conlleval's reading, the CoNLL-2003 figure),
            `"strict_iob2"` (seqeval's strict IOB2 mode) or `"raw"` (conlleval `-r`).

    Returns:
        `EntityScores`; `per_type` holds every type found in gold or predictions.
    """
    if mode not in _EXTRACTORS:
        raise UserError(f"mode must be one of {sorted(_EXTRACTORS)}, got {mode!r}")
    if len(gold) != len(predicted):
        raise UserError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    extract = _EXTRACTORS[mode]
    correct: Counter = Counter()
    found_gold: Counter = Counter()
    found_predicted: Counter = Counter()
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
        if len(gold_tags) != len(predicted_tags):
            raise UserError(
                f"Sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted"
            )
        gold_entities = set(extract(gold_tags))
        predicted_entities = set(extract(predicted_tags))
        found_gold.update(entity[0] for entity in gold_entities)
        found_predicted.update(entity[0] for entity in predicted_entities)
        correct.update(entity[0] for entity in gold_entities & predicted_entities)
    per_type = {
        entity_type: PrecisionRecallF1(
            correct=correct[entity_type],
            predicted=found_predicted[entity_type],
            gold=found_gold[entity_type],
        )
        for entity_type in sorted(set(found_gold) | set(found_predicted))
    }
    return EntityScores(
        correct=sum(correct.values()),
        predicted=sum(found_predicted.values()),
        gold=sum(found_gold.values()),
        per_type=per_type,
    )


def tag_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Fraction of words whose predicted tag equals the gold tag."""
    total = sum(len(tags) for tags in gold)
    if total == 0:
        return 0.0
    right = sum(
        g == p
        for gold_tags, predicted_tags in zip(gold, predicted, strict=True)
        for g, p in zip(gold_tags, predicted_tags, strict=True)
    )
    return right / total


def conll_report(
    gold: Sequence[Sequence[str]],
    predicted: Sequence[Sequence[str]],
    tag_scheme: str,
) -> dict[str, float]:
    """The metric dict the tagging tasks report.

    Keys: `precision`, `recall`, `f1` (conlleval semantics, `-r` for raw tags; the
    primary figure), `accuracy` (word-level tags), `num_gold_entities`,
    `num_predicted_entities`, `num_correct_entities`, per type `TYPE/precision`,
    `TYPE/recall`, `TYPE/f1`, `TYPE/support` (gold entities), and for IOB schemes
    `strict_precision`, `strict_recall`, `strict_f1`: seqeval's strict IOB2 mode on
    the tags as given for IOB2 data; IOB1 data are first rewritten in IOB2 (gold and
    predictions, by their conlleval reading), so for them the strict figures equal
    the conlleval ones.
    """
    if tag_scheme not in TAG_SCHEMES:
        raise UserError(f"tag_scheme must be one of {TAG_SCHEMES}, got {tag_scheme!r}")
    scores = entity_scores(gold, predicted, "raw" if tag_scheme == "raw" else "conlleval")
    report = {
        "precision": scores.precision,
        "recall": scores.recall,
        "f1": scores.f1,
        "accuracy": tag_accuracy(gold, predicted),
        "num_gold_entities": float(scores.gold),
        "num_predicted_entities": float(scores.predicted),
        "num_correct_entities": float(scores.correct),
    }
    for entity_type, type_scores in scores.per_type.items():
        if not entity_type:  # untyped chunks (`B`, `I`) count only overall
            continue
        report[f"{entity_type}/precision"] = type_scores.precision
        report[f"{entity_type}/recall"] = type_scores.recall
        report[f"{entity_type}/f1"] = type_scores.f1
        report[f"{entity_type}/support"] = float(type_scores.gold)
    if tag_scheme != "raw":
        if tag_scheme == "IOB1":
            gold = [iob1_to_iob2(tags) for tags in gold]
            predicted = [iob1_to_iob2(tags) for tags in predicted]
        strict = entity_scores(gold, predicted, "strict_iob2")
        report["strict_precision"] = strict.precision
        report["strict_recall"] = strict.recall
        report["strict_f1"] = strict.f1
    return report


# === Keras metric ===


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
