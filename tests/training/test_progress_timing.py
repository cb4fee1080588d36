"""When progress reaches the user (issue 47, points 7 and 10): a loop of many steps ends
early to report, after a few seconds of steps first, then every `progress_every_seconds`,
whatever `steps_per_loop` is; the progress bar of a resumed run shows the global step of
the total, as the log lines do; Ctrl-C while the step is traced stops at once, with
nothing to save; SIGTERM's line says what applies to SIGTERM."""

import os
import re
import shutil
import signal
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_progress_bar import Terminal, _screen, _size
from test_trainer import build, dataset_fn_of, token5_data, trainer

from keras_bert_zoo.training import run_phase
from keras_bert_zoo.training import trainer as trainer_module
from keras_bert_zoo.training.reporting import Reporter
from keras_bert_zoo.utils import interrupts

STEP_SECONDS = 0.2


class _Reports(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append(batch)


def _slow_dataset_fn(x, y):
    """Batches of 8 that each take `STEP_SECONDS` to make (a slow step, for the clock)."""
    plain = dataset_fn_of(x, y, batch=8, shuffle=False)

    def slow(batch_x, batch_y):
        tf.py_function(lambda: time.sleep(STEP_SECONDS), [], [])
        return batch_x, batch_y

    return lambda context: plain(context).map(slow)


@pytest.mark.slow
def test_a_long_loop_reports_after_its_time_limit_not_its_steps(tmp_path):
    x, y = token5_data()
    reports = _Reports()
    model = build(steps=16)
    run = trainer(
        model, tmp_path, steps_per_loop=1000, checkpoint_every=0, progress_every_seconds=1.0
    )
    result = run.train(_slow_dataset_fn(x, y), 16, callbacks=[reports], input_state="skip")
    # One loop of 1000 steps was asked for; each step takes 0.2 s, so the loops end on
    # the clock (about every 5 steps) and the last at the last step.
    assert result.step == 16 and reports.steps[-1] == 16
    assert len(reports.steps) >= 3, reports.steps
    assert reports.steps[0] <= 8, reports.steps
    # The steps are those of one uninterrupted run: every step's loss, in order.
    assert len(result.losses) == 16
    # The loop traced before its first call is the one every call ran: traced once.
    assert run._train_loop.experimental_get_tracing_count() == 1


@pytest.mark.slow
def test_the_first_loop_reports_after_a_few_seconds_by_default(tmp_path):
    assert run_phase.FIRST_REPORT_SECONDS <= 10
    assert trainer_module.Trainer.__init__.__kwdefaults__["progress_every_seconds"] <= 30
    x, y = token5_data()
    reports = _Reports()
    model = build(steps=40)
    run = trainer(model, tmp_path, steps_per_loop=1000, checkpoint_every=0)
    started = time.time()
    run.train(_slow_dataset_fn(x, y), 40, callbacks=[reports], input_state="skip")
    # 40 steps of 0.2 s: the first report after FIRST_REPORT_SECONDS of steps (about 25),
    # not after the 40 of the loop.
    assert len(reports.steps) >= 2 and reports.steps[0] < 40, reports.steps
    assert time.time() - started < 60


def test_the_bar_of_a_resumed_run_counts_the_global_step_of_the_total(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=None: _size(80))
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    # A run resumed at step 6 of 12, reporting loops of 2 steps.
    reporter = Reporter(
        model, str(tmp_path), progress="bar", is_chief=True, evaluates=False, step=6, num_steps=12
    )
    reporter.begin()
    for step in (8, 10, 12):
        ones = np.ones(2, np.float32)
        reporter.record(step, ones * 0.5, ones, ones * 1e-3, seconds=0.5)
    bars = [line for line in _screen(terminal.getvalue()) if re.match(r"\s*\d+/\d+ ", line)]
    # "8/12" ... "12/12" as the log lines say ("step 8/12"), not "2/6" ... "6/6".
    shown = [re.match(r"\s*(\d+)/(\d+)", bar).groups() for bar in bars]
    assert shown and shown[-1] == ("12", "12"), bars
    assert all(total == "12" and 6 < int(step) <= 12 for step, total in shown), bars
    # The time per step counts this run's steps only (3 loops of 2 steps).
    assert reporter.progress_bar._estimate_step_duration(12, time.time()) < 60


def test_ctrl_c_while_the_step_is_traced_stops_at_once_with_nothing_to_save(tmp_path, capfd):
    x, y = token5_data()
    model = build(steps=10)
    base_loss = trainer_module.default_loss_fn
    traced = []

    def slow_to_trace(model, x, y, sample_weight):
        # Python code runs only while the step is traced: a slow trace, Ctrl-C in it.
        if not traced:
            traced.append(time.time())
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(20)
        return base_loss(model, x, y, sample_weight)

    run = trainer(model, tmp_path, loss_fn=slow_to_trace, checkpoint_every=0)
    started = time.time()
    with pytest.raises(interrupts.Interrupted, match=r"stopped at step 0 of 10 \(SIGINT\)") as info:
        run.train(dataset_fn_of(x, y, batch=8), 10)
    assert time.time() - started < 15  # the 20 s of tracing left were not waited for
    assert "nothing to save" in str(info.value) and info.value.exit_status == 130
    assert int(run.global_step.numpy()) == 0
    assert not os.path.isdir(tmp_path / "checkpoints") or not os.listdir(tmp_path / "checkpoints")
    err = capfd.readouterr().err
    assert "SIGINT: stopping now, while the training step is traced" in err, err
    assert "Ctrl-C again stops at once" in err


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_says_what_stops_at_once_for_that_signal(capfd, number):
    requests = interrupts.StopRequests()
    with requests:
        os.kill(os.getpid(), number)
        deadline = time.time() + 10
        while not requests.requested and time.time() < deadline:
            time.sleep(0.01)
    err = capfd.readouterr().err
    assert requests.signal_number == number
    assert f"{signal.Signals(number).name}: stopping at the next step, with a checkpoint" in err
    if number == signal.SIGTERM:
        # Not "Ctrl-C again": a SIGTERM comes from kill or a scheduler.
        assert "Ctrl-C" not in err, err
        assert f"kill -KILL {os.getpid()}" in err and "another SIGTERM changes nothing" in err
    else:
        assert "Ctrl-C again stops at once, without one" in err
