"""LiteRT (TFLite) exports of a task model: ids in with builtin ops only, or raw text in
with tensorflow-text's TFLite kernels.

`LiteRTExporter` (`serving.export(source, output_dir, format="litert")`) writes an
export directory (`portable.py`: `model.tflite`, the sidecar `export.json`,
`vocab.txt`):

* ids in (the default): one signature, `serve_ids`, with the inputs and outputs of the
  SavedModel's `serve_ids` (`input_word_ids`, `input_mask`, `input_type_ids` `[batch,
  length]` int32, both sizes dynamic; the raw head outputs). Builtin ops only: it runs
  on the plain LiteRT / TFLite runtime of Android, iOS and microcontroller-free Linux.
  An app tokenizes with the sidecar's vocabulary and casing (BERT's WordPiece). Every
  family converts: encoder, sentence classification / regression, span (SQuAD),
  tagging, multiple choice, masked LM. The masked LM takes a fixed number of
  `masked_lm_positions` slots (`prediction_slots`, in the sidecar): the converter
  lowers the head's `positions[:, :, None]` only when that size is static.
* raw text in (`raw_text=True`; sentence tasks and the encoder, one or two text
  fields): one signature, `serving_default`, strings in and the SavedModel's
  `serving_default` answers out (`label`, `label_id`, `probabilities`; `score`;
  `pooled_output`, ...). Tokenization is tensorflow-text's `FastBertTokenizer`
  (normalizer + end-to-end WordPiece), trimming its `RoundRobinTrimmer` (for one or two
  segments the same as BERT's longest-first truncation), packing builtin ops. The graph
  holds four custom ops: `FastBertNormalize`, `FastWordpieceTokenizeWithOffsets`,
  `TFText>RoundRobinTrim`, `RaggedTensorToTensor`, which run under
  `InterpreterWithCustomOps(custom_op_registerers=tensorflow_text.tflite_registrar.
  SELECT_TFTEXT_OPS)` in Python, and on a phone with tensorflow-text's TFLite kernels
  linked into the app (docs/serving.md). Its tokens differ from BERT's on a few
  inputs (FastBertTokenizer's normalizer; `benchmarks/litert_tokenization_differences.py`
  counts them by cause).

Quantization (`quantize`): `"none"` (float32), `"dynamic_int8"` (the converter's
dynamic-range quantization: int8 weights, activations quantized on the fly) or
`"float16"` (float16 weights).

Why not Keras' `model.export(format="litert")`: it names its one signature
`serving_default` with positional outputs (`output_0`, ...) and lets the converter fall
back to TensorFlow (Flex) ops, which neither TF's interpreter nor `ai-edge-litert`
ships; the exports here keep `serve_ids`' names and refuse any Flex op.

`loading.load_portable_model` answers raw text with either: an ids-in file through the
sidecar's vocabulary and the task's own serving function.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving import common, layout, portable, signatures
from keras_bert_zoo.serving.exporter import Option
from keras_bert_zoo.serving.formats import int8_rows
from keras_bert_zoo.serving.loading import ModelRunner, litert_interpreter
from keras_bert_zoo.serving.sources import (
    ENCODER,
    MASKED_LM,
    SENTENCE_EMBEDDING,
    TASK,
    task_and_preprocessor,
)
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

IDS_SIGNATURE = signatures.IDS_SIGNATURE
TEXT_SIGNATURE = signatures.DEFAULT_SIGNATURE
# The masked LM's default number of `masked_lm_positions` slots: google-research/bert's
# `max_predictions_per_seq` at sequence length 128.
DEFAULT_PREDICTION_SLOTS = 20

RAW_TEXT = Option(
    "raw_text",
    False,
    "litert: raw strings in (sentence tasks and encoders; tensorflow-text's FastBertTokenizer "
    "in TFLite custom ops, which the app links) instead of ids.",
    type=bool,
)
PREDICTION_SLOTS = Option(
    "prediction_slots",
    DEFAULT_PREDICTION_SLOTS,
    "litert, masked_lm: the fixed number of [MASK] positions a text.",
    type=int,
)


# === Reading a .tflite flatbuffer ===


def flatbuffer_ops(model_content: bytes) -> tuple[list[str], list[str]]:
    """`(builtin op names, custom op names)` a `.tflite` flatbuffer's operator codes list,
    each sorted, read with TensorFlow's TFLite schema. A Flex op is a custom op whose
    name starts with `Flex`."""
    from tensorflow.lite.python import schema_py_generated as schema

    names = {
        value: name
        for name, value in vars(schema.BuiltinOperator).items()
        if not name.startswith("_")
    }
    model = schema.ModelT.InitFromPackedBuf(bytearray(model_content), 0)
    builtins, custom = set(), set()
    for code in model.operatorCodes:
        # Codes above 127 are in `builtinCode`; `deprecatedBuiltinCode` caps at 127.
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        if builtin == schema.BuiltinOperator.CUSTOM:
            custom.add(code.customCode.decode("utf-8"))
        else:
            builtins.add(names.get(builtin, str(builtin)))
    return sorted(builtins), sorted(custom)


def flex_ops(model_content: bytes) -> list[str]:
    """The Flex (TensorFlow fallback) ops of a `.tflite` flatbuffer, sorted."""
    return [name for name in flatbuffer_ops(model_content)[1] if name.startswith("Flex")]


# === Conversion ===


def _converter_for(function, signature: str, saved_model_dir: str, custom_ops: bool):
    """A `TFLiteConverter` of `function` (frozen, named inputs and dict outputs) under
    the signature name `signature`, through a SavedModel: the converter's only way to
    name a signature (`from_concrete_functions` calls a single one `serving_default`)."""
    tf.saved_model.save(tf.Module(), saved_model_dir, signatures={signature: function})
    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=[signature]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    # Raw text: tensorflow-text's ops stay custom ops (their TFLite kernels run them).
    converter.allow_custom_ops = custom_ops
    return converter


def _quantize(converter, quantize: str) -> None:
    if quantize == portable.QUANTIZE_DYNAMIC_INT8:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quantize == portable.QUANTIZE_FLOAT16:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]


def convert(function, signature: str, what: str, quantize: str, custom_ops: bool = False) -> bytes:
    """The `.tflite` flatbuffer of `function`, builtin ops only (plus tensorflow-text's
    kernels with `custom_ops`), checked: no Flex op, and every custom op resolves.

    Raises:
        portable.ConversionError: one line naming `what` and the converter's reason.
    """
    with tempfile.TemporaryDirectory(prefix="litert-") as saved_model_dir:
        converter = _converter_for(function, signature, saved_model_dir, custom_ops)
        _quantize(converter, quantize)
        try:
            content = converter.convert()
        except Exception as error:  # the converter raises several types; one line says why
            raise portable.ConversionError(
                f"{what}: the TFLite converter failed: {_first_reason(error)}"
            ) from error
    flex = flex_ops(content)
    if flex:
        raise portable.ConversionError(f"{what}: the converted graph needs Flex ops {flex}")
    if custom_ops:
        _check_custom_ops_resolve(content, what)
    return content


def _first_reason(error: Exception) -> str:
    """The converter's message reduced to one line: its first `error:` line if any."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line[line.index("error:") + len("error:") :].strip()[:300]
    return (lines[0] if lines else type(error).__name__)[:300]


