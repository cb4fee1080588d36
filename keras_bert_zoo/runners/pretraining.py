"""The pretraining job: everything `tools/run_pretraining.py` does, callable in-process.

`run_pretraining(PretrainingConfig(...))` runs `PretrainingJob` through the runner's
skeleton (`runners/runner.py`): it trains a `BertPretrainer` (masked LM + next
sentence prediction) with the one training loop (`training.Trainer`): the
google-research/bert `run_pretraining.py` recipe (AdamW, linear warmup then linear
decay from step 0, global-norm clipping at 1.0, the weighted-mean masked-LM loss plus
the NSP loss), on any strategy, with accumulation, mixed precision and XLA from the
shared training flags (`training/flags.py`).

Inputs (`input_mode`):

- `records`: static pretraining TFRecords, ours (`tools/create_pretraining_data.py`)
  or google-research/bert's; `max_seq_length` and `max_predictions_per_seq` are read
  from the records when not given.
- `remask_records`: the same records, with fresh masks every pass
  (`dynamic.remasked_pretraining_dataset`).
- `dynamic_text`: raw text (one sentence per line, blank lines between documents),
  with NSP pairs and masks built on the fly (`dynamic.dynamic_pretraining_dataset`);
  needs `vocab_file`.

Evaluation reads held-out static records (`eval_input_file`), `eval_steps` batches of
them, every `eval_every` steps and at the end: masked-LM accuracy (over real
predictions) and loss, NSP accuracy and loss, as the original's `metric_fn`.

The model comes from `bert_config_file` (a `bert_config.json`, or a Hugging Face
`config.json`) or `preset`, or else from `init_checkpoint`'s config. `init_checkpoint`
takes what `run_finetuning`'s does (`runners.sources`): a google-research/bert or
Hugging Face directory (with or without the pretraining heads; ours among them), the
`output_dir` of an earlier run (its newest training checkpoint) or one of its
`checkpoints/ckpt-N`, a fine-tuned directory (its encoder), or a preset name. Phase 2
of the paper (longer sequences) is phase 1's `output_dir` (or export) as
`init_checkpoint` with `max_seq_length=512`: when the
checkpoint's position-embedding table is shorter than `max_seq_length`, the table is
extended (`extend_position_embeddings`).

What `output_dir` holds (every file written through `utils.atomic`):

```
bert_config.json       the model's config (Google layout), checked on every resume
checkpoints/ckpt-N/    training checkpoints (exact resume: rerun the same command)
train/, eval/          TensorBoard summaries (loss, masked_lm_accuracy,
                       next_sentence_accuracy, learning rate, speed; eval metrics)
eval_results.json      the last evaluation and the history of all of them
export_google/         the encoder with its MLM and NSP heads, google-research/bert
                       layout (bert_model.ckpt.*, bert_config.json, vocab.txt)
export_huggingface/    the same as a BertForPreTraining directory (model.safetensors,
                       config.json, vocab.txt, tokenizer_config.json)
```

Example:

```python
from keras_bert_zoo.runners.pretraining import PretrainingConfig, run_pretraining

phase1 = run_pretraining(PretrainingConfig(
    input_file="records/train-*.tfrecord", eval_input_file="records/heldout.tfrecord",
    preset="bert_tiny_uncased", vocab_file="vocab.txt", output_dir="/tmp/phase1",
    num_train_steps=900, num_warmup_steps=100, learning_rate=1e-4))
phase2 = run_pretraining(PretrainingConfig(
    input_file="records512/train-*.tfrecord", init_checkpoint="/tmp/phase1",
    output_dir="/tmp/phase2", max_seq_length=512, max_predictions_per_seq=80,
    num_train_steps=100))
```
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.runners import flags as job_flags
from keras_bert_zoo.runners import run_dir, sources
from keras_bert_zoo.runners.run_dir import EVAL_RESULTS_FILE, EXPORT_DIRS, EXPORT_FORMATS
from keras_bert_zoo.runners.runner import Job, Runner, RunResult
from keras_bert_zoo.training.flags import TrainingOptions

logger = logging.getLogger(__name__)

INPUT_MODES = ("records", "remask_records", "dynamic_text")
CONFIG_FILE = sources.CONFIG_FILE
DEFAULT_DYNAMIC_MAX_SEQ_LENGTH = 128
DEFAULT_DYNAMIC_MAX_PREDICTIONS = 20

__all__ = [
    "EVAL_RESULTS_FILE",
    "EXPORT_DIRS",
    "EXPORT_FORMATS",
    "PretrainingConfig",
    "PretrainingJob",
    "PretrainingResult",
    "config_from_flags",
    "copy_pretraining_weights",
    "define_flags",
    "evaluate_pretraining",
    "export_pretrained",
    "extend_position_embeddings",
    "inspect_records",
    "run_pretraining",
]


# === Configuration ===


@dataclasses.dataclass
class PretrainingConfig(TrainingOptions):
    """Every setting of a pretraining run; field names are the binary's flag names.

    The training fields are those of `keras_bert_zoo.training.flags`; the defaults are
    google-research/bert's `run_pretraining.py` ones (`learning_rate=5e-5`,
    `num_train_steps=100000`, the linear decay from step 0, `eval_batch_size=8`,
    `eval_steps=100`, a checkpoint every 1000 steps), except the warmup: 1% of the
    steps (the paper's 10,000 of 1,000,000) rather than a fixed 10,000, which would
    exceed a shorter run.

    Attributes:
        input_file: comma-separated globs of the training input: TFRecords
            (`records`, `remask_records`) or text files (`dynamic_text`).
        input_mode: `records`, `remask_records` or `dynamic_text` (module docstring).
        output_dir: where everything goes (module docstring).
        eval_input_file: comma-separated globs of held-out pretraining TFRecords.
        eval_steps: batches of `eval_input_file` per evaluation (0: all of them).
        eval_batch_size: sequences per evaluation batch.
        bert_config_file: the model's `bert_config.json` (or Hugging Face
            `config.json`).
        preset: a preset name (`bert_tiny_uncased`, ...; `config.list_presets()`).
        init_checkpoint: initial weights on a fresh start (module docstring).
        vocab_file: WordPiece vocabulary (needed by `dynamic_text` and
            `remask_records`; copied into the exports). Default: `init_checkpoint`'s.
        do_lower_case: tokenizer casing of `dynamic_text`; None reads it from the
            vocabulary.
        max_seq_length, max_predictions_per_seq: sequence and prediction lengths; for
            records, None reads them from the records (given values must match them).
        masked_lm_prob, short_seq_prob, do_whole_word_mask: the masking settings of
            the dynamic modes (as in create_pretraining_data.py).
        shuffle_buffer: records (or dynamic instances) shuffled in memory.
        num_train_steps: optimizer steps.
        export_formats: checkpoint layouts written at the end.
        seed ... progress: the training core's settings (`training.flags`).
    """

    # === Input ===
    input_file: str | None = None
    input_mode: str = "records"
    output_dir: str | None = None
    eval_input_file: str | None = None
    eval_steps: int = 100
    eval_batch_size: int = 8
    # === Model ===
    bert_config_file: str | None = None
    preset: str | None = None
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    # === Data ===
    max_seq_length: int | None = None
    max_predictions_per_seq: int | None = None
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    shuffle_buffer: int = 10_000
    # === Run ===
    num_train_steps: int = 100_000
    export_formats: tuple[str, ...] = EXPORT_FORMATS
    # === Training core (keras_bert_zoo.training.flags): the defaults pretraining changes ===
    learning_rate: float = 5e-5
    warmup_proportion: float = 0.01
    decay_from_step_zero: bool = True

    def __post_init__(self):
        if self.input_mode not in INPUT_MODES:
            raise ValueError(f"input_mode must be one of {INPUT_MODES}, got {self.input_mode!r}")
        self.export_formats = run_dir.check_export_formats(self.export_formats)
        if self.num_train_steps < 1:
            raise ValueError(f"num_train_steps must be >= 1, got {self.num_train_steps}")
        for name in ("train_batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_steps < 0:
            raise ValueError(f"eval_steps must be >= 0, got {self.eval_steps}")
        if self.max_seq_length is not None and self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be >= 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}"
            )
        if self.bert_config_file and self.preset:
            raise ValueError("Pass only one of bert_config_file and preset")


def runner_flag_names() -> list[str]:
    """The names of the binary's flags (one per `PretrainingConfig` field)."""
    return [f.name for f in dataclasses.fields(PretrainingConfig)]


