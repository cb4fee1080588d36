"""`.keras` files of trained models for inference: architecture and weights, no optimizer.

A model compiled for training saves its compile config (our `AdamW`, its learning-rate
schedule, the loss) and every optimizer slot into a `.keras` file. That made the
fine-tuned directories three times the weights' size, and a process that loaded one had
to import the module registering those classes first: `tools/export_saved_model.py`
failed with "Could not locate class 'AdamW'" on every directory `run_finetuning.py`
wrote. The optimizer state of a run lives in its training checkpoints
(`training/checkpointing.py`), which are what a resumed run reads; a saved model is for
evaluation, prediction, export and further fine-tuning, none of which reads it.

It lives with the models because loading a file needs their classes registered
(`keras_bert_zoo.utils` imports nothing of the package).

Measured on bert_base (2-core CPU): the compiled save wrote 1,314 MB in 8.6 s; the
uncompiled copy (4.7 s to build) and its save, 438 MB in 6.5 s together.

Example:

```python
save_inference_model(model, "finetuned/model.keras")  # compiled or not: no optimizer
model = load_inference_model("finetuned/model.keras")  # uncompiled
```
"""

from __future__ import annotations

import os

import keras


def inference_copy(model: keras.Model) -> keras.Model:
    """An uncompiled model with `model`'s architecture and weights (the same values).

    Build it outside a multi-worker strategy's scope: its variables are new ones.
    """
    copy = model.__class__.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


def save_inference_model(model: keras.Model, path: str | os.PathLike) -> str:
    """Saves `model` to the `.keras` file `path` without compile config or optimizer
    state, so that loading it needs only the model's own classes."""
    path = os.fspath(path)
    if getattr(model, "compiled", False) or getattr(model, "optimizer", None) is not None:
        model = inference_copy(model)
    model.save(path)
    return path


def load_inference_model(path: str | os.PathLike) -> keras.Model:
    """Loads a `.keras` model uncompiled.

    A file saved from a compiled model by an earlier release (with our optimizer in its
    compile config) loads too: its compile config and optimizer slots are not read.
    """
    # Registers the package's layers and models for deserialization.
    import keras_bert_zoo.models  # noqa: F401

    return keras.saving.load_model(os.fspath(path), compile=False)
