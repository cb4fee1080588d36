"""Child process of test_embedding_losses.py: the in-batch losses under a
MirroredStrategy of two logical CPU devices (fixed when TensorFlow starts, hence a
process of its own), against the one-device computation on the global batch.

For each loss it runs what the training step runs in each replica (the forward pass,
`model.compute_loss`, the gradient; the cached variant's function) inside
`strategy.run` in a `tf.function`, sums the replicas' losses and gradients as the step
does, and prints, as one JSON line, the summed loss, the one-device loss on the whole
batch, the largest gradient difference and the largest gradient.
"""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from gathered_losses_helpers import GLOBAL_BATCH, SMALL  # noqa: E402
from gathered_losses_helpers import group_batch as batch  # noqa: E402

from keras_bert_zoo.models import BertEncoder  # noqa: E402
from keras_bert_zoo.models import embedding_losses as losses  # noqa: E402
from keras_bert_zoo.models.gradient_cache import cached_loss_and_gradients  # noqa: E402
from keras_bert_zoo.models.sentence_embedder import BertTextGroupEmbedder  # noqa: E402


def make_model():
    return BertTextGroupEmbedder(BertEncoder(**SMALL), embedding_dim=16)


# name: (the loss, texts a row, through `cached_loss_and_gradients`).
CASES = {
    # Hard negatives (columns 2 and 3) and the reverse term, through model.compute_loss.
    "mnrl_symmetric_hard_negatives": (
        lambda: losses.MultipleNegativesRankingLoss(symmetric=True),
        4,
        False,
    ),
    # A loss of the whole batch (not a mean of rows).
    "cosent": (lambda: losses.CoSENTLoss(), 2, False),
    # GradCache of Matryoshka over in-batch negatives: the all-gather in its step 2.
    "cached_matryoshka_mnrl": (
        lambda: losses.MatryoshkaLoss(
            losses.MultipleNegativesRankingLoss(), dims=(16, 8, 4), weights=(1.0, 0.5, 2.0)
        ),
        3,
        True,
    ),
}


def one_device(model, loss, x, y):
    with tf.GradientTape() as tape:
        value = loss(y, model(x, training=False))
    return float(value), tape.gradient(value, model.trainable_variables)


def mirrored(strategy, model, loss, x, y, cached):
    per_replica = GLOBAL_BATCH // strategy.num_replicas_in_sync
    model.compile(loss=loss)

    def rows(context):
        start = context.replica_id_in_sync_group * per_replica
        return (
            {k: tf.constant(v[start : start + per_replica]) for k, v in x.items()},
            tf.constant(y[start : start + per_replica]),
        )

    data = strategy.experimental_distribute_values_from_function(rows)
    variables = model.trainable_variables

    def replica_step(data):
        x_local, y_local = data
        if cached:
            value, gradients, _ = cached_loss_and_gradients(
                model, x_local, y_local, loss=loss, chunk_size=3, training=False
            )
        else:
            # The step's default_loss_fn.
            with tf.GradientTape() as tape:
                y_pred = model(x_local, training=False)
                value = model.compute_loss(x=x_local, y=y_local, y_pred=y_pred, training=True)
            gradients = tape.gradient(value, variables)
        present = [tf.convert_to_tensor(g) for g in gradients if g is not None]
        # The step sums the loss and the gradients over the replicas.
        return tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, [value, *present]
        )

    outputs = tf.function(lambda d: strategy.run(replica_step, args=(d,)))(data)
    local = [strategy.experimental_local_results(o)[0] for o in outputs]
    return float(local[0]), local[1:]


def main():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = make_model()
    reference = make_model()
    x0, _ = batch(2, 0)
    model(x0)
    reference(x0)
    rng = np.random.default_rng(1)
    # Non-trivial weights (the default init gives near-identical vectors).
    for ours, theirs in zip(model.weights, reference.weights, strict=True):
        value = (0.3 * rng.standard_normal(ours.shape)).astype("float32")
        if "gamma" in ours.path:
            value += 1.0
        ours.assign(value)
        theirs.assign(value)
    results = {"num_replicas": strategy.num_replicas_in_sync}
    per_replica = GLOBAL_BATCH // strategy.num_replicas_in_sync
    for seed, (name, (make_loss, texts, cached)) in enumerate(sorted(CASES.items())):
        x, y = batch(texts, seed + 10)
        expected, expected_gradients = one_device(reference, make_loss(), x, y)
        expected_gradients = [tf.convert_to_tensor(g) for g in expected_gradients if g is not None]
        with strategy.scope():
            loss = make_loss()
        value, gradients = mirrored(strategy, model, loss, x, y, cached)
        differences = [
            float(tf.reduce_max(tf.abs(a - b)))
            for a, b in zip(gradients, expected_gradients, strict=True)
        ]
        # Control: the mean of the replicas' halves each alone (what the replicas would
        # compute without the all-gather) is not the global batch's loss.
        halves = [
            one_device(reference, make_loss(), *split)[0]
            for split in (
                ({k: v[:per_replica] for k, v in x.items()}, y[:per_replica]),
                ({k: v[per_replica:] for k, v in x.items()}, y[per_replica:]),
            )
        ]
        results[name] = {
            "loss": value,
            "one_device_loss": expected,
            "halves_alone_loss": float(np.mean(halves)),
            "max_gradient_difference": max(differences),
            "max_gradient": max(float(tf.reduce_max(tf.abs(g))) for g in expected_gradients),
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
