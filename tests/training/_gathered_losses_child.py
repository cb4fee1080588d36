"""Child process of test_gathered_losses.py: losses over the whole batch trained by the
training step (`step.TrainStep`, what the `Trainer` runs) under a strategy of two
replicas, against one device on the global batch.

`--strategy=mirrored`: a MirroredStrategy of two logical CPU devices (fixed when
TensorFlow starts, hence a process of its own). `--strategy=multi_worker_mirrored`: one
worker of a two-process cluster (`TF_CONFIG`), one replica each. For each case it trains
two steps of the global batch of 8 (4 rows a replica; the `trainer_` cases through
`Trainer.train`, in `--model_dir`), then the same two steps on one
device (`OneDeviceStrategy`, the whole batch), and prints one JSON line: each case's
losses, the reference's, the largest weight difference and how far the weights moved.
`cached_dropout_xla`'s reference is the uncached step over the cached one's chunks,
under the same strategy and dropout masks (replicas draw their own masks: one device
cannot be the reference).
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
ARGS.add_argument("--model_dir", default="", help="the Trainer's cases' directories' parent")
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
from gathered_losses_helpers import (  # noqa: E402
    copy_seed_states,
    group_batch,
    in_chunks_loss_fn,
    make_group_model,
    train_steps,
    train_with_trainer,
)

from keras_bert_zoo.models import embedding_losses as losses  # noqa: E402
from keras_bert_zoo.models.gradient_cache import gradient_cache_loss_fn  # noqa: E402
from keras_bert_zoo.training import step as step_lib  # noqa: E402


def mnrl():
    return losses.MultipleNegativesRankingLoss(symmetric=True)


def mnrl_replica_alone():
    return losses.MultipleNegativesRankingLoss(symmetric=True, gather_across_replicas=False)


# name: (the loss, texts a row, gradient cache chunk (0: default_loss_fn), jit_compile).
# One case for each path of the step under two replicas (`TrainStep._replica_step_fn`):
# uncached or cached, without XLA or with it (the model's passes alone compiled when the
# loss gathers, `XlaForwardModel`; the whole forward and backward pass when it does not).
# The uncached and cached XLA paths run through `Trainer.train`, which runs that step.
CASES = {
    # Two hard negatives a row and the reverse term.
    "mnrl_hard_negatives": (mnrl, 4, 0, False),
    # The gradient cache over 4 rows a replica in chunks of 3, CoSENT (the whole batch's
    # pairs ranked, not a mean of rows).
    "cached_cosent": (losses.CoSENTLoss, 2, 3, False),
    # A loss of independent rows: XLA compiles the whole forward and backward pass.
    "cosine_mse_xla": (losses.CosineSimilarityLoss, 2, 0, True),
    # Through the Trainer (its input pipeline, loop, checkpoint at the end).
    "trainer_mnrl_hard_negatives_xla": (mnrl, 4, 0, True),
    "trainer_cached_mnrl_hard_negatives_xla": (mnrl, 4, 3, True),
    # The control: each replica's own negatives alone are not the global batch's.
    "mnrl_replica_alone": (mnrl_replica_alone, 4, 0, False),
}


def run(strategy, make_loss, texts, chunk, jit_compile, x, y, model_dir=None):
    model = make_group_model(strategy, make_loss)
    start = [v.numpy() for v in model.trainable_variables]
    loss_fn = gradient_cache_loss_fn(chunk) if chunk else step_lib.default_loss_fn
    if model_dir:
        step_losses = train_with_trainer(
            model, strategy, loss_fn, x, y, steps=2, model_dir=model_dir, jit_compile=jit_compile
        )
    else:
        step_losses = train_steps(model, strategy, loss_fn, x, y, steps=2, jit_compile=jit_compile)
    return step_losses, [v.numpy() for v in model.trainable_variables], start


def compare(losses_, weights, expected, expected_weights, start):
    return {
        "losses": [float(v) for v in losses_],
        "reference_losses": [float(v) for v in expected],
        "max_weight_difference": max(
            float(np.abs(a - b).max()) for a, b in zip(weights, expected_weights, strict=True)
        ),
        "moved": max(
            float(np.abs(a - b).max()) for a, b in zip(expected_weights, start, strict=True)
        ),
    }


def dropout_replayed(strategy, x, y):
    """Dropout on, under XLA: the cached step (chunks of 2 of a replica's 4 rows) and
    the uncached step over the same chunks from the same seed states, in `strategy`."""
    models = [make_group_model(strategy, mnrl, dropout=0.2) for _ in range(2)]
    copy_seed_states(*models)
    start = [v.numpy() for v in models[0].trainable_variables]
    runs = [
        (
            train_steps(model, strategy, loss_fn, x, y, steps=2, jit_compile=True),
            [v.numpy() for v in model.trainable_variables],
        )
        for model, loss_fn in zip(
            models, (gradient_cache_loss_fn(2), in_chunks_loss_fn(2)), strict=True
        )
    ]
    return runs[0], runs[1], start


def main():
    one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
    names = ARGS.cases.split(",") if ARGS.cases else [*sorted(CASES), "cached_dropout_xla"]
    results = {"num_replicas": STRATEGY.num_replicas_in_sync}
    # One reference per (loss, batch): the cases that share both share it (the model's
    # seeded start and the batch's seed make it the same run).
    references = {}
    for name in names:
        if name == "cached_dropout_xla":
            x, y = group_batch(4, seed=4)
            (losses_, weights), (expected, expected_weights), start = dropout_replayed(
                STRATEGY, x, y
            )
            results[name] = compare(losses_, weights, expected, expected_weights, start)
            continue
        make_loss, texts, chunk, jit_compile = CASES[name]
        x, y = group_batch(texts, seed=texts)
        model_dir = os.path.join(ARGS.model_dir, name) if name.startswith("trainer_") else None
        losses_, weights, start = run(
            STRATEGY, make_loss, texts, chunk, jit_compile, x, y, model_dir=model_dir
        )
        # The reference: one device, the whole batch, uncached, no XLA, the gathering loss.
        reference_loss = mnrl if make_loss is mnrl_replica_alone else make_loss
        if (reference_loss, texts) not in references:
            references[reference_loss, texts] = run(
                one_device, reference_loss, texts, 0, False, x, y
            )
        expected, expected_weights, _ = references[reference_loss, texts]
        results[name] = compare(losses_, weights, expected, expected_weights, start)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
