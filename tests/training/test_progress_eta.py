"""The training log's ETA counts from the steady rate: the run's first loop, which traces
the step, is left out, and the ETA is unknown until a second loop ends (issue 61: a first
ETA of 29 minutes for a run that ended 6.5 minutes later)."""

import logging
import types

import keras
import numpy as np

from keras_bert_zoo.training import reporting


def _reporter(tmp_path, num_steps):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    return reporting.Reporter(
        model,
        str(tmp_path),
        progress="log",
        is_chief=True,
        evaluates=False,
        step=0,
        num_steps=num_steps,
    )


def test_the_eta_leaves_out_the_first_loop_and_is_unknown_before_a_second(
    tmp_path, monkeypatch, caplog
):
    reporter = _reporter(tmp_path, num_steps=100)
    now = [0.0]
    # The reporter's clock only (logging reads the real one).
    monkeypatch.setattr(reporting, "time", types.SimpleNamespace(time=lambda: now[0]))
    reporter.begin()  # t = 0
    values = np.zeros(10, np.float32)
    with caplog.at_level(logging.INFO, logger=reporting.logger.name):
        # The first loop: 10 steps in 60 s, most of it tracing.
        now[0] = 60.0
        reporter.record(10, values, values, values, 60.0)
        # Then 10 steps every 10 s: 1 s a step, whatever the first loop took.
        now[0] = 70.0
        reporter.record(20, values, values, values, 10.0)
        now[0] = 80.0
        reporter.record(30, values, values, values, 10.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert [line.rsplit("ETA ", 1)[1] for line in lines] == ["?", "0:01:20", "0:01:10"]
    # The whole run's mean (the old estimate) would have said 0:04:40 after step 30.
    assert reporter.eta(100, 99.0) == 0.0