def _check_custom_ops_resolve(content: bytes, what: str) -> None:
    """A custom op that tensorflow-text's registrar does not provide (a TensorFlow op
    the converter kept as custom) fails when the interpreter prepares it: caught here,
    at export, rather than in an app."""
    with tempfile.NamedTemporaryFile(suffix=".tflite") as f:
        f.write(content)
        f.flush()
        try:
            litert_interpreter(f.name, custom_ops=True).allocate_tensors()
        except RuntimeError as error:
            raise portable.ConversionError(
                f"{what}: the converted graph needs ops tensorflow-text's TFLite kernels "
                f"do not provide: {_first_reason(error)}"
            ) from error


# === Raw text: tensorflow-text's tokenizer, trimming and builtin-op packing ===


def fast_bert_tokenizer(tokenizer):
    """tensorflow-text's `FastBertTokenizer` (int32 ids) closest to `tokenizer`, a
    `BertTokenizer`: its vocabulary, casing and word-length limit."""
    import tensorflow_text as tf_text

    return tf_text.FastBertTokenizer(
        vocab=tokenizer.get_vocabulary(),
        token_out_type=tf.int32,
        unknown_token=tokenizer.unknown_token,
        suffix_indicator=tokenizer.suffix_indicator,
        # FastBertTokenizer counts bytes where BERT counts characters: the byte count
        # of the longest word BERT splits, so no word BERT splits becomes [UNK].
        max_bytes_per_word=4 * tokenizer.max_chars_per_token,
        lower_case_nfd_strip_accents=tokenizer.lowercase,
    )


