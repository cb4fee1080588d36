"""Loaded once by the forkserver that forks the pretraining-data workers.

Every worker needs TensorFlow, this package and the tokenizer's Unicode tables; loading
them here (imports and pure-Python tables only, no TensorFlow op, so no runtime thread
exists at fork time) saves each worker several CPU seconds of start-up.
"""

from keras_bert_zoo.utils import quiet_import

if quiet_import.wants_quiet_import():
    quiet_import.import_tensorflow_quietly()
import tensorflow  # noqa: E402, F401

from keras_bert_zoo.pretraining import creator  # noqa: E402, F401
from keras_bert_zoo.text import (  # noqa: E402
    tokenizer,  # noqa: F401
    unicode_tables,
)

# The tokenizer's pure-Python Unicode tables (cached per process). Not
# `lowercase_fixups()`: it runs a TensorFlow op, which would start the runtime here.
unicode_tables.unicode_tables()
