"""Serving: exports that TF Serving, LiteRT and ONNX Runtime load, raw text in and
answers out.

* `export(source, output, format=..., kind=..., **options)`: the one entry point
  (`registry.py`). The source is a fine-tuned directory (or `FinetunedSource`), a
  `PretrainedSource` (a checkpoint as an encoder, a masked LM or a TF Hub style pair's
  encoder) or a `ModelSource` (a model in memory with its task and tokenizer);
  `sources.py`. The formats (`formats/`), each an `Exporter` that builds and verifies:
  - `saved_model`: one TF Serving SavedModel version (`EXPORT_BASE/MODEL_NAME/VERSION/`)
    with `serving_default` (raw strings -> answers), `serve_ids` (ids -> raw head
    outputs) and, for a task that declares a `serving_api`, `serve_examples` (TF
    Serving's Classify/Regress APIs); warmup records, the op manifest and the export
    description in `assets.extra/`;
  - `hub_pair` (`--format=saved_model --kind=hub_encoder_pair`): TF Hub style
    preprocessor + encoder SavedModels (`is_hub_pair` tells such a directory);
  - `litert`: a LiteRT `.tflite` (ids in, builtin ops only; or raw text in with
    tensorflow-text's TFLite kernels), and `onnx`: an ONNX model (ids in), each in a
    directory with its sidecar (`portable.py`).
  A new format is an `Exporter` subclass registered with `register` (or a line of
  `formats/__init__.py`, or an entry point of the group `keras_bert_zoo.serving.formats`).
* `load_served_model`, `load_portable_model`: an export loaded back, answering raw text
  (`loading.py`); `export_and_answer`, `describe_export`, `describe_portable`: what the
  tools print (`client.py`).
* `EncoderServable`, `MaskedLMServable`: serve a pretrained `BertEncoder` /
  `BertPretrainer` as a task is served (`servables.py`).
* `ops`: the ops outside core TensorFlow an export needs, recorded and checked.

The export functions of the previous release (`export_saved_model`,
`export_finetuned`, `export_litert`, ...) keep working for one release, with a
`DeprecationWarning` (`deprecated.py`).
"""

# `export`, `hub`, `litert`, `onnx_export`: the deprecated module paths, shims for one
# release. Importing the module `serving.export` binds the package's attribute `export`
# to it, so that module is callable as the function `registry.export` (see export.py).
from keras_bert_zoo.serving import (  # noqa: F401
    export,
    hub,
    litert,
    native,
    onnx_export,
    ops,
    portable,
    signatures,
    warmup,
)
from keras_bert_zoo.serving.client import (
    describe_export,
    describe_portable,
    export_and_answer,
    format_answers,
    resolve_version_dir,
)
from keras_bert_zoo.serving.common import (
    DEFAULT_WARMUP_TEXTS,
    OUTPUT_DIR,
    OVERWRITE,
    VERIFY,
    ExportVerificationError,
    publish_directory,
    reference_run,
    serving_preprocessor,
    warmup_inputs_from_rows,
)
from keras_bert_zoo.serving.exporter import Exporter, Option, OptionError
from keras_bert_zoo.serving.formats.hub_pair import HubPairExport
from keras_bert_zoo.serving.formats.saved_model import ExportedModel, next_version
from keras_bert_zoo.serving.layout import (
    existing_versions,
    is_hub_pair,
    is_portable_export,
    read_export_description,
)
from keras_bert_zoo.serving.loading import (
    PortableModel,
    ServedModel,
    load_portable_model,
    load_served_model,
)
from keras_bert_zoo.serving.portable import ConversionError, PortableExport
from keras_bert_zoo.serving.registry import (
    exporter_for,
    exporters,
    formats,
    register,
)
from keras_bert_zoo.serving.servables import (
    EncoderServable,
    MaskedLMServable,
    MaskedTextPreprocessor,
)
from keras_bert_zoo.serving.signatures import signature_schema
from keras_bert_zoo.serving.sources import FinetunedSource, ModelSource, PretrainedSource
from keras_bert_zoo.utils.deprecation import moved_names

__all__ = [
    "ConversionError",
    "DEFAULT_WARMUP_TEXTS",
    "EncoderServable",
    "ExportVerificationError",
    "ExportedModel",
    "Exporter",
    "FinetunedSource",
    "HubPairExport",
    "MaskedLMServable",
    "MaskedTextPreprocessor",
    "ModelSource",
    "OUTPUT_DIR",
    "OVERWRITE",
    "Option",
    "OptionError",
    "PortableExport",
    "PortableModel",
    "PretrainedSource",
    "ServedModel",
    "VERIFY",
    "describe_export",
    "describe_portable",
    "existing_versions",
    "export",
    "export_and_answer",
    "exporter_for",
    "exporters",
    "format_answers",
    "formats",
    "is_hub_pair",
    "is_portable_export",
    "load_portable_model",
    "load_served_model",
    "native",
    "next_version",
    "ops",
    "portable",
    "publish_directory",
    "read_export_description",
    "reference_run",
    "register",
    "resolve_version_dir",
    "serving_preprocessor",
    "signature_schema",
    "signatures",
    "warmup",
    "warmup_inputs_from_rows",
]

# The export functions of the previous release: `export` takes every source.
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.serving.deprecated"],
    only=[
        "export_saved_model",
        "export_finetuned",
        "export_pretrained",
        "export_hub_encoder_pair",
        "export_pretrained_hub_pair",
        "export_litert",
        "export_finetuned_litert",
        "export_pretrained_litert",
        "export_onnx",
        "export_finetuned_onnx",
        "export_pretrained_onnx",
    ],
)
