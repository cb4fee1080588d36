"""Deprecated module path: the TF Hub style pair moved to `formats/hub_pair.py`, and
`export_hub_encoder_pair`, `export_pretrained_hub_pair` became `serving.export(source,
output_dir, kind="hub_encoder_pair")` (or `format="hub_pair"`; the old functions in
`deprecated.py`). The old names keep working for one release, with a
`DeprecationWarning`."""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    [
        "keras_bert_zoo.serving.layout",
        "keras_bert_zoo.serving.formats.hub_pair",
        "keras_bert_zoo.serving.deprecated",
    ],
)