def define_flags(flag_values=None) -> None:
    """Defines the binary's flags: its own and every training-core flag (with the
    pretraining defaults)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    defaults = PretrainingConfig()
    job_flags.define_training_flags(flag_values, defaults)
    define = functools.partial(job_flags.define_field_flag, flag_values, defaults)

    define(
        "string",
        "input_file",
        "Comma-separated globs of the training input: pretraining TFRecords (ours or "
        "google-research/bert's) or, with --input_mode=dynamic_text, text files.",
    )
    define(
        "enum",
        "input_mode",
        "records: static records as written; remask_records: the records with new masks "
        "every pass; dynamic_text: raw text, NSP pairs and masks made on the fly.",
        enum_values=list(INPUT_MODES),
    )
    define("string", "eval_input_file", "Comma-separated globs of held-out pretraining records.")
    define("integer", "eval_steps", "Batches per evaluation (0: all).", lower_bound=0)
    define("integer", "eval_batch_size", "Batch size of evaluation.", lower_bound=1)
    define("string", "bert_config_file", "The model's bert_config.json (or HF config.json).")
    define("string", "preset", "A preset architecture for random weights (e.g. bert_tiny_uncased).")
    define(
        "string",
        "vocab_file",
        "WordPiece vocab.txt (dynamic modes; copied into the exports). Default: "
        "--init_checkpoint's.",
    )
    define(
        "bool",
        "do_lower_case",
        "Tokenizer casing of --input_mode=dynamic_text (default: read from the vocabulary).",
    )
    define(
        "integer",
        "max_seq_length",
        "Tokens per sequence (records: default read from them; dynamic_text: 128). Longer "
        "than --init_checkpoint's position table: the table is extended (phase 2).",
        lower_bound=5,
    )
    define(
        "integer",
        "max_predictions_per_seq",
        "Masked positions per sequence (records: default read from them; else 20).",
        lower_bound=1,
    )
    define("float", "masked_lm_prob", "Masked LM probability (dynamic modes).")
    define("float", "short_seq_prob", "Probability of shorter sequences (dynamic_text).")
    define("bool", "do_whole_word_mask", "Whole-word masking (dynamic modes).")
    define("integer", "shuffle_buffer", "Records (instances) shuffled in memory.", lower_bound=0)
    define("integer", "num_train_steps", "Optimizer steps.", lower_bound=1)
    job_flags.define_export_formats_flag(
        flag_values,
        "Checkpoint layouts written at the end, with the MLM and NSP heads "
        "(export_google/, export_huggingface/).",
    )


def config_from_flags(flag_values=None) -> PretrainingConfig:
    """A `PretrainingConfig` from parsed flags."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    return PretrainingConfig(**job_flags.field_values(flag_values, runner_flag_names()))


