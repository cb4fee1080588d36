"""Losses over the whole batch in the training step: under a MirroredStrategy of two
CPU devices and a cluster of two workers, with and without XLA, uncached and through
the gradient cache, by the step alone and through `Trainer.train`, two steps of
in-batch negatives (hard negatives, symmetric) and of CoSENT give one device's losses
and weights on the global batch; gradient accumulation of such a loss is refused with
a message; `XlaForwardModel` compiles the forward and backward pass and differentiates
as the model does."""

import json
import pathlib
import sys

import child_process
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import embedding_losses as losses
from keras_bert_zoo.training import Trainer
from keras_bert_zoo.training import step as step_lib
from keras_bert_zoo.utils.errors import UserError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from gathered_losses_helpers import group_batch, make_group_model  # noqa: E402

CHILD = pathlib.Path(__file__).resolve().parent / "_gathered_losses_child.py"
# The replicas' summed gradients against one device's (observed: 1.5e-6 of a step that
# moved the weights by 1.76, CoSENT under XLA).
RELATIVE = 1e-5


def _child_results(output):
    """The child's JSON line (a worker may log after it, as its peer shuts down)."""
    lines = [line for line in output.splitlines() if line.startswith('{"num_replicas"')]
    assert lines, output[-3000:]
    return json.loads(lines[-1])


def _assert_equal_one_device(results, controls=()):
    assert results.pop("num_replicas") == 2
    for name, result in results.items():
        if name in controls:
            # Each replica's negatives alone: another loss, other weights.
            assert abs(result["losses"][0] - result["reference_losses"][0]) > 0.1, name
            continue
        np.testing.assert_allclose(
            result["losses"], result["reference_losses"], rtol=RELATIVE, err_msg=name
        )
        assert result["moved"] > 1e-2, name
        assert result["max_weight_difference"] <= RELATIVE * result["moved"], (name, result)


@pytest.mark.slow
def test_mirrored_two_devices_equal_one_device_on_the_global_batch(tmp_path):
    codes, outputs = child_process.run_together(
        [[sys.executable, str(CHILD), "--strategy=mirrored", f"--model_dir={tmp_path}"]],
        [child_process.environment()],
        timeout=900,
    )
    assert codes == [0], outputs[0][-3000:]
    results = _child_results(outputs[0])
    assert sorted(results) == [
        "cached_cosent",
        "cached_dropout_xla",
        "cosine_mse_xla",
        "mnrl_hard_negatives",
        "mnrl_replica_alone",
        "num_replicas",
        "trainer_cached_mnrl_hard_negatives_xla",
        "trainer_mnrl_hard_negatives_xla",
    ]
    _assert_equal_one_device(results, controls=("mnrl_replica_alone",))


@pytest.mark.slow
def test_two_workers_equal_one_device_on_the_global_batch(tmp_path):
    command = [
        sys.executable,
        str(CHILD),
        "--strategy=multi_worker_mirrored",
        # The most of the step at once: the Trainer's per-worker input, the gradient
        # cache, XLA's passes of the model, the all-gather across the processes.
        "--cases=trainer_cached_mnrl_hard_negatives_xla",
        f"--model_dir={tmp_path}",
    ]
    codes, outputs = child_process.run_together(
        [command] * 2, child_process.worker_environments(2), timeout=900
    )
    assert codes == [0, 0], "\n".join(output[-2000:] for output in outputs)
    for output in outputs:
        _assert_equal_one_device(_child_results(output))


ONE_DEVICE = tf.distribute.OneDeviceStrategy("/cpu:0")


@pytest.mark.parametrize(
    "make_loss",
    [
        losses.MultipleNegativesRankingLoss,
        lambda: losses.CoSENTLoss(gather_across_replicas=False),
        lambda: losses.MatryoshkaLoss(losses.CoSENTLoss(), dims=(16, 8)),
    ],
    ids=["mnrl", "cosent_replica", "matryoshka_cosent"],
)
def test_accumulating_a_loss_of_the_whole_batch_is_refused(tmp_path, make_loss):
    model = make_group_model(ONE_DEVICE, make_loss)
    with pytest.raises(UserError) as raised:
        Trainer(model, model_dir=str(tmp_path), strategy=ONE_DEVICE, gradient_accumulation_steps=2)
    message = str(raised.value)
    assert "\n" not in message
    assert "gradient_accumulation_steps=2" in message and model.loss.name in message
    assert "each micro-batch would see only its own" in message
    assert "--gradient_cache_chunk_size" in message


def test_a_loss_of_independent_rows_accumulates_and_only_a_gather_leaves_xla():
    rows = make_group_model(ONE_DEVICE, losses.CosineSimilarityLoss)
    assert step_lib.batch_scopes(rows) == {}
    step_lib.TrainStep(
        rows, strategy=ONE_DEVICE, loss_fn=step_lib.default_loss_fn, gradient_accumulation_steps=2
    )
    gathering = make_group_model(ONE_DEVICE, losses.MultipleNegativesRankingLoss)
    assert step_lib.batch_scopes(gathering) == {"multiple_negatives_ranking": "global"}
    # One replica gathers nothing: XLA compiles the whole step as before.
    step = step_lib.TrainStep(
        gathering, strategy=ONE_DEVICE, loss_fn=step_lib.default_loss_fn, jit_compile=True
    )
    assert not step.gathers


@pytest.mark.slow
def test_xla_forward_model_compiles_and_differentiates_as_the_model():
    model = make_group_model(ONE_DEVICE, losses.MultipleNegativesRankingLoss)
    x, _ = group_batch(3, seed=4)
    x = tf.nest.map_structure(tf.constant, x)
    forward = step_lib.XlaForwardModel(model)
    # Everything but the call is the model's.
    assert forward.optimizer is model.optimizer and forward.loss is model.loss

    @tf.function
    def value_and_gradients(model):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y_pred=model(x, training=True), training=True)
        return loss, tape.gradient(loss, model.trainable_variables)

    got, got_gradients = value_and_gradients(forward)
    want, want_gradients = value_and_gradients(model)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    largest = max(float(tf.reduce_max(tf.abs(g))) for g in want_gradients if g is not None)
    for a, b in zip(got_gradients, want_gradients, strict=True):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(
                tf.convert_to_tensor(a), tf.convert_to_tensor(b), rtol=1e-4, atol=1e-5 * largest
            )
    # XLA compiles the forward function and its gradient function.
    library = value_and_gradients.get_concrete_function(forward).graph._functions  # noqa: SLF001
    compiled = [
        name for name, function in library.items() if function.definition.attr["_XlaMustCompile"].b
    ]
    assert any("forward" in name for name in compiled), compiled
    assert any("backward" in name for name in compiled), compiled
