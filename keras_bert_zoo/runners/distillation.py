"""The distillation job: a smaller student of a fine-tuned teacher, on the runner's
skeleton (`runners/runner.py`), for any task family.

`run_distillation(DistillationConfig(teacher=..., output_dir=...))` reads the teacher's
task from its `task.json`, builds the student (the teacher's own encoder with a subset
of its blocks, a preset, or any checkpoint `--init_checkpoint` accepts), and trains it
with `models.distillation.TaskDistiller`: the task's loss on the labels, the teacher's
soft targets computed in the same step, optionally hidden-state and attention losses.
Rows of `--transfer_file` (unlabelled in-domain text) train on the teacher's outputs
alone.

An embedding teacher (`sentence_embedding`: a fine-tuned directory, or with
`--task=sentence_embedding` a sentence-transformers checkpoint such as the installed
all-MiniLM-L6-v2) gives its vectors as soft targets: the student learns them by mean
squared error, through a projection the distiller alone holds when the widths differ
(`models.distillation`, kind `vectors`), on the transfer texts and the training
file's texts (an empty `--train_file` leaves the transfer texts alone, without the
task's loss).

It is a `FinetuningJob` whose model is the distiller: the data, the evaluation of the
student, the best export and the output directory are fine-tuning's, so the result is
an ordinary fine-tuned directory (`finetuned/`, `best/`, `eval_results.json`,
checkpoints with exact resume) that `run_finetuning --mode=eval|predict|export`,
`export_saved_model.py --finetuned_dir` and every serving path take as it is.
`eval_results.json` also holds the teacher's evaluation on the same splits and the
student's primary metric as a fraction of the teacher's.

Example:

```python
from keras_bert_zoo.runners.distillation import DistillationConfig, run_distillation

result = run_distillation(DistillationConfig(
    teacher="/tmp/sst2/finetuned", data_dir="glue_data/SST-2", student_layers="3",
    transfer_file="unlabelled_reviews.txt", output_dir="/tmp/sst2_student"))
print(result.eval_results["dev"]["accuracy"])
```
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import shutil
import tempfile
from typing import Any

from keras_bert_zoo.runners import finetuning, fingerprint, run_dir, run_outputs, sources
from keras_bert_zoo.runners.configs import (
    DistillationConfig,
    config_from_distillation_flags,
    define_distillation_flags,
)
from keras_bert_zoo.tasks.saving import finetuned_tokenizer, read_task_description
from keras_bert_zoo.training import distribute
from keras_bert_zoo.utils.atomic import write_json_atomically
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

__all__ = [
    "DISTILLATION_FILE",
    "DistillationConfig",
    "DistillationJob",
    "DistillationResult",
    "config_from_distillation_flags",
    "define_distillation_flags",
    "parse_layer_map",
    "parse_student_layers",
    "run_distillation",
    "summary",
]

# The run's distillation settings (`run_settings.json` holds them with the others, and
# checks them on a rerun; this file is the check of directories written before it).
# `--cache_teacher_outputs` is not one of them: it changes where the teacher's outputs
# come from (equal up to float rounding), not what is learned, so a run may resume with
# it switched on or off.
DISTILLATION_FILE = "distillation.json"
_FINGERPRINT_KEYS = (
    "teacher",
    "student",
    "student_layers",
    "transfer_file",
    "temperature",
    "hard_label_weight",
    "soft_target_weight",
    "hidden_state_weight",
    "attention_weight",
    "layer_map",
)


# === Flags that name layers ===


def parse_student_layers(value: str | None, num_teacher_layers: int | None) -> list[int]:
    """`--student_layers`: indices (`"0,2,4"`) or a count (`"3"`, evenly spaced from the
    first); None keeps half the teacher's blocks. With `num_teacher_layers` None (the
    teacher not read yet), the syntax alone is checked and the indices are returned."""
    from keras_bert_zoo.models.distillation import evenly_spaced_layers

    if value is None or not str(value).strip():
        return evenly_spaced_layers(num_teacher_layers, max(1, num_teacher_layers // 2))
    text = str(value).strip()
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise UserError(
            f"--student_layers={text}: expected block indices (0,2,4) or a count (3)"
        ) from None
    if num_teacher_layers is None:
        if ("," not in text and numbers[0] < 1) or min(numbers) < 0:
            raise UserError(
                f"--student_layers={text}: a count of blocks (1 or more) or distinct block "
                "indices from 0"
            )
        if len(set(numbers)) != len(numbers):
            raise UserError(f"--student_layers={text}: a block index is given twice")
        return numbers
    if "," not in text:
        count = numbers[0]
        if not 1 <= count <= num_teacher_layers:
            raise UserError(
                f"--student_layers={text}: a count from 1 to the teacher's {num_teacher_layers} "
                "blocks"
            )
        return evenly_spaced_layers(num_teacher_layers, count)
    bad = [n for n in numbers if not 0 <= n < num_teacher_layers]
    if bad or len(set(numbers)) != len(numbers):
        raise UserError(
            f"--student_layers={text}: distinct block indices from 0 to "
            f"{num_teacher_layers - 1} (the teacher has {num_teacher_layers} blocks)"
        )
    return numbers


def parse_layer_map(value: str | None) -> list[tuple[int, int]] | None:
    """`--layer_map=0:1,1:3,2:5` as `[(0, 1), (1, 3), (2, 5)]` (None: the default)."""
    if value is None or not str(value).strip():
        return None
    pairs = []
    for part in str(value).split(","):
        student, colon, teacher = part.strip().partition(":")
        if not colon or not student.strip().isdigit() or not teacher.strip().isdigit():
            raise UserError(
                f"--layer_map={value}: expected student:teacher block pairs, e.g. 0:1,1:3,2:5 "
                f"(got {part.strip()!r})"
            )
        pairs.append((int(student), int(teacher)))
    return pairs


# === The job ===


class DistillationJob(finetuning.FinetuningJob):
    """Distils `config.teacher` into a student (see the module docstring)."""

    modes = ("train", "train_and_eval")

    def check_inputs(self) -> None:
        config = self.config
        if not config.teacher:
            raise UserError(
                "--teacher is required: a fine-tuned directory (finetuned/, best/) or a "
                "fine-tuning run's --output_dir"
            )
        if config.student and config.student_layers:
            raise UserError(
                "pass --student (a preset or checkpoint) or --student_layers (the teacher's "
                "own blocks), not both"
            )
        if config.transfer_file and not os.path.isfile(config.transfer_file):
            raise FileNotFoundError(f"--transfer_file={config.transfer_file}: no such file")
        parse_layer_map(config.layer_map)
        if config.cache_teacher_outputs:
            if config.hidden_state_weight or config.attention_weight:
                raise UserError(
                    "--cache_teacher_outputs holds the teacher's outputs, not its blocks: "
                    "--hidden_state_weight and --attention_weight need the teacher at every "
                    "step"
                )
            if not config.soft_target_weight:
                raise UserError(
                    "--cache_teacher_outputs with --soft_target_weight=0: no term reads the "
                    "teacher's outputs"
                )
        if config.student_layers:
            parse_student_layers(config.student_layers, None)  # the syntax, before TF

    # --- Data, the teacher's task and tokenizer ---

    def prepare(self, strategy) -> None:
        config = self.config
        teacher = sources.resolve_weight_source(config.teacher, flag="--teacher")
        self.teacher_source = teacher
        # The chief alone writes the run directory (the skeleton's rule); the
        # teacher-output cache follows it.
        self.is_chief = strategy is None or distribute.is_chief(strategy)
        if teacher.kind == sources.CHECKPOINT and config.task:
            self.task = task = self._task_of_checkpoint_teacher(teacher)
        elif teacher.kind != sources.FINETUNED:
            raise UserError(
                f"--teacher={config.teacher} is a {teacher.kind.replace('_', ' ')}, not a "
                "fine-tuned model: give a directory run_finetuning.py wrote (model.keras, "
                "vocab.txt, task.json) or its --output_dir (or a checkpoint with --task, for "
                "a task whose model has no head to train, such as sentence_embedding)"
            )
        else:
            description = read_task_description(teacher.path)
            run_outputs.check_saved_task(config, description, teacher.path)
            self.tokenizer = finetuned_tokenizer(teacher.path, description)
            sources.check_same_vocabulary(config.vocab_file, self.tokenizer, teacher.path)
            self.task = task = run_outputs.create_task(
                description["task_name"], config, description
            )
        self.soft_targets = task.soft_targets()
        self.transfer_examples = (
            task.read_transfer_file(config.transfer_file) if config.transfer_file else []
        )
        self._read_examples(self.transfer_examples)
        task.check_distillation(hard_label_weight=config.hard_label_weight)
        if not self.train_examples and not self.transfer_examples:
            raise UserError(
                f"{task.task_name}: nothing to distil on: give the task's training data or "
                "--transfer_file"
            )
        self.student_source = (
            sources.resolve_weight_source(config.student, flag="--student")
            if config.student
            else None
        )
        if self.student_source is not None and self.student_source.vocab_file:
            self._check_student_vocabulary(self.student_source)
        self.teacher_results: dict[str, Any] | None = None

    def _task_of_checkpoint_teacher(self, teacher):
        """`config.task` on a checkpoint teacher's tokenizer and settings (a
        sentence-transformers model's pooling, normalization and length); the teacher
        model is read by `build_model` (`_load_teacher`)."""
        config = self.config
        self.tokenizer = sources.tokenizer_of(teacher, config.vocab_file, config.do_lower_case)
        task = run_outputs.create_task(config.task, config)
        task.use_init_checkpoint(teacher.path)
        return task

    def _load_teacher(self):
        """The teacher task model: a fine-tuned directory's, or `config.task`'s model on
        a checkpoint, which must hold every weight of it (no head to train)."""
        from keras_bert_zoo.tasks.saving import load_finetuned

        source = self.teacher_source
        if source.kind == sources.CHECKPOINT:
            return source.load_task_model(self.task, needed_by="--teacher")
        return load_finetuned(source.path, data_dir=self.config.data_dir).model

    def _check_student_vocabulary(self, source) -> None:
        from keras_bert_zoo.text.vocab import load_vocab

        if load_vocab(source.vocab_file) != self.tokenizer.get_vocabulary():
            raise UserError(
                f"--student={self.config.student}: its vocabulary {source.vocab_file} is not "
                f"the teacher's ({self.teacher_source.path}); the student reads the teacher's "
                "token ids"
            )

    def _training_set(self) -> str:
        text = f"{len(self.train_examples)} training examples"
        if self.transfer_examples:
            text += f" and {len(self.transfer_examples)} unlabelled transfer examples"
        if self.task.training_unit:
            text += f" in {self.num_training_features} {self.task.training_unit}"
        return text

    # --- The model: the distiller around the teacher and the student ---

    def build_model(self):
        from keras_bert_zoo.models.distillation import TaskDistiller, layer_subset_student

        config = self.config
        self.teacher_model = teacher = self._load_teacher()
        num_teacher_layers = len(teacher.encoder.transformer_layers)
        if self.student_source is None:
            self.student_layers = parse_student_layers(config.student_layers, num_teacher_layers)
            student = layer_subset_student(teacher, self.student_layers, self.task.build_model)
            description = f"the teacher's blocks {self.student_layers}"
        else:
            student = self._student_from_source(teacher)
            description = self.student_source.given
        logger.info(
            "Student: %s (%d of the teacher's %d blocks, hidden size %d of %d)",
            description,
            len(student.encoder.transformer_layers),
            num_teacher_layers,
            student.encoder.hidden_size,
            teacher.encoder.hidden_size,
        )
        hard_label_weight = config.hard_label_weight
        if not self.train_examples and hard_label_weight:
            logger.info("No labelled examples: the student learns the teacher's outputs alone")
            hard_label_weight = 0.0
        distiller = TaskDistiller(
            teacher,
            student,
            self.soft_targets,
            temperature=config.temperature,
            hard_label_weight=hard_label_weight,
            soft_target_weight=config.soft_target_weight,
            hidden_state_weight=config.hidden_state_weight,
            attention_weight=config.attention_weight,
            layer_map=parse_layer_map(config.layer_map),
        )
        self.resolve_batching(distiller)
        return distiller

    def _student_from_source(self, teacher):
        from keras_bert_zoo.checkpoints import load_weights
        from keras_bert_zoo.models import BertEncoder

        source = self.student_source
        bert_config = source.bert_config
        vocab_size = self.tokenizer.vocabulary_size()
        if source.kind == sources.PRESET:
            # A preset is an architecture: it reads the teacher's vocabulary.
            bert_config = dataclasses.replace(bert_config, vocab_size=vocab_size)
        elif bert_config.vocab_size < vocab_size:
            raise UserError(
                f"--student={source.given}: its word-embedding table has "
                f"{bert_config.vocab_size} rows, the teacher's vocabulary {vocab_size} tokens"
            )
        student = self.task.build_model(
            BertEncoder.from_bert_config(bert_config, dtype=teacher.encoder.dtype_policy)
        )
        initializer = source.encoder_initializer()
        if isinstance(initializer, str):
            logger.info(
                "Student from %s: %s", initializer, load_weights(student, initializer).summary()
            )
        elif initializer is not None:
            initializer(student)
        return student

    def initial_weights(self):
        return None  # the student's weights are set when it is built

    def compile_kwargs(self) -> dict:
        if not self.train_examples:  # no labels: no task loss (its kind is the data's)
            return {"loss": None, "metrics": None}
        return super().compile_kwargs()

    def loss_fn(self, model):
        if self.task.training_loss_fn() is not None:
            # The task's own forward pass (GradCache) trains its model, not the distiller.
            raise UserError(
                f"{self.task.task_name}: the task's own training step (e.g. "
                "--gradient_cache_chunk_size) does not run the distiller; leave it off"
            )
        return super().loss_fn(model)

    def record_run(self, *, write: bool) -> None:
        """The fine-tuning fingerprint (`run_settings.json` holds the distillation
        settings too), and `distillation.json`, which also keeps the teacher's results."""
        super().record_run(write=write)
        if write:
            path = os.path.join(self.output_dir, DISTILLATION_FILE)
            write_json_atomically(path, self._distillation_settings())

    def _distillation_settings(self) -> dict[str, Any]:
        settings = {key: getattr(self.config, key) for key in _FINGERPRINT_KEYS}
        settings["teacher"] = self.teacher_source.path
        return settings

    def run_settings(self, description: dict[str, Any]) -> dict[str, Any]:
        current = super().run_settings(description)
        current["teacher"] = fingerprint.comparable(self.teacher_source.path, path=True)
        current[fingerprint.TRANSFER_DATA] = fingerprint.examples_digest(self.transfer_examples)
        return current

    def check_earlier_fingerprint(self, description: dict[str, Any]) -> None:
        super().check_earlier_fingerprint(description)
        path = os.path.join(self.output_dir, DISTILLATION_FILE)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            run_dir.check_same_run(path, saved, self._distillation_settings(), _FINGERPRINT_KEYS)

    def run_entries(self) -> tuple[str, ...]:
        # The names of data.teacher_outputs (which imports TensorFlow): the cache.
        return (
            *super().run_entries(),
            DISTILLATION_FILE,
            "teacher_outputs.tfrecord",
            "teacher_outputs.json",
        )

    def training_features(self) -> dict[str, Any]:
        settings = {
            "features_fn": self._training_features,
            "shuffle_buffer": max(10_000, self.num_training_features),
        }
        if self.config.cache_teacher_outputs:
            cache = self._teacher_outputs_cache()
            settings["features_fn"] = lambda: cache.attach(self._training_features())
            settings["split_features"] = self._split_with_teacher_outputs
        return settings

    def _teacher_outputs_cache(self):
        """The teacher's outputs over the training features, computed once
        (`data.teacher_outputs`): in the run directory for the chief (a resumed run
        reads them back), in a temporary directory for other workers, which write
        nothing in the run directory."""
        from keras_bert_zoo.data.teacher_outputs import TeacherOutputsCache
        from keras_bert_zoo.tasks.prediction import outputs_by_batch

        if self.is_chief:
            directory = self.output_dir
        else:
            directory = tempfile.mkdtemp(prefix="teacher_outputs_")
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
        cache = TeacherOutputsCache(directory)
        input_names = self.task.model_input_names()
        features = self._training_features()
        if cache.matches(features, input_names):
            logger.info("Reading the teacher's outputs from %s", cache.records_path)
            return cache
        logger.info("Computing the teacher's outputs over %s, once", self._training_set())
        cache.write(
            outputs_by_batch(
                self.task,
                self.teacher_model,
                features,
                self.config.eval_batch_size,
                batching=self.inference_batching,
            ),
            input_names,
            self.num_training_features,
        )
        return cache

    def _split_with_teacher_outputs(self, features):
        """`task.split_features`, with the cached teacher outputs in `x`."""
        from keras_bert_zoo.inputs import TEACHER_OUTPUTS

        x, y, sample_weight = self.task.split_features(features)
        return {**x, TEACHER_OUTPUTS: features[TEACHER_OUTPUTS]}, y, sample_weight

    def _training_features(self):
        """The labelled features (`sample_weight` 1) and the transfer set's (its labels
        zeros, `sample_weight` 0: the task's loss skips them, the teacher's do not); the
        transfer set's alone for a task without training data (sentence_embedding)."""
        import tensorflow as tf

        task = self.task
        transfer = None
        if self.transfer_examples:
            transfer = task.features(self.transfer_examples, self.preprocessor, training=False)
        labelled = transfer
        if self.train_examples:
            labelled = task.features(self.train_examples, self.preprocessor, training=True)
        spec = labelled.element_spec
        labels = [key for key in task.label_keys if key in spec]
        kept = set(task.model_input_names()) | set(labels)

        def weighted(weight):
            def add_weight(features):
                features = dict(features)
                given = features.get("sample_weight")
                features = {key: features[key] for key in kept if key in features}
                for key in kept - set(features):  # a transfer row's labels
                    features[key] = tf.zeros(spec[key].shape, spec[key].dtype)
                if given is not None:
                    weight_of_row = tf.cast(given, tf.float32) * weight
                elif len(labels) == 1 and spec[labels[0]].shape.rank:
                    # Per-position labels (tags): Keras weighs each position.
                    weight_of_row = tf.fill(spec[labels[0]].shape, weight)
                else:
                    weight_of_row = weight
                features["sample_weight"] = weight_of_row
                return features

            return add_weight

        if not self.train_examples:
            return transfer.map(weighted(tf.constant(0.0)))
        labelled = labelled.map(weighted(tf.constant(1.0)))
        if transfer is None:
            return labelled
        return labelled.concatenate(transfer.map(weighted(tf.constant(0.0))))

    # --- Evaluation: the student's, beside the teacher's ---

    @staticmethod
    def _student(model):
        from keras_bert_zoo.models.distillation import TaskDistiller

        return model.student if isinstance(model, TaskDistiller) else model

    def evaluate(self, model):
        if self.teacher_results is None:
            logger.info("Evaluating the teacher (%s)", self.teacher_source.path)
            self.teacher_results, _ = run_outputs.evaluate_splits(
                self.task,
                self.teacher_model,
                self.preprocessor,
                self.eval_sets,
                self.config.eval_batch_size,
                batching=self.inference_batching,
            )
        return super().evaluate(self._student(model))

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        record = super().eval_record(step, results, history, model_source)
        primary = self.task.primary_metric
        record["teacher"] = {"model": self.teacher_source.path, "results": self.teacher_results}
        record["fraction_of_teacher"] = fractions_of_teacher(results, self.teacher_results, primary)
        return record

    def write_evaluation_summaries(self, step) -> None:
        super().write_evaluation_summaries(step)
        # The teacher's evaluation also goes in distillation.json, once: eval_results.json
        # is rewritten by any later evaluation of the directory (run_finetuning --mode=eval).
        path = os.path.join(self.output_dir, DISTILLATION_FILE)
        if self.teacher_results and not getattr(self, "_teacher_results_saved", False):
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            saved["teacher_results"] = self.teacher_results
            write_json_atomically(path, saved)
            self._teacher_results_saved = True

    def export_best(self):
        from keras_bert_zoo.tasks.saving import save_finetuned

        return lambda model, directory: save_finetuned(
            directory, self.task, self._student(model), self.tokenizer
        )

    def final_model(self, model, step: int):
        model, step, source = super().final_model(self._student(model), step)
        return model, step, source