# === Input ===


@dataclasses.dataclass(frozen=True)
class RecordsInfo:
    """What `inspect_records` found: the files, their lengths, the empty ones."""

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int
    empty_files: tuple[str, ...]


def _list_files(patterns: str | None, flag: str) -> list[str]:
    from keras_bert_zoo.data import pipeline

    if not patterns or not any(part.strip() for part in patterns.split(",")):
        raise ValueError(f"--{flag} is empty: give one or more comma-separated globs")
    try:
        files = pipeline.list_files(patterns)
    except ValueError as error:
        raise FileNotFoundError(f"--{flag}={patterns}: {error}") from None
    directories = [path for path in files if os.path.isdir(path)]
    if directories:
        raise ValueError(f"--{flag}={patterns} matches directories, not files: {directories}")
    return files


def inspect_records(
    patterns: str,
    *,
    flag: str = "input_file",
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> RecordsInfo:
    """Checks every file's first record and reads the two lengths from them.

    Reading one record per file keeps this cheap on a real corpus; a file damaged
    further in is named when training reaches it (`run_pretraining` then rescans the
    files with `writer.verify_pretraining_records`).

    Raises:
        FileNotFoundError: a glob matches nothing.
        ValueError: a file that is not a pretraining TFRecord file (named), records
            of other lengths than given or than the other files', or no record at all.
    """
    import tensorflow as tf

    files = _list_files(patterns, flag)
    lengths: dict[tuple[int, int], str] = {}
    empty = []
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError as error:
            raise ValueError(
                f"--{flag}: {path} is not a readable TFRecord file "
                f"({type(error).__name__}: {error.message.strip().splitlines()[0]})"
            ) from None
        if first is None:
            empty.append(path)
            continue
        try:
            example = tf.train.Example.FromString(first.numpy())
            feature = example.features.feature
            shape = (
                len(feature["input_ids"].int64_list.value),
                len(feature["masked_lm_positions"].int64_list.value),
            )
            missing = [
                name
                for name in ("input_mask", "segment_ids", "masked_lm_ids", "masked_lm_weights")
                if name not in feature
            ]
        except Exception as error:  # noqa: BLE001 - any decoding failure means "not ours"
            raise ValueError(
                f"--{flag}: {path} does not hold tf.train.Example pretraining records "
                f"({type(error).__name__}: {error})"
            ) from None
        if missing or shape[0] == 0 or "next_sentence_labels" not in feature:
            raise ValueError(
                f"--{flag}: the first record of {path} is not a pretraining record (features "
                f"{sorted(feature)}; expected input_ids, input_mask, segment_ids, "
                "masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels)"
            )
        lengths.setdefault(shape, path)
    if not lengths:
        raise ValueError(f"--{flag}={patterns}: the {len(files)} file(s) hold no record: {files}")
    if len(lengths) > 1:
        described = "; ".join(
            f"{path}: max_seq_length={s}, max_predictions_per_seq={p}"
            for (s, p), path in lengths.items()
        )
        raise ValueError(f"--{flag}: the files hold records of different lengths ({described})")
    (found_seq, found_predictions), path = next(iter(lengths.items()))
    for name, given, found in (
        ("max_seq_length", max_seq_length, found_seq),
        ("max_predictions_per_seq", max_predictions_per_seq, found_predictions),
    ):
        if given is not None and given != found:
            raise ValueError(
                f"--{name}={given}, but the records of --{flag} ({path}) have {name}={found}"
            )
    if empty:
        logger.warning("--%s: %d file(s) hold no record: %s", flag, len(empty), empty)
    return RecordsInfo(tuple(files), found_seq, found_predictions, tuple(empty))


def _diagnose_records(files: Sequence[str], max_seq_length: int, max_predictions: int, flag: str):
    """Raises the ValueError naming the damaged file (and record), if one is found."""
    from keras_bert_zoo.pretraining.writer import verify_pretraining_records

    try:
        verify_pretraining_records(list(files), max_seq_length, max_predictions)
    except ValueError as error:
        raise ValueError(f"--{flag}: {error}") from None


# === Model ===


def _read_bert_config(path: str):
    from keras_bert_zoo.config import BertConfig

    if not os.path.isfile(path):
        raise FileNotFoundError(f"--bert_config_file={path}: no such file")
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as error:
            raise ValueError(f"--bert_config_file={path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--bert_config_file={path}: expected a JSON object")
    if "model_type" in data or "layer_norm_eps" in data:
        return BertConfig.from_hf_dict(data, source=path)
    return BertConfig.from_google_dict(data, source=path)


def extend_position_embeddings(table: np.ndarray, rows: int) -> np.ndarray:
    """The position-embedding table with `rows` rows: the learned rows kept, the new
    ones copies of the learned ones, tiled (row `i` = learned row `i mod n`).

    Why tiling rather than a fresh random initialisation: the new rows start at the
    scale and in the subspace the rest of the network was trained on, so the first
    steps of phase 2 do not see out-of-distribution inputs at every position past the
    old length; the model then only has to learn to tell the copies apart (Longformer,
    Beltagy et al. 2020, initialised its 4096 positions from RoBERTa's 512 this way and
    found it converges much faster than a random start).
    """
    table = np.asarray(table)
    learned = table.shape[0]
    if rows <= learned:
        return table[:rows] if rows < learned else table
    repeats = math.ceil(rows / learned)
    return np.tile(table, (repeats, 1))[:rows]


def _is_seed_state(variable) -> bool:
    return (getattr(variable, "path", "") or variable.name).endswith("seed_generator_state")


def copy_pretraining_weights(source, target) -> None:
    """Copies the weights of `source` (a `BertPretrainer`, or a `BertEncoder` whose
    heads the target keeps) into the `BertPretrainer` `target`, extending the
    position-embedding table when the target's is longer.

    Raises:
        ValueError: naming the first weight whose shape differs otherwise.
    """
    from keras_bert_zoo.models import BertPretrainer

    into = target if isinstance(source, BertPretrainer) else target.encoder
    old = [v for v in source.weights if not _is_seed_state(v)]
    new = [v for v in into.weights if not _is_seed_state(v)]
    if len(old) != len(new):
        raise ValueError(
            f"The checkpoint's model has {len(old)} weights, this one {len(new)}: another "
            "architecture (check --bert_config_file / --preset against --init_checkpoint)"
        )
    position_table = target.encoder.embeddings.position_embeddings
    values = []
    for old_variable, new_variable in zip(old, new, strict=True):
        value = np.asarray(old_variable.numpy())
        if tuple(value.shape) != tuple(new_variable.shape):
            extendable = (
                new_variable is position_table
                and value.shape[1:] == tuple(new_variable.shape)[1:]
                and value.shape[0] < new_variable.shape[0]
            )
            if not extendable:
                raise ValueError(
                    f"--init_checkpoint weight {old_variable.path} has shape {value.shape}, "
                    f"this model's {new_variable.path} {tuple(new_variable.shape)}: another "
                    "architecture (check --bert_config_file / --preset)"
                )
            logger.info(
                "Extending the position embeddings from %d to %d rows (learned rows tiled)",
                value.shape[0],
                new_variable.shape[0],
            )
            value = extend_position_embeddings(value, int(new_variable.shape[0]))
        values.append(value)
    for variable, value in zip(new, values, strict=True):  # all checked: assign
        variable.assign(value)


def _model_config(config: PretrainingConfig, source, max_seq_length: int):
    from keras_bert_zoo.config import BertConfig, list_presets

    if config.bert_config_file:
        bert_config = _read_bert_config(config.bert_config_file)
    elif config.preset:
        if config.preset not in list_presets():
            raise ValueError(f"--preset={config.preset}: unknown; choose from {list_presets()}")
        bert_config = BertConfig.from_preset(config.preset)
    elif source is not None:
        bert_config = source.bert_config
    else:
        raise ValueError("Give the architecture: --bert_config_file, --preset or --init_checkpoint")
    if bert_config.max_position_embeddings < max_seq_length:
        bert_config = bert_config.replace(max_position_embeddings=max_seq_length)
    return bert_config


# === Evaluation ===


# One compiled evaluation step per model, so periodic evaluations trace it once. The
# step holds the model weakly: the cache does not keep models alive.
_EVALUATION_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _evaluation_step(model):
    step = _EVALUATION_STEPS.get(model)
    if step is not None:
        return step
    import keras
    import tensorflow as tf

    model_ref = weakref.ref(model)

    @tf.function(reduce_retracing=True)
    def batch_sums(x, y):
        predictions = model_ref()(x, training=False)
        logits = tf.cast(predictions["masked_lm_logits"], tf.float32)
        weights = tf.cast(y["masked_lm_weights"], tf.float32)
        ids = tf.cast(y["masked_lm_ids"], tf.int64)
        nll = keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1), ids), tf.float32)
        nsp_logits = tf.cast(predictions["next_sentence_logits"], tf.float32)
        nsp_labels = tf.reshape(tf.cast(y["next_sentence_labels"], tf.int64), [-1])
        nsp_nll = keras.losses.sparse_categorical_crossentropy(
            nsp_labels, nsp_logits, from_logits=True
        )
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1), nsp_labels), tf.float32)
        is_next = tf.cast(tf.equal(nsp_labels, 0), tf.float32)
        return tf.stack(
            [
                tf.reduce_sum(nll * weights),
                tf.reduce_sum(correct * weights),
                tf.reduce_sum(weights),
                tf.reduce_sum(nsp_nll),
                tf.reduce_sum(nsp_correct),
                tf.cast(tf.size(nsp_labels), tf.float32),
                tf.reduce_sum(nsp_correct * is_next),
                tf.reduce_sum(is_next),
            ]
        )

    _EVALUATION_STEPS[model] = batch_sums
    return batch_sums


