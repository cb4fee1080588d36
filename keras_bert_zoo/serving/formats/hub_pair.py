"""An encoder pair in the TF Hub style, for users who compose their own models.

`HubPairExporter` (`serving.export(source, output_dir, kind="hub_encoder_pair")`, or
`format="hub_pair"`) writes two SavedModels:

```
output_dir/preprocessor/   raw text -> encoder inputs
  __call__(text [batch] string) -> {input_word_ids, input_mask, input_type_ids}
                             int32 [batch, seq_length] (one segment; also the
                             `serving_default` signature)
  tokenize(text)           -> int32 RaggedTensor [batch, (word pieces)]
  tokenize.get_special_tokens_dict() -> {vocab_size, start_of_sequence_id,
                             end_of_segment_id, padding_id, mask_id}
  bert_pack_inputs(segments, seq_length)  1-3 ragged segments ([batch, (pieces)] or
                             TF Hub's [batch, (words), (pieces)]) and an int32
                             scalar -> the three inputs [batch, seq_length]
  assets/vocab.txt
  assets.extra/export.json, custom_ops.json   as a task export's (below)
output_dir/encoder/        encoder inputs -> outputs
  __call__({input_word_ids, input_mask, input_type_ids}) -> {sequence_output,
                             pooled_output, encoder_outputs (list, one per
                             block), default (= pooled_output)}
  mlm({... , masked_lm_positions})  (when a BertPretrainer is exported) ->
                             the same plus mlm_logits [batch, positions, vocab]
  variables, trainable_variables
  serving_default signature: the flat outputs (encoder_outputs_0, ...)
  assets.extra/export.json, custom_ops.json
```

Each SavedModel's `assets.extra/` holds what a task export's does (`saved_model.py`):
`custom_ops.json`, the ops outside core TensorFlow it needs, and `export.json`, what
it is (`"kind"`: `"hub_preprocessor"` or `"hub_encoder"`) with its settings (the
preprocessor's tokenizer ops, casing, sequence length and special token ids; the
encoder's model, BERT config and precision) and signatures.
`tools/saved_model_run.py --show_only --saved_model=output_dir` prints both.

Differences from TF Hub's BERT models: `tokenize` returns word pieces without the
word level (`bert_pack_inputs` takes both), and there is no `training` argument
(both models run in inference mode).

Example:

```python
import tensorflow as tf

preprocessor = tf.saved_model.load("hub/preprocessor")
encoder = tf.saved_model.load("hub/encoder")
tokenize = preprocessor.tokenize
inputs = preprocessor.bert_pack_inputs(
    [tokenize(tf.constant(["Who?"])), tokenize(tf.constant(["Ada."]))], tf.constant(64)
)
print(encoder(inputs)["pooled_output"].shape)  # (1, H)
```
"""

from __future__ import annotations

import dataclasses
import logging
import os

import keras
import tensorflow as tf

from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES, MASKED_LM_POSITIONS
from keras_bert_zoo.serving import common, signatures
from keras_bert_zoo.serving.exporter import Exporter
from keras_bert_zoo.serving.layout import (
    ENCODER_DIR,
    HUB_ENCODER,
    HUB_PREPROCESSOR,
    PREPROCESSOR_DIR,
)
from keras_bert_zoo.serving.sources import HUB_ENCODER_PAIR
from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessor import BertPreprocessor
from keras_bert_zoo.text.tokenizer import DEFAULT_EXPORT_TOKENIZER_OPS, check_tokenizer_ops
from keras_bert_zoo.text.tokenizer import tokenizer_ops as tokenizer_ops_of
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

# The preprocessor's packed length when the source gives none.
DEFAULT_SEQ_LENGTH = 128


@dataclasses.dataclass(frozen=True)
class HubPairExport:
    """Where a TF Hub style pair landed.

    Attributes:
        path: the pair's directory.
        preprocessor_path: its `preprocessor/` SavedModel.
        encoder_path: its `encoder/` SavedModel.
    """

    path: str
    preprocessor_path: str
    encoder_path: str

    @property
    def paths(self) -> tuple[str, str]:
        return self.preprocessor_path, self.encoder_path


def _auto_trackable():
    return tf.__internal__.tracking.AutoTrackable()


def _special_tokens(tokenizer) -> dict[str, int]:
    return {
        "vocab_size": tokenizer.vocabulary_size(),
        "start_of_sequence_id": tokenizer.cls_token_id,
        "end_of_segment_id": tokenizer.sep_token_id,
        "padding_id": tokenizer.pad_token_id or 0,
        "mask_id": -1 if tokenizer.mask_token_id is None else tokenizer.mask_token_id,
    }


