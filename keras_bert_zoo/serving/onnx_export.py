"""Deprecated module path: the ONNX format is `formats/onnx.py`, and `export_onnx`,
`export_finetuned_onnx`, `export_pretrained_onnx` are `serving.export(source,
output_dir, format="onnx")` (the old functions in `deprecated.py`). The old names keep
working for one release, with a `DeprecationWarning`."""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__, ["keras_bert_zoo.serving.formats.onnx", "keras_bert_zoo.serving.deprecated"]
)
