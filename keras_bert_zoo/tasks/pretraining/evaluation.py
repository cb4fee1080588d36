"""The original's pretraining evaluation (`run_pretraining.py`'s `metric_fn`): masked LM
and next sentence accuracy and loss over held-out records.

Example:

```python
from keras_bert_zoo.data.pretraining import pretraining_dataset
from keras_bert_zoo.tasks.pretraining.evaluation import evaluate_pretraining

dataset = pretraining_dataset(files, 32, max_seq_length=128, max_predictions_per_seq=20,
                              split_labels=True)
evaluate_pretraining(model, dataset)["masked_lm_accuracy"]
```
"""

from __future__ import annotations

import weakref

import numpy as np

from keras_bert_zoo.utils.errors import UserError

# One compiled evaluation step per model, so periodic evaluations trace it once. The
# step holds the model weakly: the cache does not keep models alive.
_EVALUATION_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _evaluation_step(model):
    step = _EVALUATION_STEPS.get(model)
    if step is not None:
        return step
    import keras
    import tensorflow as tf

    model_ref = weakref.ref(model)

    @tf.function(reduce_retracing=True, autograph=False)
    def batch_sums(x, y):
        predictions = model_ref()(x, training=False)
        logits = tf.cast(predictions["masked_lm_logits"], tf.float32)
        weights = tf.cast(y["masked_lm_weights"], tf.float32)
        ids = tf.cast(y["masked_lm_ids"], tf.int64)
        nll = keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1), ids), tf.float32)
        nsp_logits = tf.cast(predictions["next_sentence_logits"], tf.float32)
        nsp_labels = tf.reshape(tf.cast(y["next_sentence_labels"], tf.int64), [-1])
        nsp_nll = keras.losses.sparse_categorical_crossentropy(
            nsp_labels, nsp_logits, from_logits=True
        )
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1), nsp_labels), tf.float32)
        is_next = tf.cast(tf.equal(nsp_labels, 0), tf.float32)
        return tf.stack(
            [
                tf.reduce_sum(nll * weights),
                tf.reduce_sum(correct * weights),
                tf.reduce_sum(weights),
                tf.reduce_sum(nsp_nll),
                tf.reduce_sum(nsp_correct),
                tf.cast(tf.size(nsp_labels), tf.float32),
                tf.reduce_sum(nsp_correct * is_next),
                tf.reduce_sum(is_next),
            ]
        )

    _EVALUATION_STEPS[model] = batch_sums
    return batch_sums


def evaluate_pretraining(model, dataset, steps: int = 0) -> dict[str, float]:
    """The original's evaluation metrics over `steps` batches of `dataset` (0: all).

    Args:
        model: a `BertPretrainer`.
        dataset: `(x, y)` batches, as `data.pretraining_dataset(..., split_labels=True)`.
        steps: batches to evaluate (0: all).

    Returns:
        `masked_lm_accuracy` and `masked_lm_loss` (means over real predictions,
        weighted by `masked_lm_weights`), `next_sentence_accuracy`,
        `next_sentence_loss` (means over sequences), `next_sentence_balanced_accuracy`
        (the mean of the accuracy on "is next" pairs and on "random next" pairs),
        `loss` (the two losses' sum) and the counts `masked_lm_predictions` and
        `sequences`.
    """
    batch_sums = _evaluation_step(model)
    if steps:
        dataset = dataset.take(steps)
    totals = np.zeros(8, np.float64)
    for x, y in dataset:
        totals += batch_sums(x, y).numpy()
    nll, correct, weight, nsp_nll, nsp_correct, sequences, correct_is_next, is_next = totals
    if sequences == 0:
        raise UserError("The evaluation data gave no batch")
    # Accuracy within each NSP class, averaged: a constant answer scores 0.5 however
    # unbalanced the held-out pairs are (a small held-out set often is).
    recalls = [
        hits / count
        for hits, count in (
            (correct_is_next, is_next),
            (nsp_correct - correct_is_next, sequences - is_next),
        )
        if count
    ]
    masked_lm_loss = nll / weight if weight else float("nan")
    next_sentence_loss = nsp_nll / sequences
    return {
        "masked_lm_accuracy": float(correct / weight) if weight else float("nan"),
        "masked_lm_loss": float(masked_lm_loss),
        "next_sentence_accuracy": float(nsp_correct / sequences),
        "next_sentence_balanced_accuracy": float(np.mean(recalls)),
        "next_sentence_loss": float(next_sentence_loss),
        "loss": float(masked_lm_loss + next_sentence_loss),
        # Counts: integers (the sum of 0/1 weights is a count), printed as such.
        "masked_lm_predictions": int(weight) if float(weight).is_integer() else float(weight),
        "sequences": int(sequences),
    }
