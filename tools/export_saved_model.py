"""Exports a model as a TF Serving SavedModel: raw text in, answers out.

A fine-tuned model (the directory tools/run_finetuning.py writes: model.keras,
vocab.txt, task.json) becomes EXPORT_BASE/MODEL_NAME/VERSION/ with the signatures
serving_default (raw strings -> the task's answers), serve_ids (ids -> raw head
outputs) and, for label or score answers, serve_examples (TF Serving's Classify /
Regress APIs), warmup records and the list of tensorflow-text ops the server needs.
A pretrained checkpoint exports as an encoder or a masked LM the same way, or as a
TF Hub style preprocessor + encoder pair.

--format=litert writes OUTPUT_DIR/model.tflite (LiteRT: ids in, builtin ops only; with
--raw_text, raw strings in through tensorflow-text's TFLite kernels) and --format=onnx
OUTPUT_DIR/model.onnx (ids in), each with export.json (the sidecar: inputs, outputs,
casing, sequence length, label names) and vocab.txt beside it; --quantize=dynamic_int8
or float16 (LiteRT) shrinks them. saved_model_run.py answers raw text with either.

Usage:
  python tools/export_saved_model.py --finetuned_dir=runs/sst2 --export_base=exports
  python tools/export_saved_model.py --pretrained_dir=uncased_L-12_H-768_A-12 \
      --kind=masked_lm --export_base=exports --model_name=bert_mlm
  python tools/export_saved_model.py --pretrained_dir=uncased_L-12_H-768_A-12 \
      --kind=hub_encoder_pair --output_dir=hub/bert
  python tools/export_saved_model.py --finetuned_dir=runs/sst2 --format=litert \
      --quantize=dynamic_int8 --output_dir=exports/sst2_litert
  python tools/export_saved_model.py --finetuned_dir=runs/sst2 --format=onnx \
      --output_dir=exports/sst2_onnx
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ logs: TF_CPP_MIN_LOG_LEVEL=0

from absl import app, flags  # noqa: E402

from keras_bert_zoo import serving, tasks  # noqa: E402
from keras_bert_zoo.text.tokenizer import DEFAULT_EXPORT_TOKENIZER_OPS, TOKENIZER_OPS  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

KINDS = ("task", "encoder", "masked_lm", "hub_encoder_pair")
FORMATS = ("saved_model", "litert", "onnx")

_FINETUNED_DIR = flags.DEFINE_string(
    "finetuned_dir", None, "A fine-tuned model directory (model.keras, vocab.txt, task.json)."
)
_PRETRAINED_DIR = flags.DEFINE_string(
    "pretrained_dir", None, "A Google or Hugging Face BERT checkpoint directory with vocab.txt."
)
_KIND = flags.DEFINE_enum(
    "kind", None, KINDS, "What to export (default: task with --finetuned_dir, else encoder)."
)
_EXPORT_BASE = flags.DEFINE_string("export_base", None, "TF Serving base directory.")
_MODEL_NAME = flags.DEFINE_string(
    "model_name", None, "Model directory under --export_base (default: the task name)."
)
_VERSION = flags.DEFINE_integer("version", None, "Version number (default: highest + 1).")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing version directory.")
_WARMUP_FILE = flags.DEFINE_string(
    "warmup_file",
    None,
    "UTF-8 TSV of warmup rows, one text field per column in the task's order "
    "(default: built-in texts).",
)
_MAX_SEQ_LENGTH = flags.DEFINE_integer(
    "max_seq_length", 128, "Packed length (pretrained kinds; a task keeps its own)."
)
_TOP_K = flags.DEFINE_integer("top_k", 5, "masked_lm: fill-ins per [MASK].")
_TEXT_FIELDS = flags.DEFINE_list(
    "text_fields", ["sentence"], "encoder / masked_lm: names of the 1-3 text inputs."
)
_ALLOW_PARTIAL = flags.DEFINE_bool(
    "allow_partial", False, "masked_lm: accept a checkpoint without MLM head (left random)."
)
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "hub_encoder_pair, --format=litert|onnx: the output directory."
)
_FORMAT = flags.DEFINE_enum(
    "format",
    "saved_model",
    FORMATS,
    "saved_model: a TF Serving SavedModel (raw text in); litert: a LiteRT .tflite (ids in, "
    "builtin ops only; raw text in with --raw_text); onnx: an ONNX model (ids in). litert "
    "and onnx write --output_dir with the model, export.json and vocab.txt.",
)
_QUANTIZE = flags.DEFINE_enum(
    "quantize",
    "none",
    ["none", "dynamic_int8", "float16"],
    "litert / onnx: none (float32), dynamic_int8 (int8 weights, about a quarter of the "
    "size) or float16 (litert only: float16 weights).",
)
_RAW_TEXT = flags.DEFINE_bool(
    "raw_text",
    False,
    "litert: raw strings in (sentence tasks and encoders; tensorflow-text's FastBertTokenizer "
    "in TFLite custom ops, which the app links) instead of ids.",
)
_PREDICTION_SLOTS = flags.DEFINE_integer(
    "prediction_slots", 20, "litert, masked_lm: the fixed number of [MASK] positions a text."
)
_PRECISION = flags.DEFINE_enum(
    "precision",
    "float32",
    ["auto", "float32", "bfloat16"],
    "Precision the export computes in: bfloat16 stores the encoder's weights in bfloat16 "
    "and runs its matmuls in bfloat16; auto picks bfloat16 on a GPU or a CPU with AMX / "
    "AVX512_BF16, float32 elsewhere.",
)
_PADDING_FREE = flags.DEFINE_enum(
    "padding_free",
    "auto",
    ["auto", "on", "off"],
    "Classifiers, regressors and multiple choice: run the encoder on the real tokens of a "
    "request only (faster batches of mixed lengths; a single request runs the padded "
    "graph); auto: on for those models, off for the others.",
)
_TOKENIZER_OPS = flags.DEFINE_enum(
    "tokenizer_ops",
    DEFAULT_EXPORT_TOKENIZER_OPS,
    list(TOKENIZER_OPS),
    "Ops of the exported tokenizer: core (core TensorFlow only, so the export loads "
    "where tensorflow-text is not installed) or tensorflow_text (its WordPiece kernels). "
    "Both give the same tokens.",
)


def _warmup_rows(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip("\n")]
    if not rows:
        raise ValueError(f"--warmup_file={path}: no rows")
    return rows


def _pretrained_options():
    """The flags of a pretrained export, in every format."""
    return {
        "max_seq_length": _MAX_SEQ_LENGTH.value,
        "top_k": _TOP_K.value,
        "text_fields": tuple(_TEXT_FIELDS.value),
        "allow_partial": _ALLOW_PARTIAL.value,
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if bool(_FINETUNED_DIR.value) == bool(_PRETRAINED_DIR.value):
        raise app.UsageError("Give exactly one of --finetuned_dir and --pretrained_dir")
    kind = _KIND.value or ("task" if _FINETUNED_DIR.value else "encoder")
    if (kind == "task") != bool(_FINETUNED_DIR.value):
        raise app.UsageError(f"--kind={kind} goes with --pretrained_dir, task with --finetuned_dir")

    if _FORMAT.value != "saved_model":
        _export_portable(kind)
        return
    if _QUANTIZE.value != "none" or _RAW_TEXT.value:
        raise app.UsageError("--quantize and --raw_text go with --format=litert or onnx")

    if kind == "hub_encoder_pair":
        if not _OUTPUT_DIR.value:
            raise app.UsageError("--kind=hub_encoder_pair needs --output_dir")
        paths = serving.export_pretrained_hub_pair(
            _PRETRAINED_DIR.value,
            _OUTPUT_DIR.value,
            seq_length=_MAX_SEQ_LENGTH.value,
            overwrite=_OVERWRITE.value,
            allow_partial=_ALLOW_PARTIAL.value,
            tokenizer_ops=_TOKENIZER_OPS.value,
        )
        for path in paths:
            print(serving.describe_export(path))
        return

    if not _EXPORT_BASE.value:
        raise app.UsageError("--export_base is required")
    options = {
        "version": _VERSION.value,
        "overwrite": _OVERWRITE.value,
        "tokenizer_ops": _TOKENIZER_OPS.value,
        "precision": _PRECISION.value,
    }
    if kind == "task":
        options["padding_free"] = _PADDING_FREE.value
        finetuned = tasks.load_finetuned(_FINETUNED_DIR.value)
        fields = finetuned.task.text_fields
        if _WARMUP_FILE.value:
            options["warmup_inputs"] = serving.warmup_inputs_from_rows(
                fields, _warmup_rows(_WARMUP_FILE.value), _WARMUP_FILE.value
            )
        exported = serving.export_finetuned(
            finetuned, _EXPORT_BASE.value, _MODEL_NAME.value, **options
        )
    else:
        if not _MODEL_NAME.value:
            raise app.UsageError(f"--kind={kind} needs --model_name")
        if _WARMUP_FILE.value:
            options["warmup_inputs"] = serving.warmup_inputs_from_rows(
                _TEXT_FIELDS.value, _warmup_rows(_WARMUP_FILE.value), _WARMUP_FILE.value
            )
        exported = serving.export_pretrained(
            _PRETRAINED_DIR.value,
            _EXPORT_BASE.value,
            _MODEL_NAME.value,
            kind,
            **_pretrained_options(),
            **options,
        )
    print(f"exported version {exported.version} to {exported.path}")
    print(serving.describe_export(exported.path))


def _export_portable(kind):
    """--format=litert|onnx: one directory with the model file, its sidecar and vocab."""
    from keras_bert_zoo.serving import litert, onnx_export

    if kind == "hub_encoder_pair":
        raise app.UsageError(f"--kind=hub_encoder_pair has no --format={_FORMAT.value} export")
    saved_model_flags = (
        _EXPORT_BASE,
        _MODEL_NAME,
        _VERSION,
        _WARMUP_FILE,
        _PRECISION,
        _PADDING_FREE,
        _TOKENIZER_OPS,
    )
    given = [f"--{holder.name}" for holder in saved_model_flags if holder.present]
    if given:
        raise app.UsageError(
            f"{', '.join(given)}: SavedModel flags, not for --format={_FORMAT.value}"
        )
    if not _OUTPUT_DIR.value:
        raise app.UsageError(f"--format={_FORMAT.value} needs --output_dir")
    if _RAW_TEXT.value and _FORMAT.value != "litert":
        raise app.UsageError("--raw_text goes with --format=litert (ONNX takes ids)")
    options = {"quantize": _QUANTIZE.value, "overwrite": _OVERWRITE.value}
    if _FORMAT.value == "litert":
        options["raw_text"] = _RAW_TEXT.value
        options["prediction_slots"] = _PREDICTION_SLOTS.value
        finetuned, pretrained = litert.export_finetuned_litert, litert.export_pretrained_litert
    else:
        finetuned, pretrained = (
            onnx_export.export_finetuned_onnx,
            onnx_export.export_pretrained_onnx,
        )
    if kind == "task":
        exported = finetuned(_FINETUNED_DIR.value, _OUTPUT_DIR.value, **options)
    else:
        exported = pretrained(
            _PRETRAINED_DIR.value,
            _OUTPUT_DIR.value,
            kind,
            **_pretrained_options(),
            **options,
        )
    print(f"exported {_FORMAT.value} to {exported.model_path}")
    print(serving.describe_portable(exported.path))


def run():
    """The console script `keras-bert-zoo-export-saved-model`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
