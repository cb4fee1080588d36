"""Serving: SavedModels that TF Serving loads, raw text in and answers out.

* `export_saved_model` / `export_finetuned`: one SavedModel version per task model
  (`EXPORT_BASE/MODEL_NAME/VERSION/`) with `serving_default` (raw strings -> answers),
  `serve_ids` (ids -> raw head outputs) and, for a task that declares a
  `serving_api` (`tasks.base.Servable`), `serve_examples` (TF Serving's Classify/Regress
  APIs); warmup records, the op
  manifest and the export description in `assets.extra/` (see `export.py`).
* `EncoderServable`, `MaskedLMServable`: serve a pretrained `BertEncoder` /
  `BertPretrainer` the same way (see `servables.py`).
* `export_hub_encoder_pair`: TF Hub style preprocessor + encoder SavedModels, each with
  its export description and op manifest in `assets.extra/` (`is_hub_pair` tells such
  a directory).
* `load_served_model`, `export_and_answer`: load an export back and query it in raw
  text (see `client.py`).
* `ops`: the ops outside core TensorFlow an export needs, recorded and checked.
* `export_litert` / `export_onnx` (and their `_finetuned_` / `_pretrained_` forms): a
  LiteRT `.tflite` (ids in, builtin ops only; or raw text in with tensorflow-text's
  TFLite kernels) or an ONNX model (ids in) in a directory with its sidecar
  (`litert.py`, `onnx_export.py`, `portable.py`); `load_portable_model` answers raw
  text with one.
"""

from keras_bert_zoo.serving import litert, native, onnx_export, ops, portable, signatures, warmup
from keras_bert_zoo.serving.client import (
    ServedModel,
    describe_export,
    export_and_answer,
    format_answers,
    load_served_model,
    resolve_version_dir,
)
from keras_bert_zoo.serving.export import (
    DEFAULT_WARMUP_TEXTS,
    ExportedModel,
    ExportVerificationError,
    existing_versions,
    export_finetuned,
    export_pretrained,
    export_saved_model,
    next_version,
    read_export_description,
    signature_schema,
    warmup_inputs_from_rows,
)
from keras_bert_zoo.serving.hub import (
    export_hub_encoder_pair,
    export_pretrained_hub_pair,
    is_hub_pair,
)
from keras_bert_zoo.serving.litert import (
    export_finetuned_litert,
    export_litert,
    export_pretrained_litert,
)
from keras_bert_zoo.serving.onnx_export import (
    export_finetuned_onnx,
    export_onnx,
    export_pretrained_onnx,
)
from keras_bert_zoo.serving.portable import (
    ConversionError,
    PortableExport,
    PortableModel,
    describe_portable,
    is_portable_export,
    load_portable_model,
)
from keras_bert_zoo.serving.servables import (
    EncoderServable,
    MaskedLMServable,
    MaskedTextPreprocessor,
)

__all__ = [
    "ConversionError",
    "DEFAULT_WARMUP_TEXTS",
    "EncoderServable",
    "ExportVerificationError",
    "ExportedModel",
    "MaskedLMServable",
    "MaskedTextPreprocessor",
    "PortableExport",
    "PortableModel",
    "ServedModel",
    "describe_export",
    "describe_portable",
    "existing_versions",
    "export_and_answer",
    "export_finetuned",
    "export_finetuned_litert",
    "export_finetuned_onnx",
    "export_hub_encoder_pair",
    "export_litert",
    "export_onnx",
    "export_pretrained",
    "export_pretrained_hub_pair",
    "export_pretrained_litert",
    "export_pretrained_onnx",
    "export_saved_model",
    "format_answers",
    "is_hub_pair",
    "is_portable_export",
    "litert",
    "load_portable_model",
    "load_served_model",
    "native",
    "next_version",
    "onnx_export",
    "ops",
    "portable",
    "read_export_description",
    "resolve_version_dir",
    "signature_schema",
    "signatures",
    "warmup",
    "warmup_inputs_from_rows",
]
