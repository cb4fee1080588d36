"""`Trainer`: the one training loop of every job (pretraining and every task).

Why a loop of our own rather than `model.fit`: `step.py`'s docstring.

The Trainer only orchestrates; each part is its own module of `training/`:

- `step`: the compiled step (micro-batches, gradient accumulation, one all-reduce, loss
  scaling, the update) and the `tf.function` loop of `steps_per_loop` steps; the input
  pipeline and its probe; the NaN guard;
- `run_checkpoints`: restore, periodic and timed saves, stop requests;
- `evaluation`: periodic evaluation and the best export;
- `reporting`: progress bar or log lines, TensorBoard summaries, Keras callbacks;
- `distribute.WorkerAgreement`: what several workers agree on between loops.

What the model trains through is the job's knowledge, not the loop's: the job passes
the loss of one micro-batch (`loss_fn`, e.g. a faster forward pass of its model), what
its batches need for it (`dataset_transform`, e.g. packing several examples to a row)
and the initial weights (`train(initial_weights=...)`: a function of the model, or a
loaded model whose weights are copied); `runners.runner.Job` picks them for our jobs.

After each loop the host logs progress, writes summaries, evaluates (and exports the
best model), then checkpoints; when a loop ends early to report and what a stop request
does in each phase is `run_phase`'s.

Example:

```python
from keras_bert_zoo import checkpoints, tasks
from keras_bert_zoo.models.head_positions import head_positions_loss_fn
from keras_bert_zoo.training import Trainer, distribute, optimization

strategy = distribute.get_strategy("one_device")
with strategy.scope():
    model = task.build_model(encoder)
    model.compile(optimizer=optimization.create_optimizer(config, 1000), loss=task.loss())
trainer = Trainer(model, model_dir="/tmp/mrpc", strategy=strategy, loss_fn=head_positions_loss_fn)
result = trainer.train(
    tasks.training_dataset_fn(task, train_examples, preprocessor, 32, seed=1),
    num_steps=1000,
    eval_fn=lambda model: task.evaluate(tasks.predict(task, model, dev, preprocessor), dev),
    eval_every=200,
    best_metric="f1",
    input_state="skip",
    initial_weights=lambda model: checkpoints.load_weights(model, "uncased_L-12_H-768_A-12"),
)
```
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf

from keras_bert_zoo.training import distribute, run_phase
from keras_bert_zoo.training.evaluation import Evaluation
from keras_bert_zoo.training.initial_weights import (
    InitialWeights,
    apply_initial_weights,
    initial_weights_argument,
)
from keras_bert_zoo.training.reporting import PROGRESS_MODES, Reporter, TrainingResult
from keras_bert_zoo.training.run_checkpoints import INPUT_STATES, RunCheckpoints
from keras_bert_zoo.training.run_phase import Run, RunPhase
from keras_bert_zoo.training.step import (
    LOOP_SIGNATURE,
    NonFiniteLossError,
    TrainStep,
    build_training_state,
    check_finite,
    default_loss_fn,
    gradients_reduced_by_the_step,
    make_dataset,
    probe_input,
    sequences_per_step,
)
from keras_bert_zoo.utils import interrupts
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

__all__ = [
    "INPUT_STATES",
    "PROGRESS_MODES",
    "NonFiniteLossError",
    "Trainer",
    "TrainingResult",
    "default_loss_fn",
]

# Names that moved to the Trainer's parts (one release).
_REPORTING = ("write_scalar", "write_text", "BAR_WIDTH")
__getattr__ = moved_names(__name__, ["keras_bert_zoo.training.reporting"], only=_REPORTING)


def _check_train_arguments(num_steps, input_state, eval_fn, best_metric):
    if input_state not in INPUT_STATES:
        raise UserError(f"input_state must be one of {INPUT_STATES}, got {input_state!r}")
    if best_metric is not None and eval_fn is None:
        raise UserError("best_metric needs an eval_fn")
    if num_steps < 1:
        raise UserError(f"num_steps must be >= 1, got {num_steps}")


def _check_at_least(name: str, value, lowest):
    if value < lowest:
        raise UserError(f"{name} must be >= {lowest}, got {value}")


class Trainer:
    """Trains a compiled Keras model under any strategy, resumable to the step.

    Args:
        model: a compiled Keras model (built and compiled in `strategy.scope()`), whose
            `compute_loss` works: a compiled loss, or an override such as
            `BertPretrainer`'s. Its optimizer must not use Keras'
            `gradient_accumulation_steps` (use this class's).
        model_dir: where checkpoints (`checkpoints/`), TensorBoard summaries (`train/`,
            `eval/`) and the best export (`best/`) go.
        strategy: the `tf.distribute.Strategy` the model was built in (default: the
            current one).
        gradient_accumulation_steps: micro-batches per optimizer step. Each replica's
            batch is split into this many equal parts, so the global batch size stays
            the batch of one optimizer step.
        jit_compile: compile the step with XLA (see `step.py` for which part).
        steps_per_loop: steps per `tf.function` call; progress, summaries and the NaN
            check happen between loops.
        checkpoint_every: steps between checkpoints (0: only at the end).
        checkpoint_every_seconds: also checkpoint when this many seconds passed since
            the last checkpoint (0: never by time).
        keep_checkpoints: how many checkpoints to keep.
        progress: `"bar"` (Keras progress bar), `"log"` (one absl/logging line per loop),
            `"none"`, or `"auto"` (a bar on a terminal, else log lines).
        progress_every_seconds: a loop that runs this long ends at its next step to
            report, the first after `run_phase.FIRST_REPORT_SECONDS` (0: loops run their
            `steps_per_loop` steps). One worker only: several run every loop whole.
        loss_fn: `f(model, x, y, sample_weight) -> (loss, y_pred)` for one micro-batch
            (default: `default_loss_fn`), e.g. a faster forward pass of the job's model
            (`models.head_positions.head_positions_loss_fn`).
        dataset_transform: `f(dataset) -> dataset` applied to each pipeline of
            `dataset_fn` once the model is built from its batches, e.g. packing
            (`data.sequence_packing.packed_dataset`, with `packed_loss_fn`).
    """

    def __init__(
        self,
        model: keras.Model,
        *,
        model_dir: str,
        strategy: tf.distribute.Strategy | None = None,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
        steps_per_loop: int = 100,
        checkpoint_every: int = 1000,
        checkpoint_every_seconds: float = 600,
        keep_checkpoints: int = 3,
        progress: str = "auto",
        progress_every_seconds: float = 30.0,
        loss_fn: Callable | None = None,
        dataset_transform: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
    ):
        if getattr(model, "optimizer", None) is None:
            raise UserError(
                f"Compile {model.name!r} with an optimizer (and its loss) before training it"
            )
        _check_at_least("gradient_accumulation_steps", gradient_accumulation_steps, 1)
        _check_at_least("steps_per_loop", steps_per_loop, 1)
        _check_at_least("checkpoint_every", checkpoint_every, 0)
        _check_at_least("checkpoint_every_seconds", checkpoint_every_seconds, 0)
        _check_at_least("progress_every_seconds", progress_every_seconds, 0)
        if progress not in PROGRESS_MODES:
            raise UserError(f"progress must be one of {PROGRESS_MODES}, got {progress!r}")
        self.model = model
        self.model_dir = os.path.abspath(model_dir)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.gradient_accumulation_steps = int(gradient_accumulation_steps)
        self.jit_compile = bool(jit_compile)
        self.steps_per_loop = int(steps_per_loop)
        self.checkpoint_every = int(checkpoint_every)
        self.checkpoint_every_seconds = float(checkpoint_every_seconds)
        self.keep_checkpoints = int(keep_checkpoints)
        if progress == "auto":
            progress = "bar" if sys.stdout.isatty() else "log"
        self.progress = progress
        self.progress_every_seconds = float(progress_every_seconds)
        self._phase = RunPhase(self.progress_every_seconds)
        self.loss_fn = loss_fn or default_loss_fn
        self.dataset_transform = dataset_transform

        self.agreement = distribute.WorkerAgreement(self.strategy)
        self.is_chief = distribute.is_chief(self.strategy)
        self.num_workers = self.agreement.num_workers
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.local_replicas = self.num_replicas // self.num_workers
        self._step = TrainStep(
            model,
            strategy=self.strategy,
            loss_fn=self.loss_fn,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
            jit_compile=self.jit_compile,
        )
        self.global_step = self._step.global_step
        self._stop_requested = self._step.stop_requested
        self.optimizer = self._step.optimizer
        self.loss_scale_optimizer = self._step.loss_scale_optimizer
        self._train_loop = None
        self._iterator = None

    # === The loop ===

    def train(
        self,
        dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
        num_steps: int,
        *,
        input_state: str = "iterator",
        eval_fn: Callable[[keras.Model], Mapping[str, float]] | None = None,
        eval_every: int = 0,
        best_metric: str | None = None,
        higher_is_better: bool = True,
        initial_weights: InitialWeights | None = None,
        export_fn: Callable[[keras.Model, str], Any] | None = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        global_batch_size: int | None = None,
        init_checkpoint: Callable[[keras.Model], Any] | None = None,
    ) -> TrainingResult:
        """Trains to `num_steps` optimizer steps, resuming from `model_dir` if it can.

        Args:
            dataset_fn: `fn(input_context) -> tf.data.Dataset` of this worker's
                per-replica batches, `(x, y)` or `(x, y, sample_weight)` (or `x`),
                repeated (e.g. `tasks.training_dataset_fn`). With accumulation, each
                batch is split into the micro-batches.
            num_steps: the step to train to (a resumed run continues from its step).
            input_state: how the input position survives a restart: `"iterator"` saves
                the tf.data iterator in each checkpoint, `"skip"` skips the consumed
                batches of a rebuilt, deterministic pipeline (see the module docstring).
            eval_fn: `fn(model) -> {metric: value}`, run on the host every `eval_every`
                steps and at the end (on every worker; the chief writes).
            eval_every: steps between evaluations (0: only at the end).
            best_metric: the key of `eval_fn`'s dict whose best value is exported to
                `model_dir/best/` (with `metrics.json`).
            higher_is_better: direction of `best_metric`.
            initial_weights: on a fresh start only (no checkpoint in `model_dir`):
                `fn(model)` setting the model's weights (called in the strategy's scope,
                e.g. loading a pretrained checkpoint into its encoder), or a loaded
                `keras.Model` of the same architecture whose weights are copied.
            export_fn: `fn(model, directory)` writing the best model; the default saves
                `model.keras` without optimizer state (`keras.models.load_model`
                reads it back).
            callbacks: Keras callbacks; they get `on_train_begin`, `on_train_batch_end`
                after every loop (with the logged values) and `on_train_end`.
            global_batch_size: sequences per step, for sequences/s when the dataset's
                batch dimension is not static.
            init_checkpoint: deprecated, `initial_weights`'s old name (a function).

        Returns:
            A `TrainingResult`.

        Raises:
            NonFiniteLossError: a NaN or Inf loss; the message names the step.
            utils.interrupts.Interrupted: a SIGINT or SIGTERM stopped the run (saved).
        """
        initial_weights = initial_weights_argument(initial_weights, init_checkpoint)
        _check_train_arguments(num_steps, input_state, eval_fn, best_metric)
        # A restore fills existing variables (metrics, optimizer slots): build them first,
        # from a first pipeline's element spec.
        dataset_fn, element_spec = probe_input(self.strategy, dataset_fn, self.dataset_transform)
        build_training_state(self.model, self.strategy, element_spec)
        batch_size = sequences_per_step(
            element_spec, self.num_replicas, self.gradient_accumulation_steps, global_batch_size
        )
        run_checkpoints = RunCheckpoints(
            self.model_dir,
            model=self.model,
            global_step=self.global_step,
            agreement=self.agreement,
            input_state=input_state,
            every=self.checkpoint_every,
            every_seconds=self.checkpoint_every_seconds,
            keep=self.keep_checkpoints,
            metadata={
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
                "num_replicas": self.num_replicas,
            },
        )
        if input_state == "iterator":
            # The iterator must exist before the restore fills it.
            self._iterator = iter(make_dataset(self.strategy, dataset_fn))
        restored_step = run_checkpoints.restore(self._iterator)
        if restored_step is None:
            where = run_checkpoints.directory
            logger.info("Starting at step 0 of %d (no checkpoint in %s)", num_steps, where)
            if initial_weights is not None:
                apply_initial_weights(self.model, self.strategy, initial_weights)
        else:
            logger.info("Resuming at step %d of %d", restored_step, num_steps)
        if input_state == "skip":
            # Only now: the pipeline skips the batches that the restored steps consumed.
            skip_batches = (restored_step or 0) * self.local_replicas
            self._iterator = iter(make_dataset(self.strategy, dataset_fn, skip_batches))
        evaluation = Evaluation(
            self.model_dir,
            eval_fn=eval_fn,
            eval_every=eval_every,
            best_metric=best_metric,
            higher_is_better=higher_is_better,
            export_fn=export_fn,
            is_chief=self.is_chief,
        )
        self._train_loop = self._step.make_loop(lambda _: next(self._iterator))
        step = int(self.global_step.numpy())
        run = Run(
            num_steps=num_steps,
            step=step,
            checkpoints=run_checkpoints,
            evaluation=evaluation,
            reporter=Reporter(
                self.model,
                self.model_dir,
                progress=self.progress,
                is_chief=self.is_chief,
                evaluates=eval_fn is not None,
                step=step,
                num_steps=num_steps,
                batch_size=batch_size,
                loss_scale_optimizer=self.loss_scale_optimizer,
                callbacks=callbacks,
            ),
        )
        with gradients_reduced_by_the_step(self.optimizer):
            self._run(run)
        run.reporter.end()
        return run.reporter.result(run.step, restored_step, evaluation)

    def _run(self, run: Run):
        """The loops of `run`, between stop requests' handlers."""
        run.reporter.begin()
        run.checkpoints.begin()
        self._stop_requested.assign(False)
        requests = interrupts.StopRequests(
            on_request=lambda: self._stop_requested.assign(True),
            describe=lambda: self._phase.what_a_stop_does(run.step),
        )
        try:
            requests.__enter__()
            if run.checkpoints.pending_evaluation and run.evaluation.due(run.step, run.num_steps):
                self._evaluate(run)
            if run.step < run.num_steps:
                self._trace(run, requests)
            while run.step < run.num_steps:
                self._run_loop(run)
                stop, time_due = self.agreement.true_on_any(
                    [requests.requested, self.is_chief and run.checkpoints.time_due()]
                )
                if stop:
                    self._stop(run, requests.signal_number)
                # The evaluation (and best export) of a step comes before its checkpoint:
                # a run killed between the two resumes from the checkpoint before and
                # evaluates this step again, instead of resuming past an evaluation that
                # never finished (it was missing from the history, and from the choice
                # of best/).
                if run.evaluation.due(run.step, run.num_steps):
                    self._evaluate(run)
                if run.checkpoints.due(run.step, run.num_steps) or time_due:
                    self._save(run)
                run.reporter.flush()
        finally:
            requests.__exit__(None, None, None)
            run.reporter.flush(evaluations=True)

    def _trace(self, run: Run, requests: interrupts.StopRequests):
        """Traces the loop before its first call, where a stop request abandons the
        tracing (no step has run) instead of waiting for it and the compilation."""
        self._phase.doing = run_phase.TRACING
        try:
            with requests.abandoning(), stage(logger, "Tracing the training step"):
                self._train_loop.get_concrete_function(*LOOP_SIGNATURE)
        except interrupts.StopRequested as stop:
            self._stop(run, stop.signal_number)
        # The first call still instantiates the function (and XLA compiles the step)
        # before its first step, which a stop request then skips.
        self._phase.doing = run_phase.FIRST_STEP

    def _loop_steps(self, run: Run) -> int:
        every = (self.checkpoint_every, run.evaluation.every)
        return run_phase.loop_steps(run.step, run.num_steps, self.steps_per_loop, every)

    def _run_loop(self, run: Run):
        """Runs one loop of steps, checks it and reports it (nothing when a stop request
        ended it before its first step)."""
        loop_start = time.time()
        first = self._phase.doing == run_phase.FIRST_STEP
        compiling = stage(
            logger,
            "Compiling the training step%s; the first progress line follows step %d",
            " with XLA" if self.jit_compile else "",
            run.step + 1,
        )
        with compiling if first else contextlib.nullcontext():
            losses, norms, rates = self._train_loop(
                tf.constant(self._loop_steps(run), tf.int32),
                tf.constant(self._phase.loop_limit(), tf.float64),
            )
        losses, norms, rates = losses.numpy(), norms.numpy(), rates.numpy()
        seconds = time.time() - loop_start
        self._phase.doing = run_phase.TRAINING
        if not len(losses):
            return
        check_finite(
            run.step,
            losses,
            norms,
            loss_scaled=self.loss_scale_optimizer is not None,
            kept=run.checkpoints.last_good_state,
        )
        run.step += len(losses)
        run.reporter.record(run.step, losses, norms, rates, seconds)

    def _evaluate(self, run: Run):
        run.reporter.end_bar_line()
        doing, self._phase.doing = self._phase.doing, run_phase.EVALUATING
        try:
            run.evaluation.evaluate(self.model, run.step, run.reporter.eval_writers)
        finally:
            self._phase.doing = doing

    def _save(self, run: Run):
        run.reporter.end_bar_line()
        run.checkpoints.save(run.step, self._iterator)

    def _stop(self, run: Run, signal_number: int | None):
        """Saves the step reached (unless saved already) and raises `Interrupted`."""
        run.reporter.end_bar_line()
        run.checkpoints.stop(
            run.step,
            run.num_steps,
            self._iterator,
            signal_number=signal_number,
            pending_evaluation=run.evaluation.pending(run.step, run.num_steps),
        )
