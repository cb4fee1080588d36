"""`decode_spans` (via `postprocess`) against a plain restatement of google-research/bert's
`write_predictions` on random logits: n-best lists, probabilities, the null answer."""

import math
import random

import numpy as np
import pytest

from keras_bert_zoo.tasks import create_task
from keras_bert_zoo.tasks.question_answering import QuestionAnsweringExample
from keras_bert_zoo.text import BertTokenizer

WORDS = ["ada", "bob", "paris", "lima", "the", "red", "boat", "sails", "north", "at", "dawn"]
SETTINGS = dict(max_seq_length=40, doc_stride=8, max_query_length=8)


def reference_decode(windows, context, n_best_size, max_answer_length, version_2, threshold):
    """run_squad.py's write_predictions for one example, every valid (start, end) pair
    considered (instead of the 20 best starts and ends)."""
    prelim = []
    score_null = 1e6
    null_start_logit = null_end_logit = 0.0
    for window in windows:
        start_logits = [float(x) for x in window["start_logits"]]
        end_logits = [float(x) for x in window["end_logits"]]
        char_start, char_end = window["token_char_start"], window["token_char_end"]
        if version_2:
            feature_null_score = start_logits[0] + end_logits[0]
            if feature_null_score < score_null:
                score_null = feature_null_score
                null_start_logit = start_logits[0]
                null_end_logit = end_logits[0]
        for start_index in range(len(start_logits)):
            for end_index in range(len(end_logits)):
                if char_start[start_index] < 0 or char_start[end_index] < 0:
                    continue
                if not window["token_is_max_context"][start_index]:
                    continue
                if end_index < start_index:
                    continue
                if end_index - start_index + 1 > max_answer_length:
                    continue
                text = context[char_start[start_index] : char_end[end_index]]
                prelim.append(
                    (
                        text,
                        start_logits[start_index],
                        end_logits[end_index],
                        int(char_start[start_index]),
                        int(char_end[end_index]),
                    )
                )
    if version_2:
        prelim.append(("", null_start_logit, null_end_logit, -1, -1))
    prelim = sorted(prelim, key=lambda p: p[1] + p[2], reverse=True)
    seen, nbest = set(), []
    for entry in prelim:
        if len(nbest) >= n_best_size:
            break
        if entry[0] in seen:
            continue
        seen.add(entry[0])
        nbest.append(entry)
    if version_2 and "" not in seen:
        nbest.append(("", null_start_logit, null_end_logit, -1, -1))
    scores = [entry[1] + entry[2] for entry in nbest]
    max_score = max(scores)
    exps = [math.exp(score - max_score) for score in scores]
    probabilities = [x / sum(exps) for x in exps]
    best_non_null = next(entry for entry in nbest if entry[0])
    score_diff = None
    answer = nbest[0][0]
    if version_2:
        score_diff = score_null - best_non_null[1] - best_non_null[2]
        answer = "" if score_diff > threshold else best_non_null[0]
    return answer, nbest, probabilities, score_diff, best_non_null


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", "?", ","] + WORDS, lowercase=True
    )


@pytest.fixture(scope="module")
def preprocessor(tokenizer):
    # Shared by the tasks below (same window settings), so its featurizer is traced once.
    return create_task("extractive_qa", **SETTINGS).make_preprocessor(tokenizer)


def random_examples(rng, count):
    examples = []
    for i in range(count):
        # Repeated words give duplicate texts at different places (de-duplication).
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 70))]
        for j in range(len(words)):
            if rng.random() < 0.15:
                words[j] += rng.choice([".", ",", "  ", "\t"])
        context = " ".join(words)
        question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) + "?"
        examples.append(QuestionAnsweringExample(f"e{i}", question, context))
    return examples


@pytest.mark.slow
@pytest.mark.parametrize(
    "version_2, threshold, integer_logits",
    [(False, 0.0, False), (True, 0.0, False), (True, -1.5, False), (True, 0.0, True)],
)
def test_postprocess_matches_the_original_decoding(
    preprocessor, version_2, threshold, integer_logits
):
    rng = random.Random(int(version_2) * 10 + int(integer_logits))
    examples = random_examples(rng, 30)
    options = dict(n_best_size=7, max_answer_length=5, version_2_with_negative=version_2)
    if version_2:
        options["null_score_diff_threshold"] = threshold
    task = create_task("extractive_qa", **SETTINGS, **options)
    features = list(task.features(examples, preprocessor, training=False).as_numpy_iterator())
    meta = {key: np.stack([f[key] for f in features]) for key in task.feature_meta(features[0])}
    shape = meta["token_char_start"].shape
    np_rng = np.random.default_rng(0)
    if integer_logits:  # ties everywhere: the order must still be the original's
        outputs = {
            name: np_rng.integers(-3, 4, shape).astype(np.float32)
            for name in ("start_logits", "end_logits")
        }
    else:
        outputs = {
            name: (3 * np_rng.standard_normal(shape)).astype(np.float32)
            for name in ("start_logits", "end_logits")
        }
    answers = task.postprocess(outputs, meta, examples)
    assert len(answers) == len(examples)
    assert np.bincount(meta["example_index"]).max() >= 4  # several windows per example
    for index, (answer, example) in enumerate(zip(answers, examples, strict=True)):
        rows = np.flatnonzero(meta["example_index"] == index)
        windows = [
            {
                **{key: meta[key][row] for key in meta},
                "start_logits": outputs["start_logits"][row],
                "end_logits": outputs["end_logits"][row],
            }
            for row in rows
        ]
        text, nbest, probabilities, score_diff, best = reference_decode(
            windows, example.context, 7, 5, version_2, threshold
        )
        assert answer.text == text
        assert [entry.text for entry in answer.nbest] == [entry[0] for entry in nbest]
        for ours, reference, probability in zip(answer.nbest, nbest, probabilities, strict=True):
            assert ours.start_logit == reference[1] and ours.end_logit == reference[2]
            assert (ours.start, ours.end) == (reference[3], reference[4])
            assert ours.probability == pytest.approx(probability, abs=1e-12)
        assert (answer.best_text, answer.best_start, answer.best_end) == (best[0], best[3], best[4])
        if version_2:
            assert answer.null_score_diff == pytest.approx(score_diff, abs=1e-9)
        else:
            assert answer.null_score_diff is None
        if answer.text:
            assert example.context[answer.start : answer.end] == answer.text


@pytest.mark.slow
def test_postprocess_rejects_features_out_of_sync(preprocessor):
    task = create_task("extractive_qa", **SETTINGS)
    examples = random_examples(random.Random(5), 3)
    features = list(task.features(examples, preprocessor, training=False).as_numpy_iterator())
    meta = {key: np.stack([f[key] for f in features]) for key in task.feature_meta(features[0])}
    outputs = {
        name: np.zeros(meta["token_char_start"].shape, np.float32)
        for name in ("start_logits", "end_logits")
    }
    with pytest.raises(ValueError, match="out of sync"):
        task.postprocess(outputs, meta, examples[:2])
    with pytest.raises(ValueError, match="answers must follow the examples' order"):
        task.evaluate(list(reversed(task.postprocess(outputs, meta, examples))), examples)
