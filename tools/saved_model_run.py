"""Prints an export's signatures and the ops it needs, and answers raw text with it.

Like `saved_model_cli show` + `run`, but the inputs are strings: each --input gives
one text of a field (repeat a field for a batch), or --input_file a file of rows: TSV
or CSV with the field names on its first line, or JSON lines (one object a line,
{"field": "text"}). It prints each row's answers (probabilities also beside the label
names the export describes), or with --output=json one JSON object a row and nothing
else; --describe prints the export's signatures and ops first, --show_only alone.
An embedding model's export (answer `embedding`) prints each vector's L2 norm and,
after the rows, the matrix of cosines between the inputs (--output=json: the vectors);
--signature=query / document embeds the texts with the export's prompts.
The answers come from the SavedModel loaded with
tf.saved_model.load, or from the C++ TF Serving loader program with --cpp_runner
(build it with --build_cpp_runner=PATH). --saved_model may also name a LiteRT or ONNX
export of export_saved_model.py --format=litert|onnx (its .tflite / .onnx file or its
directory): an ids-in model gets the text tokenized here with the vocabulary and casing
of its sidecar, and answers as the SavedModel's serving_default does.

Usage:
  python tools/saved_model_run.py --saved_model=exports/sst2 \
      --input="sentence=a gripping, funny film" --input="sentence=a tedious mess"
  python tools/saved_model_run.py --saved_model=exports/squad/3 \
      --input="question=Who won?" --input="context=Ada won the race in 1842."
  python tools/saved_model_run.py --saved_model=exports/sst2 --input_file=reviews.csv \
      --output=json
  python tools/saved_model_run.py --saved_model=exports/sst2 --show_only
  python tools/saved_model_run.py --saved_model=exports/minilm \
      --input="sentence=A man is eating food." --input="sentence=A man eats a meal."
  python tools/saved_model_run.py --saved_model=hub/bert --show_only  # a hub pair
  python tools/saved_model_run.py --saved_model=exports/sst2_litert/model.tflite \
      --input="sentence=a gripping, funny film"
"""

import os

from keras_bert_zoo.utils import extras, startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(
    __file__,
    kernels=True,
    extras=[
        extras.when_flag(
            "saved_model", lambda v: v.endswith(".onnx"), "onnx", modules=("onnxruntime",)
        )
    ],
)

from absl import app, flags  # noqa: E402

from keras_bert_zoo import serving  # noqa: E402
from keras_bert_zoo.serving import client, loading  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_SAVED_MODEL = flags.DEFINE_string(
    "saved_model",
    None,
    "A version directory, a model directory (highest version), a TF Hub style pair's "
    "directory (--show_only), or a LiteRT / ONNX export (its .tflite / .onnx file or "
    "directory).",
)
_SIGNATURE = flags.DEFINE_string("signature", "serving_default", "Signature to run.")
_INPUT = flags.DEFINE_multi_string(
    "input", [], "FIELD=TEXT; repeat a field for more rows (in order)."
)
_INPUT_FILE = flags.DEFINE_string(
    "input_file",
    None,
    "UTF-8 rows to answer, by extension: .csv (CSV) or .tsv (TSV), the field names on the "
    'first line; .jsonl (one JSON object a line, {"field": "text"}).',
)
_SHOW_ONLY = flags.DEFINE_bool("show_only", False, "Print the signatures and ops only.")
_DESCRIBE = flags.DEFINE_bool("describe", False, "Print the signatures and ops before the answers.")
_OUTPUT = flags.DEFINE_enum(
    "output",
    "text",
    ["text", "json"],
    "text: a block of `answer: value` lines a row; json: one JSON object a row (the "
    "probabilities as {label: probability}) and nothing else on stdout.",
)
_CPP_RUNNER = flags.DEFINE_string(
    "cpp_runner", None, "Run through this compiled C++ loader program instead of Python."
)
_BUILD_CPP_RUNNER = flags.DEFINE_string(
    "build_cpp_runner", None, "Compile the C++ loader program to this path (g++), then use it."
)
startup.define_onednn_flag()


