"""Entity metrics (`tasks/tagging/metrics.py`) against seqeval, the independent reference.

seqeval's default mode follows conlleval; `mode="strict", scheme=IOB2` is its strict
IOB2 reading. Every figure must agree to 1e-9, overall and per type.
"""

import random
import warnings

import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB2

from keras_bert_zoo.tasks.tagging import metrics as entity_metrics

STRICT = {"mode": "strict", "scheme": IOB2}

# (name, gold, predicted): the cases the metric must get right.
FIXTURES = [
    (
        "iob1_original_conll",  # B- only between adjacent same-type entities
        [
            ["I-ORG", "O", "I-MISC", "O", "O", "O", "I-MISC", "O", "O"],
            ["I-PER", "I-PER"],
            ["I-LOC", "B-LOC", "I-LOC", "O", "I-PER"],
        ],
        [
            ["I-ORG", "O", "I-MISC", "O", "O", "O", "O", "O", "O"],
            ["I-PER", "O"],
            ["I-LOC", "I-LOC", "I-LOC", "O", "I-PER"],
        ],
    ),
    (
        "iob2",
        [
            ["B-ORG", "O", "B-MISC", "O", "B-PER", "I-PER"],
            ["B-LOC", "B-LOC", "I-LOC", "O"],
        ],
        [
            ["B-ORG", "O", "B-MISC", "O", "B-PER", "I-PER"],
            ["B-LOC", "I-LOC", "I-LOC", "O"],
        ],
    ),
    (
        "entities_at_sentence_ends",
        [["O", "B-PER", "I-PER"], ["B-LOC"], ["I-ORG", "I-ORG"]],
        [["O", "B-PER", "I-PER"], ["B-ORG"], ["B-ORG", "I-ORG"]],
    ),
    (
        "i_without_b",  # conlleval starts an entity there; strict IOB2 drops it
        [["O", "B-PER", "I-PER", "O", "B-LOC"], ["B-MISC", "I-MISC", "O"]],
        [["O", "I-PER", "I-PER", "O", "I-LOC"], ["B-MISC", "I-ORG", "O"]],
    ),
    (
        "type_change_inside",
        [["B-PER", "I-PER", "I-LOC", "I-LOC", "O"]],
        [["B-PER", "I-LOC", "I-LOC", "B-LOC", "O"]],
    ),
    ("no_entities_at_all", [["O", "O"], ["O"]], [["O", "O"], ["O"]]),
    ("no_gold_entities_some_predicted", [["O", "O", "O"]], [["O", "B-PER", "O"]]),
    ("no_predicted_entities", [["B-PER", "O", "I-LOC"]], [["O", "O", "O"]]),
    (
        "hyphenated_types",
        [["B-MISC-X", "I-MISC-X", "O", "B-A-B"]],
        [["B-MISC-X", "I-MISC-X", "O", "I-A-B"]],
    ),
]