def build_hub_preprocessor(tokenizer, seq_length: int = 128):
    """The preprocessor object (see the module docstring), ready to save."""
    preprocessor = BertPreprocessor(tokenizer, sequence_length=seq_length)
    packer = BertPacker(
        seq_length,
        start_value=tokenizer.cls_token_id,
        end_value=tokenizer.sep_token_id,
        pad_value=tokenizer.pad_token_id or 0,
    )
    text = tf.TensorSpec([None], tf.string, name="text")

    root = _auto_trackable()
    root.tokenizer = tokenizer
    root.preprocessor = preprocessor
    root.__call__ = tf.function(lambda text: preprocessor(text), input_signature=[text])

    tokenize = _auto_trackable()
    tokenize.__call__ = tf.function(lambda text: tokenizer(text), input_signature=[text])
    special = _special_tokens(tokenizer)
    tokenize.get_special_tokens_dict = tf.function(
        lambda: {key: tf.constant(value, tf.int32) for key, value in special.items()},
        input_signature=[],
    )
    root.tokenize = tokenize

    @tf.function
    def bert_pack_inputs(inputs, seq_length):
        return packer(list(inputs), sequence_length=seq_length)

    length = tf.TensorSpec([], tf.int32, name="seq_length")
    for ragged_rank in (1, 2):
        segment = tf.RaggedTensorSpec([None] + [None] * ragged_rank, tf.int32, ragged_rank)
        for count in (1, 2, 3):
            bert_pack_inputs.get_concrete_function([segment] * count, length)
    root.bert_pack_inputs = bert_pack_inputs
    return root, {"serving_default": root.__call__}


def _encoder_outputs(outputs) -> dict:
    result = {
        "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
        "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]],
    }
    result["default"] = result["pooled_output"]
    return result


def _encoder_and_pretrainer(model):
    """`(encoder, pretrainer or None)` of a `BertEncoder` or a `BertPretrainer`."""
    from keras_bert_zoo.models import BertEncoder, BertPretrainer

    if isinstance(model, BertPretrainer):
        return model.encoder, model
    if isinstance(model, BertEncoder):
        return model, None
    raise TypeError(f"Expected a BertEncoder or BertPretrainer, got {type(model).__name__}")


def build_hub_encoder(model):
    """The encoder object for a `BertEncoder` or a `BertPretrainer` (which adds `mlm`)."""
    encoder, pretrainer = _encoder_and_pretrainer(model)
    ids = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ENCODER_INPUT_NAMES}

    root = _auto_trackable()
    root.__call__ = tf.function(
        lambda inputs: _encoder_outputs(encoder(inputs, training=False)), input_signature=[ids]
    )
    functions = [root.__call__]
    serving = tf.function(
        lambda **inputs: signatures.flatten_outputs(encoder(inputs, training=False)),
        input_signature=None,
    ).get_concrete_function(**ids)
    if pretrainer is not None:

        def mlm(inputs):
            outputs = pretrainer(inputs, training=False)
            result = _encoder_outputs(encoder({k: inputs[k] for k in ENCODER_INPUT_NAMES}))
            result["mlm_logits"] = tf.cast(outputs["masked_lm_logits"], tf.float32)
            return result

        mlm_spec = dict(ids)
        mlm_spec[MASKED_LM_POSITIONS] = tf.TensorSpec(
            [None, None], tf.int32, name=MASKED_LM_POSITIONS
        )
        root.mlm = _auto_trackable()
        root.mlm.__call__ = tf.function(mlm, input_signature=[mlm_spec])
        functions.append(root.mlm.__call__)
    for function in functions:
        function.get_concrete_function()
    variables = signatures.captured_variables(functions)
    trainable = {id(v.value) for v in model.trainable_weights if hasattr(v, "value")}
    # Tracked as the plain tf.Variables the graphs read (see signatures.serving_module).
    root.variables = variables
    root.trainable_variables = [v for v in variables if id(v) in trainable]
    return root, {"serving_default": serving}


def hub_preprocessor_description(tokenizer, seq_length: int, tokenizer_ops: str) -> dict:
    """export.json of the pair's preprocessor (see the module docstring).

    Args:
        tokenizer: the `BertTokenizer` it runs.
        seq_length: int. The packed length of `__call__`.
        tokenizer_ops: str. `"core"` or `"tensorflow_text"`: the ops it tokenizes with.
    """
    return {
        "format_version": common.FORMAT_VERSION,
        "kind": HUB_PREPROCESSOR,
        "text_fields": ["text"],
        "seq_length": int(seq_length),
        "lowercase": bool(tokenizer.lowercase),
        "special_tokens": _special_tokens(tokenizer),
        "tokenizer_ops": tokenizer_ops,
    }


