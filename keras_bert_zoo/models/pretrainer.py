"""`BertPretrainer`: the masked LM and next-sentence objectives over a `BertEncoder`."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_zoo.layers.heads import ClassificationHead, MaskedLMHead
from keras_bert_zoo.models.head_model import (
    MASKED_LM,
    OUTPUT_DENSE,
    EncoderHeadModel,
    HeadCheckpointNames,
)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPretrainer(EncoderHeadModel):
    """BERT pretraining: masked LM (decoder tied to the word embeddings) + NSP.

    Inputs: the encoder's dict plus `masked_lm_positions` (int32
    `[batch, max_predictions_per_seq]`).

    Outputs: dict of float32 `masked_lm_logits` `[batch, predictions, vocab_size]` and
    `next_sentence_logits` `[batch, 2]` (0 = IsNext, 1 = random next, as in the
    original data).

    Compiled without a `loss`, the model trains on the original objective: `y` is a dict
    with `masked_lm_ids`, `masked_lm_weights` and `next_sentence_labels`, and the loss is
    the weighted mean masked-LM negative log-likelihood plus the mean NSP one.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        initializer_range: float. Stddev of the heads' initializers (defaults to the
            encoder's).

    Example:

    ```python
    import numpy as np
    import keras
    from keras_bert_zoo.models import BertEncoder, BertPretrainer

    model = BertPretrainer(BertEncoder.untrained("bert_tiny_uncased"))
    model.compile(optimizer=keras.optimizers.AdamW(1e-4))
    x = {
        "input_word_ids": np.array([[101, 103, 2003, 102, 2009, 102]] * 2),
        "input_mask": np.ones((2, 6), "int32"),
        "input_type_ids": np.array([[0, 0, 0, 0, 1, 1]] * 2),
        "masked_lm_positions": np.array([[1, 0]] * 2),
    }
    y = {
        "masked_lm_ids": np.array([[2023, 0]] * 2),
        "masked_lm_weights": np.array([[1.0, 0.0]] * 2),
        "next_sentence_labels": np.array([0, 1]),
    }
    model.fit(x, y, epochs=1, verbose=0)
    ```
    """

    # create_pretraining's heads; BertForPreTraining. Both must be in a checkpoint.
    checkpoint_heads = (
        HeadCheckpointNames(
            "masked_lm_head", MASKED_LM, "cls/predictions/", "cls.predictions", required=True
        ),
        HeadCheckpointNames(
            "next_sentence_head",
            OUTPUT_DENSE,
            "cls/seq_relationship/",
            "cls.seq_relationship",
            required=True,
        ),
    )
    huggingface_architecture = "BertForPreTraining"
    head_arguments = ("initializer_range",)
    # The heads read the pooled output and the last block at the masked positions.
    # Served on the padded graph: padding-free serving was measured on the models that
    # read [CLS] alone.
    outputs_from_head_positions = True
    reads_masked_lm_positions = True

    def __init__(self, encoder, initializer_range=None, **kwargs):
        initializer_range = self._initializer_range(encoder, initializer_range)
        # === Layers ===
        self.encoder = encoder
        self.masked_lm_head = MaskedLMHead(
            vocab_size=encoder.vocab_size,
            activation=encoder.hidden_act,
            layer_norm_epsilon=encoder.layer_norm_epsilon,
            initializer_range=initializer_range,
            embedding_layer=encoder.embeddings.word_embeddings,
            dtype=encoder.dtype_policy,
            name="masked_lm_head",
        )
        self.next_sentence_head = ClassificationHead(
            2,
            dropout=0.0,
            initializer_range=initializer_range,
            dtype=encoder.dtype_policy,
            name="next_sentence_head",
        )

        # === Functional Model ===
        inputs = dict(encoder.input)
        inputs["masked_lm_positions"] = keras.Input(
            shape=(None,), dtype="int32", name="masked_lm_positions"
        )
        encoder_outputs = encoder({k: inputs[k] for k in encoder.input})
        outputs = {
            "masked_lm_logits": self.masked_lm_head(
                encoder_outputs["sequence_output"], inputs["masked_lm_positions"]
            ),
            "next_sentence_logits": self.next_sentence_head(encoder_outputs["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.initializer_range = initializer_range
        self.masked_lm_loss_tracker = keras.metrics.Mean(name="masked_lm_loss")
        self.next_sentence_loss_tracker = keras.metrics.Mean(name="next_sentence_loss")
        # A weighted mean of hits (what SparseCategoricalAccuracy computes), fed by
        # tf.argmax: keras.ops.argmax first rewrites every -0.0 over the
        # [batch, predictions, vocab_size] logits, 57 against 12 ms a step (bert_mini,
        # 2-core AMX Xeon; benchmarks/README.md).
        self.masked_lm_accuracy = keras.metrics.Mean(name="masked_lm_accuracy")
        self.next_sentence_accuracy = keras.metrics.SparseCategoricalAccuracy(
            name="next_sentence_accuracy"
        )

    def outputs_at_head_positions(self, pooled_output, masked_lm_outputs=None, training=None):
        return {
            "masked_lm_logits": self.masked_lm_head.gathered_logits(masked_lm_outputs),
            "next_sentence_logits": self.next_sentence_head(pooled_output, training=training),
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.loss is not None:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        masked_lm_loss, next_sentence_loss = pretraining_losses(y, y_pred)
        # Weighted like Keras' own loss tracker (by examples; by real predictions for the
        # masked LM) so a short or empty final batch does not drag the epoch means down.
        self.masked_lm_loss_tracker.update_state(
            masked_lm_loss, sample_weight=ops.sum(ops.cast(y["masked_lm_weights"], "float32"))
        )
        self.next_sentence_loss_tracker.update_state(
            next_sentence_loss, sample_weight=ops.shape(y["next_sentence_labels"])[0]
        )
        masked_lm_ids = ops.cast(y["masked_lm_ids"], "int32")
        predicted_ids = tf.argmax(y_pred["masked_lm_logits"], axis=-1, output_type=tf.int32)
        self.masked_lm_accuracy.update_state(
            ops.cast(ops.equal(predicted_ids, masked_lm_ids), "float32"),
            sample_weight=y["masked_lm_weights"],
        )
        self.next_sentence_accuracy.update_state(
            ops.reshape(y["next_sentence_labels"], (-1,)), y_pred["next_sentence_logits"]
        )
        total = masked_lm_loss + next_sentence_loss
        # Keep regularization losses (none by default) part of the objective.
        if self.losses:
            total = total + ops.sum(ops.stack([ops.cast(v, "float32") for v in self.losses]))
        # Like Keras' compiled losses: under a tf.distribute strategy each replica returns
        # its share of the global mean, since gradients are summed across replicas.
        return total / tf.distribute.get_strategy().num_replicas_in_sync

    @property
    def metrics(self):
        own = [
            self.masked_lm_loss_tracker,
            self.next_sentence_loss_tracker,
            self.masked_lm_accuracy,
            self.next_sentence_accuracy,
        ]
        # Keras already tracks metric attributes in `super().metrics`; list them once, and
        # only when the built-in objective (which updates them) is in use. Otherwise they
        # would be reported as 0 next to a user-supplied loss.
        metrics = [m for m in super().metrics if all(m is not o for o in own)]
        if self.loss is None:
            metrics = metrics + own
        return metrics


def pretraining_losses(labels, predictions):
    """BERT's two pretraining losses, in float32.

    Args:
        labels: dict with `masked_lm_ids` `[batch, P]`, `masked_lm_weights`
            `[batch, P]` (0 for padding predictions) and `next_sentence_labels`
            `[batch]` or `[batch, 1]`.
        predictions: dict with `masked_lm_logits` and `next_sentence_logits`.

    Returns:
        `(masked_lm_loss, next_sentence_loss)`: the weighted mean masked-LM negative
        log-likelihood and the mean next-sentence one.
    """
    weights = ops.cast(labels["masked_lm_weights"], "float32")
    masked_lm_nll = sparse_softmax_cross_entropy(
        labels["masked_lm_ids"], ops.cast(predictions["masked_lm_logits"], "float32")
    )
    # The original divides by sum(weights) + 1e-5 so a batch with no predictions is 0.
    masked_lm_loss = ops.sum(masked_lm_nll * weights) / (ops.sum(weights) + 1e-5)
    next_sentence_nll = keras.losses.sparse_categorical_crossentropy(
        ops.reshape(labels["next_sentence_labels"], (-1,)),
        ops.cast(predictions["next_sentence_logits"], "float32"),
        from_logits=True,
    )
    return masked_lm_loss, ops.mean(next_sentence_nll)


def sparse_softmax_cross_entropy(labels, logits):
    """`-log softmax(logits)[label]` per row, with its gradient written out.

    Equals `keras.losses.sparse_categorical_crossentropy(labels, logits,
    from_logits=True)`. It is its own function for the masked LM's vocabulary-sized
    logits: TensorFlow's fused `SparseSoftmaxCrossEntropyWithLogits` kernel took 155 ms
    forward and backward on `[640, 30522]` float32 logits where these few ops take 60
    (2-core AMX Xeon, TF graph mode; 108 ms of a 581 ms bert_mini pretraining step;
    benchmarks/README.md).

    Args:
        labels: int tensor `[...]`, class ids in `[0, num_classes)`; an id out of range
            fails in `tf.gather`.
        logits: float32 tensor `[..., num_classes]`.

    Returns:
        float32 tensor `[...]`.
    """
    num_classes = ops.shape(logits)[-1]
    flat_loss = _sparse_softmax_cross_entropy(
        ops.reshape(ops.cast(labels, "int32"), (-1,)), ops.reshape(logits, (-1, num_classes))
    )
    return ops.reshape(flat_loss, ops.shape(labels))


@tf.custom_gradient
def _sparse_softmax_cross_entropy(labels, logits):
    """Rows of `[N, num_classes]` logits, `[N]` labels."""
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    exponentials = tf.exp(shifted)
    sums = tf.reduce_sum(exponentials, axis=-1)
    loss = tf.math.log(sums) - tf.gather(shifted, labels, batch_dims=1)

    def gradient(upstream):
        # softmax * upstream, minus upstream at each row's label: one pass over the
        # logits and a scatter of N values (no [N, num_classes] one-hot).
        logits_gradient = exponentials * (upstream / sums)[:, None]
        label_indices = tf.stack([tf.range(tf.shape(labels)[0]), labels], axis=1)
        return None, tf.tensor_scatter_nd_sub(logits_gradient, label_indices, upstream)

    return loss, gradient
