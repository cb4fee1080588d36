"""The one table of BERT weight names: ours, google-research/bert's and Hugging Face's.

Inside keras_bert_zoo a weight has one name, its *canonical* name, which is the Keras
variable path of our models (`transformer_layer_0/attention/query/kernel`,
`masked_lm_head/output_bias`, ...). Checkpoint files use other names and other shapes;
this module is the only place that knows them. Every row of the table gives:

- the canonical name,
- the attribute path of the variable on the model (`transformer_layers[0].attention.query.kernel`),
- the google-research/bert TF1 variable name,
- the Hugging Face `BertModel` / `BertForPreTraining` state-dict name (without the `bert.`
  prefix; `huggingface.py` adds or strips it),
- the layout: how our array is reshaped/transposed into each format.

Layouts (ours -> Google, ours -> Hugging Face):

| layout            | ours              | Google             | Hugging Face (Linear is [out, in]) |
|-------------------|-------------------|--------------------|------------------------------------|
| `same`            | any               | same               | same                               |
| `dense_kernel`    | [in, out]         | [in, out]          | [out, in]                          |
| `qkv_kernel`      | [H, heads, size]  | [H, heads*size]    | [heads*size, H]                    |
| `qkv_bias`        | [heads, size]     | [heads*size]       | [heads*size]                       |
| `attention_out`   | [heads, size, H]  | [heads*size, H]    | [H, heads*size]                    |
| `output_weights`  | [H, classes]      | [classes, H]       | [classes, H]                       |

`output_weights` is the Dense kernel of a classification-style head, which both
google-research/bert (`output_weights`, `cls/seq_relationship/output_weights`,
`cls/squad/output_weights`) and Hugging Face (`nn.Linear`) store transposed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

import numpy as np

from keras_bert_zoo.models.head_model import MASKED_LM, OUTPUT_DENSE, HeadCheckpointNames
from keras_bert_zoo.utils.errors import UserError

GOOGLE = "google"
HUGGINGFACE = "huggingface"
FORMATS = (GOOGLE, HUGGINGFACE)

SAME = "same"
DENSE_KERNEL = "dense_kernel"
QKV_KERNEL = "qkv_kernel"
QKV_BIAS = "qkv_bias"
ATTENTION_OUT = "attention_out"
OUTPUT_WEIGHTS = "output_weights"


class CheckpointError(UserError):
    """A checkpoint cannot be read, or does not match the model it is loaded into."""


@dataclasses.dataclass(frozen=True)
class WeightName:
    """One row of the naming table, resolved for a layer index.

    Attributes:
        name: canonical name (our Keras variable path).
        attribute: attribute path of the variable from the owner (the encoder for
            encoder weights, the task model for head weights).
        google: google-research/bert TF1 variable name.
        huggingface: Hugging Face state-dict name, without the `bert.` prefix.
        layout: one of the layouts of the module docstring (`SAME`, `DENSE_KERNEL`, ...).
        owner: `"encoder"` or the head's attribute (`"masked_lm_head"`, ...).
    """

    name: str
    attribute: str
    google: str
    huggingface: str
    layout: str
    owner: str

    def source_name(self, fmt: str) -> str:
        return self.google if fmt == GOOGLE else self.huggingface


# === The table ===
# (canonical name, attribute path, Google name, Hugging Face name, layout)
_EMBEDDING_ROWS = (
    (
        "embeddings/word_embeddings/embeddings",
        "embeddings.word_embeddings.embeddings",
        "bert/embeddings/word_embeddings",
        "embeddings.word_embeddings.weight",
        SAME,
    ),
    (
        "embeddings/token_type_embeddings/embeddings",
        "embeddings.token_type_embeddings.embeddings",
        "bert/embeddings/token_type_embeddings",
        "embeddings.token_type_embeddings.weight",
        SAME,
    ),
    (
        "embeddings/position_embeddings",
        "embeddings.position_embeddings",
        "bert/embeddings/position_embeddings",
        "embeddings.position_embeddings.weight",
        SAME,
    ),
    (
        "embeddings/layer_norm/gamma",
        "embeddings.layer_norm.gamma",
        "bert/embeddings/LayerNorm/gamma",
        "embeddings.LayerNorm.weight",
        SAME,
    ),
    (
        "embeddings/layer_norm/beta",
        "embeddings.layer_norm.beta",
        "bert/embeddings/LayerNorm/beta",
        "embeddings.LayerNorm.bias",
        SAME,
    ),
)

# `{i}` is the layer index.
_LAYER_ROWS = tuple(
    row
    for projection in ("query", "key", "value")
    for row in (
        (
            f"transformer_layer_{{i}}/attention/{projection}/kernel",
            f"transformer_layers[{{i}}].attention.{projection}.kernel",
            f"bert/encoder/layer_{{i}}/attention/self/{projection}/kernel",
            f"encoder.layer.{{i}}.attention.self.{projection}.weight",
            QKV_KERNEL,
        ),
        (
            f"transformer_layer_{{i}}/attention/{projection}/bias",
            f"transformer_layers[{{i}}].attention.{projection}.bias",
            f"bert/encoder/layer_{{i}}/attention/self/{projection}/bias",
            f"encoder.layer.{{i}}.attention.self.{projection}.bias",
            QKV_BIAS,
        ),
    )
) + (
    (
        "transformer_layer_{i}/attention/attention_output/kernel",
        "transformer_layers[{i}].attention.attention_output.kernel",
        "bert/encoder/layer_{i}/attention/output/dense/kernel",
        "encoder.layer.{i}.attention.output.dense.weight",
        ATTENTION_OUT,
    ),
    (
        "transformer_layer_{i}/attention/attention_output/bias",
        "transformer_layers[{i}].attention.attention_output.bias",
        "bert/encoder/layer_{i}/attention/output/dense/bias",
        "encoder.layer.{i}.attention.output.dense.bias",
        SAME,
    ),
    (
        "transformer_layer_{i}/attention_layer_norm/gamma",
        "transformer_layers[{i}].attention_layer_norm.gamma",
        "bert/encoder/layer_{i}/attention/output/LayerNorm/gamma",
        "encoder.layer.{i}.attention.output.LayerNorm.weight",
        SAME,
    ),
    (
        "transformer_layer_{i}/attention_layer_norm/beta",
        "transformer_layers[{i}].attention_layer_norm.beta",
        "bert/encoder/layer_{i}/attention/output/LayerNorm/beta",
        "encoder.layer.{i}.attention.output.LayerNorm.bias",
        SAME,
    ),
    (
        "transformer_layer_{i}/intermediate_dense/kernel",
        "transformer_layers[{i}].intermediate_dense.kernel",
        "bert/encoder/layer_{i}/intermediate/dense/kernel",
        "encoder.layer.{i}.intermediate.dense.weight",
        DENSE_KERNEL,
    ),
    (
        "transformer_layer_{i}/intermediate_dense/bias",
        "transformer_layers[{i}].intermediate_dense.bias",
        "bert/encoder/layer_{i}/intermediate/dense/bias",
        "encoder.layer.{i}.intermediate.dense.bias",
        SAME,
    ),
    (
        "transformer_layer_{i}/output_dense/kernel",
        "transformer_layers[{i}].output_dense.kernel",
        "bert/encoder/layer_{i}/output/dense/kernel",
        "encoder.layer.{i}.output.dense.weight",
        DENSE_KERNEL,
    ),
    (
        "transformer_layer_{i}/output_dense/bias",
        "transformer_layers[{i}].output_dense.bias",
        "bert/encoder/layer_{i}/output/dense/bias",
        "encoder.layer.{i}.output.dense.bias",
        SAME,
    ),
    (
        "transformer_layer_{i}/output_layer_norm/gamma",
        "transformer_layers[{i}].output_layer_norm.gamma",
        "bert/encoder/layer_{i}/output/LayerNorm/gamma",
        "encoder.layer.{i}.output.LayerNorm.weight",
        SAME,
    ),
    (
        "transformer_layer_{i}/output_layer_norm/beta",
        "transformer_layers[{i}].output_layer_norm.beta",
        "bert/encoder/layer_{i}/output/LayerNorm/beta",
        "encoder.layer.{i}.output.LayerNorm.bias",
        SAME,
    ),
)

_POOLER_ROWS = (
    (
        "pooler_dense/kernel",
        "pooler_dense.kernel",
        "bert/pooler/dense/kernel",
        "pooler.dense.weight",
        DENSE_KERNEL,
    ),
    (
        "pooler_dense/bias",
        "pooler_dense.bias",
        "bert/pooler/dense/bias",
        "pooler.dense.bias",
        SAME,
    ),
)

# Heads: each task model declares its heads (`models.HeadCheckpointNames`: attribute,
# kind, Google scope, Hugging Face scope); these are the rows of each kind, relative to
# those. `{head}` is the attribute, `{google}` and `{hf}` the scopes.
_HEAD_KIND_ROWS = {
    OUTPUT_DENSE: (
        (
            "{head}/output_dense/kernel",
            "{head}.output_dense.kernel",
            "{google}output_weights",
            "{hf}.weight",
            OUTPUT_WEIGHTS,
        ),
        (
            "{head}/output_dense/bias",
            "{head}.output_dense.bias",
            "{google}output_bias",
            "{hf}.bias",
            SAME,
        ),
    ),
    MASKED_LM: (
        (
            "{head}/transform_dense/kernel",
            "{head}.transform_dense.kernel",
            "{google}transform/dense/kernel",
            "{hf}.transform.dense.weight",
            DENSE_KERNEL,
        ),
        (
            "{head}/transform_dense/bias",
            "{head}.transform_dense.bias",
            "{google}transform/dense/bias",
            "{hf}.transform.dense.bias",
            SAME,
        ),
        (
            "{head}/transform_layer_norm/gamma",
            "{head}.transform_layer_norm.gamma",
            "{google}transform/LayerNorm/gamma",
            "{hf}.transform.LayerNorm.weight",
            SAME,
        ),
        (
            "{head}/transform_layer_norm/beta",
            "{head}.transform_layer_norm.beta",
            "{google}transform/LayerNorm/beta",
            "{hf}.transform.LayerNorm.bias",
            SAME,
        ),
        ("{head}/output_bias", "{head}.output_bias", "{google}output_bias", "{hf}.bias", SAME),
    ),
}

# Hugging Face duplicates of tied weights: (duplicate, the name it must equal).
HF_TIED_ALIASES = {
    "cls.predictions.decoder.weight": "embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}
# Hugging Face buffers that are not weights.
HF_BUFFERS = ("embeddings.position_ids",)

# google-research/bert training bookkeeping: optimizer slots, step counters, EMA shadows.
_GOOGLE_BOOKKEEPING = re.compile(
    r"(^|/)(adam_m|adam_v|Adam|Adam_\d+|Momentum|RMSProp(_\d+)?|Adagrad|LAMB(_\d+)?"
    r"|ExponentialMovingAverage)$"
    r"|^(global_step|beta1_power|beta2_power|_CHECKPOINTABLE_OBJECT_GRAPH|good_steps"
    r"|current_loss_scale)$"
)


def is_google_bookkeeping(name: str) -> bool:
    """True for optimizer slots and counters that a weight import skips."""
    return bool(_GOOGLE_BOOKKEEPING.search(name))


def _rows_to_names(rows, owner, **fields) -> list[WeightName]:
    return [
        WeightName(*(text.format(**fields) for text in row[:4]), layout=row[4], owner=owner)
        for row in rows
    ]


def encoder_weight_names(num_layers: int) -> list[WeightName]:
    """The encoder's rows for `num_layers` blocks, in checkpoint order."""
    names = _rows_to_names(_EMBEDDING_ROWS, "encoder")
    for layer in range(num_layers):
        names += _rows_to_names(_LAYER_ROWS, "encoder", i=layer)
    return names + _rows_to_names(_POOLER_ROWS, "encoder")