def hub_encoder_description(model) -> dict:
    """export.json of the pair's encoder (see the module docstring).

    Args:
        model: the exported `BertEncoder` or `BertPretrainer`.
    """
    encoder, pretrainer = _encoder_and_pretrainer(model)
    return {
        "format_version": common.FORMAT_VERSION,
        "kind": HUB_ENCODER,
        "model": type(model).__name__,
        "mlm": pretrainer is not None,
        "bert_config": dataclasses.asdict(encoder.bert_config),
        # What its matmuls run in; every output is cast to float32.
        "precision": keras.backend.standardize_dtype(encoder.compute_dtype),
        "padding_free": False,
    }


def _verify(preprocessor_dir, encoder_dir, model, graph, tokenizer, seq_length) -> None:
    """The reloaded pair against the Keras layers on the warmup texts: the
    preprocessor's ids against `BertPreprocessor`'s, the encoder's outputs on them
    against the model's (in bfloat16, against `graph`, the encoder object saved: its
    fused kernels round differently from eager ops, as a SavedModel's do)."""
    texts = tf.constant(list(common.DEFAULT_WARMUP_TEXTS))
    ids = BertPreprocessor(tokenizer, sequence_length=seq_length)(texts)
    encoder, _ = _encoder_and_pretrainer(model)
    if keras.backend.standardize_dtype(encoder.compute_dtype) == "float32":
        want = _encoder_outputs(encoder(ids, training=False))
    else:
        want = graph.__call__(ids)
    keys = ("sequence_output", "pooled_output")
    got = tf.saved_model.load(encoder_dir)(ids)
    problems = common.output_problems(
        common.numpy_outputs(ids),
        common.numpy_outputs(tf.saved_model.load(preprocessor_dir)(texts)),
        "preprocessor",
    ) + common.output_problems(
        {key: want[key].numpy() for key in keys}, {key: got[key].numpy() for key in keys}, "encoder"
    )
    if problems:
        raise common.ExportVerificationError(
            f"{os.path.dirname(encoder_dir)}: the reloaded pair answers differently from the "
            "in-memory model:\n  " + "\n  ".join(problems)
        )


class HubPairExporter(Exporter):
    """The TF Hub style preprocessor + encoder pair of a `BertEncoder` or a
    `BertPretrainer` (which adds `mlm`); see the module docstring. Both SavedModels
    appear at once (one directory rename), after both are loaded back and checked
    against the Keras layers (`verify`). Options: `overwrite` (replace an existing
    `output_dir`), `tokenizer_ops` (the preprocessor's, as a SavedModel's) and
    `verify`; the packed length is the source's `max_seq_length` (default 128).
    """

    name = "hub_pair"
    format = "saved_model"
    title = "TF Hub style pair"
    summary = "a TF Hub style preprocessor + encoder pair of SavedModels"
    kinds = (HUB_ENCODER_PAIR,)
    output = common.OUTPUT_DIR
    options = (common.OVERWRITE, common.TOKENIZER_OPS, common.VERIFY)

    def export(self, source, output_dir, *, overwrite, tokenizer_ops, verify) -> HubPairExport:
        model, tokenizer = source.model, source.tokenizer
        seq_length = source.max_seq_length or DEFAULT_SEQ_LENGTH
        ops_name = check_tokenizer_ops(tokenizer_ops or DEFAULT_EXPORT_TOKENIZER_OPS)
        common.check_new_output(output_dir, overwrite)
        encoder, encoder_signatures = build_hub_encoder(model)
        with (
            tokenizer_ops_of(ops_name, tokenizer),
            common.publish_directory(output_dir, overwrite=overwrite) as temp_dir,
        ):
            preprocessor, preprocessor_signatures = build_hub_preprocessor(tokenizer, seq_length)
            preprocessor_dir = os.path.join(temp_dir, PREPROCESSOR_DIR)
            with stage(logger, "Writing the preprocessor SavedModel (tracing its signatures)"):
                tf.saved_model.save(
                    preprocessor, preprocessor_dir, signatures=preprocessor_signatures
                )
            common.write_export_manifests(
                preprocessor_dir, hub_preprocessor_description(tokenizer, seq_length, ops_name)
            )
            encoder_dir = os.path.join(temp_dir, ENCODER_DIR)
            with stage(logger, "Writing the encoder SavedModel (tracing its signatures)"):
                tf.saved_model.save(encoder, encoder_dir, signatures=encoder_signatures)
            common.write_export_manifests(encoder_dir, hub_encoder_description(model))
            if verify:
                with stage(
                    logger, "Loading the pair back to check its answers against the model's"
                ):
                    _verify(preprocessor_dir, encoder_dir, model, encoder, tokenizer, seq_length)
        path = os.path.abspath(os.fspath(output_dir))
        return HubPairExport(
            path, os.path.join(path, PREPROCESSOR_DIR), os.path.join(path, ENCODER_DIR)
        )

    def report(self, exported: HubPairExport) -> str:
        from keras_bert_zoo.serving.client import describe_export

        return "\n".join(describe_export(path) for path in exported.paths)
