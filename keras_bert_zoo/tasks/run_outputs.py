"""Deprecated: what a fine-tuning run reads and writes moved to
`keras_bert_zoo.runners.run_outputs` (it reads the runners' configs); the `.keras`
archive comparison to `keras_bert_zoo.utils.keras_archive`.

The old names keep working for one release, with a `DeprecationWarning`.
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(__name__, ["keras_bert_zoo.runners.run_outputs"])