class FastBertPacker:
    """Raw strings -> `input_word_ids`, `input_mask`, `input_type_ids` (padded to the
    longest packed input, at most `sequence_length`) with ops that have TFLite kernels:
    tensorflow-text's `FastBertTokenizer` and `RoundRobinTrimmer`, then builtin ops.

    `BertPacker`'s packing (`[CLS] A [SEP] B [SEP]`) and truncation: for one or two
    segments BERT's longest-first truncation keeps the same tokens as round robin.
    tensorflow-text's `combine_segments` converts to a `RaggedGather`, which has no
    TFLite kernel, so the segments are laid out here with a cumulative sum and a
    scatter.

    Args:
        tokenizer: the `BertTokenizer` (vocabulary, casing, word length).
        sequence_length: int. Longest packed input.
        segments: int. Text segments (1 or 2).
    """

    def __init__(self, tokenizer, sequence_length: int, segments: int):
        import tensorflow_text as tf_text

        vocabulary = tokenizer.get_vocabulary()
        self._tokenizer = fast_bert_tokenizer(tokenizer)
        self._trimmer = tf_text.RoundRobinTrimmer(max_seq_length=sequence_length - segments - 1)
        self._cls = tokenizer.token_to_id("[CLS]")
        self._sep = tokenizer.token_to_id("[SEP]")
        self._pad = tokenizer.token_to_id("[PAD]") if "[PAD]" in vocabulary else 0

    def __call__(self, inputs):
        segments = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        tokens = self._trimmer.trim([self._tokenizer.tokenize(text) for text in segments])
        batch = tf.shape(segments[0])[0]
        column = tf.ones([batch, 1], tf.int32)
        ids, real, types = [column * self._cls], [column], [column * 0]
        for index, segment in enumerate(tokens):
            dense = segment.to_tensor(default_value=0)
            present = tf.sequence_mask(segment.row_lengths(), tf.shape(dense)[1], tf.int32)
            ids += [dense, column * self._sep]
            real += [present, column]
            types += [present * index, column * index]
        ids, real, types = (tf.concat(parts, axis=1) for parts in (ids, real, types))
        # Each real entry's place in the packed row; the others go to an extra column.
        place = tf.cumsum(real, axis=1) - 1
        length = tf.reduce_max(place[:, -1]) + 1
        place = tf.where(real > 0, place, length)
        rows = tf.broadcast_to(tf.range(batch)[:, tf.newaxis], tf.shape(place))
        indices = tf.stack([rows, place], axis=-1)
        shape = tf.stack([batch, length + 1])

        def laid_out(values, fill):
            return (tf.scatter_nd(indices, values * real - fill * real, shape) + fill)[:, :length]

        return {
            "input_word_ids": laid_out(ids, self._pad),
            "input_mask": laid_out(real, 0),
            "input_type_ids": laid_out(types, 0),
        }


