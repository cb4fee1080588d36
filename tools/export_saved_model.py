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

The formats, their kinds and their flags are those registered in
keras_bert_zoo.serving (`serving.exporters()`): this tool knows none by name. A format
of another package (an entry point of the group keras_bert_zoo.serving.formats) is a
--format here with its flags.

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

from keras_bert_zoo.utils import extras, startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(
    __file__, kernels=True, extras=[extras.when_flag("format", lambda v: v == "onnx", "onnx")]
)

from absl import app, flags  # noqa: E402

from keras_bert_zoo import serving  # noqa: E402
from keras_bert_zoo.serving import registry  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_FINETUNED_DIR = flags.DEFINE_string(
    "finetuned_dir",
    None,
    "A fine-tuned model directory (model.keras, vocab.txt, task.json), or a fine-tuning "
    "run's --output_dir (its finetuned/).",
)
_PRETRAINED_DIR = flags.DEFINE_string(
    "pretrained_dir",
    None,
    "A Google or Hugging Face BERT checkpoint directory with vocab.txt, or a pretraining "
    "run's --output_dir (its export_google/ or export_huggingface/).",
)
# Each source flag and what it makes of its directory.
_SOURCES = (
    (_FINETUNED_DIR, serving.FinetunedSource),
    (_PRETRAINED_DIR, serving.PretrainedSource),
)
_KIND = flags.DEFINE_enum(
    "kind",
    None,
    list(dict.fromkeys(kind for _, source in _SOURCES for kind in source.kinds)),
    "What to export (default: "
    + ", ".join(f"{source.default_kind} with --{holder.name}" for holder, source in _SOURCES)
    + ").",
)
_FORMAT = flags.DEFINE_enum(
    "format",
    registry.DEFAULT_FORMAT,
    list(serving.formats()),
    "; ".join(f"{name}: {serving.exporter_for(name).summary}" for name in serving.formats()) + ".",
)


def _define(option: serving.Option):
    """The absl flag of an export or source option."""
    if option.choices:
        return flags.DEFINE_enum(option.name, option.default, list(option.choices), option.help)
    define = {
        str: flags.DEFINE_string,
        int: flags.DEFINE_integer,
        bool: flags.DEFINE_bool,
        list: flags.DEFINE_list,
    }[option.type]
    default = list(option.default) if option.type is list else option.default
    return define(option.name, default, option.help)


_SOURCE_OPTIONS = {
    option.name: _define(option) for _, source in _SOURCES for option in source.options
}
_EXPORT_OPTIONS = {option.name: _define(option) for option in registry.flag_options()}
startup.define_onednn_flag()
# Other packages' export formats add flags (entry points): with one installed, the
# command line is checked once the formats are loaded, not before TensorFlow loads.
FLAG_PLUGIN_GROUPS = (registry.ENTRY_POINT_GROUP,)


def _source():
    """The source of the one directory flag given."""
    given = [(holder, source) for holder, source in _SOURCES if holder.value]
    if len(given) != 1:
        names = " and ".join(f"--{holder.name}" for holder, _ in _SOURCES)
        raise app.UsageError(f"Give exactly one of {names}")
    holder, source_class = given[0]
    options = {option.name: _SOURCE_OPTIONS[option.name].value for option in source_class.options}
    return holder, source_class(holder.value, **options)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    startup.log_kernel_choice()
    holder, source = _source()
    kind = _KIND.value or source.default_kind
    if kind not in source.kinds:
        other = next(other for other, cls in _SOURCES if kind in cls.kinds)
        raise app.UsageError(f"--kind={kind} goes with --{other.name}, not --{holder.name}")
    given = [name for name, flag in _EXPORT_OPTIONS.items() if flag.present]
    try:
        exporter = serving.exporter_for(_FORMAT.value, kind)
        values = {
            name: _EXPORT_OPTIONS[name].value
            for name in exporter.option_names()
            if name in _EXPORT_OPTIONS
        }
        registry.check_options(exporter, given, values, kind=kind, source=source)
    except serving.OptionError as error:
        raise app.UsageError(error.as_flags()) from None
    output = values.pop(exporter.output.name)
    exported = serving.export(source, output, format=exporter.name, kind=kind, **values)
    print(exporter.report(exported))


def run():
    """The console script `keras-bert-zoo-export-saved-model`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
