"""The weights a fresh `Trainer.train` run starts from: the job's choice, applied once.

Reading a checkpoint is the job's knowledge (`runners.loss_and_weights`), so the
Trainer takes `initial_weights` as a function of the model (e.g. loading a pretrained
encoder into it) or a loaded `keras.Model` of the same architecture whose weights are
copied, and applies it only when no checkpoint of the run exists.

Example:

```python
from keras_bert_zoo import checkpoints

apply_initial_weights(model, strategy, lambda m: checkpoints.load_weights(m, "bert_tiny"))
```
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from keras_bert_zoo.utils.deprecation import REMOVAL

logger = logging.getLogger(__name__)

InitialWeights = Callable[[keras.Model], Any] | keras.Model


def initial_weights_argument(initial_weights, init_checkpoint):
    """`initial_weights`, or the deprecated `init_checkpoint` keyword's function."""
    if init_checkpoint is None:
        return initial_weights
    message = "Trainer.train(init_checkpoint=) is Trainer.train(initial_weights=)"
    warnings.warn(f"{message}; the old keyword goes in {REMOVAL}", DeprecationWarning, 3)
    if isinstance(init_checkpoint, str | os.PathLike):  # reading checkpoints is the job's
        raise TypeError(
            f"{message}: a function, e.g. lambda model: "
            f"keras_bert_zoo.checkpoints.load_weights(model, {os.fspath(init_checkpoint)!r})"
        )
    return init_checkpoint


def apply_initial_weights(
    model: keras.Model, strategy: tf.distribute.Strategy, initial_weights: InitialWeights
) -> None:
    """Sets `model`'s weights from `initial_weights` (see the module), in `strategy`'s
    scope (a loading function may create variables)."""
    with strategy.scope():
        if isinstance(initial_weights, keras.Model):
            model.set_weights(initial_weights.get_weights())
            logger.info("Initialized from the weights of %s", initial_weights.name)
        else:
            initial_weights(model)
