"""BERT hyperparameters, the preset table, and the two published config formats.

`BertConfig` is the one in-memory description of an encoder. It reads and writes
google-research/bert's `bert_config.json` and Hugging Face's `config.json`. The two
formats disagree about what `"hidden_act": "gelu"` means, so the activation is stored
here under an unambiguous name:

- `"gelu"`: the exact erf form, `x * Phi(x)` (Hugging Face's `"gelu"`).
- `"gelu_approximate"`: the tanh approximation (google-research/bert's `"gelu"`,
  Hugging Face's `"gelu_new"` / `"gelu_pytorch_tanh"`).

Example:

```python
from keras_bert_zoo.config import BertConfig, list_presets

print(list_presets())
config = BertConfig.from_preset("bert_tiny_uncased")
config.to_google_json("/tmp/bert_config.json")
assert BertConfig.from_google_json("/tmp/bert_config.json") == config
```
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
from typing import Any

from keras_bert_zoo.layers.activations import check_activation
from keras_bert_zoo.layers.attention import attention_head_size
from keras_bert_zoo.utils.atomic import write_json_atomically
from keras_bert_zoo.utils.errors import UserError

# google-research/bert's modeling.get_activation: its "gelu" is the tanh approximation.
# An exact-erf GELU has no name there, so it is written as "gelu_exact": the original code
# rejects it with a clear "Unsupported activation" instead of silently changing the math.
_GOOGLE_TO_OURS = {
    "gelu": "gelu_approximate",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_OURS_TO_GOOGLE = {ours: google for google, ours in _GOOGLE_TO_OURS.items()}
# Hugging Face's ACT2FN names; the first of each of ours is the one written.
_HF_TO_OURS = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_OURS_TO_HF = {ours: hf for hf, ours in reversed(_HF_TO_OURS.items())}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of a BERT encoder.

    Args:
        vocab_size: int. Number of WordPiece tokens.
        hidden_size: int. Width H of every encoder layer.
        num_layers: int. Number L of Transformer encoder blocks.
        num_heads: int. Number A of attention heads; must divide `hidden_size`.
        intermediate_size: int. Width of the feed-forward layer inside each block.
        hidden_act: str. One of `layers.activations.ACTIVATION_NAMES` (see the module
            docstring for GELU).
        hidden_dropout: float. Dropout after embeddings and each sub-layer.
        attention_dropout: float. Dropout on the attention probabilities.
        max_position_embeddings: int. Longest sequence the position table covers.
        type_vocab_size: int. Number of segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon.
        pad_token_id: int. Id of `[PAD]` (kept for the Hugging Face config).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_approximate"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12
    pad_token_id: int = 0

    def __post_init__(self):
        for name in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UserError(f"BertConfig.{name} must be a positive int, got {value!r}")
        attention_head_size(self.hidden_size, self.num_heads, owner="BertConfig.")
        check_activation(self.hidden_act, "BertConfig.hidden_act")
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            if not _is_real(value) or not 0.0 <= value < 1.0:
                raise UserError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_epsilon"):
            value = getattr(self, name)
            if not _is_real(value) or not (value > 0 and math.isfinite(value)):
                raise UserError(f"BertConfig.{name} must be a positive number, got {value!r}")
        pad = self.pad_token_id
        if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
            raise UserError(f"BertConfig.pad_token_id must be a non-negative int, got {pad!r}")

    # --- Encoder constructor arguments -------------------------------------------------

    @classmethod
    def encoder_argument_names(cls) -> tuple[str, ...]:
        """The fields that are `keras_bert_zoo.models.BertEncoder`'s constructor
        arguments, and its attributes of the same names: all but `pad_token_id`."""
        return tuple(
            field.name for field in dataclasses.fields(cls) if field.name != "pad_token_id"
        )

    def encoder_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `keras_bert_zoo.models.BertEncoder`."""
        return {name: getattr(self, name) for name in self.encoder_argument_names()}

    def replace(self, **changes) -> BertConfig:
        return dataclasses.replace(self, **changes)

    # --- Presets ----------------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides) -> BertConfig:
        if name not in PRESETS:
            raise UserError(f"Unknown preset {name!r}; available presets: {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)

    # --- google-research/bert bert_config.json ----------------------------------------

    @classmethod
    def from_google_dict(cls, data: dict[str, Any], source: str = "bert_config.json"):
        activation = data.get("hidden_act", "gelu")
        if activation not in _GOOGLE_TO_OURS:
            raise UserError(
                f"{source}: hidden_act {activation!r} is not one of {sorted(_GOOGLE_TO_OURS)}"
            )
        required = (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
        )
        missing = [key for key in required if key not in data]
        if missing:
            raise UserError(f"{source}: missing required keys {missing}")
        return cls(
            vocab_size=_json_int(data, "vocab_size", source),
            hidden_size=_json_int(data, "hidden_size", source),
            num_layers=_json_int(data, "num_hidden_layers", source),
            num_heads=_json_int(data, "num_attention_heads", source),
            intermediate_size=_json_int(data, "intermediate_size", source),
            hidden_act=_GOOGLE_TO_OURS[activation],
            hidden_dropout=_json_float(data, "hidden_dropout_prob", source, 0.1),
            attention_dropout=_json_float(data, "attention_probs_dropout_prob", source, 0.1),
            max_position_embeddings=_json_int(data, "max_position_embeddings", source, 512),
            type_vocab_size=_json_int(data, "type_vocab_size", source, 2),
            initializer_range=_json_float(data, "initializer_range", source, 0.02),
            # The original hard-codes 1e-12; a non-standard key lets a round trip keep others.
            layer_norm_epsilon=_json_float(data, "layer_norm_eps", source, 1e-12),
        )

    def to_google_dict(self) -> dict[str, Any]:
        data = {
            "attention_probs_dropout_prob": self.attention_dropout,
            "hidden_act": _OURS_TO_GOOGLE[self.hidden_act],
            "hidden_dropout_prob": self.hidden_dropout,
            "hidden_size": self.hidden_size,
            "initializer_range": self.initializer_range,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "num_attention_heads": self.num_heads,
            "num_hidden_layers": self.num_layers,
            "type_vocab_size": self.type_vocab_size,
            "vocab_size": self.vocab_size,
        }
        if self.layer_norm_epsilon != 1e-12:
            data["layer_norm_eps"] = self.layer_norm_epsilon
        return data

    @classmethod
    def from_google_json(cls, path: str | os.PathLike) -> BertConfig:
        return cls.from_google_dict(_read_json(path), source=os.fspath(path))

    def to_google_json(self, path: str | os.PathLike) -> None:
        write_json_atomically(path, self.to_google_dict())

    # --- Hugging Face config.json ------------------------------------------------------

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any], source: str = "config.json") -> BertConfig:
        model_type = data.get("model_type", "bert")
        if model_type != "bert":
            raise UserError(f"{source}: model_type is {model_type!r}, expected 'bert'")
        position_type = data.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise UserError(
                f"{source}: position_embedding_type {position_type!r} is not supported "
                "(only 'absolute', as in BERT)"
            )
        activation = data.get("hidden_act", "gelu")
        if activation not in _HF_TO_OURS:
            raise UserError(
                f"{source}: hidden_act {activation!r} is not one of {sorted(_HF_TO_OURS)}"
            )
        google_like = dict(data)
        google_like["hidden_act"] = _OURS_TO_GOOGLE[_HF_TO_OURS[activation]]
        config = cls.from_google_dict(google_like, source=source)
        return config.replace(
            layer_norm_epsilon=_json_float(data, "layer_norm_eps", source, 1e-12),
            pad_token_id=_json_int(
                {"pad_token_id": data.get("pad_token_id") or 0}, "pad_token_id", source
            ),
        )

    def to_hf_dict(self) -> dict[str, Any]:
        data = self.to_google_dict()
        data.pop("layer_norm_eps", None)
        data.update(
            {
                "architectures": ["BertModel"],
                "model_type": "bert",
                "hidden_act": _OURS_TO_HF[self.hidden_act],
                "layer_norm_eps": self.layer_norm_epsilon,
                "pad_token_id": self.pad_token_id,
                "position_embedding_type": "absolute",
            }
        )
        return data

    @classmethod
    def from_hf_json(cls, path: str | os.PathLike) -> BertConfig:
        return cls.from_hf_dict(_read_json(path), source=os.fspath(path))

    def to_hf_json(self, path: str | os.PathLike) -> None:
        write_json_atomically(path, self.to_hf_dict())


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


