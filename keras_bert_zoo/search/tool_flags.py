"""The flags every search tool shares: the embedding model and how it runs.

`tools/index_corpus.py`, `search_corpus.py` and `mine_hard_negatives.py` each call
`define_embedder_flags()` (absl's flags, defined once a process: `utils.settings
.define_once`) and `open_embedder_from_flags()`, so `--model`, `--batch_size` and
`--max_seq_length` have one meaning and one help text.

Example:

```python
from keras_bert_zoo.search import tool_flags

holders = tool_flags.define_embedder_flags(model_help="Defaults to the index's model.")
embedder = tool_flags.open_embedder_from_flags(holders)
```
"""

from __future__ import annotations

import dataclasses

from keras_bert_zoo.search import embedders
from keras_bert_zoo.utils import settings

MODEL_HELP = (
    "The embedding model: a SavedModel (version or model directory), a fine-tuned "
    "directory (or its run's --output_dir), a sentence-transformers directory or an "
    "installed checkpoint's name."
)


@dataclasses.dataclass(frozen=True)
class EmbedderFlags:
    """The holders of the shared flags."""

    model: object
    batch_size: object
    max_seq_length: object


def define_embedder_flags(model_help: str = MODEL_HELP) -> EmbedderFlags:
    """Defines `--model`, `--batch_size` and `--max_seq_length` (once a process)."""
    from absl import flags

    values = flags.FLAGS
    settings.define_once(values, "string", "model", None, model_help)
    settings.define_once(
        values,
        "integer",
        "batch_size",
        embedders.DEFAULT_BATCH_SIZE,
        "Texts a model call.",
        lower_bound=1,
    )
    settings.define_once(
        values,
        "integer",
        "max_seq_length",
        None,
        "A checkpoint's packed length (default: its sentence-transformers length, else 128); "
        "an export or a fine-tuned directory keeps its own.",
        lower_bound=2,
    )
    return EmbedderFlags(
        *(
            flags.FlagHolder(values, values[name])
            for name in ("model", "batch_size", "max_seq_length")
        )
    )


def open_embedder_from_flags(holders: EmbedderFlags, model: str | None = None):
    """`embedders.open_embedder` of `--model` (or `model`) with the flags' settings."""
    return embedders.open_embedder(
        model or holders.model.value,
        batch_size=holders.batch_size.value,
        max_seq_length=holders.max_seq_length.value,
    )
