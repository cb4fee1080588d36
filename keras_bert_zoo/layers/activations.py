"""Activation lookup by `BertConfig.hidden_act` name: the one list of activation names.

Layers store the activation's *name* in their config and call `apply_activation`, so a
saved model keeps the exact-versus-tanh GELU distinction without serializing functions.
`BertConfig` validates `hidden_act` against the same names.
"""

import keras

from keras_bert_zoo.utils.errors import UserError


def _in_float32(activation):
    """`activation` computed in float32 for 16-bit inputs, its result cast back.

    TensorFlow's CPU kernels run most elementwise ops on bfloat16 one element at a
    time; GELU's dozen forward and backward ops on a `[32, 128, 1024]` bfloat16 tensor
    took 30.8 ms against 18.9 ms with the two casts (2-core AMX Xeon, TF graph mode;
    benchmarks/README.md). It is also the more accurate of the two.
    """

    def apply(x):
        if keras.backend.standardize_dtype(x.dtype) in ("bfloat16", "float16"):
            return keras.ops.cast(activation(keras.ops.cast(x, "float32")), x.dtype)
        return activation(x)

    return apply


_ACTIVATIONS = {
    # The exact erf form, x * Phi(x) (Hugging Face's "gelu").
    "gelu": _in_float32(lambda x: keras.activations.gelu(x, approximate=False)),
    # The tanh approximation (google-research/bert's "gelu").
    "gelu_approximate": _in_float32(lambda x: keras.activations.gelu(x, approximate=True)),
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "linear": lambda x: x,
}
ACTIVATION_NAMES = tuple(_ACTIVATIONS)

# The same activations in the input's own dtype, for inference: after a 2-D matmul and
# its bias, TensorFlow's CPU graph rewriter hands all three to one oneDNN kernel, which
# computes the activation in float32 internally whatever the input dtype (see
# `TransformerEncoderBlock._dense`). Names missing here have no fused form.
_FUSABLE_ACTIVATIONS = {
    "gelu": lambda x: keras.ops.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.ops.gelu(x, approximate=True),
    "relu": keras.ops.relu,
    "linear": lambda x: x,
}


def check_activation(name: str, field: str = "activation") -> str:
    """Returns `name` if it is one of `ACTIVATION_NAMES`; raises a ValueError naming `field`."""
    if name not in _ACTIVATIONS:
        raise UserError(f"{field} must be one of {ACTIVATION_NAMES}, got {name!r}")
    return name


def apply_activation(name: str, x):
    """Applies one of `ACTIVATION_NAMES` to `x`.

    Args:
        name: str. `"gelu"` (exact erf), `"gelu_approximate"` (tanh form, as in
            google-research/bert), `"relu"`, `"tanh"` or `"linear"`.
        x: tensor.
    """
    return _ACTIVATIONS[check_activation(name)](x)


def fusable_activation(name: str):
    """`name`'s activation in the input dtype (the form a matmul fuses), or None."""
    return _FUSABLE_ACTIVATIONS.get(check_activation(name))