def evaluate_pretraining(model, dataset, steps: int = 0) -> dict[str, float]:
    """The original's evaluation metrics over `steps` batches of `dataset` (0: all).

    `dataset` yields `(x, y)` as `data.pretraining_dataset(..., split_labels=True)`.
    Returns `masked_lm_accuracy` and `masked_lm_loss` (means over real predictions,
    weighted by `masked_lm_weights`), `next_sentence_accuracy`, `next_sentence_loss`
    (means over sequences), `next_sentence_balanced_accuracy` (the mean of the accuracy
    on "is next" pairs and on "random next" pairs), `loss` (the two losses' sum) and
    the counts `masked_lm_predictions` and `sequences`.
    """
    batch_sums = _evaluation_step(model)
    if steps:
        dataset = dataset.take(steps)
    totals = np.zeros(8, np.float64)
    for x, y in dataset:
        totals += batch_sums(x, y).numpy()
    nll, correct, weight, nsp_nll, nsp_correct, sequences, correct_is_next, is_next = totals
    if sequences == 0:
        raise ValueError("The evaluation data gave no batch")
    # Accuracy within each NSP class, averaged: a constant answer scores 0.5 however
    # unbalanced the held-out pairs are (a small held-out set often is).
    recalls = [
        hits / count
        for hits, count in (
            (correct_is_next, is_next),
            (nsp_correct - correct_is_next, sequences - is_next),
        )
        if count
    ]
    masked_lm_loss = nll / weight if weight else float("nan")
    next_sentence_loss = nsp_nll / sequences
    return {
        "masked_lm_accuracy": float(correct / weight) if weight else float("nan"),
        "masked_lm_loss": float(masked_lm_loss),
        "next_sentence_accuracy": float(nsp_correct / sequences),
        "next_sentence_balanced_accuracy": float(np.mean(recalls)),
        "next_sentence_loss": float(next_sentence_loss),
        "loss": float(masked_lm_loss + next_sentence_loss),
        "masked_lm_predictions": float(weight),
        "sequences": float(sequences),
    }