def _seqeval(gold, predicted, **mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on zero divisions; it still returns 0
        overall = (
            precision_score(gold, predicted, **mode),
            recall_score(gold, predicted, **mode),
            f1_score(gold, predicted, **mode),
        )
        report = classification_report(gold, predicted, output_dict=True, **mode)
    return overall, report


def _assert_agrees(ours, gold, predicted, **mode):
    (precision, recall, f1), report = _seqeval(gold, predicted, **mode)
    assert ours.precision == pytest.approx(precision, abs=1e-9)
    assert ours.recall == pytest.approx(recall, abs=1e-9)
    assert ours.f1 == pytest.approx(f1, abs=1e-9)
    reference_types = {
        name for name in report if name not in ("micro avg", "macro avg", "weighted avg")
    }
    # seqeval lists the types of gold and predicted entities, as conlleval does.
    assert set(ours.per_type) == reference_types
    for name, scores in ours.per_type.items():
        assert scores.precision == pytest.approx(report[name]["precision"], abs=1e-9), name
        assert scores.recall == pytest.approx(report[name]["recall"], abs=1e-9), name
        assert scores.f1 == pytest.approx(report[name]["f1-score"], abs=1e-9), name
        assert scores.gold == report[name]["support"], name


@pytest.mark.parametrize("name,gold,predicted", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_conlleval_mode_equals_seqeval_default(name, gold, predicted):
    _assert_agrees(entity_metrics.entity_scores(gold, predicted), gold, predicted)


@pytest.mark.parametrize("name,gold,predicted", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_strict_iob2_mode_equals_seqeval_strict(name, gold, predicted):
    ours = entity_metrics.entity_scores(gold, predicted, mode="strict_iob2")
    _assert_agrees(ours, gold, predicted, **STRICT)


def test_random_sequences_agree_in_both_modes():
    rng = random.Random(7)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    for _ in range(200):
        gold = [[rng.choice(tags) for _ in range(rng.randint(0, 9))] for _ in range(4)]
        predicted = [[rng.choice(tags) if rng.random() < 0.4 else t for t in s] for s in gold]
        if not any(gold):
            continue
        _assert_agrees(entity_metrics.entity_scores(gold, predicted), gold, predicted)
        _assert_agrees(
            entity_metrics.entity_scores(gold, predicted, mode="strict_iob2"),
            gold,
            predicted,
            **STRICT,
        )


def test_the_i_without_b_case_differs_between_modes():
    # Guards against a metric that ignores the mode: the fixture must tell them apart.
    _, gold, predicted = FIXTURES[3]
    conlleval = entity_metrics.entity_scores(gold, predicted)
    strict = entity_metrics.entity_scores(gold, predicted, mode="strict_iob2")
    assert conlleval.predicted == 4 and strict.predicted == 1  # only B-MISC
    assert conlleval.f1 != strict.f1


def test_iob1_to_iob2_keeps_the_conlleval_entities():
    for _, gold, predicted in FIXTURES:
        for tags in (*gold, *predicted):
            converted = entity_metrics.iob1_to_iob2(tags)
            # seqeval strict IOB2 reads the converted tags as conlleval reads the original.
            _, strict_report = _seqeval([converted], [converted], **STRICT)
            _, default_report = _seqeval([tags], [tags])
            assert {k: v["support"] for k, v in strict_report.items()} == {
                k: v["support"] for k, v in default_report.items()
            }


def test_detect_tag_scheme():
    detect = entity_metrics.detect_tag_scheme
    assert detect(FIXTURES[0][1]) == "IOB1"
    assert detect(FIXTURES[1][1]) == "IOB2"
    assert detect([["O", "O"]]) == "IOB2"  # nothing to tell: both read the same
    assert detect([["NN", "VBZ", "-LRB-", "O"]]) == "raw"
    with pytest.raises(ValueError, match="E-PER"):
        detect([["B-PER", "E-PER"]])
    with pytest.raises(ValueError, match="mixed"):
        detect([["B-PER", "NN"]])


def test_raw_tags_score_one_word_chunks():
    gold = [["NN", "VB", "O", "NN"]]
    predicted = [["NN", "NN", "O", "NN"]]
    scores = entity_metrics.entity_scores(gold, predicted, mode="raw")
    # conlleval -r: each non-O word is a chunk; 2 of 3 predicted chunks are right.
    assert (scores.correct, scores.predicted, scores.gold) == (2, 3, 3)
    assert scores.per_type["NN"].precision == pytest.approx(2 / 3)


def test_conll_report_keys_and_strict_reading_of_iob1():
    _, gold, predicted = FIXTURES[0]
    report = entity_metrics.conll_report(gold, predicted, "IOB1")
    (precision, recall, f1), _ = _seqeval(gold, predicted)
    assert report["f1"] == pytest.approx(f1, abs=1e-9)
    assert report["precision"] == pytest.approx(precision, abs=1e-9)
    assert report["recall"] == pytest.approx(recall, abs=1e-9)
    # IOB1 data are rewritten in IOB2 before the strict reading.
    assert report["strict_f1"] == pytest.approx(f1, abs=1e-9)
    for entity_type in ("ORG", "MISC", "PER", "LOC"):
        assert f"{entity_type}/f1" in report and f"{entity_type}/support" in report
    words = sum(len(s) for s in gold)
    right = sum(
        g == p for gs, ps in zip(gold, predicted, strict=True) for g, p in zip(gs, ps, strict=True)
    )
    assert report["accuracy"] == pytest.approx(right / words)

    _, gold2, predicted2 = FIXTURES[3]
    report2 = entity_metrics.conll_report(gold2, predicted2, "IOB2")
    (_, _, strict_f1), _ = _seqeval(gold2, predicted2, **STRICT)
    assert report2["strict_f1"] == pytest.approx(strict_f1, abs=1e-9)


def test_mismatched_lengths_are_errors():
    with pytest.raises(ValueError, match="Sentence 0"):
        entity_metrics.entity_scores([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="mode"):
        entity_metrics.entity_scores([["O"]], [["O"]], mode="lenient")
