"""The official SQuAD evaluation (`evaluate-v1.1.py` and `evaluate-v2.0.py`) as functions.

Both scripts compare a prediction with every gold answer after the same normalization
(lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace)
and keep the best exact match and token-overlap F1. They differ in details this module
keeps apart on purpose, because each changes the numbers:

* v1.1 counts a question without a prediction in the total (it scores 0); v2.0 leaves
  it out of the total.
* v1.1's F1 is 0 when the prediction or the gold answer normalizes to nothing; v2.0
  gives 1 when both do and 0 when only one does. v2.0 also drops gold answers that
  normalize to nothing, and a question left with none has the single gold answer "".
* v2.0 reads no-answer probabilities (`na_probs`): a question whose value exceeds
  `na_prob_thresh` counts as answered with "" in the main scores, and
  `find_best_thresh` sweeps the threshold to report `best_exact`, `best_f1` and the
  thresholds that reach them.

The returned dicts have the scripts' keys and values (percentages), in their order.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

from keras_bert_zoo.utils.errors import UserError

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower-case, remove punctuation, articles and extra whitespace (both scripts)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


# === v1.1 ===


def exact_match_v1(prediction: str, ground_truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def _token_overlap_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    """The harmonic mean of token precision and recall, 0 without a common token (the
    arithmetic both scripts share once they have the tokens)."""
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def f1_v1(prediction: str, ground_truth: str) -> float:
    return _token_overlap_f1(
        normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    )


def evaluate_v1(
    gold_answers: Mapping[str, Sequence[str]], predictions: Mapping[str, str]
) -> dict[str, float]:
    """`evaluate-v1.1.py`: `{"exact_match", "f1"}` in percent.

    Args:
        gold_answers: question id -> gold answer texts, in the data file's order.
        predictions: question id -> predicted text. A missing id scores 0.
    """
    total = exact_match = f1 = 0.0
    for question_id, ground_truths in gold_answers.items():
        total += 1
        if question_id not in predictions:
            continue
        prediction = predictions[question_id]
        exact_match += max(exact_match_v1(prediction, truth) for truth in ground_truths)
        f1 += max(f1_v1(prediction, truth) for truth in ground_truths)
    if total == 0:
        raise UserError("evaluate_v1: no questions to evaluate")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# === v2.0 ===


def _answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_v2(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_v2(gold: str, prediction: str) -> float:
    gold_tokens = _answer_tokens(gold)
    prediction_tokens = _answer_tokens(prediction)
    if not gold_tokens or not prediction_tokens:
        # A no-answer on either side scores 1 when both agree, 0 otherwise.
        return float(gold_tokens == prediction_tokens)
    return _token_overlap_f1(prediction_tokens, gold_tokens)


def raw_scores_v2(
    gold_answers: Mapping[str, Sequence[str]], predictions: Mapping[str, str]
) -> tuple[dict[str, int], dict[str, float]]:
    """Per-question exact and F1 before any no-answer threshold (`get_raw_scores`)."""
    exact_scores: dict[str, int] = {}
    f1_scores: dict[str, float] = {}
    for question_id, answers in gold_answers.items():
        golds = [text for text in answers if normalize_answer(text)] or [""]
        if question_id not in predictions:
            continue
        prediction = predictions[question_id]
        exact_scores[question_id] = max(exact_v2(gold, prediction) for gold in golds)
        f1_scores[question_id] = max(f1_v2(gold, prediction) for gold in golds)
    return exact_scores, f1_scores


def _apply_no_answer_threshold(scores, na_probs, has_answer, na_prob_thresh):
    return {
        question_id: float(not has_answer[question_id])
        if na_probs[question_id] > na_prob_thresh
        else score
        for question_id, score in scores.items()
    }


def _eval_dict(exact_scores, f1_scores, question_ids=None) -> dict[str, float]:
    if question_ids is None:
        total = len(exact_scores)
        exact = sum(exact_scores.values())
        f1 = sum(f1_scores.values())
    else:
        missing = [k for k in question_ids if k not in exact_scores]
        if missing:
            # The script stops with a KeyError here.
            raise UserError(f"No prediction for {len(missing)} question(s), e.g. {missing[:3]}")
        total = len(question_ids)
        exact = sum(exact_scores[k] for k in question_ids)
        f1 = sum(f1_scores[k] for k in question_ids)
    return {"exact": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total}


def find_best_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """`find_best_thresh`: (best score in percent, the no-answer threshold reaching it).

    Questions are answered in increasing `na_probs` order (ties keep `na_probs`'
    order); each answered question adds its score, minus one for a non-empty answer
    to an unanswerable question. Predicting "" when `na_prob > threshold` scores the
    returned value.
    """
    current = best = sum(1 for k in has_answer if not has_answer[k])
    best_threshold = 0.0
    for question_id in sorted(na_probs, key=lambda k: na_probs[k]):
        if question_id not in scores:
            continue
        if has_answer[question_id]:
            difference = scores[question_id]
        else:
            difference = -1 if predictions[question_id] else 0
        current += difference
        if current > best:
            best = current
            best_threshold = na_probs[question_id]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(
    gold_answers: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
    threshold_predictions: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """`evaluate-v2.0.py`: the script's output dict.

    Args:
        gold_answers: question id -> gold answer texts ([] for unanswerable), in the
            data file's order.
        predictions: question id -> predicted text ("" for no answer).
        na_probs: question id -> no-answer score (`--na-prob-file`), in that file's
            order; None scores every question 0.0 and adds no `best_*` keys.
        na_prob_thresh: `--na-prob-thresh`.
        threshold_predictions: the predictions `best_*` sweep over; default
            `predictions` (the script). Passing the answers before any no-answer
            decision makes the sweep search every threshold (see `SquadTask.evaluate`).

    Returns:
        `exact`, `f1`, `total`, `HasAns_*` and `NoAns_*` (when such questions exist),
        and with `na_probs` `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`.
    """
    with_na_probs = na_probs is not None
    if na_probs is None:
        na_probs = {k: 0.0 for k in predictions}
    has_answer = {k: bool(answers) for k, answers in gold_answers.items()}
    has_answer_ids = [k for k, v in has_answer.items() if v]
    no_answer_ids = [k for k, v in has_answer.items() if not v]
    exact_raw, f1_raw = raw_scores_v2(gold_answers, predictions)
    if not exact_raw:
        raise UserError("evaluate_v2: no question has a prediction")
    exact_thresh = _apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1_thresh = _apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _eval_dict(exact_thresh, f1_thresh)
    if has_answer_ids:
        for key, value in _eval_dict(exact_thresh, f1_thresh, has_answer_ids).items():
            result[f"HasAns_{key}"] = value
    if no_answer_ids:
        for key, value in _eval_dict(exact_thresh, f1_thresh, no_answer_ids).items():
            result[f"NoAns_{key}"] = value
    if with_na_probs:
        sweep_predictions = predictions if threshold_predictions is None else threshold_predictions
        if sweep_predictions is not predictions:
            exact_raw, f1_raw = raw_scores_v2(gold_answers, sweep_predictions)
        best_exact, exact_threshold = find_best_threshold(
            sweep_predictions, exact_raw, na_probs, has_answer
        )
        best_f1, f1_threshold = find_best_threshold(sweep_predictions, f1_raw, na_probs, has_answer)
        result["best_exact"] = best_exact
        result["best_exact_thresh"] = exact_threshold
        result["best_f1"] = best_f1
        result["best_f1_thresh"] = f1_threshold
    return result
