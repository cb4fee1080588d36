"""The run skeleton every job goes through, in every mode.

```
Runner(job).run():                mode: job.mode (config.mode)
  job.check_inputs()              every input problem found before TensorFlow starts
  setup_strategy()                strategy (first: MultiWorkerMirroredStrategy), seed, dtype policy
  train | train_and_eval:
    job.prepare(strategy)         data, tokenizer, initial weights
    job.record_run(write=False)   a rerun must be the same run (the resume fingerprint),
                                  refused before any model is built
    build_model(strategy)         job.build_model() in the strategy's scope
    job.count_train_steps()       the optimizer steps of the run
    compile(model)                keras optimizer from the optimizer flags + job.compile_kwargs()
    start_over()                  --overwrite_output_dir: the chief removes the old run
                                  (job.run_entries()), every worker waits for it
    build_trainer(model)          training.Trainer from the loop flags, with the job's
                                  job.loss_fn(model) and job.dataset_transform()
    job.record_run(write=chief)
    train(trainer)                Trainer.train from job.initial_weights(), with periodic
                                  evaluation (job.evaluate), the best export (job.export_best),
                                  eval_results.json after each
    job.final_model()             the model the run reports (the final or the best one)
  eval | predict | export:
    job.load_for_inference()      the model of a finished run (or a checkpoint), in scope
  evaluation()                    train_and_eval, eval: job.evaluate, eval_results.json, then
                                  job.write_eval_predictions(); reused when the last periodic
                                  evaluation was of the same model at the same step
  job.predict(model)              predict: the prediction files, and the metrics of the
                                  labelled ones (job.prediction_results), eval_results.json;
                                  train, train_and_eval: the prediction files of a file to
                                  predict given with the run (job.predicts_after_training)
  job.export(model)               train, train_and_eval, export: the chief writes the exports
```

Model Garden's `OrbitExperimentRunner` is the model: `run()` dispatches the modes, each
part is a method a job or a subclass can override; a new kind of job adds a `Job`, not
a skeleton. The jobs are `runners.finetuning.FinetuningJob` and
`runners.pretraining.PretrainingJob`.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from keras_bert_zoo.runners import fingerprint, run_dir
from keras_bert_zoo.runners.loss_and_weights import (
    load_checkpoint,
    model_loss_fn,
    packed_row_bucket,
    packing_transform,
)
from keras_bert_zoo.training import distribute
from keras_bert_zoo.utils import cpu_kernels, run_layout
from keras_bert_zoo.utils.deprecation import REMOVAL
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

TRAINING_MODES = ("train", "train_and_eval")
MODES = ("train", "train_and_eval", "eval", "predict", "export")
EVALUATING_MODES = ("train_and_eval", "eval")


@dataclasses.dataclass
class LoadedModel:
    """The model an `eval`, `predict` or `export` run uses (`Job.load_for_inference`).

    Attributes:
        model: the Keras model.
        step: its training step (None when unknown).
        source: where it came from (`"final"`, `"best"`, or a directory).
    """

    model: Any
    step: int | None
    source: str


# === The job: what one kind of run provides ===


class Job(abc.ABC):
    """One kind of training run, in the parts the `Runner` calls.

    Attributes:
        config: the run's settings, a `training.options.TrainingOptions` subclass
            (`runners.configs.JobOptions`).
        output_dir: the absolute run directory.
        num_train_steps: optimizer steps; `count_train_steps` sets it.
        input_state: `Trainer.train`'s `input_state` (`"skip"`: a deterministic
            pipeline rebuilt and skipped on resume; `"iterator"`: saved iterators).
    """

    input_state: ClassVar[str] = "skip"
    modes: ClassVar[tuple[str, ...]] = ("train",)

    def __init__(self, config):
        if not config.output_dir:
            raise UserError("--output_dir is required")
        self.config = dataclasses.replace(config, output_dir=os.path.abspath(config.output_dir))
        self.output_dir = self.config.output_dir
        self.num_train_steps: int | None = None

    @property
    def mode(self) -> str:
        """What `Runner.run` does (`config.mode`; `"train"` for a config without one)."""
        return getattr(self.config, "mode", "train")

    # --- Before anything is built or written ---

    def check_inputs(self) -> None:
        """Checks what needs no TensorFlow (runs before the strategy exists)."""
        return None

    @abc.abstractmethod
    def prepare(self, strategy) -> None:
        """Reads the data, makes the tokenizer and resolves the initial weights; raises
        on any input problem."""

    def count_train_steps(self) -> int:
        """The run's optimizer steps (default: `config.num_train_steps`)."""
        return int(self.config.num_train_steps)

    # --- The model ---

    @abc.abstractmethod
    def build_model(self):
        """The uncompiled model, built in the strategy's scope."""

    def compile_kwargs(self) -> dict[str, Any]:
        """`model.compile` arguments besides the optimizer (loss, metrics)."""
        return {}

    def initial_weights(self) -> Callable | None:
        """`Trainer.train(initial_weights=...)`: the weights of a fresh start, a function
        of the model (e.g. `load_checkpoint(path)`) or a loaded model (None: as built)."""
        legacy = getattr(type(self), "initializer", None)
        if legacy is None:
            return None
        warnings.warn(
            f"{type(self).__name__}.initializer() is Job.initial_weights() (a function of the "
            "model or a loaded model; load_checkpoint(path) for a checkpoint directory); the "
            f"old name will be removed in {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        given = legacy(self)
        return load_checkpoint(given) if isinstance(given, str) else given

    # --- What the model trains through (the Trainer knows no model) ---

    def batching(self) -> str:
        """The layout of the training batches: `config.batching`, `auto` resolved. The
        base job's batches are full rows (pretraining records): `auto` is `padded`, and
        `bucketed` is refused; `FinetuningJob` resolves it for its task and model
        (`loss_and_weights.training_batching`)."""
        requested = self.config.batching
        if requested == "bucketed":
            raise UserError(
                f"--batching=bucketed does not apply to {type(self).__name__}: its batches "
                "are full rows; use padded or packed"
            )
        return "padded" if requested == "auto" else requested

    def loss_fn(self, model) -> Callable:
        """`Trainer(loss_fn=...)`: the loss of one micro-batch of `model` (see
        `model_loss_fn`), packed when `batching()` is."""
        return model_loss_fn(model, packed=self.batching() == "packed")

    def dataset_transform(self) -> Callable | None:
        """`Trainer(dataset_transform=...)`: the batches packed, when `batching()` is
        (else None)."""
        if self.batching() != "packed":
            return None
        config = self.config
        compiled_per_shape = (
            cpu_kernels.training_jit_compile(config.jit_compile)
            or config.distribution_strategy == "tpu"
        )
        return packing_transform(
            config.gradient_accumulation_steps,
            row_bucket=packed_row_bucket(compiled_per_shape=compiled_per_shape),
        )

    @abc.abstractmethod
    def record_run(self, *, write: bool) -> None:
        """Refuses an `output_dir` that holds another run (unless `starts_over`); with
        `write`, records this one (the resume fingerprint, `runners.fingerprint`)."""

    @property
    def starts_over(self) -> bool:
        """Whether this run replaces the run in `output_dir` (`--overwrite_output_dir`)
        instead of resuming it."""
        return bool(getattr(self.config, "overwrite_output_dir", False))

    def run_entries(self) -> tuple[str, ...]:
        """The names a run of this job writes in `output_dir`: what
        `--overwrite_output_dir` removes (other files stay)."""
        return (
            run_layout.CHECKPOINTS_DIR,
            run_layout.TRAIN_SUMMARIES_DIR,
            run_layout.EVAL_SUMMARIES_DIR,
            run_layout.BEST_DIR,
            run_layout.FINETUNED_DIR,
            *run_layout.EXPORT_DIRS.values(),
            run_layout.EVAL_RESULTS_FILE,
            run_layout.PREDICTIONS_DIR,
            fingerprint.RUN_SETTINGS_FILE,
        )

    # --- Training ---

    @abc.abstractmethod
    def dataset_fn(self) -> Callable:
        """`Trainer.train`'s `dataset_fn`."""

    def log_plan(self) -> None:
        """Logs what the run will do, once everything is checked."""
        return None

    # --- Inference: eval, predict, export ---

    def load_for_inference(self) -> LoadedModel:
        """The model of a finished run (or a checkpoint) for the `eval`, `predict` and
        `export` modes, and whatever `evaluate` / `predict` then need (called in the
        strategy's scope)."""
        raise NotImplementedError(f"{type(self).__name__} does not load a model to infer with")

    def record_inference(self, *, write: bool) -> None:
        """After `load_for_inference`, before anything is written: what an `eval` or
        `predict` run leaves in `output_dir` recorded (or refused when the directory
        holds another run). Default: nothing."""
        del write

    def predict(self, model, *, write: bool) -> dict[str, list[str]]:
        """`predict` mode: the prediction files (`{split: [paths]}`; written by the chief,
        `write`)."""
        raise NotImplementedError(f"{type(self).__name__} does not predict")

    def write_eval_predictions(self, *, write: bool) -> dict[str, list[str]]:
        """After the run's reported evaluation: the files of its answers (none by
        default)."""
        return {}

    def predicts_after_training(self) -> bool:
        """Whether a training run also predicts (`predict`) with the model it reports,
        e.g. a file to predict given with it (default: no)."""
        return False

    def prediction_results(self) -> dict[str, Any]:
        """After `predict`: the evaluation results of the predicted splits that have
        labels (none by default), reported and written as an evaluation's."""
        return {}

    # --- Evaluation ---

    @property
    def evaluates(self) -> bool:
        """Whether this run evaluates (`train_and_eval`, `eval`)."""
        return self.mode in EVALUATING_MODES

    @property
    def eval_every(self) -> int:
        return int(self.config.eval_every or 0)

    @property
    def best_metric(self) -> str | None:
        """The `trainer_metrics` key whose best value is exported (None: no best export)."""
        return None

    higher_is_better: ClassVar[bool] = True

    def evaluate(self, model) -> Mapping[str, Any]:
        """The evaluation results of `model` (JSON-able)."""
        raise NotImplementedError

    def trainer_metrics(self, results: Mapping[str, Any]) -> dict[str, Any]:
        """`results` as the Trainer logs, writes and ranks them: `{metric: value}`, or
        `{split: {metric: value}}` (`training.evaluation.Evaluation`)."""
        return dict(results)

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        """The content of `eval_results.json`."""
        return {"step": step, "results": results, "history": history}

    def export_best(self) -> Callable | None:
        """`Trainer.train(export_fn=...)` for the best model (None: the Trainer's)."""
        return None

    # --- The end ---

    def final_model(self, model, step: int):
        """`(model, step, source)` of the model this run reports and exports."""
        return model, step, "final"

    def export(self, model, step, eval_results) -> dict[str, str]:
        """Writes the exports (the chief only); returns `{name: directory}`."""
        return {}

    def write_evaluation_summaries(self, step) -> None:
        """After each evaluation, on the chief: summaries beyond its metrics (the Trainer
        writes those), e.g. a confusion matrix for TensorBoard."""
        return None

    def eval_history_entry(self, source: str) -> dict[str, Any]:
        """What an evaluation of an `eval` run adds to its history entry besides the step
        and the results."""
        return {"model": source}


def tensorboard_hint(output_dir: str) -> str:
    """The line a training run ends with: how to look at its summaries."""
    import importlib.util

    command = f"tensorboard --logdir {output_dir}"
    if importlib.util.find_spec("tensorboard") is None:
        return f"TensorBoard (pip install tensorboard==2.21.*): {command}"
    return f"TensorBoard: {command}"


# === The skeleton ===


def setup_strategy(config):
    """`(strategy, is_chief)`: the strategy, seed and dtype policy of the training
    settings in `config` (a `TrainingOptions`). The chief alone writes the run directory
    (two writers would also remove each other's in-flight temporaries); it clears what a
    killed run left."""
    strategy = config.setup()
    chief = distribute.is_chief(strategy)
    if chief:
        run_dir.remove_stale_temporaries(config.output_dir)
    return strategy, chief


@dataclasses.dataclass
class RunResult:
    """What `Runner.run` did.

    Attributes:
        model: the model of this run (`job.final_model`), its `step` and `model_source`.
        trained_model: the model trained (the same as `model` unless the job picked
            another, e.g. the best evaluated one).
        num_train_steps: the run's optimizer steps.
        training: the Trainer's `TrainingResult`.
        eval_results: the evaluation of `model` (empty when the job does not evaluate).
        eval_history: every evaluation of the run directory.
        exports: `{name: directory}`.
        prediction_files: `{split: [paths]}` of `predict` and of the evaluation.
        mode: what ran.
        training_seconds, seconds: wall time of training and of the whole run.
    """

    model: Any
    trained_model: Any
    step: int | None
    model_source: str
    num_train_steps: int | None
    training: Any
    eval_results: dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_history: list[dict] = dataclasses.field(default_factory=list)
    exports: dict[str, str] = dataclasses.field(default_factory=dict)
    prediction_files: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    mode: str = "train"
    training_seconds: float = 0.0
    seconds: float = 0.0

    def fields_for(self, result_class) -> dict[str, Any]:
        """These values, for the fields that `result_class` (a job's result dataclass)
        also declares."""
        wanted = {field.name for field in dataclasses.fields(result_class)}
        return {name: getattr(self, name) for name in wanted if hasattr(self, name)}


class Runner:
    """Runs a `Job` through the skeleton (see the module docstring).

    Args:
        job: the `Job`.
    """

    def __init__(self, job: Job):
        self.job = job
        self.strategy = None
        self.chief = True
        self.trainer = None
        self.history: run_dir.EvalHistory | None = None
        self._last_evaluation: dict[str, Any] = {}

    def run(self) -> RunResult:
        """Runs `job.mode` (see the module docstring)."""
        start = time.time()
        job = self.job
        mode = job.mode
        if mode not in job.modes:
            raise UserError(f"--mode={mode} is not a mode of this job; choose from {job.modes}")
        if job.starts_over and mode not in TRAINING_MODES:
            raise UserError(
                f"--overwrite_output_dir starts a training run over; --mode={mode} reads "
                "the run there: leave the flag out"
            )
        job.check_inputs()
        self.setup_strategy()
        self.history = run_dir.EvalHistory(
            job.output_dir, redoes_later_steps=mode in TRAINING_MODES
        )
        if mode in TRAINING_MODES:
            result = self.run_training()
        else:
            result = self.run_inference()
        if job.evaluates:
            result.prediction_files.update(job.write_eval_predictions(write=self.chief))
        if mode == "predict":
            result.prediction_files.update(job.predict(result.model, write=self.chief))
            self.report_prediction_results(result)
        elif mode in TRAINING_MODES and job.predicts_after_training():
            logger.info("Predicting with the model of the run (step %s)", result.step)
            result.prediction_files.update(job.predict(result.model, write=self.chief))
        if mode in TRAINING_MODES + ("export",) and self.chief:
            logger.info("Writing the model of the run")
            result.exports = job.export(result.model, result.step, result.eval_results)
        result.eval_history = self.history.so_far()
        result.mode = mode
        result.seconds = time.time() - start
        return result

    def run_training(self) -> RunResult:
        """`train`, `train_and_eval`: the skeleton's training part, and the evaluation of
        the model the run reports."""
        job = self.job
        job.prepare(self.strategy)
        job.record_run(write=False)
        logger.info("Building the model")
        model = self.build_model()
        job.num_train_steps = job.count_train_steps()
        self.compile(model)
        self.start_over()
        self.trainer = self.build_trainer(model)
        job.record_run(write=self.chief)
        job.log_plan()

        training_start = time.time()
        training = self.train()
        training_seconds = time.time() - training_start

        final, step, source = job.final_model(model, training.step)
        # "final": the model trained, or the part of it the job reports (a distiller's
        # student), whose last periodic evaluation may stand.
        eval_results = self.final_evaluation(final, step, source, trained=source == "final")
        return RunResult(
            model=final,
            trained_model=model,
            step=step,
            model_source=source,
            num_train_steps=job.num_train_steps,
            training=training,
            eval_results=eval_results,
            training_seconds=training_seconds,
        )

    def run_inference(self) -> RunResult:
        """`eval`, `predict`, `export`: the model the job loads, evaluated in `eval`.

        Nothing is written before the model loads: a mistake in the input leaves no
        `--output_dir` behind (every writer creates the directories it writes in).
        """
        job = self.job
        logger.info("Loading the model for --mode=%s", job.mode)
        with self.strategy.scope():
            loaded = job.load_for_inference()
        logger.info("Loaded %s (step %s)", loaded.source, loaded.step)
        job.record_inference(write=self.chief)
        result = RunResult(
            model=loaded.model,
            trained_model=None,
            step=loaded.step,
            model_source=loaded.source,
            num_train_steps=None,
            training=None,
        )
        if job.evaluates:
            result.eval_results = job.evaluate(loaded.model)
            self.history.add(
                loaded.step, result.eval_results, **job.eval_history_entry(loaded.source)
            )
            self.write_eval_results(loaded.step, result.eval_results, loaded.source)
        return result

    def report_prediction_results(self, result: RunResult) -> None:
        """`predict` on labelled data: its metrics are the run's evaluation results,
        in `eval_results.json` under each split's name."""
        results = self.job.prediction_results()
        if not results:
            return
        result.eval_results = results
        self.history.add(result.step, results, **self.job.eval_history_entry(result.model_source))
        self.write_eval_results(result.step, results, result.model_source)

    # --- The parts ---

    def start_over(self) -> None:
        """`--overwrite_output_dir`: the chief removes the run in `output_dir` once every
        input is checked and the model is built (a mistake leaves the old run whole);
        every worker waits for it before anything reads the directory."""
        job = self.job
        if not job.starts_over:
            return
        if self.chief:
            run_dir.clear_run(job.output_dir, job.run_entries())
        distribute.WorkerAgreement(self.strategy).barrier()
        self.history = run_dir.EvalHistory(job.output_dir, redoes_later_steps=True)

    def setup_strategy(self):
        self.strategy, self.chief = setup_strategy(self.job.config)
        return self.strategy

    def build_model(self):
        with self.strategy.scope():
            return self.job.build_model()

    def compile(self, model) -> None:
        from keras_bert_zoo.training import optimization

        config = self.job.config
        with self.strategy.scope():
            model.compile(
                optimizer=optimization.create_optimizer(
                    config.optimizer_config(), self.job.num_train_steps
                ),
                **self.job.compile_kwargs(),
            )

    def build_trainer(self, model):
        from keras_bert_zoo.training import Trainer

        job = self.job
        return Trainer(
            model,
            strategy=self.strategy,
            loss_fn=job.loss_fn(model),
            dataset_transform=job.dataset_transform(),
            **job.config.trainer_settings(),
        )

    def train(self):
        job = self.job
        return self.trainer.train(
            job.dataset_fn(),
            job.num_train_steps,
            input_state=job.input_state,
            eval_fn=self.evaluate_during_training if job.evaluates else None,
            eval_every=job.eval_every if job.evaluates else 0,
            best_metric=job.best_metric if job.evaluates else None,
            higher_is_better=job.higher_is_better,
            initial_weights=job.initial_weights(),
            export_fn=job.export_best(),
            global_batch_size=job.config.train_batch_size,
        )

    def evaluate_during_training(self, model) -> dict[str, float]:
        """`Trainer.train`'s `eval_fn`: every worker evaluates, the chief writes
        `eval_results.json` at every evaluation, so the history survives a kill and can
        be watched."""
        step = int(self.trainer.global_step.numpy())
        results = self.job.evaluate(model)
        self._last_evaluation = {"step": step, "results": results}
        self.history.add(step, results)
        self.write_eval_results(step, results, "training")
        return self.job.trainer_metrics(results)

    def final_evaluation(self, model, step, source: str, *, trained: bool):
        """The evaluation of the model this run reports: the last periodic one when it
        evaluated this model at this step, else a new one (a rerun of a finished run
        trains no step, and its evaluation is still reported)."""
        job = self.job
        if not job.evaluates:
            return {}
        if trained and self._last_evaluation.get("step") == step:
            results = self._last_evaluation["results"]
        else:
            results = job.evaluate(model)
            if trained:
                self.history.add(step, results)
        self.write_eval_results(step, results, source)
        return results

    def write_eval_results(self, step, results, source: str) -> None:
        if self.chief:
            record = self.job.eval_record(step, results, self.history.so_far(), source)
            run_dir.write_eval_results(self.job.output_dir, record)
            self.job.write_evaluation_summaries(step)