_REQUIRED = object()


def _json_int(data: dict[str, Any], key: str, source: str, default: Any = _REQUIRED) -> int:
    """`data[key]` as an int; a non-integral value is an error naming the key."""
    value = data[key] if default is _REQUIRED else data.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{source}: {key} must be an integer, got {value!r}")
    return value


def _json_float(data: dict[str, Any], key: str, source: str, default: float) -> float:
    """`data.get(key, default)` as a float; a non-number is an error naming the key."""
    value = data.get(key, default)
    if not _is_real(value):
        raise UserError(f"{source}: {key} must be a number, got {value!r}")
    return float(value)


def _read_json(path: str | os.PathLike) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as error:
        raise UserError(f"{os.fspath(path)}: not valid JSON ({error})") from error
    if not isinstance(data, dict):
        raise UserError(f"{os.fspath(path)}: expected a JSON object at the top level")
    return data


# === Presets ===
# The Google releases (google-research/bert README): sizes per row, vocab per suffix.
_SIZES = {
    "bert_tiny": dict(num_layers=2, hidden_size=128, num_heads=2, intermediate_size=512),
    "bert_mini": dict(num_layers=4, hidden_size=256, num_heads=4, intermediate_size=1024),
    "bert_small": dict(num_layers=4, hidden_size=512, num_heads=8, intermediate_size=2048),
    "bert_medium": dict(num_layers=8, hidden_size=512, num_heads=8, intermediate_size=2048),
    "bert_base": dict(num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072),
    "bert_large": dict(num_layers=24, hidden_size=1024, num_heads=16, intermediate_size=4096),
}
_VOCABS = {
    "uncased": 30522,
    "cased": 28996,
    "multi_cased": 119547,
    "chinese": 21128,
}
_RELEASED = [
    ("bert_tiny", "uncased"),
    ("bert_mini", "uncased"),
    ("bert_small", "uncased"),
    ("bert_medium", "uncased"),
    ("bert_base", "uncased"),
    ("bert_base", "cased"),
    ("bert_base", "multi_cased"),
    ("bert_base", "chinese"),
    ("bert_large", "uncased"),
    ("bert_large", "cased"),
]

