"""The precision an export computes in: float32, or bfloat16 where the hardware has it.

`export_saved_model(..., precision=...)` and `tools/export_saved_model.py
--precision=auto|float32|bfloat16`. `"bfloat16"` serves a copy of the model under the
`mixed_bfloat16` policy (matmuls in bfloat16, LayerNorm, softmax and the answers in
float32; the weights are the same float32 values, rounded where the matmuls read
them). `"auto"` picks bfloat16 where it is native: a GPU, or a CPU with AMX or
AVX512_BF16, whose oneDNN kernels run bfloat16 matmuls about twice as fast as float32
ones; elsewhere a CPU emulates bfloat16 and float32 is faster, so `"auto"` stays
float32. The export records the precision it holds in `export.json`.
"""

from __future__ import annotations

import copy

import keras
import tensorflow as tf

FLOAT32 = "float32"
BFLOAT16 = "bfloat16"
AUTO = "auto"
PRECISIONS = (AUTO, FLOAT32, BFLOAT16)
# CPU flags (/proc/cpuinfo, Linux's names) of native bfloat16 arithmetic.
NATIVE_BFLOAT16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (empty where `/proc/cpuinfo` is unreadable)."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def resolve_precision(precision: str, *, flags=None, gpus=None) -> str:
    """`"float32"` or `"bfloat16"` for `precision` (`"auto"` decided from the hardware:
    `flags` (default `cpu_flags()`) and `gpus` (default the GPUs TF sees))."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
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


def model_in_precision(model, precision: str):
    """`model` itself for float32 (or when it already computes in bfloat16); for
    bfloat16, a copy built from its config under `mixed_bfloat16` with its weights."""
    if precision == FLOAT32 or keras.backend.standardize_dtype(model.compute_dtype) == BFLOAT16:
        return model
    if precision != BFLOAT16:
        raise ValueError(f"precision must be {FLOAT32} or {BFLOAT16}; got {precision!r}")
    config = _with_policy(keras.saving.serialize_keras_object(model), "mixed_bfloat16")
    copy_ = keras.saving.deserialize_keras_object(config)
    copy_.set_weights(model.get_weights())
    return copy_
