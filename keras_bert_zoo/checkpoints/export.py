"""A model written in a checkpoint layout with what its readers need beside the weights.

`export_checkpoint` writes `save_pretrained`'s weights and config, `vocab.txt`, and for
the Hugging Face layout the `tokenizer_config.json` and the `config.json` keys
(`huggingface.tokenizer_config`, `huggingface.label_config`) that `transformers` reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from keras_bert_zoo.checkpoints import huggingface
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically


def export_checkpoint(
    directory: str,
    model,
    export_format: str,
    *,
    vocabulary: Sequence[str] | None,
    lowercase: bool | None,
    model_max_length: int,
    config_update: Mapping[str, Any] | None = None,
    extra_files: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Writes `model` in a checkpoint layout (`google` or `huggingface`), atomically.

    `from_pretrained(directory, ...)` reads it back, and so does the `transformers`
    class that a Hugging Face `config.json` names.

    Args:
        directory: where to write (replaced whole).
        model: a `BertEncoder`, `BertPretrainer` or task model (`save_pretrained`).
        export_format: `"google"` or `"huggingface"`.
        vocabulary: the WordPiece tokens, written as `vocab.txt` (None: no vocabulary).
        lowercase: the tokenizer's casing, for Hugging Face's `tokenizer_config.json`.
        model_max_length: the longest input, for `tokenizer_config.json`.
        config_update: keys set in Hugging Face's `config.json` (label names ...).
        extra_files: `{file name: JSON object}` written beside the weights.
    """
    from keras_bert_zoo.checkpoints.loader import save_pretrained
    from keras_bert_zoo.text.vocab import write_vocab

    with atomic_directory(directory) as temp_dir:
        save_pretrained(model, temp_dir, format=export_format)
        if vocabulary is not None:
            write_vocab(os.path.join(temp_dir, "vocab.txt"), list(vocabulary))
        for name, content in (extra_files or {}).items():
            write_json_atomically(os.path.join(temp_dir, name), content)
        if export_format == "huggingface":
            if config_update:
                config_path = os.path.join(temp_dir, "config.json")
                with open(config_path, encoding="utf-8") as f:
                    hf_config = json.load(f)
                hf_config.update(config_update)
                write_json_atomically(config_path, hf_config)
            if vocabulary is not None:
                write_json_atomically(
                    os.path.join(temp_dir, huggingface.TOKENIZER_CONFIG_FILE),
                    huggingface.tokenizer_config(lowercase, model_max_length),
                )
    return directory
