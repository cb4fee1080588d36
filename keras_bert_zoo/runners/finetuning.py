"""The fine-tuning job: everything `tools/run_finetuning.py` does, callable in-process.

`run_finetuning(FinetuningConfig(...))` runs `FinetuningJob` through the runner's
skeleton (`runners/runner.py`) in any mode, for any registered task
(`tasks.list_tasks()`), through the task contract (`tasks/task.py`); it knows no task
by name. `runners.demo.run_demo()` is the main job.

Modes:

- `train`: fine-tune `--init_checkpoint` on the task's training split, save the model.
  A rerun resumes the run in `output_dir` only if it is the same run
  (`runners.fingerprint`), or starts over there with `overwrite_output_dir`.
- `train_and_eval`: the same, evaluating the eval splits every `eval_every` steps (by
  default once per epoch) and at the end; the best model by the task's
  `primary_metric` is exported to `best/`.
- `eval`: evaluate a fine-tuned model on the eval splits, each reported under its name
  (`eval_split`, by default the stem of `--eval_file`, else the task's: `dev`); the
  results of other splits stay in `eval_results.json`.
- `predict`: write the task's prediction files for its predict splits, and the metrics
  of those with labels (printed, and in `eval_results.json` under the split's name).
- `export`: write a fine-tuned model as `finetuned/` and in the `--checkpoint_layouts`
  checkpoint layouts (e.g. a google-research/bert checkpoint with the task's head as a
  Hugging Face directory).

`eval`, `predict` and `export` load the model from `--init_checkpoint` when it is a
fine-tuned directory (`finetuned/`, `best/`), a fine-tuning run's `--output_dir`, one
of our Google or Hugging Face exports (`export_google/`, `export_huggingface/`, which
carry `task.json`), or any checkpoint that holds the task's head; without
`--init_checkpoint`, from `output_dir/finetuned/` (or `output_dir/best/` with
`use_best_model`).

What `output_dir` holds after a run: `utils.run_layout` names and describes it.

Under `multi_worker_mirrored` every worker trains, evaluates and predicts (each on the
whole eval/predict set, with the same weights: the same answers); only the chief writes
the files above (the Trainer writes each worker's checkpoint shards).

"The model of this run" is the final one (as google-research/bert's `run_classifier.py`
evaluates and predicts with), or the best evaluated one with `use_best_model=True`.

Example:

```python
from keras_bert_zoo.runners.finetuning import FinetuningConfig, run_finetuning

result = run_finetuning(FinetuningConfig(
    task="glue/mrpc", data_dir="glue_data/MRPC", init_checkpoint="uncased_L-12_H-768_A-12",
    output_dir="/tmp/mrpc", learning_rate=2e-5))
print(result.eval_results["dev"]["f1"])
```
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from keras_bert_zoo.runners import eval_summaries, fingerprint, run_dir, run_outputs, sources
from keras_bert_zoo.runners.configs import (
    FinetuningConfig,
    config_from_flags,
    define_flags,
    explicit_flag_values,
    runner_flag_names,
)
from keras_bert_zoo.runners.loss_and_weights import (
    load_checkpoint,
    task_family,
    training_batching,
)
from keras_bert_zoo.runners.runner import (
    MODES,
    Job,
    LoadedModel,
    Runner,
    RunResult,
    tensorboard_hint,
)
from keras_bert_zoo.tasks import datasets, prediction, registry
from keras_bert_zoo.tasks.saving import TASK_FILE, read_task_description, task_description
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.atomic import write_json_atomically
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.run_layout import (
    BEST_DIR,
    CHECKPOINT_LAYOUTS,
    EVAL_RESULTS_FILE,
    EXPORT_DIRS,
    FINETUNED_DIR,
    METRICS_FILE,
    PREDICTIONS_DIR,
)

logger = logging.getLogger(__name__)

__all__ = [
    "BEST_DIR",
    "CHECKPOINT_LAYOUTS",
    "EVAL_RESULTS_FILE",
    "EXPORT_DIRS",
    "FINETUNED_DIR",
    "FinetuningConfig",
    "FinetuningJob",
    "FinetuningResult",
    "METRICS_FILE",
    "MODES",
    "PREDICTIONS_DIR",
    "config_from_flags",
    "define_flags",
    "explicit_flag_values",
    "run_finetuning",
    "runner_flag_names",
]

# Names that moved down a floor, for one release (docs/api-changes.md): {home: names}.
_MOVED = {
    "keras_bert_zoo.utils.atomic": ("json_safe", "remove_stale_temporaries"),
    "keras_bert_zoo.runners.sources": ("make_tokenizer",),
    "keras_bert_zoo.runners.run_outputs": (
        "save_run_model",
        "eval_record",
        "huggingface_label_config",
    ),
}
__getattr__ = moved_names(
    __name__,
    [],
    renamed={
        "export_checkpoint": ("keras_bert_zoo.runners.run_outputs", "export_task_checkpoint"),
        "EXPORT_FORMATS": ("keras_bert_zoo.utils.run_layout", "CHECKPOINT_LAYOUTS"),
        **{name: (home, name) for home, names in _MOVED.items() for name in names},
    },
)

# === Results ===


@dataclasses.dataclass
class FinetuningResult(RunResult):
    """What `run_finetuning` did: the `RunResult` of the skeleton, and

    Attributes:
        config: the configuration run.
        task: the task (with its state).
        tokenizer, preprocessor: the text pipeline of `model`.
        eval_answers: `({split: examples}, {split: answers})` of the evaluation.
    """

    config: FinetuningConfig | None = None
    task: Task | None = None
    tokenizer: Any = None
    preprocessor: Any = None
    eval_answers: tuple[dict, dict] | None = dataclasses.field(default=None, repr=False)


# === The job on the runner's skeleton ===


class FinetuningJob(Job):
    """Fine-tunes, evaluates, predicts with or exports `config.task`.

    `Runner(FinetuningJob(config)).run()` runs `config.mode` (the module docstring).
    """

    input_state = "skip"  # task pipelines are deterministic: skipping restores them
    modes = MODES
    task: Task | None = None  # `prepare` (or the mode that loads a run) creates it

    def check_inputs(self) -> None:
        if self.config.trains and not self.config.task:
            raise UserError(f"--task is required to train; choose from {registry.list_tasks()}")

    # --- Training ---

    def prepare(self, strategy) -> None:
        config = self.config
        self.source = sources.resolve_weight_source(config.init_checkpoint)
        self.tokenizer = sources.tokenizer_of(self.source, config.vocab_file, config.do_lower_case)
        self.task = run_outputs.create_task(config.task, config)
        self.task.use_init_checkpoint(self.source.path)
        self._read_examples()

    def _read_examples(self, extra_training_examples=()) -> None:
        """The task's training and eval splits, its preprocessor and the number of
        training features, `extra_training_examples` (e.g. distillation's transfer rows)
        counted in."""
        task = self.task
        splits = task.split_names()
        logger.info("Reading %s: %s", task.task_name, ", ".join(splits["train"] + splits["eval"]))
        train_sets = run_outputs.read_splits(task, splits["train"])
        self.train_examples = [example for examples in train_sets.values() for example in examples]
        self._read_eval_sets()
        self.preprocessor = task.make_preprocessor(self.tokenizer)
        if task.training_unit:
            logger.info(
                "Counting the %s of %d examples", task.training_unit, len(self.train_examples)
            )
        self.num_training_features = sum(
            task.count_training_features(examples, self.preprocessor)
            for examples in (self.train_examples, extra_training_examples)
            if examples
        )
        self.steps_per_epoch = self.num_training_features / self.config.train_batch_size

    def _read_eval_sets(self) -> None:
        task = self.task
        splits = task.split_names()
        # {the name each evaluated split is reported under: the task's split}
        names = run_outputs.eval_split_names(task, self.config.eval_split)
        self.eval_sets = {}
        if self.evaluates:
            read = run_outputs.read_splits(task, list(names.values()))
            self.eval_sets = {name: read[split] for name, split in names.items()}
        self.last_answers: dict[str, Any] = {}
        if self.evaluates and not self.eval_sets:
            hint = "use --mode=train, or " if self.config.trains else ""
            raise UserError(
                f"{task.task_name} has no eval split here ({splits}); {hint}give it "
                "evaluation data (e.g. --eval_file or --heldout_fraction)"
            )

    def count_train_steps(self) -> int:
        config = self.config
        steps = config.num_train_steps or int(self.steps_per_epoch * config.num_train_epochs)
        if steps < 1:
            raise UserError(
                f"{self._training_set()} at --train_batch_size="
                f"{config.train_batch_size} for {config.num_train_epochs} epochs make no step"
            )
        return steps

    def build_model(self):
        from keras_bert_zoo.models import BertEncoder

        model = self.task.build_model(BertEncoder.from_bert_config(self.source.bert_config))
        self.resolve_batching(model)
        return model

    # --- The layout of the batches ---

    _batching: str | None = None

    def resolve_batching(self, model) -> str:
        """The layout of `model`'s training batches on this job's task:
        `config.batching`, `auto` resolved for the task family
        (`loss_and_weights.training_batching`); logged.

        Raises:
            UserError: a layout the model cannot train on (packed per-position heads).
        """
        task = getattr(self, "task", None)
        family = task_family(task, model)
        try:
            self._batching = training_batching(self.config.batching, model, family)
        except UserError as error:
            name = task.task_name if task is not None else family
            raise UserError(f"task {name!r}: {error}") from None
        logger.info(
            "Training batches: %s (--batching=%s; the %s family)",
            self._batching,
            self.config.batching,
            family,
        )
        return self._batching

    def batching(self) -> str:
        """The layout of the training batches (`resolve_batching`, once the model is
        built)."""
        if self._batching is not None:
            return self._batching
        if self.config.batching == "auto":
            raise RuntimeError("--batching=auto is resolved when the model is built")
        return self.config.batching

    def loss_fn(self, model):
        if self._batching is None:
            self.resolve_batching(model)
        # A task's own forward pass (GradCache) before the job's usual choice.
        own = self.task.training_loss_fn() if self.task is not None else None
        return own or super().loss_fn(model)

    @property
    def inference_batching(self) -> str:
        """How evaluation and prediction batch the features (`tasks.prediction`):
        sorted by length and trimmed, unless `--batching=padded`."""
        return "padded" if self.config.batching == "padded" else "bucketed"

    def compile_kwargs(self) -> dict[str, Any]:
        return {"loss": self.task.loss(), "metrics": self.task.metrics()}

    def initial_weights(self):
        initializer = self.source.encoder_initializer()
        return load_checkpoint(initializer) if isinstance(initializer, str) else initializer

    def record_run(self, *, write: bool) -> None:
        """`output_dir/run_settings.json` (`runners.fingerprint`) and `task.json`: a
        rerun resumes only the same run (or starts over, `--overwrite_output_dir`);
        written once every input is checked."""
        description = task_description(self.task, self.tokenizer)
        # The run's settings, not what it learns (tuned thresholds live in finetuned/).
        for key in self.task.learned_state_keys():
            description["state"].pop(key, None)
        current = self.run_settings(description)
        if not self.starts_over:
            if os.path.isfile(fingerprint.run_settings_path(self.output_dir)):
                fingerprint.check_run_settings(self.output_dir, current)
            else:  # nothing there, or a run of an earlier version: its own fingerprint
                self.check_earlier_fingerprint(description)
        if write:
            write_json_atomically(os.path.join(self.output_dir, TASK_FILE), description)
            fingerprint.write_run_settings(self.output_dir, current)

    def record_inference(self, *, write: bool) -> None:
        """An `eval` or `predict` run of a model from elsewhere (`--init_checkpoint`)
        records what it evaluated in `run_settings.json` (the task, the model, its
        length, casing and vocabulary, the task options that change results), as a
        training run records itself: a later run of another task or model into the
        directory is then refused in one line (`--overwrite_output_dir` starts over),
        where it used to add its results beside this one's. The directory's own model
        (no `--init_checkpoint`, or the directory itself or a path inside it) needs no record: the
        run's own stands."""
        given = self.config.init_checkpoint
        if self.mode not in ("eval", "predict") or not given:
            return
        inside = os.path.realpath(self.output_dir) + os.sep
        if os.path.exists(given) and (os.path.realpath(given) + os.sep).startswith(inside):
            return
        current = {
            "mode": self.mode,
            "task": self.task.task_name,
            "init_checkpoint": fingerprint.comparable(given, path=True),
            "max_seq_length": self.task.max_seq_length,
            "do_lower_case": bool(self.tokenizer.lowercase),
            "vocab_file": fingerprint.vocabulary_digest(self.tokenizer.get_vocabulary()),
            **fingerprint.task_option_settings(self.task.option_values),
        }
        if os.path.isfile(fingerprint.run_settings_path(self.output_dir)):
            fingerprint.check_run_settings(self.output_dir, current)
        elif write:
            fingerprint.write_run_settings(self.output_dir, current)

    def run_settings(self, description: dict[str, Any]) -> dict[str, Any]:
        """What this run's result depends on (`runners.fingerprint`): the settings that
        change it, as the task and tokenizer resolved them (the task's length, the
        vocabulary's casing and content), and the training examples' digest."""
        task, tokenizer = self.task, self.tokenizer
        current = fingerprint.config_settings(self.config)
        current.update(
            task=task.task_name,
            max_seq_length=task.max_seq_length,
            encoding=task.encoding,
            do_lower_case=bool(tokenizer.lowercase),
            vocab_file=fingerprint.vocabulary_digest(tokenizer.get_vocabulary()),
        )
        current.update(fingerprint.task_option_settings(task.option_values))
        current[fingerprint.TASK_STATE] = description["state"]
        current[fingerprint.TRAINING_DATA] = fingerprint.examples_digest(self.train_examples)
        return current

    def check_earlier_fingerprint(self, description: dict[str, Any]) -> None:
        """A directory without `run_settings.json` (none yet, or written by an earlier
        version): its `task.json` must name the same task, state, length and casing."""
        path = os.path.join(self.output_dir, TASK_FILE)
        if os.path.isfile(path):
            run_dir.check_same_run(
                path,
                read_task_description(self.output_dir),
                description,
                ("task_name", "state", "max_seq_length", "lowercase"),
            )

    def run_entries(self) -> tuple[str, ...]:
        return (*super().run_entries(), TASK_FILE)

    def dataset_fn(self):
        config = self.config
        return datasets.training_dataset_fn(
            self.task,
            self.train_examples,
            self.preprocessor,
            config.train_batch_size,
            seed=config.seed,
            batching="bucketed" if self.batching() == "bucketed" else "padded",
            **self.training_features(),
        )

    def training_features(self) -> dict[str, Any]:
        """`training_dataset_fn`'s `features_fn`, `shuffle_buffer` (none: the examples')."""
        return {}

    def log_plan(self) -> None:
        config = self.config
        logger.info(
            "%s: %s, %d steps of %d (%.3g epochs), learning rate %g, warmup %d steps",
            self.task.task_name,
            self._training_set(),
            self.num_train_steps,
            config.train_batch_size,
            self.num_train_steps / self.steps_per_epoch,
            config.learning_rate,
            config.optimizer_config().resolved_warmup_steps(self.num_train_steps),
        )

    def _training_set(self) -> str:
        """ "N training examples", with what they make when it is more ("in M windows")."""
        text = f"{len(self.train_examples)} training examples"
        if self.task.training_unit:
            text += f" in {self.num_training_features} {self.task.training_unit}"
        return text

    def final_model(self, model, step: int):
        from keras_bert_zoo.tasks.saving import load_finetuned

        best_dir = os.path.join(self.output_dir, BEST_DIR)
        if self.config.use_best_model and sources.is_finetuned_dir(best_dir):
            best = load_finetuned(best_dir, data_dir=self.config.data_dir)
            return best.model, run_outputs.read_metrics_file(best_dir).get("step"), "best"
        return model, step, "final"

    # --- Inference: eval, predict, export ---

    def load_for_inference(self) -> LoadedModel:
        config = self.config
        given = config.init_checkpoint or sources.finetuned_dir_of_run(
            self.output_dir, prefer_best=config.use_best_model, needed_by=f"--mode={self.mode}"
        )
        source = sources.resolve_weight_source(given, prefer_best=config.use_best_model)
        if source.kind == sources.FINETUNED:
            description = read_task_description(source.path)
            run_outputs.check_saved_task(config, description, source.path)
            finetuned = source.load_finetuned(data_dir=config.data_dir)
            sources.check_same_vocabulary(config.vocab_file, finetuned.tokenizer, source.path)
            self.task = run_outputs.create_task(description["task_name"], config, description)
            self.tokenizer = finetuned.tokenizer
            model = finetuned.model
            step = run_outputs.read_metrics_file(source.path).get("step")
        elif source.kind == sources.CHECKPOINT:
            description = source.task_description()
            if description is not None:
                run_outputs.check_saved_task(config, description, source.path)
            task_name = description["task_name"] if description else config.task
            if not task_name:
                raise UserError(
                    f"--task is required: {source.path} does not say which task it was tuned on"
                )
            if config.do_lower_case is None and description is not None:
                config = dataclasses.replace(config, do_lower_case=description["lowercase"])
            self.tokenizer = sources.tokenizer_of(source, config.vocab_file, config.do_lower_case)
            self.task = run_outputs.create_task(task_name, config, description)
            if description is None:
                self.task.use_init_checkpoint(source.path)
            model = source.load_task_model(self.task, f"--mode={config.mode}")
            step = None
        else:
            raise UserError(
                f"--init_checkpoint={given} is a {source.kind.replace('_', ' ')}: it holds no "
                f"trained task head, and --mode={config.mode} needs a fine-tuned model"
            )
        self.preprocessor = self.task.make_preprocessor(self.tokenizer)
        self._read_eval_sets()
        return LoadedModel(model, step, sources.name_in_run(source.path, self.output_dir))

    def predict(self, model, *, write: bool) -> dict[str, list[str]]:
        task = self.task
        splits = task.split_names()
        if not splits["predict"]:
            raise UserError(
                f"{task.task_name} has no predict split here ({splits}): give it the file "
                "to predict (e.g. --predict_file) or the test files in --data_dir"
            )
        files = {}
        # The labelled splits' answers, scored by prediction_results.
        self.predicted: dict[str, tuple[list, list]] = {}
        for split, examples in run_outputs.read_splits(task, splits["predict"]).items():
            answers = prediction.predict(
                task,
                model,
                examples,
                self.preprocessor,
                self.config.predict_batch_size,
                batching=self.inference_batching,
            )
            if run_outputs.labelled(examples):
                self.predicted[split] = (examples, answers)
            if write:
                files[split] = run_outputs.write_predictions(
                    task, answers, examples, self.output_dir, split
                )
        return files

    def prediction_results(self) -> dict[str, Any]:
        predicted = getattr(self, "predicted", {})
        if not predicted:
            return {}
        examples = {split: pair[0] for split, pair in predicted.items()}
        answers = {split: pair[1] for split, pair in predicted.items()}
        self.last_confusion_matrices = run_outputs.confusion_matrices(self.task, answers, examples)
        results = run_outputs.score_answers(self.task, answers, examples)
        self.last_scored = (results, answers, examples)  # for its summaries
        return results

    def write_eval_predictions(self, *, write: bool) -> dict[str, list[str]]:
        files = {}
        for split, examples in self.eval_sets.items():
            if write:
                files[split] = run_outputs.write_predictions(
                    task=self.task,
                    answers=self.last_answers[split],
                    examples=examples,
                    output_dir=self.output_dir,
                    split=split,
                )
        return files

    # --- Evaluation ---

    @property
    def eval_every(self) -> int:
        if self.config.eval_every is None:  # once per epoch
            return max(1, int(round(self.steps_per_epoch)))
        return int(self.config.eval_every)

    @property
    def best_metric(self) -> str | None:
        if not self.config.export_best:
            return None
        return f"{next(iter(self.eval_sets))}/{self.task.primary_metric}"

    @property
    def higher_is_better(self) -> bool:
        return self.task.higher_is_better

    def evaluate(self, model):
        logger.info(
            "Evaluating on %s",
            ", ".join(
                f"{split} ({len(examples)} examples)" for split, examples in self.eval_sets.items()
            ),
        )
        results, self.last_answers = run_outputs.evaluate_splits(
            self.task,
            model,
            self.preprocessor,
            self.eval_sets,
            self.config.eval_batch_size,
            batching=self.inference_batching,
        )
        self.last_confusion_matrices = run_outputs.confusion_matrices(
            self.task, self.last_answers, self.eval_sets
        )
        self.last_scored = (results, self.last_answers, self.eval_sets)  # for its summaries
        return results

    def trainer_metrics(self, results) -> dict[str, dict[str, float]]:
        # By split: the Trainer writes each split's metrics to its own TensorBoard run,
        # under the training run's tags, and ranks them as "split/metric".
        return {split: dict(metrics) for split, metrics in results.items()}

    def predicts_after_training(self) -> bool:
        # A file to predict given with the training run (--predict_file) is predicted.
        return bool(self.config.task_options.get("predict_file"))

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        record = run_outputs.eval_record(
            self.task, results, step=step, model_source=model_source, history=history
        )
        if getattr(self, "last_confusion_matrices", None):
            record["confusion_matrices"] = self.last_confusion_matrices
        # The other splits evaluated in this directory keep their results (an eval of
        # test.csv does not replace dev's).
        return run_outputs.with_earlier_splits(record, run_dir.read_eval_results(self.output_dir))

    def write_evaluation_summaries(self, step) -> None:
        # The final evaluation that reuses the last periodic one is written once.
        if step is None or step == getattr(self, "_summarized_step", None):
            return
        self._summarized_step = step
        results, answers, examples = getattr(self, "last_scored", ({}, {}, {}))
        eval_summaries.write_evaluation_summaries(
            self.output_dir,
            step,
            self.task,
            answers=answers,
            examples=examples,
            matrices=getattr(self, "last_confusion_matrices", None) or {},
            results=results,
            # A training run's Trainer wrote the metrics; eval and predict runs write them.
            write_metrics=not self.config.trains,
        )

    def export_best(self):
        from keras_bert_zoo.tasks.saving import save_finetuned

        return lambda model, directory: save_finetuned(directory, self.task, model, self.tokenizer)

    # --- The end ---

    def export(self, model, step, eval_results) -> dict[str, str]:
        return run_outputs.save_run_model(
            self.output_dir,
            self.task,
            model,
            self.tokenizer,
            step=step,
            eval_results=eval_results,
            checkpoint_layouts=self.config.checkpoint_layouts,
            # The best export of the last evaluation (or the best model itself, with
            # use_best_model) is this model: finetuned/ links its files, not a copy.
            same_model_dir=os.path.join(self.output_dir, BEST_DIR),
        )


# === The run ===


def run_job(job: FinetuningJob, result_class=FinetuningResult, **extra) -> FinetuningResult:
    """Runs `job` (a `FinetuningJob` or a subclass) through the runner's skeleton; its
    `result_class` result, with the `extra` fields."""
    ran = Runner(job).run()
    result = result_class(
        **{field.name: getattr(ran, field.name) for field in dataclasses.fields(RunResult)},
        config=job.config,
        task=job.task,
        tokenizer=job.tokenizer,
        preprocessor=job.preprocessor,
        **{name: value(job) for name, value in extra.items()},
    )
    if job.evaluates:
        result.eval_answers = (job.eval_sets, job.last_answers)
    return result


def run_finetuning(config: FinetuningConfig) -> FinetuningResult:
    """Runs `config.mode` through the runner's skeleton (see the module docstring);
    returns a `FinetuningResult`. The chief writes the metrics and prediction files."""
    result = run_job(FinetuningJob(config), FinetuningResult)
    if result.eval_answers is not None:
        logger.info(
            "eval (step %s): %s", result.step, run_outputs.format_results(result.eval_results)
        )
    return result


def summary(result: FinetuningResult) -> str:
    """What `tools/run_finetuning.py` prints at the end: the metrics, prediction files
    and exports of the run."""
    primary = result.task.primary_metric if result.task is not None else None
    lines = run_outputs.results_lines(result.eval_results, result.step, primary)
    for split, paths in result.prediction_files.items():
        lines.append(f"{split}: " + ", ".join(paths))
    for layout, path in result.exports.items():
        lines.append(f"{layout}: {path}")
    if result.training is not None:
        lines.append(tensorboard_hint(result.config.output_dir))
    return "\n".join(lines)