# === The run ===


@dataclasses.dataclass
class DistillationResult(finetuning.FinetuningResult):
    """What `run_distillation` did: a `FinetuningResult` and the teacher's evaluation."""

    teacher_results: dict[str, Any] | None = None


def run_distillation(config: DistillationConfig) -> DistillationResult:
    """Trains the student of `config.teacher` (see the module docstring)."""
    return finetuning.run_job(
        DistillationJob(config),
        DistillationResult,
        teacher_results=lambda job: job.teacher_results,
    )


def summary(result: DistillationResult) -> str:
    """What `tools/run_distillation.py` prints: the teacher's metrics, then the
    student's (as `run_finetuning.py` prints them) with its primary metric as a fraction
    of the teacher's on each split, then the run's files."""
    lines = []
    student = finetuning.summary(result).splitlines()
    if result.teacher_results:
        primary = result.task.primary_metric
        metrics = run_outputs.results_lines(result.teacher_results, None, primary)[1:]
        lines += [f"teacher ({result.config.teacher}):", *metrics]
        fractions = fractions_of_teacher(result.eval_results, result.teacher_results, primary)
        if fractions:
            # After the student's metrics, the lines results_lines wrote.
            end = len(run_outputs.results_lines(result.eval_results, result.step, primary))
            shown = ", ".join(f"{split} {value:.4f}" for split, value in fractions.items())
            student.insert(end, f"  fraction of the teacher's {primary}: {shown}")
    return "\n".join([*lines, *student])


def fractions_of_teacher(
    results: dict[str, dict[str, float]] | None,
    teacher_results: dict[str, dict[str, float]] | None,
    primary: str,
) -> dict[str, float]:
    """The student's `primary` metric over the teacher's, on each split both have (and
    the teacher's is not 0): `eval_results.json`'s `fraction_of_teacher`."""
    return {
        split: metrics[primary] / teacher_results[split][primary]
        for split, metrics in (results or {}).items()
        if teacher_results
        and primary in metrics
        and (teacher_results.get(split) or {}).get(primary)
    }
