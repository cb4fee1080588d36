"""Weights copied between pretrainer models whose position tables differ in length.

Phase 2 of BERT's pretraining (512 tokens) starts from phase 1 (128): the checkpoint's
position-embedding table is shorter than the model's. `copy_pretraining_weights` copies
every weight as it is and extends that one table (`extend_position_embeddings`); any
other difference of shape is another architecture, refused by name before anything is
assigned.

Example:

```python
source = from_pretrained("phase1/export_google", model="pretrainer")
target = BertPretrainer(BertEncoder.from_bert_config(config.replace(max_position_embeddings=512)))
copy_pretraining_weights(source, target)
```
"""

from __future__ import annotations

import logging
import math

import numpy as np

from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

__all__ = ["copy_pretraining_weights", "extend_position_embeddings"]


def extend_position_embeddings(table: np.ndarray, rows: int) -> np.ndarray:
    """The position-embedding table with `rows` rows: the learned rows kept, the new
    ones copies of the learned ones, tiled (row `i` = learned row `i mod n`).

    Why tiling rather than a fresh random initialisation: the new rows start at the
    scale and in the subspace the rest of the network was trained on, so the first
    steps of phase 2 do not see out-of-distribution inputs at every position past the
    old length; the model then only has to learn to tell the copies apart (Longformer,
    Beltagy et al. 2020, initialised its 4096 positions from RoBERTa's 512 this way and
    found it converges much faster than a random start).

    Args:
        table: `[positions, hidden]`, the learned table.
        rows: the positions wanted (fewer: the first `rows`).
    """
    table = np.asarray(table)
    learned = table.shape[0]
    if rows <= learned:
        return table[:rows] if rows < learned else table
    repeats = math.ceil(rows / learned)
    return np.tile(table, (repeats, 1))[:rows]


def _is_seed_state(variable) -> bool:
    # Dropout RNG states are per model, not weights: neither copied nor counted.
    return (getattr(variable, "path", "") or variable.name).endswith("seed_generator_state")


def copy_pretraining_weights(source, target) -> None:
    """Copies the weights of `source` into the `BertPretrainer` `target`, extending the
    position-embedding table when the target's is longer.

    Args:
        source: a `BertPretrainer`, or a `BertEncoder` (the target's heads then keep
            their initialization).
        target: the `BertPretrainer` written to.

    Raises:
        ValueError: naming the first weight whose shape differs otherwise.
    """
    from keras_bert_zoo.models import BertPretrainer

    into = target if isinstance(source, BertPretrainer) else target.encoder
    old = [v for v in source.weights if not _is_seed_state(v)]
    new = [v for v in into.weights if not _is_seed_state(v)]
    if len(old) != len(new):
        raise UserError(
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
                raise UserError(
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
    # Assigned only once every shape is checked: a refused copy leaves the target as it was.
    for variable, value in zip(new, values, strict=True):
        variable.assign(value)