def head_weight_names(head: HeadCheckpointNames) -> list[WeightName]:
    """The rows of one head, as its model declares it."""
    if head.kind not in _HEAD_KIND_ROWS:
        raise ValueError(
            f"Head {head.attribute!r} has kind {head.kind!r}; "
            f"known kinds: {sorted(_HEAD_KIND_ROWS)}"
        )
    return _rows_to_names(
        _HEAD_KIND_ROWS[head.kind],
        head.attribute,
        head=head.attribute,
        google=head.google_scope,
        hf=head.huggingface_scope,
    )


def apply_overrides(
    names: Iterable[WeightName], fmt: str, overrides: Mapping[str, str] | None
) -> list[WeightName]:
    """Replaces the `fmt` source name of rows whose canonical name is in `overrides`."""
    names = list(names)
    if not overrides:
        return names
    known = {w.name for w in names}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UserError(
            f"name_overrides keys must be canonical names of the model's weights; unknown: "
            f"{unknown}. Known: {sorted(known)}"
        )
    field = GOOGLE if fmt == GOOGLE else HUGGINGFACE
    return [
        dataclasses.replace(w, **{field: overrides[w.name]}) if w.name in overrides else w
        for w in names
    ]


# === Layout conversions ===


def _check_format(fmt):
    if fmt not in FORMATS:
        raise UserError(f"format must be one of {FORMATS}, got {fmt!r}")


