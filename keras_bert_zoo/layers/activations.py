"""Activation lookup by `BertConfig.hidden_act` name (see `keras_bert_zoo.config`).

Layers store the activation's *name* in their config and call `apply_activation`, so a
saved model keeps the exact-versus-tanh GELU distinction without serializing functions.
"""

import keras

ACTIVATION_NAMES = ("gelu", "gelu_approximate", "relu", "tanh", "linear")


def apply_activation(name: str, x):
    """Applies one of `ACTIVATION_NAMES` to `x`.

    Args:
        name: str. `"gelu"` (exact erf), `"gelu_approximate"` (tanh form, as in
            google-research/bert), `"relu"`, `"tanh"` or `"linear"`.
        x: tensor.
    """
    if name == "gelu":
        return keras.activations.gelu(x, approximate=False)
    if name == "gelu_approximate":
        return keras.activations.gelu(x, approximate=True)
    if name == "relu":
        return keras.activations.relu(x)
    if name == "tanh":
        return keras.activations.tanh(x)
    if name == "linear":
        return x
    raise ValueError(f"Unknown activation {name!r}; expected one of {ACTIVATION_NAMES}")


def check_activation(name: str) -> str:
    if name not in ACTIVATION_NAMES:
        raise ValueError(f"Unknown activation {name!r}; expected one of {ACTIVATION_NAMES}")
    return name