# === Export ===


def export_pretrained(model, directory: str, export_format: str, vocab_file: str | None) -> str:
    """Writes the encoder with its MLM and NSP heads in `export_format`'s layout
    (`from_pretrained(directory, model="pretrainer")` and, for Hugging Face,
    `transformers.BertForPreTraining.from_pretrained` read it), atomically."""
    from keras_bert_zoo.text.tokenizer import infer_lowercase
    from keras_bert_zoo.text.vocab import load_vocab

    vocabulary = load_vocab(vocab_file) if vocab_file else None
    return run_dir.export_checkpoint(
        directory,
        model,
        export_format,
        vocabulary=vocabulary,
        lowercase=infer_lowercase(vocabulary) if vocabulary else None,
        model_max_length=model.encoder.max_position_embeddings,
    )


# === The run ===


@dataclasses.dataclass(kw_only=True)
class PretrainingResult(RunResult):
    """What `run_pretraining` did: the `RunResult` of the skeleton (the trained
    `BertPretrainer` in `model`, `step`, `training`, `eval_results`: the last evaluation,
    `eval_history`: every evaluation of the run directory, `exports`: `{layout:
    directory}`, `seconds`), and what the job read.

    Attributes:
        config: the configuration run.
        bert_config: the model's `BertConfig`.
        max_seq_length, max_predictions_per_seq: the input's lengths.
    """

    config: PretrainingConfig
    bert_config: Any
    max_seq_length: int
    max_predictions_per_seq: int


