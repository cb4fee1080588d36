"""keras_bert_zoo: BERT for TensorFlow and Keras 3.

The public API: configs and presets, the encoder and task models, and
`from_pretrained` for Google and Hugging Face checkpoints. Text processing lives in
`keras_bert_zoo.text`, input pipelines in `keras_bert_zoo.data`.
"""

from keras_bert_zoo.checkpoints import CheckpointError, from_pretrained, save_pretrained
from keras_bert_zoo.config import PRESETS, BertConfig, list_presets
from keras_bert_zoo.models import (
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
