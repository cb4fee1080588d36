"""Deprecated: packing datasets is `keras_bert_zoo.data.sequence_packing`; the layout of a
packed batch (`pack_batch`, its keys) is `keras_bert_zoo.models.sequence_packing`.

Its names still resolve here for one release, with a `DeprecationWarning`.
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    [
        "keras_bert_zoo.data.sequence_packing",
        "keras_bert_zoo.models.sequence_packing.batch",
        "keras_bert_zoo.inputs",
    ],
    only=(
        "FIRST_TOKEN_INDEX",
        "MASKED_LM_POSITIONS",
        "PACKED_ROW_KEYS",
        "POSITION_IDS",
        "SEQUENCE_IDS",
        "pack_batch",
        "packed_dataset",
        "packed_dataset_fn",
    ),
)