def _inputs():
    columns = {}
    for item in _INPUT.value:
        field, separator, text = item.partition("=")
        if not separator or not field:
            raise app.UsageError(f"--input={item!r}: expected FIELD=TEXT")
        columns.setdefault(field, []).append(text)
    if _INPUT_FILE.value:
        for field, texts in client.read_requests(_INPUT_FILE.value).items():
            columns.setdefault(field, []).extend(texts)
    lengths = {field: len(values) for field, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise app.UsageError(f"Every field needs the same number of texts: {lengths}")
    return columns


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    startup.log_kernel_choice()
    if not _SAVED_MODEL.value:
        raise app.UsageError("--saved_model is required")
    if serving.is_portable_export(_SAVED_MODEL.value):
        _run_portable(_SAVED_MODEL.value)
        return
    path = serving.resolve_version_dir(_SAVED_MODEL.value)
    if _SHOW_ONLY.value:
        print(serving.describe_export(path))
        return
    if serving.is_hub_pair(path):
        raise app.UsageError(
            f"{path} is a TF Hub style pair: --show_only describes it; this tool answers "
            "requests of task exports only (load the pair with tf.saved_model.load)"
        )
    inputs = _inputs()
    if not inputs:
        raise app.UsageError("Give --input=FIELD=TEXT (or --input_file) to run a request")
    # A request the export cannot take ends in one line, before the description and
    # before anything loads.
    loading.check_request(path, _SIGNATURE.value, inputs)
    _print_header(serving.describe_export(path) if _DESCRIBE.value else f"SavedModel: {path}")
    runner = _CPP_RUNNER.value
    if _BUILD_CPP_RUNNER.value:
        runner = serving.native.compile_runner(_BUILD_CPP_RUNNER.value)
    rows = len(next(iter(inputs.values())))
    _print_header(f"{_gap()}request: {_SIGNATURE.value} on {rows} row(s)")
    if runner:
        manifest = serving.ops.read_op_manifest(path)
        outputs = serving.native.run_saved_model(
            runner,
            path,
            inputs,
            signature=_SIGNATURE.value,
            op_libraries=serving.ops.library_paths(manifest),
        )
        _print_header(f"answered by the C++ loader {runner}")
    else:
        outputs = serving.load_served_model(path, _SIGNATURE.value)(**inputs)
    _print_answers(outputs, client.label_names_of(path))


def _gap() -> str:
    """A blank line between the description (--describe) and the request."""
    return "\n" if _DESCRIBE.value else ""


def _print_header(text: str) -> None:
    """What the text output says before the answers (nothing of it with --output=json)."""
    if _OUTPUT.value == "text":
        print(text)


def _print_answers(outputs, label_names) -> None:
    if _OUTPUT.value == "json":
        for line in client.answers_as_json(outputs, label_names):
            print(line)
    else:
        print(client.format_answers(outputs, label_names=label_names))


def _run_portable(path):
    """A LiteRT / ONNX export: its description, then its answers to the request."""
    if _CPP_RUNNER.value or _BUILD_CPP_RUNNER.value:
        raise app.UsageError("--cpp_runner runs SavedModels; a LiteRT / ONNX export runs here")
    description = serving.describe_portable(path)
    if _SHOW_ONLY.value:
        print(description)
        return
    inputs = _inputs()
    if not inputs:
        raise app.UsageError("Give --input=FIELD=TEXT (or --input_file) to run a request")
    # The same one-line refusal as a SavedModel's, read from the sidecar before the
    # model loads.
    directory, sidecar = loading.resolve_export(path)
    model_path = os.path.join(directory, sidecar["model_file"])
    loading.check_input_names(model_path, "raw text", inputs, sidecar["text_fields"])
    model = serving.load_portable_model(path)
    _print_header(description if _DESCRIBE.value else description.splitlines()[0])
    rows = len(next(iter(inputs.values())))
    _print_header(f"{_gap()}request: {rows} row(s) of raw text")
    _print_answers(model(**inputs), client.label_names_of(path))


def run():
    """The console script `keras-bert-zoo-saved-model-run`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
