"""Child process of test_gathered_losses.py: losses over the whole batch trained by the
training step (`step.TrainStep`, what the `Trainer` runs) under a strategy of two
replicas, against one device on the global batch.

`--strategy=mirrored`: a MirroredStrategy of two logical CPU devices (fixed when
TensorFlow starts, hence a process of its own). `--strategy=multi_worker_mirrored`: one
worker of a two-process cluster (`TF_CONFIG`), one replica each. For each case it trains
two steps of the global batch of 8 (4 rows a replica), then the same two steps on one
device (`OneDeviceStrategy`, the whole batch), and prints one JSON line: each case's
losses, the reference's, the largest weight difference and how far the weights moved.
"""

import argparse
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ARGS = argparse.ArgumentParser()
ARGS.add_argument("--strategy", choices=["mirrored", "multi_worker_mirrored"], required=True)
ARGS.add_argument("--cases", default="", help="comma-separated; default: every case")
ARGS = ARGS.parse_args()

import tensorflow as tf  # noqa: E402

if ARGS.strategy == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )
    STRATEGY = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
else:
    STRATEGY = tf.distribute.MultiWorkerMirroredStrategy()

import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from gathered_losses_helpers import group_batch, make_group_model, train_steps  # noqa: E402

from keras_bert_zoo.models import embedding_losses as losses  # noqa: E402
from keras_bert_zoo.models.gradient_cache import gradient_cache_loss_fn  # noqa: E402
from keras_bert_zoo.training import step as step_lib  # noqa: E402


def mnrl():
    return losses.MultipleNegativesRankingLoss(symmetric=True)


def mnrl_replica_alone():
    return losses.MultipleNegativesRankingLoss(symmetric=True, gather_across_replicas=False)


# name: (the loss, texts a row, gradient cache chunk (0: default_loss_fn), jit_compile).
CASES = {
    # Two hard negatives a row and the reverse term.
    "mnrl_hard_negatives": (mnrl, 4, 0, False),
    "mnrl_hard_negatives_xla": (mnrl, 4, 0, True),
    "cosent_xla": (losses.CoSENTLoss, 2, 0, True),
    # The gradient cache over 4 rows a replica in chunks of 3.
    "cached_mnrl_hard_negatives": (mnrl, 4, 3, False),
    "cached_mnrl_hard_negatives_xla": (mnrl, 4, 3, True),
    "cached_cosent": (losses.CoSENTLoss, 2, 3, False),
    # A loss of independent rows: XLA compiles the whole forward and backward pass.
    "cosine_mse_xla": (losses.CosineSimilarityLoss, 2, 0, True),
    # The control: each replica's own negatives alone are not the global batch's.
    "mnrl_replica_alone": (mnrl_replica_alone, 4, 0, False),
}


def run(strategy, make_loss, texts, chunk, jit_compile, x, y):
    model = make_group_model(strategy, make_loss)
    start = [v.numpy() for v in model.trainable_variables]
    loss_fn = gradient_cache_loss_fn(chunk) if chunk else step_lib.default_loss_fn
    step_losses = train_steps(model, strategy, loss_fn, x, y, steps=2, jit_compile=jit_compile)
    return step_losses, [v.numpy() for v in model.trainable_variables], start


def main():
    one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
    names = ARGS.cases.split(",") if ARGS.cases else sorted(CASES)
    results = {"num_replicas": STRATEGY.num_replicas_in_sync}
    for name in names:
        make_loss, texts, chunk, jit_compile = CASES[name]
        x, y = group_batch(texts, seed=texts)
        losses_, weights, start = run(STRATEGY, make_loss, texts, chunk, jit_compile, x, y)
        # The reference: one device, the whole batch, uncached, no XLA, the gathering loss.
        reference_loss = losses.CoSENTLoss if make_loss is losses.CoSENTLoss else make_loss
        if make_loss is mnrl_replica_alone:
            reference_loss = mnrl
        expected, expected_weights, _ = run(one_device, reference_loss, texts, 0, False, x, y)
        results[name] = {
            "losses": [float(v) for v in losses_],
            "one_device_losses": [float(v) for v in expected],
            "max_weight_difference": max(
                float(np.abs(a - b).max()) for a, b in zip(weights, expected_weights, strict=True)
            ),
            "moved": max(
                float(np.abs(a - b).max()) for a, b in zip(expected_weights, start, strict=True)
            ),
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
