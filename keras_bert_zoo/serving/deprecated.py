"""The export functions of the previous release, each a call of `serving.export`.

Reached through the `moved_names` shims of `serving`, `serving.export`,
`serving.litert`, `serving.onnx_export`, `serving.hub` and `serving.portable`, which
warn with a `DeprecationWarning`; removed in the next release. The package itself
calls `serving.export` (`registry.py`).

| old | new |
| --- | --- |
| `export_saved_model(base, name, task, model, tokenizer, ...)` | `export(ModelSource(task, model, tokenizer), base, model_name=name, ...)` |
| `export_finetuned(finetuned, base, name, ...)` | `export(finetuned, base, model_name=name, ...)` |
| `export_pretrained(checkpoint, base, name, kind, ...)` | `export(PretrainedSource(checkpoint, ...), base, kind=kind, model_name=name)` |
| `export_hub_encoder_pair(out, model, tokenizer, seq_length=...)` | `export(ModelSource(None, model, tokenizer, max_seq_length=...), out, format="hub_pair").paths` |
| `export_pretrained_hub_pair(checkpoint, out, ...)` | `export(PretrainedSource(checkpoint, ...), out, kind="hub_encoder_pair").paths` |
| `export_litert` / `export_onnx(out, task, model, tokenizer, ...)` | `export(ModelSource(task, model, tokenizer), out, format="litert"` / `"onnx", ...)` |
| `export_finetuned_litert` / `_onnx(finetuned, out, ...)` | `export(finetuned, out, format=...)` |
| `export_pretrained_litert` / `_onnx(checkpoint, out, kind, ...)` | `export(PretrainedSource(checkpoint, ...), out, format=..., kind=kind)` |
"""  # noqa: E501

from __future__ import annotations

from keras_bert_zoo.serving.registry import export
from keras_bert_zoo.serving.sources import ModelSource, PretrainedSource

_SOURCE_OPTIONS = tuple(option.name for option in PretrainedSource.options)


def _pretrained(checkpoint_dir, options: dict) -> PretrainedSource:
    """The checkpoint's source, taking its options out of `options`."""
    given = {name: options.pop(name) for name in _SOURCE_OPTIONS if name in options}
    return PretrainedSource(checkpoint_dir, **given)


def export_saved_model(
    export_base, model_name, task, model, tokenizer, *, preprocessor=None, **options
):
    source = ModelSource(task, model, tokenizer, preprocessor=preprocessor)
    return export(source, export_base, model_name=model_name, **options)


def export_finetuned(finetuned, export_base, model_name=None, **options):
    return export(finetuned, export_base, model_name=model_name, **options)


def export_pretrained(checkpoint_dir, export_base, model_name, kind="encoder", **options):
    source = _pretrained(checkpoint_dir, options)
    return export(source, export_base, kind=kind, model_name=model_name, **options)


def export_hub_encoder_pair(output_dir, model, tokenizer, *, seq_length=128, **options):
    source = ModelSource(None, model, tokenizer, max_seq_length=seq_length)
    return export(source, output_dir, format="hub_pair", **options).paths


def export_pretrained_hub_pair(checkpoint_dir, output_dir, *, seq_length=128, **options):
    options["max_seq_length"] = seq_length
    source = _pretrained(checkpoint_dir, options)
    return export(source, output_dir, kind="hub_encoder_pair", **options).paths


def export_litert(output_dir, task, model, tokenizer, *, preprocessor=None, **options):
    source = ModelSource(task, model, tokenizer, preprocessor=preprocessor)
    return export(source, output_dir, format="litert", **options)


def export_onnx(output_dir, task, model, tokenizer, *, preprocessor=None, **options):
    source = ModelSource(task, model, tokenizer, preprocessor=preprocessor)
    return export(source, output_dir, format="onnx", **options)


def export_finetuned_litert(finetuned, output_dir, **options):
    return export(finetuned, output_dir, format="litert", **options)


def export_finetuned_onnx(finetuned, output_dir, **options):
    return export(finetuned, output_dir, format="onnx", **options)


def export_pretrained_litert(checkpoint_dir, output_dir, kind="encoder", **options):
    source = _pretrained(checkpoint_dir, options)
    return export(source, output_dir, format="litert", kind=kind, **options)


def export_pretrained_onnx(checkpoint_dir, output_dir, kind="encoder", **options):
    source = _pretrained(checkpoint_dir, options)
    return export(source, output_dir, format="onnx", kind=kind, **options)


def export_finetuned_with(export_function, finetuned, output_dir, **options):
    """`export_function(output_dir, task, model, tokenizer, preprocessor=..., **options)`
    of a fine-tuned model (the wrappers' helper of the previous release)."""
    from keras_bert_zoo.serving.sources import FinetunedSource

    source = FinetunedSource(finetuned).load()
    return export_function(
        output_dir,
        source.task,
        source.model,
        source.tokenizer,
        preprocessor=source.preprocessor,
        **options,
    )


def export_pretrained_with(export_function, checkpoint_dir, output_dir, kind="encoder", **options):
    """`export_function(output_dir, servable, model, tokenizer, **options)` of a
    pretrained checkpoint (the wrappers' helper of the previous release)."""
    source = _pretrained(checkpoint_dir, options).load(kind)
    return export_function(output_dir, source.task, source.model, source.tokenizer, **options)
