"""Serving: SavedModels that TF Serving loads, raw text in and answers out.

* `export_saved_model` / `export_finetuned`: one SavedModel version per task model
  (`EXPORT_BASE/MODEL_NAME/VERSION/`) with `serving_default` (raw strings -> answers),
  `serve_ids` (ids -> raw head outputs) and, for label or score answers,
  `serve_examples` (TF Serving's Classify/Regress APIs); warmup records, the op
  manifest and the export description in `assets.extra/` (see `export.py`).
* `EncoderServable`, `MaskedLMServable`: serve a pretrained `BertEncoder` /
  `BertPretrainer` the same way (see `servables.py`).
* `export_hub_encoder_pair`: TF Hub style preprocessor + encoder SavedModels.
* `load_served_model`, `export_and_answer`: load an export back and query it in raw
  text (see `client.py`).
* `ops`: the ops outside core TensorFlow an export needs, recorded and checked.
"""

from keras_bert_zoo.serving import ops, signatures, warmup
from keras_bert_zoo.serving.client import ServedModel, export_and_answer, load_served_model
from keras_bert_zoo.serving.export import (
    DEFAULT_WARMUP_TEXTS,
    ExportedModel,
    ExportVerificationError,
    existing_versions,
    export_finetuned,
    export_saved_model,
    next_version,
    read_export_description,
    signature_schema,
)
from keras_bert_zoo.serving.servables import (
    EncoderServable,
    MaskedLMServable,
    MaskedTextPreprocessor,
)

__all__ = [
    "DEFAULT_WARMUP_TEXTS",
    "EncoderServable",
    "ExportVerificationError",
    "ExportedModel",
    "MaskedLMServable",
    "MaskedTextPreprocessor",
    "ServedModel",
    "existing_versions",
    "export_and_answer",
    "export_finetuned",
    "export_saved_model",
    "load_served_model",
    "next_version",
    "ops",
    "read_export_description",
    "signature_schema",
    "signatures",
    "warmup",
]
