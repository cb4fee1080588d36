"""keras_bert_zoo: BERT for TensorFlow and Keras 3.

The public API: configs and presets, the encoder and task models, and
`from_pretrained` for Google and Hugging Face checkpoints. Text processing lives in
`keras_bert_zoo.text`, input pipelines in `keras_bert_zoo.data`.
"""

from keras_bert_zoo.utils import quiet_import as _quiet_import
from keras_bert_zoo.utils import startup as _startup
from keras_bert_zoo.version import __version__

__all__ = [
    "__version__",
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
    "load_inference_model",
    "load_preprocessor",
    "save_pretrained",
]

# Where each public name lives, for a tool's process (below).
_HOMES = {
    "CheckpointError": "keras_bert_zoo.checkpoints",
    "from_pretrained": "keras_bert_zoo.checkpoints",
    "save_pretrained": "keras_bert_zoo.checkpoints",
    "PRESETS": "keras_bert_zoo.config",
    "BertConfig": "keras_bert_zoo.config",
    "list_presets": "keras_bert_zoo.config",
    "load_inference_model": "keras_bert_zoo.serving.sources",
    "load_preprocessor": "keras_bert_zoo.serving.sources",
}

if _startup.starting_tool() is None:
    # A library user's import (and the tests'): the public API at once, its Keras
    # classes registered for `keras.saving.load_model`.
    if _quiet_import.wants_quiet_import():
        _quiet_import.import_tensorflow_quietly()

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
    from keras_bert_zoo.serving.sources import load_inference_model, load_preprocessor


def __getattr__(name):
    """A public name at its first use, in a process started as one of the tools: there
    the package imports no TensorFlow, so that the tool checks its flags and chooses the
    CPU kernels before TensorFlow loads (`utils.startup`)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES.get(name, "keras_bert_zoo.models")), name)
    globals()[name] = value
    return value
