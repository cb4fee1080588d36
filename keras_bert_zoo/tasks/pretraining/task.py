"""`PretrainingTask`: BERT pretraining of a `BertPretrainer` (see the package docstring).

Example:

```python
from keras_bert_zoo.tasks.pretraining import PretrainingTask, resolve_training_input

lengths = resolve_training_input("data128/train.tfrecord-*", "records")
task = PretrainingTask(bert_config, max_seq_length=lengths.max_seq_length,
                       max_predictions_per_seq=lengths.max_predictions_per_seq)
model = task.build_model()
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from keras_bert_zoo.checkpoints.resize import copy_pretraining_weights
from keras_bert_zoo.data import pretraining_records
from keras_bert_zoo.tasks.pretraining.architecture import pretraining_bert_config
from keras_bert_zoo.tasks.pretraining.evaluation import evaluate_pretraining
from keras_bert_zoo.tasks.pretraining.exports import export_with_vocabulary
from keras_bert_zoo.tasks.pretraining.inputs import INPUT_MODES, PretrainingInput
from keras_bert_zoo.utils.errors import UserError

# The settings of a run (`PretrainingConfig` fields) the task takes under the same name.
TASK_SETTINGS = (
    "input_mode",
    "do_lower_case",
    "masked_lm_prob",
    "short_seq_prob",
    "do_whole_word_mask",
    "shuffle_buffer",
)


class PretrainingTask:
    """BERT pretraining of a `BertPretrainer` (see the package docstring).

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
        return export_with_vocabulary(model, directory, export_format, self.vocabulary())
