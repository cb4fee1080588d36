"""Periodic evaluation during training, and the export of the best evaluated model.

Every `eval_every` steps and at the end, `eval_fn(model)` runs on the host (on every
worker: it may run collectives; the chief writes), once per step: a periodic evaluation
less than half an interval before the last step is left to the final one (once per
epoch, 187 steps of 62.5 per epoch evaluate at 62, 124 and 187, not also at 186). Its
metrics, `{metric: value}` or `{split: {metric: value}}`, are logged (a split's as
`split/metric`, the name `best_metric` takes) and written to TensorBoard under the
training run's tags (`loss`, `accuracy`), in the run of their split
(`reporting.eval_summaries_dir`: `eval/`, `eval/test/`). With a `best_metric`, an
evaluation that beats the best one so far (this run's or an earlier run's of the same
`model_dir`, read back from `best/metrics.json`) is exported to `model_dir/best/` by
`export_fn`, with its `metrics.json`; the directory is replaced whole (`utils.atomic`),
so a kill leaves the previous best or the new one.

Example:

```python
evaluation = Evaluation(
    "/tmp/run", eval_fn=lambda model: {"f1": 0.9}, eval_every=100, best_metric="f1",
    is_chief=True,
)
if evaluation.due(step=100, num_steps=1000):
    evaluation.evaluate(model, 100, writers)  # logs, writes eval/ scalars, exports best/
```
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import keras

from keras_bert_zoo.models.model_files import save_inference_model
from keras_bert_zoo.training.reporting import metric_value, split_metrics, write_scalar
from keras_bert_zoo.utils import run_layout
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)


def save_model_keras(model: keras.Model, directory: str):
    """The default best export: `directory/model.keras` without optimizer state
    (`keras.models.load_model` reads it back)."""
    save_inference_model(model, os.path.join(directory, "model.keras"))


class Evaluation:
    """The evaluations of one `Trainer.train` call and its best export.

    Args:
        model_dir: the run directory (`best/` goes there).
        eval_fn: `fn(model) -> {metric: value}` or `{split: {metric: value}}`, or None
            (no evaluation).
        eval_every: steps between evaluations (0: only at the end).
        best_metric: the metric whose best value is exported (`split/metric` for a
            split's; None: no best export).
        higher_is_better: direction of `best_metric`.
        export_fn: `fn(model, directory)` writing the best model (default:
            `save_model_keras`).
        is_chief: whether this worker exports.

    Attributes:
        history: `(step, metrics)` of every evaluation of this run.
        best_step, best_value: the best evaluation so far (None before any).
    """

    def __init__(
        self,
        model_dir: str,
        *,
        eval_fn: Callable[[keras.Model], Mapping[str, float]] | None,
        eval_every: int = 0,
        best_metric: str | None = None,
        higher_is_better: bool = True,
        export_fn: Callable[[keras.Model, str], Any] | None = None,
        is_chief: bool = True,
    ):
        if best_metric is not None and eval_fn is None:
            raise UserError("best_metric needs an eval_fn")
        self.model_dir = model_dir
        self.eval_fn = eval_fn
        self.eval_every = eval_every
        self.best_metric = best_metric
        self.higher_is_better = higher_is_better
        self.export_fn = export_fn or save_model_keras
        self.is_chief = is_chief
        self.history: list[tuple[int, dict]] = []
        self.best_step, self.best_value = self._previous_best()

    @property
    def every(self) -> int:
        """Steps between evaluations (0: none between loops; a loop stops at each)."""
        return self.eval_every if self.eval_fn else 0

    def due(self, step: int, num_steps: int) -> bool:
        """Whether `step` is evaluated: the last step, and every `eval_every` steps but
        those less than half an interval before the last (its evaluation follows)."""
        if self.eval_fn is None:
            return False
        if step == num_steps:
            return True
        every = self.eval_every
        return bool(every) and step % every == 0 and 2 * (num_steps - step) >= every

    def pending(self, step: int, num_steps: int) -> bool:
        """Whether `step` is evaluated and this run has not evaluated it yet (a run
        stopped there leaves it to the rerun)."""
        evaluated = bool(self.history) and self.history[-1][0] == step
        return self.due(step, num_steps) and not evaluated

    def evaluate(self, model: keras.Model, step: int, writers):
        """Evaluates at `step` (on every worker; the chief writes) and exports a new best.

        Args:
            model: the model trained.
            step: its global step.
            writers: `reporting.EvalSummaryWriters` (a split's run each), or one summary
                writer for every split; no-op ones off the chief.
        """
        # The job says what it evaluates; a long evaluation is not a silence either.
        with stage(logger, "evaluating step %d", step, announce=False):
            results = self.eval_fn(model)
        by_split = {
            split: {name: metric_value(value) for name, value in values.items()}
            for split, values in split_metrics(results).items()
        }
        metrics = {
            name if split is None else f"{split}/{name}": value
            for split, values in by_split.items()
            for name, value in values.items()
        }
        self.history.append((step, metrics))
        logger.info(
            "eval at step %d: %s",
            step,
            ", ".join(f"{k} {v:.6g}" for k, v in sorted(metrics.items())),
        )
        for split, values in by_split.items():
            writer = writers.for_split(split) if hasattr(writers, "for_split") else writers
            with writer.as_default():
                for name, value in values.items():
                    write_scalar(name, value, step)
        if self.best_metric is None:
            return
        if self.best_metric not in metrics:
            raise KeyError(
                f"best_metric {self.best_metric!r} is not among the evaluation's "
                f"metrics {sorted(metrics)}"
            )
        value = metrics[self.best_metric]
        better = self.best_value is None or (
            value > self.best_value if self.higher_is_better else value < self.best_value
        )
        if better:
            self.best_step, self.best_value = step, value
            self._export_best(model, step, value, metrics)

    def _previous_best(self) -> tuple[int | None, float | None]:
        """The best evaluation an earlier run exported to `best/`, if it ranks by
        `best_metric`."""
        best_step, best_value, saved_metric = self._read_best()
        if self.best_metric is not None and saved_metric not in (None, self.best_metric):
            logger.warning(
                "%s/best holds the best %s; this run ranks by %s and will replace it",
                self.model_dir,
                saved_metric,
                self.best_metric,
            )
            return None, None
        return best_step, best_value

    def _read_best(self) -> tuple[int | None, float | None, str | None]:
        path = os.path.join(self.model_dir, run_layout.BEST_DIR, run_layout.METRICS_FILE)
        if not os.path.exists(path):
            return None, None, None
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            return int(saved["step"]), float(saved["value"]), saved.get("metric")
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("Ignoring unreadable %s: %s", path, error)
            return None, None, None

    def _export_best(self, model, step: int, value: float, metrics: dict):
        if not self.is_chief:
            return
        metric = self.best_metric
        with atomic_directory(os.path.join(self.model_dir, run_layout.BEST_DIR)) as temp:
            self.export_fn(model, temp)
            write_json_atomically(
                os.path.join(temp, run_layout.METRICS_FILE),
                {
                    "step": step,
                    "metric": metric,
                    "value": value,
                    "metrics": dict(metrics),
                },
            )
        logger.info("Exported the best model (%s=%.6g at step %d)", metric, value, step)
