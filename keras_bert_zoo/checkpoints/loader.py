"""`from_pretrained` / `save_pretrained`: BERT checkpoints of either layout, validated whole.

A directory is recognised by its files:

- google-research/bert: `bert_config.json` + `*.ckpt.index` (or a checkpoint prefix).
- Hugging Face: `config.json` + `model.safetensors` (or `pytorch_model.bin`, or shards).

Loading is all-or-nothing. Every weight of the model is matched to a checkpoint tensor
through the naming table (`naming.py`), every shape is checked and every tensor is read
before the first variable is assigned; one `CheckpointError` lists every missing,
unexpected and mis-shaped tensor by name, with the file, and the model is left as it was.

Example:

```python
from keras_bert_zoo.checkpoints import from_pretrained, save_pretrained
from keras_bert_zoo.models import BertClassifier

encoder = from_pretrained("all-MiniLM-L6-v2")                       # Hugging Face layout
save_pretrained(encoder, "/tmp/minilm_google", format="google")     # TF1 layout
classifier = from_pretrained("/tmp/minilm_google", model=BertClassifier, num_classes=3)
```
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Mapping

import keras

from keras_bert_zoo.checkpoints import google, huggingface, naming
from keras_bert_zoo.checkpoints._files import to_numpy_for_saving
from keras_bert_zoo.checkpoints.info import CheckpointInfo, normalize_format, read_checkpoint_info
from keras_bert_zoo.checkpoints.naming import GOOGLE, HUGGINGFACE, CheckpointError
from keras_bert_zoo.checkpoints.plan import (
    LoadReport,
    apply_plan,
    checkpoint_heads,
    encoder_of,
    model_weights,
)
from keras_bert_zoo.models import BertEncoder, BertPretrainer
from keras_bert_zoo.text.vocab import load_vocab
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)


def load_weights(
    model,
    path,
    *,
    allow_partial: bool = False,
    name_overrides: Mapping[str, str] | None = None,
    format: str | None = None,
) -> LoadReport:
    """Loads a checkpoint into an existing model, all-or-nothing.

    Task heads that the checkpoint has none of (a classification head when fine-tuning
    from a pretrained encoder) keep their initialization and are logged. Pretraining
    heads (MLM/NSP) of a `BertPretrainer` are required like encoder weights. Head
    weights the checkpoint has but the model does not use (e.g. `cls/predictions/*`
    when loading an encoder) are ignored and logged.

    Args:
        model: a `BertEncoder`, or a task model with an `encoder` attribute.
        path: checkpoint directory (or Google checkpoint prefix).
        allow_partial: load what matches and log the missing, unexpected and mis-shaped
            tensors instead of raising.
        name_overrides: canonical name -> checkpoint name, for heads saved under other
            names (e.g. `{"classification_head/output_dense/kernel": "mnli/output_weights"}`).
        format: force `"google"` or `"huggingface"` instead of detecting it.

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointError: listing every problem, with the files; no variable is changed.
    """
    return apply_plan(
        model,
        read_checkpoint_info(path, format),
        allow_partial=allow_partial,
        name_overrides=name_overrides,
    )


def _build_model(model, encoder, model_kwargs):
    if model == "encoder":
        if model_kwargs:
            raise TypeError(f"model='encoder' takes no extra arguments, got {sorted(model_kwargs)}")
        return encoder
    if model == "pretrainer":
        return BertPretrainer(encoder, **model_kwargs)
    if isinstance(model, str):
        raise UserError(  # noqa: TRY004 - a wrong value, not a wrong type
            f"model must be 'encoder', 'pretrainer', a task model class or a callable, "
            f"got {model!r}"
        )
    if inspect.isclass(model) and issubclass(model, BertEncoder):
        return encoder
    if callable(model):
        return model(encoder, **model_kwargs)
    raise TypeError(f"model must be a string, a class or a callable, got {type(model).__name__}")


def from_pretrained(
    path,
    *,
    model: str | type | Callable = "encoder",
    allow_partial: bool = False,
    dtype=None,
    format: str | None = None,
    name_overrides: Mapping[str, str] | None = None,
    **model_kwargs,
):
    """Builds a model from a checkpoint's config and loads its weights.

    Args:
        path: a google-research/bert release directory (or checkpoint prefix) or a
            Hugging Face BERT directory; the layout is recognised from the files. Or the
            name of a checkpoint an installed package ships (`all-MiniLM-L6-v2`,
            `checkpoints.installed`).
        model: `"encoder"` (a `BertEncoder`), `"pretrainer"` (a `BertPretrainer` with
            MLM/NSP heads), a task model class (`BertClassifier`, `BertSpanLabeler`, ...)
            or a callable `f(encoder, **model_kwargs) -> keras.Model`.
        allow_partial: load what matches and log what was skipped, instead of raising.
        dtype: dtype policy of the model (`"float32"`, `"mixed_bfloat16"`, ...).
        format: force `"google"` or `"huggingface"`.
        name_overrides: canonical name -> checkpoint name for heads stored elsewhere.
        **model_kwargs: passed to the task model (e.g. `num_classes=3`).

    Returns:
        The model with the checkpoint's weights.

    Raises:
        CheckpointError: unreadable files, or weights that do not match the config;
            the message lists every offending tensor by name and names the files.
    """
    info = read_checkpoint_info(path, format)
    _check_vocab(info)
    encoder = BertEncoder.from_bert_config(info.config, dtype=dtype)
    built = _build_model(model, encoder, model_kwargs)
    apply_plan(
        built,
        info,
        allow_partial=allow_partial,
        name_overrides=name_overrides,
        model_description=f"the {type(built).__name__} built from {info.config_file}",
    )
    return built


def _check_vocab(info: CheckpointInfo):
    """Refuses a vocab.txt longer than the word-embedding table; warns on a shorter one.

    Ids past the table fail only when the model runs on the plain path, and XLA
    clamps out-of-range gathers silently. A shorter vocabulary is legitimate (tables
    are often padded to a multiple of 8 or 128); its extra rows are never used.
    """
    if info.vocab_file is None:
        return
    tokens = len(load_vocab(info.vocab_file))
    rows = info.config.vocab_size  # the table's shape is checked against it on loading
    if tokens > rows:
        raise CheckpointError(
            f"{info.vocab_file} has {tokens} tokens but the word-embedding table has "
            f"{rows} rows (vocab_size in {info.config_file}): ids {rows} to {tokens - 1} "
            "would index past it. Use the vocab.txt the checkpoint was trained with."
        )
    if tokens < rows:
        logger.warning(
            "%s has %d tokens, fewer than the %d rows of the word-embedding table "
            "(vocab_size in %s); the last %d rows are never used.",
            info.vocab_file,
            tokens,
            rows,
            info.config_file,
            rows - tokens,
        )


# === Saving ===


def checkpoint_tensors(
    model,
    format: str,
    *,
    include_heads: bool = True,
    name_overrides: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """The model's weights as `{checkpoint name: numpy array}` in `format`'s layout.

    Hugging Face names get the `bert.` prefix when heads are included (as in
    `BertForPreTraining` and the task models) and none for a bare encoder (as
    `BertModel` saves them).
    """
    fmt = normalize_format(format)
    pairs, uncovered = model_weights(model, fmt, name_overrides)
    if not include_heads:
        pairs = [(row, v) for row, v in pairs if row.owner == "encoder"]
    has_heads = any(row.owner != "encoder" for row, _ in pairs)
    if uncovered and include_heads:
        logger.warning("Not saved (outside the BERT naming table): %s", [v.path for v in uncovered])
    tensors = {}
    for row, variable in pairs:
        name = row.source_name(fmt)
        if fmt == HUGGINGFACE and has_heads and row.owner == "encoder":
            name = huggingface.PREFIX + name
        if name in tensors:
            raise ValueError(f"Two weights map to the checkpoint name {name!r}")
        tensors[name] = naming.to_source(
            row.layout, fmt, to_numpy_for_saving(keras.ops.convert_to_numpy(variable))
        )
    return tensors


def save_pretrained(
    model,
    path,
    format: str = "google",
    vocab_file=None,
    *,
    include_heads: bool = True,
    name_overrides: Mapping[str, str] | None = None,
) -> str:
    """Writes a model as a google-research/bert or Hugging Face checkpoint directory.

    Google: `bert_model.ckpt.{index,data-00000-of-00001}` + `bert_config.json`.
    Hugging Face: `model.safetensors` + `config.json`. Plus `vocab.txt` when
    `vocab_file` is given. Files are written to a temporary directory and renamed into
    place, so a failure leaves nothing half written.

    Args:
        model: a `BertEncoder` or a task model with an `encoder` attribute.
        path: output directory.
        format: `"google"` or `"huggingface"`.
        vocab_file: vocabulary to copy as `vocab.txt`.
        include_heads: also write the task/pretraining heads.
        name_overrides: canonical name -> checkpoint name for the heads.

    Returns:
        `path`.
    """
    fmt = normalize_format(format)
    tensors = checkpoint_tensors(
        model, fmt, include_heads=include_heads, name_overrides=name_overrides
    )
    config = encoder_of(model).bert_config
    if fmt == GOOGLE:
        google.write_checkpoint(path, tensors, config=config, vocab_file=vocab_file)
        return os.fspath(path)
    architecture, extra = "BertModel", {}
    if include_heads and checkpoint_heads(model):
        architecture = model.huggingface_architecture
        num_classes = getattr(model, "num_classes", None)
        if num_classes is not None:
            extra["num_labels"] = int(num_classes)
            extra["id2label"] = {str(i): f"LABEL_{i}" for i in range(int(num_classes))}
            extra["label2id"] = {f"LABEL_{i}": i for i in range(int(num_classes))}
    huggingface.write_checkpoint(
        path,
        tensors,
        config=config,
        vocab_file=vocab_file,
        architecture=architecture,
        extra_config=extra,
    )
    return os.fspath(path)


def convert_checkpoint(
    input_path,
    output_path,
    output_format: str,
    *,
    include_heads: bool = False,
    allow_partial: bool = False,
) -> str:
    """Converts a checkpoint between the google-research/bert and Hugging Face layouts.

    The weights go through our model (so they are validated like `from_pretrained`),
    and `vocab.txt` is copied when the input has one.

    Args:
        input_path: checkpoint directory (or Google checkpoint prefix), either layout.
        output_path: output directory.
        output_format: `"google"` or `"huggingface"`.
        include_heads: also convert the pretraining heads (masked LM and next sentence);
            the input must have them.
        allow_partial: as in `from_pretrained`.

    Returns:
        `output_path`.
    """
    info = read_checkpoint_info(input_path)
    model = from_pretrained(
        input_path,
        model="pretrainer" if include_heads else "encoder",
        allow_partial=allow_partial,
    )
    return save_pretrained(
        model,
        output_path,
        format=output_format,
        vocab_file=info.vocab_file,
        include_heads=include_heads,
    )
