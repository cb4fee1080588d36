"""Pretraining as a task: masked LM + next sentence prediction (BERT's objective).

The counterpart of Model Garden's `official/nlp/tasks/masked_lm.py`: the one place that
knows the pretraining input, model, loss and metrics, evaluation and exports; the job
(`runners.pretraining.PretrainingJob`) only orchestrates it. It is no fine-tuning
`Task` (nothing to read per split, no answers to post-process), so it is not
registered; it has the methods the job calls:

```
resolve_training_input(...) / resolve_record_input(...) -> the files and their lengths
pretraining_bert_config(...)                           -> the architecture
task = PretrainingTask(bert_config, ...)                  (or .from_settings(config, ...))
task.build_model(), compile_kwargs()                   -> BertPretrainer, its own loss
task.initialize(model, weights) / load_checkpoint(...) -> initial or trained weights
task.training_dataset_fn(files, batch_size, seed=)     -> records | remask_records | dynamic_text
task.evaluate(model, files, ...)                       -> the original's metric_fn values
task.vocabulary(), export(model, directory, layout)    -> vocab.txt, the exports
```

Inputs (`input_mode`): `records`, static pretraining TFRecords (ours or
google-research/bert's; their lengths read from them); `remask_records`, the same
records with fresh masks every pass; `dynamic_text`, raw text (one sentence a line,
blank lines between documents) with NSP pairs and masks made on the fly.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.checkpoints.resize import copy_pretraining_weights
from keras_bert_zoo.data import pretraining_records
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

INPUT_MODES = ("records", "remask_records", "dynamic_text")
DEFAULT_DYNAMIC_MAX_SEQ_LENGTH = 128
DEFAULT_DYNAMIC_MAX_PREDICTIONS = 20
# The settings of a run (`PretrainingConfig` fields) the task takes under the same name.
TASK_SETTINGS = (
    "input_mode",
    "do_lower_case",
    "masked_lm_prob",
    "short_seq_prob",
    "do_whole_word_mask",
    "shuffle_buffer",
)

__all__ = [
    "INPUT_MODES",
    "PretrainingInput",
    "PretrainingTask",
    "evaluate_pretraining",
    "export_pretrained",
    "pretraining_bert_config",
    "read_bert_config",
    "resolve_record_input",
    "resolve_training_input",
]


# === Input ===


@dataclasses.dataclass(frozen=True)
class PretrainingInput:
    """Input files and the lengths of the sequences made from them.

    Attributes:
        files: the files to read (record files that hold records, or text files).
        max_seq_length: tokens per sequence.
        max_predictions_per_seq: masked positions per sequence.
    """

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int


def resolve_training_input(
    input_file: str | None,
    input_mode: str,
    *,
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> PretrainingInput:
    """The training input: for records, the lengths read from them (given lengths must
    match); for `dynamic_text`, the given lengths or 128 and 20.

    Args:
        input_file: comma-separated globs (`--input_file`).
        input_mode: one of `INPUT_MODES`.
        max_seq_length, max_predictions_per_seq: the lengths asked for (None: default).
    """
    if input_mode == "dynamic_text":
        return PretrainingInput(
            tuple(pretraining_records.list_text_files(input_file, "input_file")),
            max_seq_length or DEFAULT_DYNAMIC_MAX_SEQ_LENGTH,
            max_predictions_per_seq or DEFAULT_DYNAMIC_MAX_PREDICTIONS,
        )
    return resolve_record_input(
        input_file,
        flag="input_file",
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )


def resolve_record_input(
    patterns: str | None,
    *,
    flag: str = "eval_input_file",
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> PretrainingInput:
    """Static pretraining records, their lengths read from them
    (`data.pretraining_records.inspect_records`).

    Args:
        patterns: comma-separated globs of pretraining TFRecords.
        flag: the flag they came from, for the messages.
        max_seq_length, max_predictions_per_seq: the lengths the records must have
            (None: theirs).
    """
    info = pretraining_records.inspect_records(
        patterns,
        flag=flag,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
    )
    return PretrainingInput(
        tuple(info.record_files), info.max_seq_length, info.max_predictions_per_seq
    )


# === Model ===


def read_bert_config(path: str):
    """The `BertConfig` of a `bert_config.json` or a Hugging Face `config.json`.

    Args:
        path: the file (`--bert_config_file`).
    """
    from keras_bert_zoo.config import BertConfig

    if not os.path.isfile(path):
        raise FileNotFoundError(f"--bert_config_file={path}: no such file")
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as error:
            raise UserError(f"--bert_config_file={path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise UserError(f"--bert_config_file={path}: expected a JSON object")
    if "model_type" in data or "layer_norm_eps" in data:
        return BertConfig.from_hf_dict(data, source=path)
    return BertConfig.from_google_dict(data, source=path)


def pretraining_bert_config(
    *,
    bert_config_file: str | None,
    preset: str | None,
    source_config,
    max_seq_length: int | None,
    extend: bool = True,
):
    """The architecture: `bert_config_file`'s, else `preset`'s, else the initial
    weights' (`source_config`), with at least `max_seq_length` positions.

    Args:
        bert_config_file, preset: the architecture asked for, if any.
        source_config: the `BertConfig` of the initial weights, or None.
        max_seq_length: the longest input (None: any).
        extend: False refuses an input longer than the position table instead of
            extending it (a trained model evaluated as it is).
    """
    from keras_bert_zoo.config import BertConfig, list_presets

    if bert_config_file:
        bert_config = read_bert_config(bert_config_file)
    elif preset:
        if preset not in list_presets():
            raise UserError(f"--preset={preset}: unknown; choose from {list_presets()}")
        bert_config = BertConfig.from_preset(preset)
    elif source_config is not None:
        bert_config = source_config
    else:
        raise UserError("Give the architecture: --bert_config_file, --preset or --init_checkpoint")
    if max_seq_length and bert_config.max_position_embeddings < max_seq_length:
        if not extend:
            raise UserError(
                f"The records hold {max_seq_length} tokens per sequence, more than the "
                f"model's {bert_config.max_position_embeddings} positions"
            )
        bert_config = bert_config.replace(max_position_embeddings=max_seq_length)
    return bert_config


# === The task ===


class PretrainingTask:
    """BERT pretraining of a `BertPretrainer` (see the module docstring).

    Args:
        bert_config: the encoder's `BertConfig`.
        max_seq_length, max_predictions_per_seq: the input's lengths (None when the
            task only exports).
        input_mode: one of `INPUT_MODES`.
        vocab_file: the WordPiece vocabulary (needed by the dynamic modes; copied into
            the run directory and the exports).
        do_lower_case: tokenizer casing of `dynamic_text` (None: read from the
            vocabulary).
        masked_lm_prob, short_seq_prob, do_whole_word_mask: the dynamic modes' masking
            (as in create_pretraining_data.py).
        shuffle_buffer: records (or dynamic instances) shuffled in memory (0: none).
    """

    def __init__(
        self,
        bert_config,
        *,
        max_seq_length: int | None,
        max_predictions_per_seq: int | None,
        input_mode: str = "records",
        vocab_file: str | None = None,
        do_lower_case: bool | None = None,
        masked_lm_prob: float = 0.15,
        short_seq_prob: float = 0.1,
        do_whole_word_mask: bool = False,
        shuffle_buffer: int = 10_000,
    ):
        if input_mode not in INPUT_MODES:
            raise UserError(f"input_mode must be one of {INPUT_MODES}, got {input_mode!r}")
        self.bert_config = bert_config
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.input_mode = input_mode
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.masked_lm_prob = masked_lm_prob
        self.short_seq_prob = short_seq_prob
        self.do_whole_word_mask = do_whole_word_mask
        self.shuffle_buffer = shuffle_buffer
        self._vocabulary: list[str] | None = None

    @classmethod
    def from_settings(
        cls,
        run_settings,
        *,
        lengths: PretrainingInput | None,
        source_config=None,
        source_vocab_file: str | None = None,
        training: bool = True,
    ) -> PretrainingTask:
        """The task of a run's settings.

        Args:
            run_settings: the run's settings (`runners.pretraining.PretrainingConfig`, or
                any object with its field names: `vocab_file`, `bert_config_file`,
                `preset` and `TASK_SETTINGS`).
            lengths: the input's lengths (None: no input, e.g. an export).
            source_config, source_vocab_file: the `BertConfig` and vocabulary of the
                initial or trained weights, if any.
            training: True: the architecture asked for (`bert_config_file`, `preset`,
                else the source's), its position table extended to the input; False:
                the source's architecture as it is (a trained model evaluated or
                exported).
        """
        vocab_file = run_settings.vocab_file or source_vocab_file
        if training and run_settings.input_mode != "records" and not vocab_file:
            raise UserError(f"--input_mode={run_settings.input_mode} needs --vocab_file")
        bert_config = pretraining_bert_config(
            bert_config_file=run_settings.bert_config_file if training else None,
            preset=run_settings.preset if training else None,
            source_config=source_config,
            max_seq_length=lengths.max_seq_length if lengths else None,
            extend=training,
        )
        return cls(
            bert_config,
            max_seq_length=lengths.max_seq_length if lengths else None,
            max_predictions_per_seq=lengths.max_predictions_per_seq if lengths else None,
            vocab_file=vocab_file,
            **{name: getattr(run_settings, name) for name in TASK_SETTINGS},
        )

    def describe(self) -> str:
        """The model and the sequences, for a log line."""
        config = self.bert_config
        return (
            f"L={config.num_layers}, H={config.hidden_size}, vocab {config.vocab_size}, "
            f"{config.max_position_embeddings} positions; sequences of {self.max_seq_length} "
            f"tokens ({self.max_predictions_per_seq} predictions)"
        )

    # --- Model ---

    def build_model(self):
        """A fresh `BertPretrainer` of `bert_config` (build it in the strategy's scope)."""
        from keras_bert_zoo.models import BertEncoder, BertPretrainer

        return BertPretrainer(BertEncoder.from_bert_config(self.bert_config))

    def compile_kwargs(self) -> dict[str, Any]:
        """`model.compile` arguments besides the optimizer: none, because a
        `BertPretrainer` compiled without a loss trains on BERT's objective (the
        weighted-mean masked-LM NLL plus the NSP NLL) and tracks its metrics itself."""
        return {}

    def initialize(self, model, weights) -> None:
        """Copies `weights` (a `BertPretrainer`, or a `BertEncoder` whose heads `model`
        keeps) into `model`, extending a shorter position table."""
        copy_pretraining_weights(weights, model)

    def load_checkpoint(self, model, path: str) -> int:
        """Loads a pretraining run's training checkpoint (its newest readable one, or
        the `ckpt-N` named) into `model`; returns its step."""
        from keras_bert_zoo.training.checkpointing import load_checkpoint_weights

        return load_checkpoint_weights(model, path)

    # --- Input ---

    def training_dataset_fn(
        self, files: Sequence[str], global_batch_size: int, *, seed: int
    ) -> Callable:
        """`Trainer.train`'s `dataset_fn`: repeated, shuffled `(x, y)` batches of
        `files` in `input_mode`, each replica's share of `global_batch_size`."""
        from keras_bert_zoo.data.pretraining import pretraining_dataset
        from keras_bert_zoo.pretraining.dynamic import (
            dynamic_pretraining_dataset,
            remasked_pretraining_dataset,
        )

        files = list(files)
        lengths = dict(
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
        )
        shuffle_buffer = self.shuffle_buffer or None

        def dataset_fn(input_context=None):
            batch_size = global_batch_size
            if input_context is not None:
                batch_size = input_context.get_per_replica_batch_size(global_batch_size)
            common = dict(input_context=input_context, seed=seed, **lengths)
            if self.input_mode == "records":
                return pretraining_dataset(
                    files,
                    batch_size,
                    shuffle=True,
                    shuffle_buffer=shuffle_buffer,
                    split_labels=True,
                    repeat=True,
                    drop_remainder=True,
                    **common,
                )
            masking = dict(
                masked_lm_prob=self.masked_lm_prob,
                do_whole_word_mask=self.do_whole_word_mask,
                shuffle_buffer=shuffle_buffer,
            )
            if self.input_mode == "remask_records":
                return remasked_pretraining_dataset(
                    files, self.vocab_file, batch_size, **masking, **common
                )
            return dynamic_pretraining_dataset(
                files,
                self.vocab_file,
                batch_size,
                short_seq_prob=self.short_seq_prob,
                do_lower_case=self.do_lower_case,
                **masking,
                **common,
            )

        return dataset_fn

    # --- Evaluation ---

    def evaluate(
        self,
        model,
        files: Sequence[str],
        *,
        batch_size: int,
        steps: int = 0,
        flag: str = "eval_input_file",
    ) -> dict[str, float]:
        """`evaluate_pretraining` over `steps` batches (0: all) of the static records
        `files`; a damaged record is named (file and record) in the error.

        Args:
            model: the `BertPretrainer`.
            files: held-out pretraining TFRecords of this task's lengths.
            batch_size: sequences per batch.
            steps: batches to evaluate (0: all).
            flag: the flag the files came from, for the messages.
        """
        import tensorflow as tf

        from keras_bert_zoo.data.pretraining import pretraining_dataset

        dataset = pretraining_dataset(
            list(files),
            batch_size,
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
            split_labels=True,
        )
        try:
            return evaluate_pretraining(model, dataset, steps)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
            # tf.data names neither the file nor the record; find them.
            pretraining_records.diagnose_records(
                files, self.max_seq_length, self.max_predictions_per_seq, flag
            )
            raise

    # --- Exports ---

    def vocabulary(self) -> list[str] | None:
        """The WordPiece tokens of `vocab_file` (None without one), read once."""
        from keras_bert_zoo.text.vocab import load_vocab

        if self._vocabulary is None and self.vocab_file:
            self._vocabulary = load_vocab(self.vocab_file)
        return self._vocabulary

    def export(self, model, directory: str, export_format: str) -> str:
        """`export_pretrained` with this task's vocabulary (read once)."""
        from keras_bert_zoo.checkpoints.export import export_checkpoint

        arguments = _export_arguments(model, self.vocabulary())
        return export_checkpoint(directory, model, export_format, **arguments)


def _export_arguments(model, vocabulary: list[str] | None) -> dict[str, Any]:
    """What an export writes beside the weights: the vocabulary, and for Hugging Face's
    tokenizer_config.json its casing and longest input."""
    from keras_bert_zoo.text.tokenizer import infer_lowercase

    return {
        "vocabulary": vocabulary,
        "lowercase": infer_lowercase(vocabulary) if vocabulary else None,
        "model_max_length": model.encoder.max_position_embeddings,
    }


def export_pretrained(model, directory: str, export_format: str, vocab_file: str | None) -> str:
    """Writes the encoder with its MLM and NSP heads in `export_format`'s layout,
    atomically: `from_pretrained(directory, model="pretrainer")` and, for Hugging Face,
    `transformers.BertForPreTraining.from_pretrained` read it, with its tokenizer.

    Args:
        model: the `BertPretrainer`.
        directory: where to write (replaced whole).
        export_format: `"google"` or `"huggingface"`.
        vocab_file: the WordPiece vocabulary written beside it (None: none).

    Returns:
        `directory`.
    """
    from keras_bert_zoo.checkpoints.export import export_checkpoint
    from keras_bert_zoo.text.vocab import load_vocab

    vocabulary = load_vocab(vocab_file) if vocab_file else None
    arguments = _export_arguments(model, vocabulary)
    return export_checkpoint(directory, model, export_format, **arguments)


# === The evaluation ===


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

    Args:
        model: a `BertPretrainer`.
        dataset: `(x, y)` batches, as `data.pretraining_dataset(..., split_labels=True)`.
        steps: batches to evaluate (0: all).

    Returns:
        `masked_lm_accuracy` and `masked_lm_loss` (means over real predictions,
        weighted by `masked_lm_weights`), `next_sentence_accuracy`,
        `next_sentence_loss` (means over sequences), `next_sentence_balanced_accuracy`
        (the mean of the accuracy on "is next" pairs and on "random next" pairs),
        `loss` (the two losses' sum) and the counts `masked_lm_predictions` and
        `sequences`.
    """
    batch_sums = _evaluation_step(model)
    if steps:
        dataset = dataset.take(steps)
    totals = np.zeros(8, np.float64)
    for x, y in dataset:
        totals += batch_sums(x, y).numpy()
    nll, correct, weight, nsp_nll, nsp_correct, sequences, correct_is_next, is_next = totals
    if sequences == 0:
        raise UserError("The evaluation data gave no batch")
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
