"""The pretraining job: everything `tools/run_pretraining.py` does, callable in-process.

`run_pretraining(PretrainingConfig(...))` runs `PretrainingJob` through the runner's
skeleton (`runners/runner.py`); the job only orchestrates. The pretraining task
(`tasks.pretraining`) owns the input modes (`records`, `remask_records`,
`dynamic_text`), the `BertPretrainer` and its loss (google-research/bert's recipe with
the shared training flags), the MLM/NSP evaluation and the exports' contents;
`data.pretraining_records` reads the records' lengths and names a damaged record;
`checkpoints.resize` extends a shorter position table (phase 2: phase 1's `output_dir`
as `init_checkpoint` with `max_seq_length=512`).

Modes (`mode`): `train` trains (resuming from `output_dir`), evaluates on
`eval_input_file` when given (every `eval_every` steps and at the end) and exports;
`eval` evaluates the newest checkpoint of `output_dir` (or `init_checkpoint`, any
kind `runners.sources` resolves) on `eval_input_file`; `export` writes that model as
`export_google/` and `export_huggingface/` (the encoder with its MLM and NSP heads).
`output_dir` also holds `bert_config.json` (checked on every resume), `vocab.txt`,
`checkpoints/`, TensorBoard summaries and `eval_results.json`.

Example:

```python
run_pretraining(PretrainingConfig(
    input_file="records/train-*.tfrecord", eval_input_file="records/heldout.tfrecord",
    preset="bert_tiny_uncased", vocab_file="vocab.txt", output_dir="/tmp/phase1",
    num_train_steps=900, num_warmup_steps=100, learning_rate=1e-4))
scores = run_pretraining(PretrainingConfig(
    mode="eval", output_dir="/tmp/phase1", eval_input_file="records/heldout.tfrecord"))
```
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from keras_bert_zoo.runners import fingerprint, run_dir, sources
from keras_bert_zoo.runners.configs import PRETRAINING_MODES, PretrainingConfig
from keras_bert_zoo.runners.configs import config_from_pretraining_flags as config_from_flags
from keras_bert_zoo.runners.configs import define_pretraining_flags as define_flags
from keras_bert_zoo.runners.configs import pretraining_flag_names as runner_flag_names
from keras_bert_zoo.runners.run_dir import CHECKPOINT_LAYOUTS, EVAL_RESULTS_FILE, EXPORT_DIRS
from keras_bert_zoo.runners.runner import Job, LoadedModel, Runner, RunResult, tensorboard_hint
from keras_bert_zoo.tasks import pretraining as pretraining_task
from keras_bert_zoo.tasks.pretraining import PretrainingTask
from keras_bert_zoo.training.reporting import format_metric
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

CONFIG_FILE = sources.CONFIG_FILE

__all__ = [
    "CHECKPOINT_LAYOUTS",
    "EVAL_RESULTS_FILE",
    "EXPORT_DIRS",
    "PretrainingConfig",
    "PretrainingJob",
    "PretrainingResult",
    "config_from_flags",
    "define_flags",
    "run_pretraining",
    "runner_flag_names",
]

# Names whose logic moved below this floor, kept for one release (docs/api-changes.md):
# {old name here: its home now, under the same name}.
MOVED_NAMES = {
    "RecordsInfo": "keras_bert_zoo.data.pretraining_records",
    "inspect_records": "keras_bert_zoo.data.pretraining_records",
    "copy_pretraining_weights": "keras_bert_zoo.checkpoints.resize",
    "extend_position_embeddings": "keras_bert_zoo.checkpoints.resize",
    "evaluate_pretraining": "keras_bert_zoo.tasks.pretraining",
    "export_pretrained": "keras_bert_zoo.tasks.pretraining",
    "DEFAULT_DYNAMIC_MAX_SEQ_LENGTH": "keras_bert_zoo.tasks.pretraining",
    "DEFAULT_DYNAMIC_MAX_PREDICTIONS": "keras_bert_zoo.tasks.pretraining",
}
__getattr__ = moved_names(
    __name__,
    [],
    only=(),
    renamed={
        **{name: (home, name) for name, home in MOVED_NAMES.items()},
        "EXPORT_FORMATS": ("keras_bert_zoo.utils.run_layout", "CHECKPOINT_LAYOUTS"),
    },
)


# === The run ===


@dataclasses.dataclass(kw_only=True)
class PretrainingResult(RunResult):
    """What `run_pretraining` did: the skeleton's `RunResult` (`model`, the
    `BertPretrainer`; `step`, `training`, `eval_results`, `eval_history`, `exports`,
    `mode`, `seconds`), and what the job read.

    Attributes:
        config: the configuration run.
        bert_config: the model's `BertConfig`.
        max_seq_length, max_predictions_per_seq: the input's lengths (None in `export`).
    """

    config: PretrainingConfig
    bert_config: Any
    max_seq_length: int | None
    max_predictions_per_seq: int | None


class PretrainingJob(Job):
    """Pretraining (masked LM + NSP) on the runner's skeleton (see the module docstring).

    Attributes:
        train_input, eval_input: the `tasks.pretraining.PretrainingInput`s read (None
            when the mode reads none).
        task: the `PretrainingTask`, made by `prepare` / `load_for_inference`.
    """

    input_state = "iterator"  # shuffled record streams: the iterator is checkpointed
    modes = PRETRAINING_MODES

    def __init__(self, config: PretrainingConfig):
        super().__init__(config)
        self.train_input = self.eval_input = self.task = self.source = None
        self.bert_config = self.vocab_file = self.seq_length = self.predictions = None

    def check_inputs(self) -> None:
        config = self.config
        if self.mode == "train":
            self.train_input = pretraining_task.resolve_training_input(
                config.input_file,
                config.input_mode,
                max_seq_length=config.max_seq_length,
                max_predictions_per_seq=config.max_predictions_per_seq,
            )
        elif self.mode == "eval" and not config.eval_input_file:
            raise UserError("--mode=eval needs --eval_input_file (held-out pretraining records)")
        given = self.train_input or config
        if config.eval_input_file and self.mode != "export":
            self.eval_input = pretraining_task.resolve_record_input(
                config.eval_input_file,
                max_seq_length=given.max_seq_length,
                max_predictions_per_seq=given.max_predictions_per_seq,
            )
        lengths = self.train_input or self.eval_input
        self.seq_length = lengths.max_seq_length if lengths else None
        self.predictions = lengths.max_predictions_per_seq if lengths else None

    def _make_task(self, source, *, training: bool):
        """The task on the architecture asked for (training) or the source's (inference)."""
        self.source = source
        self.task = PretrainingTask.from_settings(
            self.config,
            lengths=self.train_input or self.eval_input,
            source_config=source.bert_config if source else None,
            source_vocab_file=source.vocab_file if source else None,
            training=training,
        )
        vocab_file = self.task.vocab_file
        if training and self.config.preset and vocab_file and os.path.isfile(vocab_file):
            # A preset is an architecture: its word-embedding table and output layer take
            # the vocabulary's size (a --bert_config_file keeps its own vocab_size, which
            # must hold the vocabulary: check_vocab_fits).
            tokens = len(self.task.vocabulary())
            self.task.bert_config = self.task.bert_config.replace(vocab_size=tokens)
        self.bert_config, self.vocab_file = self.task.bert_config, vocab_file
        if self.vocab_file:
            sources.check_vocab_fits(self.vocab_file, self.bert_config)
        return self.task

    def prepare(self, strategy) -> None:
        given = self.config.init_checkpoint
        self._make_task(sources.resolve_weight_source(given) if given else None, training=True)

    def build_model(self):
        return self.task.build_model()

    def compile_kwargs(self) -> dict[str, Any]:
        return self.task.compile_kwargs()

    def initial_weights(self):
        source = self.source
        if source is None or not source.has_weights:
            return None

        def initialize(target):
            self.task.initialize(target, source.load_pretraining_weights())
            logger.info("Initialized from %s", source.path)

        return initialize

    def record_run(self, *, write: bool) -> None:
        """`bert_config.json` (and `vocab.txt`) and `run_settings.json`
        (`runners.fingerprint`) of the run: a rerun resumes only the same run, the same
        architecture and every setting that changes what is learned (or starts over,
        `--overwrite_output_dir`)."""
        from keras_bert_zoo.config import BertConfig
        from keras_bert_zoo.text.vocab import write_vocab
        from keras_bert_zoo.utils.atomic import write_json_atomically

        path = os.path.join(self.output_dir, CONFIG_FILE)
        current = self.bert_config.to_google_dict()
        settings = self.run_settings()
        if not self.starts_over:
            architecture = []
            if os.path.isfile(path):
                saved = BertConfig.from_google_json(path).to_google_dict()
                keys = sorted(set(saved) | set(current))
                architecture = run_dir.setting_differences(saved, current, keys)
            if os.path.isfile(fingerprint.run_settings_path(self.output_dir)):
                fingerprint.check_run_settings(
                    self.output_dir, settings, more_differences=architecture
                )
            elif architecture:  # no run_settings.json: a run of an earlier version
                raise run_dir.other_run_error(path, architecture)
        if not write:
            return
        write_json_atomically(path, current)
        if self.task.vocabulary():
            write_vocab(os.path.join(self.output_dir, "vocab.txt"), self.task.vocabulary())
        fingerprint.write_run_settings(self.output_dir, settings)

    def run_settings(self) -> dict[str, Any]:
        """What this run's result depends on (`runners.fingerprint`): the settings that
        change it, the lengths read from the records, and digests of the vocabulary and
        the training files."""
        current = fingerprint.config_settings(self.config)
        current.update(
            max_seq_length=self.seq_length,
            max_predictions_per_seq=self.predictions,
            vocab_file=fingerprint.vocabulary_digest(self.task.vocabulary() or []),
        )
        current[fingerprint.TRAINING_DATA] = fingerprint.files_digest(self.train_input.files)
        return current

    def run_entries(self) -> tuple[str, ...]:
        return (*super().run_entries(), CONFIG_FILE, "vocab.txt")

    def dataset_fn(self):
        return self.task.training_dataset_fn(
            self.train_input.files, self.config.train_batch_size, seed=self.config.seed
        )

    def log_plan(self) -> None:
        logger.info(
            "Pretraining %s (%s) for %d steps of %d sequences from %d %s file(s)",
            self.output_dir,
            self.task.describe(),
            self.config.num_train_steps,
            self.config.train_batch_size,
            len(self.train_input.files),
            self.config.input_mode,
        )

    def load_for_inference(self) -> LoadedModel:
        """`eval`, `export`: the newest checkpoint of `output_dir` (or `init_checkpoint`,
        any kind `runners.sources` resolves but a preset), as the task's model."""
        given = self.config.init_checkpoint
        if not given and not sources.is_pretraining_run_dir(self.output_dir):
            raise FileNotFoundError(
                f"--mode={self.mode} needs a trained model: {self.output_dir} holds no "
                f"pretraining run ({CONFIG_FILE} and checkpoints/); train first, or pass "
                "--init_checkpoint"
            )
        source = sources.resolve_weight_source(given or self.output_dir)
        if not source.has_weights:
            raise UserError(f"--mode={self.mode} needs trained weights; {given} is a preset")
        task = self._make_task(source, training=False)
        model, step = task.build_model(), None
        if source.kind == sources.PRETRAINING_RUN:  # a run's checkpoint: its step is known
            step = task.load_checkpoint(model, source.path)
        else:
            task.initialize(model, source.load_pretraining_weights())
        return LoadedModel(model, step, source.path)

    @property
    def evaluates(self) -> bool:
        mode = self.mode
        return mode == "eval" or (mode == "train" and bool(self.config.eval_input_file))

    def evaluate(self, model) -> dict[str, float]:
        return self.task.evaluate(
            model,
            self.eval_input.files,
            batch_size=self.config.eval_batch_size,
            steps=self.config.eval_steps,
        )

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        config = self.config
        record = {"eval_input_file": config.eval_input_file, "eval_steps": config.eval_steps}
        return {"step": step, **record, "results": results, "history": history}

    def export(self, model, step, eval_results) -> dict[str, str]:
        exports = {}
        for export_format in self.config.checkpoint_layouts:
            path = os.path.join(self.output_dir, EXPORT_DIRS[export_format])
            exports[export_format] = self.task.export(model, path, export_format)
            logger.info("Wrote the %s layout with the MLM and NSP heads to %s", export_format, path)
        return exports


