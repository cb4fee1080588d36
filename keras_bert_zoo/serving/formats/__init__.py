"""The export formats, one module each: it builds and verifies its export, nothing else.

`EXPORTERS` registers them (`registry.py`), in this order: the order of the tool's
`--format` choices, and of the exporters one `--format` holds (`saved_model`: the
SavedModel, then the TF Hub style pair of `--kind=hub_encoder_pair`). A new format is
a module here with its `Exporter` subclass, and a line below; a format of another
package is an entry point of the group `keras_bert_zoo.serving.formats` instead.
"""

EXPORTERS = (
    "keras_bert_zoo.serving.formats.saved_model:SavedModelExporter",
    "keras_bert_zoo.serving.formats.hub_pair:HubPairExporter",
    "keras_bert_zoo.serving.formats.litert:LiteRTExporter",
    "keras_bert_zoo.serving.formats.onnx:OnnxExporter",
)