def _transposed_in(layout, fmt) -> bool:
    if layout == OUTPUT_WEIGHTS:
        return True
    return bool(fmt == HUGGINGFACE and layout in (DENSE_KERNEL, QKV_KERNEL, ATTENTION_OUT))


def _flat_shape(layout, shape) -> tuple[int, ...]:
    """Our shape with the head axes merged (before any transpose)."""
    shape = tuple(int(d) for d in shape)
    if layout == QKV_KERNEL:  # [H, heads, size] -> [H, heads*size]
        return (shape[0], shape[1] * shape[2])
    if layout == QKV_BIAS:  # [heads, size] -> [heads*size]
        return (shape[0] * shape[1],)
    if layout == ATTENTION_OUT:  # [heads, size, H] -> [heads*size, H]
        return (shape[0] * shape[1], shape[2])
    return shape


def source_shape(layout: str, fmt: str, our_shape) -> tuple[int, ...]:
    """The shape a weight of our shape `our_shape` has in a checkpoint of `fmt`."""
    _check_format(fmt)
    flat = _flat_shape(layout, our_shape)
    return flat[::-1] if _transposed_in(layout, fmt) else flat


def to_source(layout: str, fmt: str, array: np.ndarray) -> np.ndarray:
    """Our array -> the array stored in a checkpoint of `fmt`."""
    _check_format(fmt)
    flat = np.reshape(array, _flat_shape(layout, array.shape))
    if _transposed_in(layout, fmt):
        flat = flat.T
    return np.ascontiguousarray(flat)


def from_source(layout: str, fmt: str, array: np.ndarray, our_shape) -> np.ndarray:
    """A checkpoint array of `fmt` -> our array of shape `our_shape`.

    The caller checks `array.shape == source_shape(layout, fmt, our_shape)` first.
    """
    _check_format(fmt)
    if _transposed_in(layout, fmt):
        array = array.T
    return np.ascontiguousarray(np.reshape(array, tuple(int(d) for d in our_shape)))


def resolve_attribute(owner, attribute: str):
    """Follows an attribute path like `transformer_layers[1].attention.query.kernel`."""
    value = owner
    for part in attribute.split("."):
        match = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part)
        value = getattr(value, match.group(1))
        if match.group(2) is not None:
            value = value[int(match.group(2))]
    return value