def run_pretraining(config: PretrainingConfig) -> PretrainingResult:
    """Runs `config.mode` (see the module docstring): trains (resuming from `output_dir`
    when it holds a checkpoint), evaluates and exports. Returns a `PretrainingResult`."""
    import tensorflow as tf

    from keras_bert_zoo.data.pretraining_records import diagnose_records

    job = PretrainingJob(config)
    try:
        run = Runner(job).run()
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
        if job.train_input is not None and job.config.input_mode != "dynamic_text":
            # tf.data names neither the file nor the record; find them.
            diagnose_records(job.train_input.files, job.seq_length, job.predictions, "input_file")
        raise
    return PretrainingResult(
        config=job.config,
        bert_config=job.bert_config,
        max_seq_length=job.seq_length,
        max_predictions_per_seq=job.predictions,
        **run.fields_for(PretrainingResult),
    )


def summary(result: PretrainingResult) -> str:
    """What `tools/run_pretraining.py` prints at the end."""
    if result.mode == "train":
        lines = [f"Trained to step {result.step} in {result.seconds:.1f} s"]
    else:
        lines = [f"Loaded {result.model_source} (step {result.step}) in {result.seconds:.1f} s"]
    if result.eval_results:
        lines.append(
            f"eval_results.json (step {result.step}): "
            + ", ".join(f"{k} {format_metric(v)}" for k, v in sorted(result.eval_results.items()))
        )
    lines.extend(f"{layout}: {path}" for layout, path in result.exports.items())
    if result.training is not None:
        lines.append(tensorboard_hint(result.config.output_dir))
    return "\n".join(lines)
