"""What a sentence-transformers model directory says about its vectors.

A sentence-transformers model (all-MiniLM-L6-v2, for one) is a Hugging Face BERT
directory plus the modules that turn its token outputs into a vector, listed in
`modules.json`: `Transformer` (the BERT, in the directory itself), `Pooling` (its mode
in `<path>/config.json`: `pooling_mode_mean_tokens`, `pooling_mode_cls_token`,
`pooling_mode_max_tokens`) and `Normalize` (L2), and the sequence length in
`sentence_bert_config.json`. `read_sentence_transformers_settings` reads them into the
arguments of `models.BertSentenceEmbedder`, so that

```python
settings = read_sentence_transformers_settings("all-MiniLM-L6-v2")
embedder = from_pretrained(
    "all-MiniLM-L6-v2", model=BertSentenceEmbedder, **settings.model_kwargs()
)
```

gives the vectors of `SentenceTransformer(path).encode(...)`. A module this package does
not build (`Dense`, `LayerNorm`, a pooling of several modes or another mode) is a
`CheckpointError` naming it, never a silently different vector.
"""

from __future__ import annotations

import dataclasses
import json
import os

from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint
from keras_bert_zoo.checkpoints.naming import CheckpointError

MODULES_FILE = "modules.json"
SETTINGS_FILE = "sentence_bert_config.json"

# `Pooling` config keys -> `SequencePooling` modes.
_POOLING_FLAGS = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}
_UNSUPPORTED_POOLING_FLAGS = (
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


@dataclasses.dataclass(frozen=True)
class SentenceTransformersSettings:
    """A sentence-transformers directory's vector settings.

    Attributes:
        pooling: `"mean"`, `"cls"` or `"max"`.
        normalize: the modules end with `Normalize` (L2).
        max_seq_length: the longest input in tokens it was trained with, or None.
        lowercase: `do_lower_case` of `sentence_bert_config.json` (sentence-transformers
            lowercases the text before its tokenizer does), or None.
    """

    pooling: str
    normalize: bool
    max_seq_length: int | None = None
    lowercase: bool | None = None

    def model_kwargs(self) -> dict:
        """The `BertSentenceEmbedder` arguments: `pooling` and `normalize`."""
        return {"pooling": self.pooling, "normalize": self.normalize}


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{path}: not JSON ({error})") from error


def _pooling_mode(config_path) -> str:
    config = _read_json(config_path)
    modes = [mode for flag, mode in _POOLING_FLAGS.items() if config.get(flag)]
    unsupported = [flag for flag in _UNSUPPORTED_POOLING_FLAGS if config.get(flag)]
    if unsupported or len(modes) != 1:
        flags = [
            flag for flag in (*_POOLING_FLAGS, *_UNSUPPORTED_POOLING_FLAGS) if config.get(flag)
        ]
        raise CheckpointError(
            f"{config_path}: pooling {flags or 'none'}; supported is exactly one of "
            f"{', '.join(_POOLING_FLAGS)}"
        )
    return modes[0]


def read_sentence_transformers_settings(path) -> SentenceTransformersSettings | None:
    """The settings of the sentence-transformers model at `path` (a directory, or the
    name of an installed checkpoint), or None when it has no `modules.json` (a plain
    BERT checkpoint).

    Raises:
        CheckpointError: a module other than Transformer, Pooling and Normalize, a
            pooling this package does not compute, or an unreadable file.
    """
    directory = resolve_installed_checkpoint(str(path))
    modules_file = os.path.join(directory, MODULES_FILE)
    if not os.path.isfile(modules_file):
        return None
    pooling, normalize = None, False
    for module in sorted(_read_json(modules_file), key=lambda m: m.get("idx", 0)):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Transformer":
            continue
        if kind == "Pooling":
            pooling = _pooling_mode(os.path.join(directory, module.get("path", ""), "config.json"))
        elif kind == "Normalize":
            normalize = True
        else:
            raise CheckpointError(
                f"{modules_file}: module {module.get('type')!r} is not supported (this package "
                "builds Transformer, Pooling and Normalize)"
            )
    if pooling is None:
        raise CheckpointError(f"{modules_file}: no Pooling module")
    settings_file = os.path.join(directory, SETTINGS_FILE)
    settings = _read_json(settings_file) if os.path.isfile(settings_file) else {}
    max_seq_length = settings.get("max_seq_length")
    lowercase = settings.get("do_lower_case")
    return SentenceTransformersSettings(
        pooling=pooling,
        normalize=normalize,
        max_seq_length=None if max_seq_length is None else int(max_seq_length),
        lowercase=None if lowercase is None else bool(lowercase),
    )
