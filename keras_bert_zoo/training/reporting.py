"""What a training run reports between its compiled loops: progress, TensorBoard, callbacks.

After each loop of steps the `Trainer` hands the loop's losses, gradient norms and
learning rates to its `Reporter`, which

- shows progress on the chief: a Keras progress bar on a terminal (the global step of
  the run's last step, the loss and as many of the model's metrics as fit 80 columns),
  else one log line per loop with steps/s, sequences/s and the ETA;
- writes TensorBoard summaries under `model_dir/train/` (every step's loss, learning
  rate and gradient norm at its own step; the loop's metrics and speed at its last
  step); evaluations go to the runs of `eval_summaries_dir` under the same tags
  (`loss`, `accuracy`, ...), so TensorBoard draws train and eval on one chart;
- calls the Keras callbacks (`on_train_begin`, `on_train_batch_end` after every loop
  with the logged values, `on_train_end`);
- keeps what `Trainer.train` returns, a `TrainingResult` (every step's values, one
  dict per loop).

Summaries are written as `tf.summary.scalar` / `tf.summary.text` and the `tensorboard`
package's `pr_curve` summary would, without that package (the tensorflow 2.21 wheel does
not depend on it): TensorBoard's scalars, text and PR-curve plugins read these events as
their own.

Example:

```python
writer = tf.summary.create_file_writer("/tmp/run/train")
with writer.as_default():
    write_scalar("loss", 0.25, step=100)
    write_text("confusion_matrix", "| | a | b |\\n|-|-|-|\\n...", step=100)
    write_pr_curve("pr_curve/pos", labels=[True, False], predictions=[0.9, 0.4], step=100)
```
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from keras_bert_zoo.utils import run_layout
from keras_bert_zoo.utils.progress import format_eta

logger = logging.getLogger(__name__)

PROGRESS_MODES = ("auto", "bar", "log", "none")

# The split whose evaluation summaries go to `eval/` itself (the others: `eval/<split>/`).
MAIN_EVAL_SPLIT = "dev"

# TensorBoard's PR-curve plugin: its name, the version of its data, and the default
# number of thresholds and smallest count of `tensorboard.plugins.pr_curve.summary.pb`.
PR_CURVE_PLUGIN = "pr_curves"
PR_CURVE_THRESHOLDS = 201
_PR_CURVE_MINIMUM_COUNT = 1e-7

# The progress bar fits an 80-column terminal: "step/steps", a 20-column bar, the time
# ("12s 345ms/step", about 15 columns), then the loss and as many of the model's
# metrics as fit.
BAR_WIDTH = 20
_BAR_COLUMNS = 79
_BAR_TIME_COLUMNS = 15
# Logged and written to TensorBoard, but not worth a place on the bar.
_NOT_ON_BAR = frozenset(
    ("step", "learning_rate", "gradient_norm", "steps_per_second", "sequences_per_second")
)


@dataclasses.dataclass
class TrainingResult:
    """What `Trainer.train` returns.

    Attributes:
        step: the global step reached.
        restored_step: the step the run resumed from, or None for a fresh start.
        losses: the loss of every step this call ran, in order (`float32`).
        learning_rates: the learning rate of each of those steps.
        gradient_norms: the global gradient norm of each of those steps.
        history: one dict per logged loop (step, loss, metrics, speed).
        eval_history: `(step, metrics)` for every evaluation.
        best_step, best_value: the best evaluation of `best_metric` so far (this run or
            an earlier one of the same `model_dir`).
    """

    step: int
    restored_step: int | None
    losses: np.ndarray
    learning_rates: np.ndarray
    gradient_norms: np.ndarray
    history: list[dict]
    eval_history: list[tuple[int, dict]]
    best_step: int | None = None
    best_value: float | None = None


def write_scalar(name: str, value: float, step: int):
    """A scalar summary, as `tf.summary.scalar` writes it (see the module docstring)."""
    tf.summary.write(
        name, tf.constant(value, tf.float32), step=step, metadata=_plugin_metadata("scalars")
    )


def _plugin_metadata(plugin_name: str, content: bytes = b"") -> summary_pb2.SummaryMetadata:
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin_name, content=content)
    )


def _varint(number: int) -> bytes:
    """`number` as a protocol-buffer varint."""
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def pr_curve_data(labels, predictions, num_thresholds: int = PR_CURVE_THRESHOLDS) -> np.ndarray:
    """The `[6, num_thresholds]` float32 tensor of TensorBoard's PR-curve plugin: true
    positives, false positives, true negatives, false negatives, precision and recall at
    `num_thresholds` thresholds evenly spaced in [0, 1], computed as
    `tensorboard.plugins.pr_curve.summary.pb` does.

    Args:
        labels: booleans, whether each example is of the class.
        predictions: the class's probability for each example, in [0, 1].
        num_thresholds: at least 2.
    """
    labels = np.asarray(labels, bool).ravel()
    predictions = np.clip(np.asarray(predictions, np.float64).ravel(), 0.0, 1.0)
    buckets = np.floor(predictions * (num_thresholds - 1)).astype(np.int32)
    counts_range = (0, num_thresholds - 1)
    positives = labels.astype(np.float64)
    tp_buckets, _ = np.histogram(buckets, num_thresholds, counts_range, weights=positives)
    fp_buckets, _ = np.histogram(buckets, num_thresholds, counts_range, weights=1 - positives)
    tp = np.cumsum(tp_buckets[::-1])[::-1]  # at or above each threshold
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(_PR_CURVE_MINIMUM_COUNT, tp + fp)
    recall = tp / np.maximum(_PR_CURVE_MINIMUM_COUNT, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall)).astype(np.float32)


def write_pr_curve(
    name: str, labels, predictions, step: int, num_thresholds: int = PR_CURVE_THRESHOLDS
):
    """A precision-recall curve of one class (TensorBoard's PR Curves tab), written as
    the `tensorboard` package's `pr_curve` summary would, without that package: the
    `pr_curve_data` tensor with the plugin's metadata (`PrCurvePluginData`: version 0,
    `num_thresholds`).

    Args:
        name: the tag.
        labels, predictions: see `pr_curve_data`.
        step: the global step.
        num_thresholds: thresholds evenly spaced in [0, 1].
    """
    # PrCurvePluginData: field 1 (version, 0: left out) and field 2 (num_thresholds).
    content = b"\x10" + _varint(int(num_thresholds))
    tf.summary.write(
        name,
        tf.constant(pr_curve_data(labels, predictions, num_thresholds)),
        step=step,
        metadata=_plugin_metadata(PR_CURVE_PLUGIN, content),
    )


def eval_summaries_dir(split: str | None = None) -> str:
    """Where an evaluation's summaries go, relative to the run directory:
    `eval/` for a model's own metrics (no split) and the main split (`MAIN_EVAL_SPLIT`,
    `dev`), `eval/<split>/` for another (`eval/test/`). Each is a TensorBoard run
    whose tags are the training run's (`loss`, `accuracy`): the charts overlay them."""
    if split is None or split == MAIN_EVAL_SPLIT:
        return run_layout.EVAL_SUMMARIES_DIR
    return os.path.join(run_layout.EVAL_SUMMARIES_DIR, split)