PRESETS: dict[str, BertConfig] = {
    f"{size}_{vocab}": BertConfig(vocab_size=_VOCABS[vocab], **_SIZES[size])
    for size, vocab in _RELEASED
}
# Size-only names pick the uncased English vocabulary, as the paper's tables do.
PRESETS.update({size: BertConfig(vocab_size=_VOCABS["uncased"], **_SIZES[size]) for size in _SIZES})


def list_presets() -> list[str]:
    return sorted(PRESETS)


def count_encoder_parameters(config: BertConfig) -> int:
    """Closed-form parameter count of the encoder (embeddings, blocks, pooler)."""
    hidden, inter = config.hidden_size, config.intermediate_size
    embeddings = (
        config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    ) * hidden + 2 * hidden
    block = 4 * (hidden * hidden + hidden) + 2 * hidden * inter + inter + hidden + 4 * hidden
    pooler = hidden * hidden + hidden
    return embeddings + config.num_layers * block + pooler


def format_presets_table() -> str:
    """The preset table as aligned text (what `tools/list_presets.py` prints)."""
    rows = [("preset", "layers", "hidden", "heads", "intermediate", "vocab", "params")]
    for name in list_presets():
        config = PRESETS[name]
        rows.append(
            (
                name,
                str(config.num_layers),
                str(config.hidden_size),
                str(config.num_heads),
                str(config.intermediate_size),
                str(config.vocab_size),
                f"{count_encoder_parameters(config) / 1e6:.1f}M",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
