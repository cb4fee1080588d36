"""keras_bert_zoo: BERT for TensorFlow and Keras 3.

The public API: configs and presets, the encoder and task models, and
`from_pretrained` for Google and Hugging Face checkpoints. Text processing lives in
`keras_bert_zoo.text`, input pipelines in `keras_bert_zoo.data`.
"""

from keras_bert_zoo.utils import quiet_import as _quiet_import

if _quiet_import.wants_quiet_import():
    _quiet_import.import_tensorflow_quietly()

from keras_bert_zoo.checkpoints import CheckpointError, from_pretrained, save_pretrained  # noqa: E402
from keras_bert_zoo.config import PRESETS, BertConfig, list_presets  # noqa: E402
from keras_bert_zoo.models import (  # noqa: E402
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
    PaddingFreeEncoder,
)

__all__ = [
    "PRESETS",
    "BertClassifier",
    "BertConfig",
    "BertEncoder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanLabeler",
    "BertTokenClassifier",
    "CheckpointError",
    "PaddingFreeEncoder",
    "from_pretrained",
    "list_presets",
    "save_pretrained",
]
