"""Where a run's initial weights come from: one resolver for every job.

`resolve_weight_source(path)` accepts, for fine-tuning (training, eval, predict) and
pretraining alike:

- a **fine-tuned directory**, one that `tasks.save_finetuned` wrote (`finetuned/`,
  `best/`: `model.keras`, `vocab.txt`, `task.json`);
- a **fine-tuning run's `--output_dir`**: its `finetuned/` (or `best/`);
- a **pretraining run's `--output_dir`** (its `bert_config.json` and `checkpoints/`):
  its newest training checkpoint, or one `checkpoints/ckpt-N` of it;
- a **checkpoint** in the google-research/bert or Hugging Face layout (with or without
  heads; our `export_google/` and `export_huggingface/` among them);
- a **preset** name (`bert_base_uncased`, ...: `config.list_presets()`): the
  architecture only, random weights.

Anything else is one error naming what was found there.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Any

from keras_bert_zoo.tasks.saving import (
    MODEL_FILE,
    TASK_FILE,
    VOCAB_FILE,
    load_finetuned,
    read_task_description,
)
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.run_layout import (  # noqa: F401 - re-exported
    BEST_DIR,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    FINETUNED_DIR,
)

logger = logging.getLogger(__name__)

FINETUNED = "finetuned"
PRETRAINING_RUN = "pretraining_run"
CHECKPOINT = "checkpoint"
PRESET = "preset"


WHAT_IS_ACCEPTED = (
    "a google-research/bert or Hugging Face checkpoint directory, the name of one an "
    "installed package ships (all-MiniLM-L6-v2), a fine-tuned directory, the --output_dir "
    "of a fine-tuning or pretraining run, or a preset name"
)


def is_finetuned_dir(path: str | None) -> bool:
    """A directory `save_finetuned` wrote (model.keras + vocab.txt + task.json)."""
    return bool(path) and all(
        os.path.isfile(os.path.join(path, name)) for name in (MODEL_FILE, VOCAB_FILE, TASK_FILE)
    )


def finetuned_dirs_of_run(output_dir: str, *, prefer_best: bool = False) -> list[str]:
    """The fine-tuned directories a fine-tuning run's `output_dir` may hold, in the
    order they are used (`best/` first with `prefer_best`)."""
    names = [BEST_DIR, FINETUNED_DIR] if prefer_best else [FINETUNED_DIR]
    return [os.path.join(output_dir, name) for name in names]


def is_pretraining_run_dir(path: str) -> bool:
    """Whether `path` is the `--output_dir` of a pretraining run (its bert_config.json
    and checkpoints/)."""
    return os.path.isfile(os.path.join(path, CONFIG_FILE)) and os.path.isdir(
        os.path.join(path, CHECKPOINTS_DIR)
    )


@dataclasses.dataclass
class WeightSource:
    """Resolved initial weights (see the module docstring).

    Attributes:
        kind: `FINETUNED`, `PRETRAINING_RUN`, `CHECKPOINT` or `PRESET`.
        path: what is read: the fine-tuned directory, the run directory or `ckpt-N`,
            the checkpoint, or the preset's name.
        given: the value the user gave.
        vocab_file: the vocabulary that comes with the weights, or None.
    """

    kind: str
    path: str
    given: str
    vocab_file: str | None

    @functools.cached_property
    def bert_config(self):
        """The encoder's `BertConfig`."""
        from keras_bert_zoo.checkpoints import read_checkpoint_info
        from keras_bert_zoo.config import BertConfig

        if self.kind == FINETUNED:
            return self.load_finetuned().model.encoder.bert_config
        if self.kind == PRETRAINING_RUN:
            return BertConfig.from_google_json(os.path.join(_run_dir(self.path), CONFIG_FILE))
        if self.kind == CHECKPOINT:
            return read_checkpoint_info(self.path).config
        return BertConfig.from_preset(self.path)

    @property
    def has_weights(self) -> bool:
        return self.kind != PRESET

    def load_finetuned(self, data_dir: str | None = None):
        """The `tasks.FinetunedModel` of a `FINETUNED` source."""
        if self.kind != FINETUNED:
            raise UserError(f"{self.given} is not a fine-tuned directory")
        if data_dir is None:
            return self._finetuned
        return load_finetuned(self.path, data_dir=data_dir)

    @functools.cached_property
    def _finetuned(self):
        return load_finetuned(self.path)

    def load_pretraining_weights(self):
        """A model holding the weights: a `BertPretrainer` when the source has the
        pretraining heads, else a `BertEncoder` (the heads then start from random
        weights). None for a preset."""
        from keras_bert_zoo.checkpoints import from_pretrained, read_checkpoint_info
        from keras_bert_zoo.models import BertEncoder, BertPretrainer
        from keras_bert_zoo.training.checkpointing import load_checkpoint_weights

        if self.kind == PRESET:
            return None
        if self.kind == FINETUNED:
            logger.warning(
                "%s is a fine-tuned model: the MLM and NSP heads start from random weights",
                self.path,
            )
            return self.load_finetuned().model.encoder
        if self.kind == PRETRAINING_RUN:
            model = BertPretrainer(BertEncoder.from_bert_config(self.bert_config))
            step = load_checkpoint_weights(model, self.path)
            logger.info("Read the weights of %s at step %d", self.path, step)
            return model
        names = read_checkpoint_info(self.path).open_tensors().names
        if any("cls/predictions" in n or "cls.predictions" in n for n in names):
            return from_pretrained(self.path, model="pretrainer")
        logger.warning(
            "%s holds no pretraining heads: the MLM and NSP heads start from random weights",
            self.path,
        )
        return from_pretrained(self.path, model="encoder")

    def load_encoder(self):
        """The `BertEncoder` holding the source's encoder weights (None for a preset)."""
        if self.kind == FINETUNED:
            return self.load_finetuned().model.encoder
        model = self.load_pretraining_weights()
        return getattr(model, "encoder", model)

    def task_description(self) -> dict | None:
        """The `task.json` beside a checkpoint's weights (our exports carry one), or None."""
        if os.path.isfile(os.path.join(self.path, TASK_FILE)):
            return read_task_description(self.path)
        return None

    def load_task_model(self, task, needed_by: str):
        """`task`'s model on this checkpoint's architecture, with the checkpoint's encoder
        and task-head weights; a checkpoint without the head is an error naming what is
        missing and `needed_by` (what needs a trained head)."""
        from keras_bert_zoo.checkpoints import load_weights
        from keras_bert_zoo.models import BertEncoder

        if self.kind != CHECKPOINT:
            raise UserError(f"{self.given} is not a checkpoint directory")
        model = task.build_model(BertEncoder.from_bert_config(self.bert_config))
        report = load_weights(model, self.path)
        if report.new_heads:
            raise UserError(
                f"{self.path} holds no trained {task.task_name} head (missing: "
                f"{', '.join(report.new_heads)}): {needed_by} needs a fine-tuned model"
            )
        return model

    def encoder_initializer(self) -> Any:
        """The initial weights of a task model built on this source's architecture
        (`Job.initial_weights`): a checkpoint path (its task head is read too when it has one),
        a function copying the encoder's weights, or None for a preset."""
        if self.kind == PRESET:
            return None
        if self.kind == CHECKPOINT:
            return self.path

        def copy_encoder(model):
            model.encoder.set_weights(self.load_encoder().get_weights())
            logger.info("Initialized the encoder from %s", self.path)

        return copy_encoder


