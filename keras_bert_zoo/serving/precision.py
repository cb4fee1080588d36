"""The precision an export computes in: float32, or bfloat16 where the hardware has it.

`serving.export(..., precision=...)` and `tools/export_saved_model.py
--precision=auto|float32|bfloat16`. `"bfloat16"` serves a copy of the model whose
`BertEncoder` runs under the `bfloat16` policy and everything else under
`mixed_bfloat16`: the encoder's weights are stored in bfloat16 (the float32 values
rounded once, at export) and its matmuls run in bfloat16, while LayerNorm's moments,
the attention softmax and every head's logits stay float32 (those layers cast for
them). Under `mixed_bfloat16` alone each call would cast every float32 kernel to
bfloat16 again: for MiniLM's 21M encoder weights that was ~3 ms of a ~10 ms batch-1
call, and stored bfloat16 weights ran the encoder 1.2-1.4x faster
(`benchmarks/encoder_throughput.py --reviews`: 193 -> 267 seq/s as a graph, 239 -> 329
padding-free). `"auto"` picks bfloat16 where it is native: a GPU, or a CPU with AMX or
AVX512_BF16, whose oneDNN kernels run bfloat16 matmuls about twice as fast as float32
ones; elsewhere a CPU emulates bfloat16 and float32 is faster, so `"auto"` stays
float32. The export records the precision it holds in `export.json`.
"""

from __future__ import annotations

import copy

import keras
import tensorflow as tf

from keras_bert_zoo.models.encoder import BertEncoder
from keras_bert_zoo.utils import cpu_kernels
from keras_bert_zoo.utils.errors import UserError

FLOAT32 = "float32"
BFLOAT16 = "bfloat16"
AUTO = "auto"
PRECISIONS = (AUTO, FLOAT32, BFLOAT16)
# CPU flags (/proc/cpuinfo, Linux's names) of native bfloat16 arithmetic.
NATIVE_BFLOAT16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (empty where `/proc/cpuinfo` is unreadable): the ones
    `utils.cpu_kernels` chooses the CPU kernels by."""
    return set(cpu_kernels.read_cpu_flags(cpuinfo_path))


def resolve_precision(precision: str, *, flags=None, gpus=None) -> str:
    """`"float32"` or `"bfloat16"` for `precision` (`"auto"` decided from the hardware:
    `flags` (default `cpu_flags()`) and `gpus` (default the GPUs TF sees))."""
    if precision not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    if precision != AUTO:
        return precision
    if gpus is None:
        gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return BFLOAT16
    flags = cpu_flags() if flags is None else set(flags)
    return BFLOAT16 if flags & set(NATIVE_BFLOAT16_CPU_FLAGS) else FLOAT32


def _with_policy(config, policy: str):
    """`config` with every float32 dtype policy replaced by `policy` (a copy)."""
    config = copy.deepcopy(config)

    def walk(node):
        if isinstance(node, dict):
            if node.get("class_name") == "DTypePolicy" and node.get("config", {}).get("name") in (
                FLOAT32,
                "mixed_bfloat16",
            ):
                node["config"]["name"] = policy
            for key, value in node.items():
                if key == "dtype" and value == FLOAT32:
                    node[key] = policy
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return config


def _encoders_in_bfloat16(node):
    """Every `BertEncoder` config under `node` switched to the `bfloat16` policy."""
    if isinstance(node, dict):
        if node.get("class_name") == BertEncoder.__name__:
            return _with_policy(node, BFLOAT16)
        return {key: _encoders_in_bfloat16(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_encoders_in_bfloat16(value) for value in node]
    return node


def model_in_precision(model, precision: str):
    """`model` itself for float32 (or when it already computes in bfloat16); for
    bfloat16, a copy built from its config with its weights: its encoder(s) under the
    `bfloat16` policy (weights stored in bfloat16), the rest under `mixed_bfloat16`."""
    if precision == FLOAT32 or keras.backend.standardize_dtype(model.compute_dtype) == BFLOAT16:
        return model
    if precision != BFLOAT16:
        raise UserError(f"precision must be {FLOAT32} or {BFLOAT16}; got {precision!r}")
    config = _with_policy(keras.saving.serialize_keras_object(model), "mixed_bfloat16")
    copy_ = keras.saving.deserialize_keras_object(_encoders_in_bfloat16(config))
    # Keras casts each float32 value to its variable's dtype (round to nearest even).
    copy_.set_weights(model.get_weights())
    return copy_