def _train_dataset_fn(config: PretrainingConfig, files, vocab_file, seq_length, predictions):
    from keras_bert_zoo.data.pretraining import pretraining_dataset
    from keras_bert_zoo.pretraining.dynamic import (
        dynamic_pretraining_dataset,
        remasked_pretraining_dataset,
    )

    def dataset_fn(input_context=None):
        batch_size = config.train_batch_size
        if input_context is not None:
            batch_size = input_context.get_per_replica_batch_size(config.train_batch_size)
        common = dict(input_context=input_context, seed=config.seed)
        if config.input_mode == "records":
            return pretraining_dataset(
                files,
                batch_size,
                max_seq_length=seq_length,
                max_predictions_per_seq=predictions,
                shuffle=True,
                shuffle_buffer=config.shuffle_buffer or None,
                split_labels=True,
                repeat=True,
                drop_remainder=True,
                **common,
            )
        masking = dict(
            max_seq_length=seq_length,
            max_predictions_per_seq=predictions,
            masked_lm_prob=config.masked_lm_prob,
            do_whole_word_mask=config.do_whole_word_mask,
            shuffle_buffer=config.shuffle_buffer or None,
        )
        if config.input_mode == "remask_records":
            return remasked_pretraining_dataset(files, vocab_file, batch_size, **masking, **common)
        return dynamic_pretraining_dataset(
            files,
            vocab_file,
            batch_size,
            short_seq_prob=config.short_seq_prob,
            do_lower_case=config.do_lower_case,
            **masking,
            **common,
        )

    return dataset_fn