def _run_dir(path: str) -> str:
    """The run directory of a run directory or of one of its `checkpoints/ckpt-N`."""
    if os.path.basename(path).startswith("ckpt-"):
        return os.path.dirname(os.path.dirname(path))
    return path


def resolve_weight_source(
    given: str | None, *, flag: str = "--init_checkpoint", prefer_best: bool = False
) -> WeightSource:
    """Resolves `given` (see the module docstring).

    Args:
        given: the path or preset name.
        flag: the flag it came from, for error messages.
        prefer_best: for a fine-tuning run's output_dir, its `best/` before `finetuned/`.

    Raises:
        ValueError: `given` is empty, or exists but is none of the accepted kinds (the
            message lists what was found).
        FileNotFoundError: no such path, and not a preset name.
    """
    from keras_bert_zoo.checkpoints import CheckpointError, read_checkpoint_info
    from keras_bert_zoo.checkpoints.installed import (
        list_installed_checkpoints,
        resolve_installed_checkpoint,
    )
    from keras_bert_zoo.config import list_presets

    if not given:
        raise UserError(
            f"{flag} is required: {WHAT_IS_ACCEPTED} ({', '.join(list_presets())}; installed: "
            f"{', '.join(list_installed_checkpoints())})"
        )
    path = os.path.abspath(resolve_installed_checkpoint(given))
    if is_finetuned_dir(path):
        return WeightSource(FINETUNED, path, given, os.path.join(path, VOCAB_FILE))
    if os.path.isfile(os.path.join(path, TASK_FILE)):
        found = [
            d for d in finetuned_dirs_of_run(path, prefer_best=prefer_best) if is_finetuned_dir(d)
        ]
        if found:
            return WeightSource(FINETUNED, found[0], given, os.path.join(found[0], VOCAB_FILE))
    run_dir = _run_dir(path)
    if is_pretraining_run_dir(run_dir):
        vocab = os.path.join(run_dir, "vocab.txt")
        return WeightSource(PRETRAINING_RUN, path, given, vocab if os.path.isfile(vocab) else None)
    if os.path.exists(path) or os.path.exists(path + ".index"):
        try:
            info = read_checkpoint_info(path)
        except CheckpointError as error:
            present = sorted(os.listdir(path)) if os.path.isdir(path) else [path]
            raise CheckpointError(
                f"{flag}={given}: none of {WHAT_IS_ACCEPTED}; found {present} ({error})"
            ) from None
        return WeightSource(CHECKPOINT, path, given, info.vocab_file)
    if given in list_presets():
        return WeightSource(PRESET, given, given, None)
    raise FileNotFoundError(
        f"{flag}={given}: no such file or directory, not the name of an installed checkpoint "
        f"({', '.join(list_installed_checkpoints()) or 'none installed'}) and not a preset "
        f"name ({', '.join(list_presets())})"
    )


