"""A pretrained model's exports: the encoder with its MLM and NSP heads in a checkpoint
layout (`google`, `huggingface`), with its vocabulary and tokenizer settings.

Example:

```python
from keras_bert_zoo.tasks.pretraining.exports import export_pretrained

export_pretrained(model, "export/huggingface", "huggingface", "vocab.txt")
```
"""

from __future__ import annotations


def export_with_vocabulary(
    model, directory: str, export_format: str, vocabulary: list[str] | None
) -> str:
    """Writes `model` in `export_format`'s layout with `vocabulary` beside it, and for
    Hugging Face's tokenizer_config.json its casing and longest input.

    Args:
        model: the `BertPretrainer`.
        directory: where to write (replaced whole).
        export_format: `"google"` or `"huggingface"`.
        vocabulary: the WordPiece tokens (None: none written).

    Returns:
        `directory`.
    """
    from keras_bert_zoo.checkpoints.export import export_checkpoint
    from keras_bert_zoo.text.tokenizer import infer_lowercase

    return export_checkpoint(
        directory,
        model,
        export_format,
        vocabulary=vocabulary,
        lowercase=infer_lowercase(vocabulary) if vocabulary else None,
        model_max_length=model.encoder.max_position_embeddings,
    )


def export_pretrained(model, directory: str, export_format: str, vocab_file: str | None) -> str:
    """Writes the encoder with its MLM and NSP heads in `export_format`'s layout,
    atomically: `from_pretrained(directory, model="pretrainer")` and, for Hugging Face,
    `transformers.BertForPreTraining.from_pretrained` read it, with its tokenizer.

    Args:
        model: the `BertPretrainer`.
        directory: where to write (replaced whole).
        export_format: `"google"` or `"huggingface"`.
        vocab_file: the WordPiece vocabulary written beside it (None: none).

    Returns:
        `directory`.
    """
    from keras_bert_zoo.text.vocab import load_vocab

    vocabulary = load_vocab(vocab_file) if vocab_file else None
    return export_with_vocabulary(model, directory, export_format, vocabulary)
