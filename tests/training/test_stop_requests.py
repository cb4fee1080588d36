"""Stopping `Trainer.train` on a signal, in one process: a SIGINT sent while the
compiled loop runs (from the input pipeline, at a chosen batch) stops it inside that
loop at the next step, with a checkpoint at the step reached and `Interrupted`; a new
`Trainer` on the same directory resumes there and ends with bitwise the weights of an
uninterrupted run. The reference is that uninterrupted run of the same model and data.
"""

import os
import signal
import threading

import numpy as np
import pytest
import tensorflow as tf
from test_trainer import build, token5_data, trainer, weights_of

from keras_bert_zoo.utils import interrupts

STEPS = 40
SIGNAL_AT_BATCH = 9


def _dataset_fn(x, y, signal_at_batch=None):
    """Batches of 8, in order; the batch `signal_at_batch` (0-based) sends this process
    SIGINT as tf.data makes it, around step `signal_at_batch` (tf.data may make a batch
    ahead)."""

    def maybe_signal(index):
        if signal_at_batch is not None and int(index) == signal_at_batch:
            os.kill(os.getpid(), signal.SIGINT)
        return index

    def dataset_fn(context):
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8, drop_remainder=True)
        numbered = tf.data.Dataset.zip((tf.data.Dataset.range(10**9), dataset))

        def signal_then_batch(index, batch):
            tf.py_function(maybe_signal, [index], tf.int64)
            return batch

        return numbered.map(signal_then_batch)

    return dataset_fn


@pytest.mark.slow
def test_a_signal_inside_the_compiled_loop_stops_at_the_next_step_and_resumes_bitwise(tmp_path):
    # Signal handlers are installed from the main thread only (pytest and its xdist
    # workers run tests there): fail rather than skip if that ever changes.
    assert threading.current_thread() is threading.main_thread()
    x, y = token5_data()
    reference = build(steps=STEPS, dropout=0.1)
    trainer(reference, tmp_path / "reference", steps_per_loop=100, checkpoint_every=0).train(
        _dataset_fn(x, y), STEPS, input_state="skip"
    )

    model = build(steps=STEPS, dropout=0.1)
    run = trainer(model, tmp_path / "stopped", steps_per_loop=100, checkpoint_every=0)
    # What this process had (Python's default_int_handler, unless an earlier test's
    # library changed it in this worker).
    handler_before = signal.getsignal(signal.SIGINT)
    with pytest.raises(interrupts.Interrupted, match=rf"stopped at step (\d+) of {STEPS}") as info:
        run.train(_dataset_fn(x, y, SIGNAL_AT_BATCH), STEPS, input_state="skip")
    assert info.value.exit_status == 128 + signal.SIGINT
    stopped = int(run.global_step.numpy())
    # One loop of all the steps was asked for: it ended inside, a step or two after the
    # signal.
    assert SIGNAL_AT_BATCH - 1 <= stopped <= SIGNAL_AT_BATCH + 3 < STEPS, stopped
    assert sorted(os.listdir(tmp_path / "stopped" / "checkpoints")) == [f"ckpt-{stopped:08d}"]
    # The handlers are gone again: the process's own SIGINT handling is back.
    assert signal.getsignal(signal.SIGINT) is handler_before

    resumed = build(steps=STEPS, dropout=0.1)
    result = trainer(resumed, tmp_path / "stopped", steps_per_loop=100, checkpoint_every=0).train(
        _dataset_fn(x, y), STEPS, input_state="skip"
    )
    assert result.restored_step == stopped and result.step == STEPS
    for got, want in zip(weights_of(resumed), weights_of(reference), strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