# === The vocabulary that goes with the weights ===


def make_tokenizer(vocab_file: str, do_lower_case: bool | None, *, flag="--do_lower_case"):
    """A `BertTokenizer` on `vocab_file`; the casing is read from the vocabulary unless
    given, and a given casing that contradicts the vocabulary is an error naming it."""
    from keras_bert_zoo.text import BertTokenizer

    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{vocab_file}: no such vocabulary file")
    try:
        return BertTokenizer(vocab_file, lowercase=do_lower_case)
    except ValueError as error:
        if do_lower_case is None:
            raise
        raise UserError(f"{flag}={do_lower_case} contradicts {vocab_file}: {error}") from error


def check_vocab_fits(vocab_file: str, bert_config, size: int | None = None) -> None:
    """Refuses a vocabulary with more tokens than the encoder's word-embedding rows."""
    if size is None:
        from keras_bert_zoo.text.vocab import load_vocab

        if not os.path.isfile(vocab_file):
            raise FileNotFoundError(f"--vocab_file={vocab_file}: no such file")
        size = len(load_vocab(vocab_file))
    if size > bert_config.vocab_size:
        raise UserError(
            f"{vocab_file} has {size} tokens but the encoder's word-embedding table has "
            f"{bert_config.vocab_size} rows (vocab_size): ids past it would index out of "
            "range. Use the vocabulary the checkpoint was trained with."
        )


def tokenizer_of(source: WeightSource, vocab_file: str | None, do_lower_case: bool | None):
    """The tokenizer of `source`'s weights: `vocab_file` or the source's vocabulary, which
    must fit the encoder's word-embedding table."""
    vocab_file = vocab_file or source.vocab_file
    if not vocab_file:
        raise UserError(f"{source.path} has no vocab.txt: pass --vocab_file")
    tokenizer = make_tokenizer(vocab_file, do_lower_case)
    check_vocab_fits(vocab_file, source.bert_config, tokenizer.vocabulary_size())
    return tokenizer


def check_same_vocabulary(vocab_file: str | None, tokenizer, model_dir: str) -> None:
    """Refuses a `--vocab_file` other than the one a fine-tuned model carries."""
    from keras_bert_zoo.text.vocab import load_vocab

    if vocab_file and load_vocab(vocab_file) != tokenizer.get_vocabulary():
        raise UserError(
            f"--vocab_file={vocab_file} differs from the fine-tuned model's "
            f"{os.path.join(model_dir, VOCAB_FILE)} (the model carries its vocabulary)"
        )


def finetuned_dir_of_run(output_dir: str, *, prefer_best: bool, needed_by: str) -> str:
    """The fine-tuned model of a fine-tuning run's `output_dir` (`finetuned/`, or `best/`
    first with `prefer_best`); an error saying what `needed_by` needs when none is."""
    candidates = finetuned_dirs_of_run(output_dir, prefer_best=prefer_best)
    found = [path for path in candidates if is_finetuned_dir(path)]
    if not found:
        raise FileNotFoundError(
            f"{needed_by} needs a fine-tuned model: none in {' or '.join(candidates)}; train "
            "first, or pass --init_checkpoint (a fine-tuned directory or a checkpoint with "
            "the task's head)"
        )
    return found[0]


def name_in_run(path: str, output_dir: str | None) -> str:
    """`finetuned` / `best` for a run's own models, as training names them, so that
    eval_results.json does not depend on where the run lives; else the path (a model
    from elsewhere)."""
    if output_dir:
        for name in (FINETUNED_DIR, BEST_DIR):
            if os.path.realpath(os.path.join(output_dir, name)) == os.path.realpath(path):
                return name
    return path
