"""Deprecated module path (one release, with a `DeprecationWarning`): the LiteRT format is
`formats/litert.py`; `export_litert` and its `_finetuned_` / `_pretrained_` forms are
`serving.export(source, output_dir, format="litert")`."""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__, ["keras_bert_zoo.serving.formats.litert", "keras_bert_zoo.serving.deprecated"]
)
