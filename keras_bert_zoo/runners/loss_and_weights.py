"""What a job passes the `Trainer` about its model: the loss function and initial weights.

The training loop (`training/`) knows no model, checkpoint layout or input pipeline:
which forward pass trains a model fastest, how its batches are packed for it, and where
its weights start from are the job's knowledge. `runners.runner.Job` picks them with
these functions (`Job.loss_fn`, `Job.dataset_transform`, `Job.initial_weights`), and a
new job overrides those methods to pass its own.

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

logger = logging.getLogger(__name__)


def model_loss_fn(model, *, packed: bool = False) -> Callable:
    """The fastest loss function of one micro-batch that gives `model`'s loss: on packed
    batches (`models.sequence_packing`, `packed`), else with the last block computed
    only at the positions the heads read (`models.head_positions`, for the models that
    declare them: `BertClassifier`, `BertPretrainer`), else the model's own call
    (`training.default_loss_fn`).

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
    return default_loss_fn


def packing_transform(micro_batches: int = 1) -> Callable:
    """`Trainer(dataset_transform=...)` packing each padded batch several examples to a
    row (`data.sequence_packing.packed_dataset`), each of `micro_batches` parts on its
    own (gradient accumulation splits the packed batch into them)."""
    from keras_bert_zoo.data.sequence_packing import packed_dataset

    return functools.partial(packed_dataset, micro_batches=micro_batches)


def load_checkpoint(path: str) -> Callable:
    """`Trainer.train(initial_weights=...)` reading the checkpoint directory `path` (any
    layout `checkpoints.load_weights` reads) into the model's encoder and the heads it
    holds."""

    def load(model):
        from keras_bert_zoo.checkpoints import load_weights

        report = load_weights(model, path)
        logger.info("Initialized from %s: %s", path, report.summary())

    return load
