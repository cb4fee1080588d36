"""The architecture a pretraining run trains: a `bert_config.json`, a preset, or the
initial weights' own, with enough positions for the input.

Example:

```python
from keras_bert_zoo.tasks.pretraining.architecture import pretraining_bert_config

config = pretraining_bert_config(
    bert_config_file=None, preset="bert_tiny", source_config=None, max_seq_length=128
)
```
"""

from __future__ import annotations

import json
import os

from keras_bert_zoo.utils.errors import UserError


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
