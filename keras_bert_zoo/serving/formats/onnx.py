"""ONNX exports of a task model, ids in, through tf2onnx; answered by ONNX Runtime.

`OnnxExporter` (`serving.export(source, output_dir, format="onnx")`) writes an export
directory (`portable.py`: `model.onnx`, the sidecar `export.json`, `vocab.txt`). The
graph's inputs and outputs are those of the SavedModel's `serve_ids` (`input_word_ids`,
`input_mask`, `input_type_ids` int32 `[batch, length]`, both dynamic; the raw head
outputs by name), for every family: encoder, sentence classification / regression, span
(SQuAD), tagging, multiple choice, masked LM. An app tokenizes with the sidecar's
vocabulary and casing. Raw text in has no ONNX export: the tokenizer's string ops, its
int64 hash tables and `UnsortedSegmentMax` have no ONNX form that ONNX Runtime runs.

GELU: TensorFlow computes the exact GELU as `0.5 * x * erfc(-x / sqrt(2))`, and tf2onnx
has no `Erfc` conversion (the op is left as is and ONNX Runtime refuses the graph,
INVALID_GRAPH). The export writes it `0.5 * x * (1 + erf(x / sqrt(2)))` (the identity
`erfc(-z) = 1 + erf(z)`), through tf2onnx's custom-op handler: in the exported graph
only. Not in the Keras model: the erf form moves MiniLM's sequence output by up to
2.5e-5 on real sentences (pooled output 2e-7; float32 rounding of `1 + erf` near -1),
more than the 1e-6 a change of the model may move an answer.

Quantization (`quantize`): `"none"` (float32) or `"dynamic_int8"`, weights in 8 bits,
in two steps of ONNX Runtime's quantization tools (`quantize_dynamic_int8`):
- the embedding tables (`Gather`): `quantize_dynamic`, which stores a Gather's table as
  uint8 with one scale and zero point per table; the gathered rows are dequantized;
- the matmuls with a constant weight: `MatMulNBits` (`MatMulNBitsQuantizer`), int8
  weights with one scale per block of 32 input rows of each output column, computed
  in int8 (`accuracy_level=4`: the activations quantized per block of 32 on the fly).
`MatMulNBits` is an ONNX Runtime contrib op (domain `com.microsoft`): ONNX Runtime runs
the int8 export, another ONNX runtime may not. The float32 export has standard ops only.
On MiniLM's real sentences (mean cosine of the pooled output to float; dev labels of a
sentiment head kept): `quantize_dynamic` on the matmuls too, which quantizes their
activations with one scale per tensor, 0.994; `MatMulNBits` in blocks of 128, 0.9987
and 97% of the labels; in blocks of 32, 0.9995 and all of them (6% slower than blocks
of 128 at batch 1, 10-16% at batch 32). `MatMulNBits` computing in float
(`accuracy_level` 0 or 1) keeps 0.9997 but runs 2.7 times slower than the float32 model
at batch 1.

Why not Keras' `model.export(format="onnx")`: it converts the model's own outputs
(positional, no `serve_ids` names) and keeps `Erfc`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile

import numpy as np

from keras_bert_zoo.serving import common, layout, portable, signatures
from keras_bert_zoo.serving.formats import int8_rows
from keras_bert_zoo.serving.loading import ModelRunner
from keras_bert_zoo.serving.sources import ENCODER, MASKED_LM, SENTENCE_EMBEDDING, TASK
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

ONNX_QUANTIZE_CHOICES = (portable.QUANTIZE_NONE, portable.QUANTIZE_DYNAMIC_INT8)
# ONNX opset of the exported graph: ONNX Runtime 1.16 and later run it.
OPSET = 17


def _erfc_as_erf(ctx, node, name, args):
    """tf2onnx handler of TensorFlow's `Erfc`: `erfc(z) = 1 - erf(z)` (see the module
    docstring: tf2onnx has no conversion of its own, ONNX Runtime no `Erfc`)."""
    import tf2onnx

    dtype = tf2onnx.utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(tf2onnx.utils.make_name(f"{name}_one"), np.array(1, dtype))
    node.type = "Sub"
    node.domain = ""  # the standard ONNX domain, not tf2onnx's custom-op one
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])
    return node


def convert(function, input_specs, what: str) -> bytes:
    """The serialized ONNX model of `function` (frozen ids function, named dict outputs).

    Raises:
        portable.ConversionError: one line naming `what` and tf2onnx's reason.
    """
    import tf2onnx

    # tf2onnx logs each step at INFO (opset, constant folding, optimizer counts).
    tf2onnx_logger = logging.getLogger("tf2onnx")
    level = tf2onnx_logger.level
    tf2onnx_logger.setLevel(logging.WARNING)
    try:
        proto, _ = tf2onnx.convert.from_function(
            function,
            input_signature=list(input_specs),
            opset=OPSET,
            custom_op_handlers={"Erfc": (_erfc_as_erf, [])},
        )
    except Exception as error:  # tf2onnx raises several types; one line says why
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        raise portable.ConversionError(
            f"{what}: tf2onnx failed: {type(error).__name__} {reason}"
        ) from error
    finally:
        tf2onnx_logger.setLevel(level)
    # tf2onnx logs an op it cannot convert and leaves it in the graph as is; ONNX
    # Runtime would refuse the graph later, so it is refused here, by name.
    import onnx

    unsupported = sorted(
        {node.op_type for node in proto.graph.node if not onnx.defs.has(node.op_type, node.domain)}
    )
    if unsupported:
        raise portable.ConversionError(
            f"{what}: ops with no ONNX conversion left in the graph: {unsupported}"
        )
    return proto.SerializeToString()


NBITS_LOGGER = "onnxruntime.quantization.matmul_nbits_quantizer"
# MatMulNBits' block: input rows of a weight column per scale, and activations per scale.
NBITS_BLOCK_SIZE = 32


@contextlib.contextmanager
def _quiet_quantizers():
    """Yields ONNX Runtime's `quantize_dynamic` and `matmul_nbits_quantizer` module,
    the root logger and the quantizer's at ERROR meanwhile; puts back the root logger's
    level and handlers after. The tools log advice and each node they skip (INFO,
    WARNING: nothing for the user of an export to act on), and `matmul_nbits_quantizer`
    calls `logging.basicConfig(level=INFO)` on import, which would print every INFO
    line of the process from then on."""
    root, nbits_logger = logging.getLogger(), logging.getLogger(NBITS_LOGGER)
    handlers, levels = list(root.handlers), (root.level, nbits_logger.level)
    try:
        from onnxruntime.quantization import matmul_nbits_quantizer, quantize_dynamic

        root.setLevel(logging.ERROR)
        nbits_logger.setLevel(logging.ERROR)
        yield quantize_dynamic, matmul_nbits_quantizer
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(levels[0])
        nbits_logger.setLevel(levels[1])


def quantize_dynamic_int8(model_bytes: bytes) -> bytes:
    """`model_bytes` with 8-bit weights (see the module docstring): the embedding tables
    by ONNX Runtime's `quantize_dynamic`, the matmuls as `MatMulNBits` (int8 per block
    of 32, int8 compute)."""
    import onnx
    from onnxruntime.quantization import QuantFormat

    with _quiet_quantizers() as (quantize_dynamic, nbits):
        with tempfile.TemporaryDirectory(prefix="onnx-int8-") as directory:
            source, target = (os.path.join(directory, name) for name in ("f.onnx", "q.onnx"))
            with open(source, "wb") as f:
                f.write(model_bytes)
            # Gather only: quantize_dynamic stores a Gather's table as it does an
            # activation (uint8, one scale per tensor; its weight_type and per_channel
            # do not apply). Not its matmuls: it quantizes their activations per tensor,
            # 0.994 pooled cosine to float on MiniLM; MatMulNBits' per-block int8, 0.9995.
            quantize_dynamic(source, target, op_types_to_quantize=["Gather"])
            model = onnx.load(target)
        config = nbits.DefaultWeightOnlyQuantConfig(
            block_size=NBITS_BLOCK_SIZE,
            is_symmetric=True,
            accuracy_level=4,  # int8 compute, the activations quantized per block
            bits=8,
            quant_format=QuantFormat.QOperator,
            op_types_to_quantize=("MatMul",),
        )
        quantizer = nbits.MatMulNBitsQuantizer(model, algo_config=config)
        quantizer.process()
    # The initializers are in the proto itself (no external data): its bytes are the model.
    return quantizer.model.model.SerializeToString()


class OnnxExporter(portable.PortableExporter):
    """An ONNX export, ids in (see the module docstring).

    Options: `quantize` (`"none"`, float32 and standard ops, or `"dynamic_int8"`,
    8-bit weights: embedding tables uint8 per table by `quantize_dynamic`, matmuls int8
    per block of 32 as ONNX Runtime's `com.microsoft` `MatMulNBits`), `overwrite` and
    `verify` (run the exported model on ONNX Runtime on the ids of the warmup texts and
    compare with the Keras model, float32: 1e-4, quantized: finite answers, before
    publishing it).

    Raises (from `export`):
        portable.ConversionError: the converter failed (one line naming the family).
        FileExistsError: `output_dir` exists and `overwrite` is false.
    """

    name = "onnx"
    title = "ONNX"
    summary = "an ONNX model (ids in)"
    kinds = (TASK, ENCODER, MASKED_LM, SENTENCE_EMBEDDING)
    options = (portable.QUANTIZE, common.TRUNCATE_DIM, common.OVERWRITE, common.VERIFY)
    refusals = {"raw_text": "{raw_text} goes with {format}=litert (ONNX takes ids)"}
    extra = "onnx"

    def check(self, values, *, kind, source) -> None:
        """A quantization ONNX Runtime does not offer (float16) is refused before the
        model loads."""
        quantize = values.get(portable.QUANTIZE.name)
        if quantize not in ONNX_QUANTIZE_CHOICES:
            raise UserError(
                f"ONNX: quantize must be one of {', '.join(ONNX_QUANTIZE_CHOICES)}; "
                f"got {quantize!r}"
            )

    def export(self, source, output_dir, *, quantize, truncate_dim, overwrite, verify):
        task, tokenizer = source.task, source.tokenizer
        model = task.serving_model(source.model, truncate_dim=truncate_dim)
        what = f"{task.task_name} ({type(source.model).__name__}, ONNX)"
        output_dir, _, ids, expected, structure = portable.start_export(
            output_dir, overwrite, task, model, tokenizer, source.preprocessor
        )
        specs = signatures.model_input_specs(model)
        # int8: the word embeddings as int8 rows with a scale each (int8_rows.py).
        with int8_rows.tracing_lookup(model, quantize):
            function = portable.ids_function(model, specs)
        with stage(logger, "Converting %s to ONNX", what):
            content = convert(function, specs.values(), what)
        if quantize == portable.QUANTIZE_DYNAMIC_INT8:
            with stage(logger, "Quantizing the ONNX model's weights to 8 bits"):
                content = quantize_dynamic_int8(content)
        import onnxruntime
        import tf2onnx

        sidecar = portable.sidecar_description(
            export_format=layout.ONNX_FORMAT,
            input_kind=layout.IDS_INPUT,
            signature=signatures.IDS_SIGNATURE,
            task=task,
            tokenizer=tokenizer,
            inputs=portable.tensor_schema(specs),
            outputs=portable.tensor_schema(function.get_concrete_function().structured_outputs),
            quantize=quantize,
            keras_outputs=structure,
            opset=OPSET,
            tf2onnx_version=tf2onnx.__version__,
            onnxruntime_version=onnxruntime.__version__,
            **({} if truncate_dim is None else {"truncate_dim": truncate_dim}),
        )

        def write_model(path):
            with open(path, "wb") as f:
                f.write(content)
            if verify:
                with stage(logger, "Checking the ONNX model's answers against the model's"):
                    got = ModelRunner(path, sidecar, num_threads=None).run(ids)
                    portable.check_answers(
                        expected, got, what, exact=quantize == portable.QUANTIZE_NONE
                    )

        return portable.write_export(output_dir, write_model, sidecar, tokenizer, overwrite)