def _resolve_input(config: PretrainingConfig):
    """(files, max_seq_length, max_predictions_per_seq) of the training input."""
    if config.input_mode == "dynamic_text":
        files = _list_files(config.input_file, "input_file")
        empty = [path for path in files if os.path.getsize(path) == 0]
        if len(empty) == len(files):
            raise ValueError(f"--input_file={config.input_file}: every file is empty: {files}")
        return (
            files,
            config.max_seq_length or DEFAULT_DYNAMIC_MAX_SEQ_LENGTH,
            config.max_predictions_per_seq or DEFAULT_DYNAMIC_MAX_PREDICTIONS,
        )
    info = inspect_records(
        config.input_file,
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
    )
    files = [path for path in info.files if path not in info.empty_files]
    return files, info.max_seq_length, info.max_predictions_per_seq


class PretrainingJob(Job):
    """Pretraining (masked LM + NSP) on the runner's skeleton (see the module docstring)."""

    input_state = "iterator"  # shuffled record streams: the iterator is checkpointed

    def check_inputs(self) -> None:
        config = self.config
        self.files, self.seq_length, self.predictions = _resolve_input(config)
        self.eval_info = None
        if config.eval_input_file:
            self.eval_info = inspect_records(
                config.eval_input_file,
                flag="eval_input_file",
                max_seq_length=self.seq_length,
                max_predictions_per_seq=self.predictions,
            )

    def prepare(self, strategy) -> None:
        config = self.config
        self.source = None
        if config.init_checkpoint:
            self.source = sources.resolve_weight_source(config.init_checkpoint)
        self.vocab_file = config.vocab_file or (self.source.vocab_file if self.source else None)
        if config.input_mode != "records" and not self.vocab_file:
            raise ValueError(f"--input_mode={config.input_mode} needs --vocab_file")
        self.bert_config = _model_config(config, self.source, self.seq_length)
        if self.vocab_file:
            sources.check_vocab_fits(self.vocab_file, self.bert_config)

    def build_model(self):
        from keras_bert_zoo.models import BertEncoder, BertPretrainer

        return BertPretrainer(BertEncoder.from_bert_config(self.bert_config))

    def initializer(self):
        source = self.source
        if source is None or not source.has_weights:
            return None

        def initialize(target):
            copy_pretraining_weights(source.load_pretraining_weights(), target)
            logger.info("Initialized from %s", source.path)

        return initialize

    def record_run(self, *, write: bool) -> None:
        """`bert_config.json` (and `vocab.txt`) of the run; a resumed run must match."""
        from keras_bert_zoo.config import BertConfig
        from keras_bert_zoo.text.vocab import load_vocab, write_vocab
        from keras_bert_zoo.utils.atomic import write_json_atomically

        path = os.path.join(self.output_dir, CONFIG_FILE)
        current = self.bert_config.to_google_dict()
        if os.path.isfile(path):
            saved = BertConfig.from_google_json(path).to_google_dict()
            run_dir.check_same_run(path, saved, current, sorted(set(saved) | set(current)))
        if not write:
            return
        write_json_atomically(path, current)
        if self.vocab_file:
            write_vocab(os.path.join(self.output_dir, "vocab.txt"), load_vocab(self.vocab_file))

    def dataset_fn(self):
        return _train_dataset_fn(
            self.config, self.files, self.vocab_file, self.seq_length, self.predictions
        )

    def log_plan(self) -> None:
        config, bert_config = self.config, self.bert_config
        logger.info(
            "Pretraining %s (L=%d, H=%d, vocab %d, %d positions) for %d steps of %d sequences "
            "of %d tokens (%d predictions) from %d %s file(s)",
            self.output_dir,
            bert_config.num_layers,
            bert_config.hidden_size,
            bert_config.vocab_size,
            bert_config.max_position_embeddings,
            config.num_train_steps,
            config.train_batch_size,
            self.seq_length,
            self.predictions,
            len(self.files),
            config.input_mode,
        )

    @property
    def evaluates(self) -> bool:
        return self.eval_info is not None

    def evaluate(self, model) -> dict[str, float]:
        import tensorflow as tf

        from keras_bert_zoo.data.pretraining import pretraining_dataset

        info = self.eval_info
        dataset = pretraining_dataset(
            [f for f in info.files if f not in info.empty_files],
            self.config.eval_batch_size,
            max_seq_length=self.seq_length,
            max_predictions_per_seq=self.predictions,
            split_labels=True,
        )
        try:
            return evaluate_pretraining(model, dataset, self.config.eval_steps)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
            _diagnose_records(info.files, self.seq_length, self.predictions, "eval_input_file")
            raise

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        return {
            "step": step,
            "eval_input_file": self.config.eval_input_file,
            "eval_steps": self.config.eval_steps,
            "results": results,
            "history": history,
        }

    def export(self, model, step, eval_results) -> dict[str, str]:
        exports = {}
        for export_format in self.config.export_formats:
            path = os.path.join(self.output_dir, EXPORT_DIRS[export_format])
            exports[export_format] = export_pretrained(model, path, export_format, self.vocab_file)
            logger.info("Wrote the %s layout with the MLM and NSP heads to %s", export_format, path)
        return exports


def run_pretraining(config: PretrainingConfig) -> PretrainingResult:
    """Trains (resuming from `output_dir` when it holds a checkpoint), evaluates and
    exports; see the module docstring. Returns a `PretrainingResult`."""
    import tensorflow as tf

    job = PretrainingJob(config)
    try:
        run = Runner(job).run()
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
        if job.config.input_mode != "dynamic_text":
            # tf.data names neither the file nor the record; find them.
            _diagnose_records(job.files, job.seq_length, job.predictions, "input_file")
        raise
    return PretrainingResult(
        config=job.config,
        bert_config=job.bert_config,
        max_seq_length=job.seq_length,
        max_predictions_per_seq=job.predictions,
        **run.fields_for(PretrainingResult),
    )