def raw_text_refusal(task, preprocessor) -> str | None:
    """Why `task` (packed by `preprocessor`) has no raw-text LiteRT export, or None."""
    from keras_bert_zoo.text.preprocessor import BertPreprocessor

    what = f"{task.task_name} (raw-text LiteRT)"
    fields = tuple(task.text_fields)
    if type(preprocessor) is not BertPreprocessor:
        return (
            f"{what}: only tasks packed by BertPreprocessor (sentence tasks, the encoder) "
            f"have a raw-text LiteRT export; this one uses {type(preprocessor).__name__}"
        )
    if len(fields) > 2 or (len(fields) == 2 and preprocessor.packer.truncate == "waterfall"):
        return (
            f"{what}: {len(fields)} text fields with {preprocessor.packer.truncate!r} "
            "truncation; tensorflow-text's TFLite trimming matches it for one or two"
        )
    return None


def _raw_text_function(task, model, tokenizer, preprocessor):
    """The raw-text `serving_default` of `task` with `FastBertPacker` in place of the
    task's preprocessor, frozen; or a `ConversionError` naming why the task has none."""
    refusal = raw_text_refusal(task, preprocessor)
    if refusal is not None:
        raise portable.ConversionError(refusal)
    what = f"{task.task_name} (raw-text LiteRT)"
    fields = tuple(task.text_fields)
    packer = FastBertPacker(tokenizer, preprocessor.sequence_length, len(fields))
    answer = task.serving_outputs(model, packer)
    specs = [tf.TensorSpec([None], tf.string, name=field) for field in fields]

    def serve(*texts):
        return signatures._check_outputs(answer(**dict(zip(fields, texts, strict=True))), what)

    concrete = tf.function(serve, autograph=False).get_concrete_function(*specs)
    return portable.frozen_function(concrete, specs), concrete.structured_outputs


# === Export ===


def _ids_function(model, prediction_slots: int):
    """The frozen `serve_ids` function, its inputs' schema and the sidecar's extra keys:
    a masked LM's positions take `prediction_slots` (the converter lowers the head's
    `positions[:, :, None]` only when that size is static)."""
    specs = signatures.model_input_specs(model)
    extra: dict[str, Any] = {}
    if layout.MASKED_LM_POSITIONS in specs:
        specs[layout.MASKED_LM_POSITIONS] = tf.TensorSpec(
            [None, int(prediction_slots)], tf.int32, name=layout.MASKED_LM_POSITIONS
        )
        extra["prediction_slots"] = int(prediction_slots)
    function = portable.ids_function(model, specs)
    outputs = function.get_concrete_function().structured_outputs
    return function, outputs, portable.tensor_schema(specs), extra


def _verify(model_path, sidecar, ids, expected, quantize, what) -> None:
    """The `.tflite` on the reference ids against the Keras model (`check_answers`)."""
    runner = ModelRunner(model_path, sidecar, num_threads=None)
    feed = dict(ids)
    slots = sidecar.get("prediction_slots")
    if slots is not None:
        positions = feed[layout.MASKED_LM_POSITIONS]
        if positions.shape[1] > slots:
            return  # the reference texts hold more masks than slots: nothing to compare
        feed[layout.MASKED_LM_POSITIONS] = np.pad(
            positions, [(0, 0), (0, slots - positions.shape[1])]
        )
    got = runner.run(feed)
    if slots is not None:
        got[layout.MASKED_LM_LOGITS] = got[layout.MASKED_LM_LOGITS][:, : positions.shape[1]]
    portable.check_answers(expected, got, what, exact=quantize == portable.QUANTIZE_NONE)


