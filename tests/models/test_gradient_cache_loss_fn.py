"""`gradient_cache_loss_fn` through the training step: one optimizer step with GradCache
gives the weights and loss of one step with `default_loss_fn` (the uncached forward
pass, `model.compute_loss` and its gradient) on the same batch, for in-batch negatives
with hard negatives (also under XLA), CoSENT and Matryoshka; the loss equals the numpy
restatement of the loss on the model's vectors; the step's tape does not differentiate
through the chunks' forward passes; dropout is replayed; loss scaling passes through.
The same under a MirroredStrategy of two CPU devices: tests/training/test_gathered_losses.py.
"""

import pathlib
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import embedding_losses as losses
from keras_bert_zoo.models.gradient_cache import gradient_cache_loss_fn
from keras_bert_zoo.training import step as step_lib
from keras_bert_zoo.utils.errors import UserError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from child_process import import_by_path  # noqa: E402
from gathered_losses_helpers import (  # noqa: E402
    copy_seed_states,
    group_batch,
    in_chunks_loss_fn,
    make_group_model,
    train_steps,
)

_restated = import_by_path(
    "embedding_losses_restated", pathlib.Path(__file__).with_name("test_embedding_losses.py")
)
np_cosent, np_mnrl = _restated.np_cosent, _restated.np_mnrl

STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")
CASES = {
    # Two hard negatives a row; 8 rows in chunks of 3 (the last chunk filled).
    "mnrl_hard_negatives": (lambda: losses.MultipleNegativesRankingLoss(symmetric=True), 4, 3),
    "cosent": (lambda: losses.CoSENTLoss(), 2, 5),
    "matryoshka_mnrl": (
        lambda: losses.MatryoshkaLoss(losses.MultipleNegativesRankingLoss(), dims=(16, 8)),
        3,
        1,
    ),
}


def _weights(model):
    return [v.numpy() for v in model.trainable_variables]


def assert_same_update(got, want, start):
    """The weights `got` equal `want` to float rounding, relative to how far the step
    moved them from `start` (which it must have: a step that moved nothing proves
    nothing)."""
    moved = max(np.abs(w - s).max() for w, s in zip(want, start, strict=True))
    assert moved > 1e-3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * moved)


def _expected_loss(case, vectors, scores):
    """The numpy restatement of the case's loss on the vectors."""
    if case == "cosent":
        return np_cosent(vectors, scores)
    if case == "mnrl_hard_negatives":
        return np_mnrl(vectors, symmetric=True)
    return np_mnrl(vectors) + np_mnrl(vectors[..., :8])


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, jit_compile",
    # Every loss in a graph; under XLA (the whole step compiled, the chunks' loops with
    # it) the one of the most texts a row, in chunks that do not divide the batch.
    [(case, False) for case in sorted(CASES)] + [("mnrl_hard_negatives", True)],
    ids=[f"{case}-graph" for case in sorted(CASES)] + ["mnrl_hard_negatives-xla"],
)
def test_cached_steps_equal_the_uncached_steps(case, jit_compile):
    """Two steps (the second from the first's weights): the same losses, the first the
    numpy loss of the initial vectors, and the same weights."""
    make_loss, texts, chunk_size = CASES[case]
    x, y = group_batch(texts, seed=len(case))
    results = {}
    for name, loss_fn in (
        ("uncached", step_lib.default_loss_fn),
        ("cached", gradient_cache_loss_fn(chunk_size)),
    ):
        model = make_group_model(STRATEGY, make_loss)
        start, vectors = _weights(model), model(x, training=False).numpy()
        step_losses = train_steps(model, STRATEGY, loss_fn, x, y, steps=2, jit_compile=jit_compile)
        results[name] = (step_losses, _weights(model))
    np.testing.assert_allclose(results["cached"][0][0], _expected_loss(case, vectors, y), rtol=1e-5)
    np.testing.assert_allclose(results["cached"][0], results["uncached"][0], rtol=1e-5)
    assert_same_update(results["cached"][1], results["uncached"][1], start)


@pytest.mark.slow
def test_the_tape_records_no_chunk_forward_pass():
    """The step's graph holds two loops over the chunks (step 1's forward pass, step 3's
    backpropagation) and no third: the tape does not differentiate through step 1."""
    make_loss, texts, chunk_size = CASES["mnrl_hard_negatives"]
    model = make_group_model(STRATEGY, make_loss)
    x, y = group_batch(texts, seed=1)
    train_step = step_lib.TrainStep(
        model, strategy=STRATEGY, loss_fn=gradient_cache_loss_fn(chunk_size)
    )
    compute_gradients = tf.function(train_step._compute_gradients_fn())  # noqa: SLF001
    graph = compute_gradients.get_concrete_function(
        (tf.nest.map_structure(tf.constant, x), tf.constant(y))
    ).graph
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert len(loops) == 2, [op.name for op in loops]


@pytest.mark.slow
@pytest.mark.parametrize("loss_scaled", [False, True], ids=["sgd", "loss_scale"])
def test_dropout_is_replayed_and_the_loss_scale_passes_through(loss_scaled):
    """Dropout on: a cached step (chunks of 4) equals the uncached step over the same
    two chunks from the same seed states, so the masks of step 3 are step 1's (with
    other masks the loss differs: checked without loss scaling). Under a
    LossScaleOptimizer (scale 2^15) the update is the same: the gradient is neither
    scaled twice nor left scaled."""
    make_loss, texts, _ = CASES["mnrl_hard_negatives"]
    x, y = group_batch(texts, seed=3)
    optimizer = lambda: (  # noqa: E731
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.5))
        if loss_scaled
        else keras.optimizers.SGD(0.5)
    )
    # The control of other masks once (the optimizer plays no part in the masks).
    names = ("cached", "chunked") + (() if loss_scaled else ("other_masks",))
    models = {
        name: make_group_model(STRATEGY, make_loss, dropout=0.2, optimizer=optimizer())
        for name in names
    }
    start = _weights(models["cached"])
    for name in names[1:]:
        copy_seed_states(models["cached"], models[name], offset=int(name == "other_masks"))
    cached = train_steps(models["cached"], STRATEGY, gradient_cache_loss_fn(4), x, y, steps=1)
    chunked, *other = (
        train_steps(models[name], STRATEGY, in_chunks_loss_fn(4), x, y, steps=1)
        for name in names[1:]
    )
    np.testing.assert_allclose(cached, chunked, rtol=1e-5)
    if other:
        assert abs(float(other[0][0]) - float(chunked[0])) > 1e-3
    assert_same_update(_weights(models["cached"]), _weights(models["chunked"]), start)


def test_bad_chunk_sizes_and_regularized_models_are_user_errors():
    with pytest.raises(UserError, match="chunk_size=0"):
        gradient_cache_loss_fn(0)
    inputs = keras.Input((3, 4))
    outputs = keras.layers.Dense(5, kernel_regularizer="l2")(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="sgd", loss=losses.MultipleNegativesRankingLoss())
    model(np.zeros((2, 3, 4), "float32"))
    with pytest.raises(UserError, match="regularization"):
        gradient_cache_loss_fn(2)(model, np.zeros((2, 3, 4), "float32"), None, None)
