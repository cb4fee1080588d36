"""Deprecated: the layout of a packed batch is `keras_bert_zoo.models.sequence_packing.batch`.

Its names still resolve here for one release, with a `DeprecationWarning`.
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(__name__, ["keras_bert_zoo.models.sequence_packing.batch"])