class LiteRTExporter(portable.PortableExporter):
    """A LiteRT `.tflite` export (see the module docstring).

    Options: `quantize` (`"none"`, `"dynamic_int8"` or `"float16"`), `raw_text`
    (strings in, tensorflow-text custom ops, instead of ids), `prediction_slots` (the
    masked LM's number of `masked_lm_positions`, ids in), `overwrite` and `verify` (run
    the converted model on the ids of the warmup texts and compare with the Keras
    model, float32: 1e-4, quantized: finite answers, before publishing it).

    Raises (from `export`):
        portable.ConversionError: the family has no such export, or the converter
            failed (one line naming the family and the reason).
        FileExistsError: `output_dir` exists and `overwrite` is false.
    """

    name = "litert"
    title = "LiteRT"
    summary = "a LiteRT .tflite (ids in, builtin ops only; raw text in with --raw_text)"
    kinds = (TASK, ENCODER, MASKED_LM, SENTENCE_EMBEDDING)
    options = (
        portable.QUANTIZE,
        RAW_TEXT,
        PREDICTION_SLOTS,
        common.TRUNCATE_DIM,
        common.OVERWRITE,
        common.VERIFY,
    )

    def check(self, values, *, kind, source) -> None:
        """A raw-text export of a task that has none is refused from the task alone,
        before the model loads."""
        if values.get(RAW_TEXT.name):
            described = task_and_preprocessor(source)
            refusal = raw_text_refusal(*described) if described else None
            if refusal is not None:
                raise portable.ConversionError(refusal)

    def export(
        self,
        source,
        output_dir,
        *,
        quantize,
        raw_text,
        prediction_slots,
        truncate_dim,
        overwrite,
        verify,
    ) -> portable.PortableExport:
        task, tokenizer = source.task, source.tokenizer
        model = task.serving_model(source.model, truncate_dim=truncate_dim)
        portable.check_quantize(quantize)
        output_dir, preprocessor, ids, expected, structure = portable.start_export(
            output_dir, overwrite, task, model, tokenizer, source.preprocessor
        )
        what = f"{task.task_name} ({type(source.model).__name__}, LiteRT)"
        extra: dict[str, Any] = {}
        if raw_text:
            function, outputs = _raw_text_function(task, model, tokenizer, preprocessor)
            signature = TEXT_SIGNATURE
            inputs = {field: {"dtype": "string", "shape": [-1]} for field in task.text_fields}
        else:
            # int8: the word embeddings as int8 rows with a scale each (int8_rows.py).
            with int8_rows.tracing_lookup(model, quantize):
                function, outputs, inputs, extra = _ids_function(model, prediction_slots)
            signature = IDS_SIGNATURE
        with stage(logger, "Converting %s to LiteRT (quantize=%s)", what, quantize):
            content = convert(function, signature, what, quantize, custom_ops=raw_text)
        builtin_ops, custom_ops = flatbuffer_ops(content)
        if raw_text:
            import tensorflow_text

            extra["tensorflow_text_version"] = tensorflow_text.__version__
        if truncate_dim is not None:
            extra["truncate_dim"] = truncate_dim
        sidecar = portable.sidecar_description(
            export_format=layout.LITERT_FORMAT,
            input_kind=layout.TEXT_INPUT if raw_text else layout.IDS_INPUT,
            signature=signature,
            task=task,
            tokenizer=tokenizer,
            inputs=inputs,
            outputs=portable.tensor_schema(outputs),
            quantize=quantize,
            keras_outputs=structure,
            builtin_ops=builtin_ops,
            custom_ops=custom_ops,
            **extra,
        )

        def write_model(path):
            with open(path, "wb") as f:
                f.write(content)
            if verify and not raw_text:
                with stage(logger, "Checking the LiteRT model's answers against the model's"):
                    _verify(path, sidecar, ids, expected, quantize, what)

        return portable.write_export(output_dir, write_model, sidecar, tokenizer, overwrite)
