"""What a job passes the `Trainer` about its model: the loss function, the layout of its
batches and the initial weights.

The training loop (`training/`) knows no model, checkpoint layout or input pipeline:
which forward pass trains a model fastest, how its batches are laid out for it, and
where its weights start from are the job's knowledge. `runners.runner.Job` picks them
with these functions (`Job.loss_fn`, `Job.dataset_transform`, `Job.initial_weights`,
`training_batching`), and a new job overrides those methods to pass its own.

The layout of the training batches (`--batching`, `training_batching`): `bucketed`
(batches of similar lengths cut to their longest row: `tasks.datasets`), `packed`
(several examples to a row: `packing_transform`, with `model_loss_fn(packed=True)`),
`padded` (rows of `max_seq_length`), or `auto`: the one `BATCHING_BY_FAMILY` names for
the task family, measured by `benchmarks/batching_choice.py` (the table in its
docstring and the docs/fine-tuning.md).

Example:

```python
trainer = Trainer(
    model,
    model_dir=output_dir,
    loss_fn=model_loss_fn(model, packed=True),
    dataset_transform=packing_transform(micro_batches=1),
)
trainer.train(dataset_fn, 1000, initial_weights=load_checkpoint("uncased_L-12_H-768_A-12"))
```
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

# `--batching=auto`'s choice by task family (`task_family`), the fastest layout measured
# by `benchmarks/batching_choice.py` (MiniLM-L6 shapes, real text, 2-core CPU). Packing
# needs a model with one output per example (`BertClassifier`); the other families
# train on bucketed batches; pretraining's records are full rows, padded already.
BATCHING_BY_FAMILY = {
    "sentences": "packed",
    "pairs": "packed",
    "regression": "packed",
    "multi_label": "packed",
    "windows": "bucketed",
    "tagging": "bucketed",
    "spans": "bucketed",
    "multiple_choice": "bucketed",
    "sentence_embedding": "bucketed",
    "distillation": "bucketed",
    "pretraining": "padded",
}
TASK_FAMILIES = tuple(BATCHING_BY_FAMILY)


def task_family(task, model) -> str:
    """The family (`TASK_FAMILIES`) of what `model` trains on `task`: by its model
    class (tagging, spans, multiple choice, sentence embeddings, a distiller, a
    pretrainer), else by the
    sentence task's settings (windows of long documents, regression, multi-label, pairs
    or single sentences)."""
    from keras_bert_zoo.models import (
        BertMultipleChoice,
        BertPretrainer,
        BertSpanLabeler,
        BertTextGroupEmbedder,
        BertTokenClassifier,
    )
    from keras_bert_zoo.models.distillation import TaskDistiller

    by_model = (
        (TaskDistiller, "distillation"),
        (BertPretrainer, "pretraining"),
        (BertTokenClassifier, "tagging"),
        (BertSpanLabeler, "spans"),
        (BertMultipleChoice, "multiple_choice"),
        (BertTextGroupEmbedder, "sentence_embedding"),
    )
    for model_class, family in by_model:
        if isinstance(model, model_class):
            return family
    if getattr(task, "windowed", False):
        return "windows"
    if getattr(task, "is_regression", False):
        return "regression"
    if getattr(task, "is_multi_label", False):
        return "multi_label"
    return "pairs" if len(getattr(task, "text_fields", ())) > 1 else "sentences"


def packs(model) -> bool:
    """Whether `model` trains on packed batches (one output per example)."""
    from keras_bert_zoo.models.sequence_packing import forward

    try:
        forward.check_supported(model)
    except TypeError:
        return False
    return True


def training_batching(requested: str, model, family: str) -> str:
    """The layout of the training batches: `requested` (`--batching`), `auto` resolved
    by `BATCHING_BY_FAMILY[family]` (bucketed where `model` cannot pack).

    Raises:
        UserError: `packed` for a model whose outputs are not one per example, or
            `bucketed` for pretraining (its records are full rows).
    """
    if requested == "packed" and not packs(model):
        from keras_bert_zoo.models.sequence_packing.forward import SUPPORTED_MODELS

        raise UserError(
            f"--batching=packed does not apply to the {family} family: it trains a "
            f"{type(model).__name__}, whose outputs or inputs are not one per example; "
            f"packed batches train {[m.__name__ for m in SUPPORTED_MODELS]} only. Use "
            "--batching=bucketed (or auto)"
        )
    if requested == "bucketed" and family == "pretraining":
        raise UserError(
            "--batching=bucketed does not apply to pretraining: its records are full rows "
            "(packed to the length when they were written); use padded or packed"
        )
    if requested != "auto":
        return requested
    choice = BATCHING_BY_FAMILY.get(family, "bucketed")
    return "bucketed" if choice == "packed" and not packs(model) else choice


def model_loss_fn(model, *, packed: bool = False) -> Callable:
    """The fastest loss function of one micro-batch that gives `model`'s loss: on packed
    batches (`models.sequence_packing`, `packed`), else with the last block computed
    only at the positions the heads read (`models.head_positions`, for the models that
    declare them: `BertClassifier`, `BertPretrainer`), else the model's own call
    (`training.default_loss_fn`); for span heads (`BertSpanLabeler`, or a distiller's
    span student) with their padded positions out of the softmax
    (`span_loss_without_padding`).

    Raises:
        TypeError: `packed` for a model whose outputs are not one per example.
    """
    from keras_bert_zoo.models import head_positions
    from keras_bert_zoo.models.sequence_packing import forward
    from keras_bert_zoo.training import default_loss_fn

    if packed:
        forward.check_supported(model)
        return forward.packed_loss_fn
    if head_positions.supports(model):
        return head_positions.head_positions_loss_fn
    if _reads_span_positions(model):
        return span_loss_without_padding
    return default_loss_fn


def _reads_span_positions(model) -> bool:
    from keras_bert_zoo.models import BertSpanLabeler

    return isinstance(model, BertSpanLabeler) or isinstance(
        getattr(model, "student", None), BertSpanLabeler
    )


def span_loss_without_padding(model, x, y, sample_weight):
    """`Trainer` loss function of a span model: `(loss, y_pred)` of one micro-batch, its
    `[batch, seq_len]` logits (the start and end positions) at padded positions set to
    `-1e9` before the loss.

    Span logits are not masked by the model (google-research/bert's neither), so the
    softmax over the positions took in every padded position, and the loss of an
    example depended on how far its batch was padded: a row of 120 real tokens in a
    batch padded to 384 had another loss than in one trimmed to 128. Without the padded
    positions the loss is the same however the batch is laid out (padded, or trimmed by
    `--batching=bucketed`), as the distillation's `positions` targets already are.
    """
    import tensorflow as tf

    from keras_bert_zoo.inputs import INPUT_MASK
    from keras_bert_zoo.models.distillation import mask_positions

    mask = x[INPUT_MASK]

    def without_padding(logits):
        if logits.shape.rank != 2 or not logits.dtype.is_floating:
            return logits
        return mask_positions(logits, mask)  # float32: -1e9 overflows float16

    y_pred = model(x, training=True)
    if isinstance(y_pred, dict) and "encoder_outputs" in y_pred:  # a distiller's blocks
        y_pred = {**y_pred, "outputs": tf.nest.map_structure(without_padding, y_pred["outputs"])}
    else:
        y_pred = tf.nest.map_structure(without_padding, y_pred)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    return loss, y_pred


def packing_transform(micro_batches: int = 1, *, row_bucket: int = 4) -> Callable:
    """`Trainer(dataset_transform=...)` packing each padded batch several examples to a
    row (`data.sequence_packing.packed_dataset`), each of `micro_batches` parts on its
    own (gradient accumulation splits the packed batch into them), the row count rounded
    up to a multiple of `row_bucket`."""
    from keras_bert_zoo.data.sequence_packing import packed_dataset

    return functools.partial(packed_dataset, micro_batches=micro_batches, row_bucket=row_bucket)


def packed_row_bucket(*, compiled_per_shape: bool) -> int:
    """The row count a packed training batch is rounded up to a multiple of.

    A step compiled per shape (XLA, TPUs) wants few row counts: 4 bounds them to
    batch / 4 compilations. Without XLA the training loop is traced once whatever the
    rows, so each batch keeps exactly the rows it fills: on the main job's sentences
    (batch 16, length 128) rounding to 4 sent 16% of the batches from 5 rows to 8, 77% of
    the computed tokens real against 87% unrounded (docs/speed.md)."""
    return 4 if compiled_per_shape else 1


def load_checkpoint(path: str) -> Callable:
    """`Trainer.train(initial_weights=...)` reading the checkpoint directory `path` (any
    layout `checkpoints.load_weights` reads) into the model's encoder and the heads it
    holds."""

    def load(model):
        from keras_bert_zoo.checkpoints import load_weights

        report = load_weights(model, path)
        logger.info("Initialized from %s: %s", path, report.summary())

    return load