def split_metrics(metrics: Mapping) -> dict[str | None, dict]:
    """`{split: {metric: value}}` of an evaluation's results: `{split: {metric: value}}`
    as given, or a flat `{metric: value}` as the split None."""
    if any(isinstance(value, Mapping) for value in metrics.values()):
        return {split: dict(values) for split, values in metrics.items()}
    return {None: dict(metrics)}


def metric_value(value):
    """A metric as reported: a count (a Python or numpy integer) stays an `int`, any
    other number is a `float`."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return int(value)
    return float(value)


def format_metric(value, digits: int = 4) -> str:
    """A metric as the tools print it: a count as an integer (`sequences 111`), any
    other number with `digits` decimals (`accuracy 0.8600`)."""
    value = metric_value(value)
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


class EvalSummaryWriters:
    """The summary writers of an evaluation's splits (`eval_summaries_dir`), made when
    first written to; no-op ones off the chief (`active` false).

    Args:
        model_dir: the run directory.
        active: whether this worker writes.
    """

    def __init__(self, model_dir: str, active: bool):
        self.model_dir = model_dir
        self.active = active
        self._writers: dict[str, Any] = {}

    def for_split(self, split: str | None = None):
        """The writer of `split`'s run (None: the model's own metrics, `eval/`)."""
        directory = eval_summaries_dir(split)
        if directory not in self._writers:
            self._writers[directory] = summary_writer(self.model_dir, directory, self.active)
        return self._writers[directory]

    def flush(self):
        for writer in self._writers.values():
            writer.flush()

    def close(self):
        for writer in self._writers.values():
            writer.close()


def write_text(name: str, markdown: str, step: int):
    """A text summary (TensorBoard's Text tab renders its markdown), written as
    `tf.summary.text` would, without the `tensorboard` package."""
    tf.summary.write(name, tf.constant(markdown), step=step, metadata=_plugin_metadata("text"))


def bar_values(logs: dict, num_steps: int) -> list[tuple[str, float]]:
    """The loss, then as many of the model's metrics as fit `_BAR_COLUMNS` (and the
    terminal)."""
    columns = min(_BAR_COLUMNS, shutil.get_terminal_size((80, 24)).columns - 1)
    values, used = [], 2 * len(str(num_steps)) + 2 + BAR_WIDTH + _BAR_TIME_COLUMNS
    for name, value in logs.items():
        width = len(name) + 11  # " - name: 0.1234"
        fits = name == "loss" or used + width <= columns  # the loss is always shown
        if name in _NOT_ON_BAR or name == "loss_scale" or not fits:
            continue
        values.append((name, value))
        used += width
    return values


class ResumedProgbar(keras.utils.Progbar):
    """Keras' progress bar of a run from `start_step` to `num_steps`: it shows the global
    step of the total (`20/62` after a resume at 10, as the log lines say), and its time
    per step and ETA count only this run's steps. Every value shown is already its
    loop's mean: no averaging.

    Args:
        num_steps: the run's last step.
        start_step: the step it started (or resumed) from.
    """

    def __init__(self, num_steps: int, start_step: int = 0):
        super().__init__(num_steps, width=BAR_WIDTH, stateless_metrics=())
        self.start_step = int(start_step)

    def _estimate_step_duration(self, current, now):
        return super()._estimate_step_duration(current - self.start_step, now)


def loop_logs(
    model: keras.Model,
    step: int,
    losses: np.ndarray,
    norms: np.ndarray,
    rates: np.ndarray,
    seconds: float,
    batch_size: int | None,
    loss_scale_optimizer=None,
) -> dict:
    """The logged values of one loop: its mean loss and gradient norm, last learning
    rate, speed, loss scale and the model's metrics (which are reset for the next loop).

    Args:
        model: the model trained; its compiled metrics are read and reset.
        step: the global step at the end of the loop.
        losses, norms, rates: the loop's values, one per step.
        seconds: the loop's wall time.
        batch_size: sequences per step (None: sequences/s is not reported).
        loss_scale_optimizer: the `LossScaleOptimizer`, whose scale is reported.
    """
    steps_per_second = len(losses) / max(seconds, 1e-9)
    logs = {
        "step": step,
        "loss": float(np.mean(losses)),
        "learning_rate": float(rates[-1]),
        "gradient_norm": float(np.mean(norms)),
        "steps_per_second": steps_per_second,
    }
    if batch_size is not None:
        logs["sequences_per_second"] = steps_per_second * batch_size
    if loss_scale_optimizer is not None:
        logs["loss_scale"] = float(loss_scale_optimizer.dynamic_scale.numpy())
    for name, value in model.get_metrics_result().items():
        if name == "loss":  # Keras' loss tracker; the loop reports its own loss
            continue
        if np.ndim(value) == 0:
            logs[name] = float(value)
    model.reset_metrics()
    return logs


def summary_writer(model_dir: str, name: str, active: bool):
    """A summary writer of `model_dir/name`, or a no-op one when not `active` (off the
    chief)."""
    if active:
        return tf.summary.create_file_writer(os.path.join(model_dir, name))
    return tf.summary.create_noop_writer()


class Reporter:
    """Reports one `Trainer.train` call (see the module docstring).

    Args:
        model: the model trained (its metrics are logged; the callbacks' model).
        model_dir: where the summaries go (`train/`, `eval_summaries_dir`).
        progress: `"bar"`, `"log"` or `"none"` (`"auto"` resolved by the Trainer).
        is_chief: whether this worker shows progress and writes summaries.
        evaluates: whether the run evaluates (its eval writers write).
        step: the step the run starts from.
        num_steps: the step it trains to.
        batch_size: sequences per step (None: no sequences/s).
        loss_scale_optimizer: the `LossScaleOptimizer`, whose scale is logged (or None).
        callbacks: Keras callbacks.
    """

    def __init__(
        self,
        model: keras.Model,
        model_dir: str,
        *,
        progress: str,
        is_chief: bool,
        evaluates: bool,
        step: int,
        num_steps: int,
        batch_size: int | None = None,
        loss_scale_optimizer=None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
    ):
        self.model = model
        self.batch_size = batch_size
        self.loss_scale_optimizer = loss_scale_optimizer
        self.progress = progress
        self.is_chief = is_chief
        self.num_steps = num_steps
        self.callbacks = keras.callbacks.CallbackList(list(callbacks), model=model)
        self.writer = summary_writer(model_dir, run_layout.TRAIN_SUMMARIES_DIR, is_chief)
        self.eval_writers = EvalSummaryWriters(model_dir, is_chief and evaluates)
        self.progress_bar = self._progress_bar(step, num_steps)
        self.bar_line_open = False
        self.start_step, self.run_start = step, 0.0
        # (time, step) at the end of the run's first loop, which pays for tracing.
        self.first_loop_end: tuple[float, int] | None = None
        self.losses: list[np.ndarray] = []
        self.norms: list[np.ndarray] = []
        self.rates: list[np.ndarray] = []
        self.history: list[dict] = []

    @property
    def eval_writer(self):
        """The writer of `eval/` (a model's own metrics and the main split's)."""
        return self.eval_writers.for_split(None)

    def _progress_bar(self, step: int, num_steps: int) -> keras.utils.Progbar | None:
        if self.progress != "bar" or not self.is_chief or step >= num_steps:
            return None
        return ResumedProgbar(num_steps, step)

    def begin(self):
        """The run starts: the callbacks' `on_train_begin`; time counts from here."""
        self.callbacks.on_train_begin()
        self.run_start = time.time()

    def end(self):
        """The callbacks' `on_train_end`, with the last loop's logs."""
        self.callbacks.on_train_end(self.history[-1] if self.history else None)

    def record(self, step: int, losses, norms, rates, seconds: float):
        """Keeps one loop's values and logs (`loop_logs`), then shows and writes them (see
        the module docstring).

        Args:
            step: the global step at the end of the loop.
            losses, norms, rates: the loop's values, one per step.
            seconds: the loop's wall time.
        """
        logs = loop_logs(
            self.model,
            step,
            losses,
            norms,
            rates,
            seconds,
            self.batch_size,
            self.loss_scale_optimizer,
        )
        self.losses.append(losses)
        self.norms.append(norms)
        self.rates.append(rates)
        self.history.append(logs)
        if self.first_loop_end is None:
            self.first_loop_end = (time.time(), step)
        self._show(step, logs)
        with self.writer.as_default():
            # Every step's loss, learning rate and gradient norm at its own step (a short
            # run still draws a curve); the loop's metrics and speed at its last step.
            per_step = {"loss": losses, "learning_rate": rates, "gradient_norm": norms}
            first_step = step - len(losses) + 1
            for name, values in per_step.items():
                for offset, value in enumerate(values):
                    write_scalar(name, float(value), first_step + offset)
            for name, value in logs.items():
                if name != "step" and name not in per_step:
                    write_scalar(name, value, step)
        self.callbacks.on_train_batch_end(step, logs)

    def _show(self, step: int, logs: dict):
        if not self.is_chief or self.progress == "none":
            return
        num_steps = self.num_steps
        eta = self.eta(step, time.time())
        if self.progress_bar is not None:
            values = bar_values(logs, num_steps)
            self.progress_bar.update(step, values=values, finalize=step >= num_steps)
            self.bar_line_open = step < num_steps
            return
        parts = [f"step {step}/{num_steps}"]
        parts += [f"{k} {v:.4g}" for k, v in logs.items() if k != "step"]
        parts.append(f"ETA {format_eta(eta)}")
        logger.info("  ".join(parts))

    def eta(self, step: int, now: float) -> float:
        """Seconds left, at the steady rate: the time per step since the end of the run's
        first loop (evaluations included), not counting that loop, which traces the
        step (on a CPU it can take as long as a hundred later steps: a first ETA of
        29 minutes for a run of 6.5). Unknown (inf) until a second loop ends."""
        if step >= self.num_steps:
            return 0.0
        if self.first_loop_end is None or step <= self.first_loop_end[1]:
            return float("inf")
        since, at = self.first_loop_end
        return (now - since) / (step - at) * (self.num_steps - step)

    def end_bar_line(self):
        """Ends the bar's line before a log line, which would be glued onto it."""
        if self.progress_bar is not None and self.bar_line_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.bar_line_open = False

    def flush(self, *, evaluations: bool = False):
        self.writer.flush()
        if evaluations:
            self.eval_writers.flush()

    def result(self, step: int, restored_step: int | None, evaluation) -> TrainingResult:
        """The run's `TrainingResult`, with `evaluation`'s history and best (an
        `evaluation.Evaluation`)."""

        def concatenated(chunks):
            return np.concatenate(chunks) if chunks else np.zeros((0,), np.float32)

        return TrainingResult(
            step=step,
            restored_step=restored_step,
            losses=concatenated(self.losses),
            learning_rates=concatenated(self.rates),
            gradient_norms=concatenated(self.norms),
            history=self.history,
            eval_history=evaluation.history,
            best_step=evaluation.best_step,
            best_value=evaluation.best_value,
        )
