"""`EncoderHeadModel`: the base of the models made of a `BertEncoder` and output heads."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import keras

OUTPUT_DENSE = "output_dense"
MASKED_LM = "masked_lm"


@dataclasses.dataclass(frozen=True)
class HeadCheckpointNames:
    """Where one head's weights sit in google-research/bert and Hugging Face checkpoints.

    A model declares one per head in its `checkpoint_heads`, the one place that says
    so; `keras_bert_zoo.checkpoints.naming` expands it into rows of the naming table.

    Attributes:
        attribute: the model attribute that holds the head layer; also the layer's
            name, so the first part of its weights' canonical names.
        kind: `OUTPUT_DENSE` for a head whose one weight layer is `output_dense`
            (`ClassificationHead`, `SpanHead`), `MASKED_LM` for `MaskedLMHead`.
        google_scope: prefix of its google-research/bert variable names
            (`"cls/squad/"` gives `cls/squad/output_weights`; `""` gives
            run_classifier.py's bare `output_weights`).
        huggingface_scope: its Hugging Face module path (`"qa_outputs"` gives
            `qa_outputs.weight`).
        required: the checkpoint must hold it, as it must the encoder (pretraining
            heads). A task head that a checkpoint lacks is a new head instead: it
            keeps its initialization, to be trained.
    """

    attribute: str
    kind: str
    google_scope: str
    huggingface_scope: str
    required: bool = False


class EncoderHeadModel(keras.Model):
    """Base of the functional models that put heads on a `BertEncoder`.

    Subclasses build their graph in `__init__` (keras-hub's functional-subclass
    pattern), keep the encoder as `self.encoder`, name their own constructor arguments
    in `head_arguments` (each kept in the attribute of its name), and declare their
    heads' checkpoint names once in `checkpoint_heads` (with the Hugging Face class the
    same model is, `huggingface_architecture`).

    Each class also declares what its outputs read of the encoder (false by default):
    the faster passes that may stand in for its plain call read these capabilities,
    never a list of classes, so a new model opts in by declaring them.

    Attributes:
        head_arguments: the constructor arguments besides `encoder`, each kept in the
            attribute of the same name: `get_config` saves them (`_head_config`, which
            a class whose arguments are not attributes overrides).
        outputs_from_head_positions: its outputs are its heads applied to the pooled
            output ([CLS]) of `[batch, seq_len]` inputs, one example a row, and, with
            `reads_masked_lm_positions`, to the last block's outputs at
            `masked_lm_positions`; `outputs_at_head_positions` computes them from
            those alone. The packed (`models.packed`) and head-position
            (`models.head_positions`) training passes run such a model.
        reads_masked_lm_positions: its heads also read the last block at the
            `masked_lm_positions` input (pretraining).
        supports_padding_free_inference: its outputs read the encoder at [CLS] only,
            so that an export may run the encoder on the real tokens of a request
            alone (`models.padding_free.padding_free_inference`): its padded
            positions reach no output.
    """

    head_arguments: ClassVar[tuple[str, ...] | None] = None
    checkpoint_heads: ClassVar[tuple[HeadCheckpointNames, ...]] = ()
    huggingface_architecture: ClassVar[str] = "BertModel"
    outputs_from_head_positions: ClassVar[bool] = False
    reads_masked_lm_positions: ClassVar[bool] = False
    supports_padding_free_inference: ClassVar[bool] = False

    @staticmethod
    def _initializer_range(encoder, initializer_range):
        """The heads' initializer stddev: the given one, else the encoder's."""
        return encoder.initializer_range if initializer_range is None else initializer_range

    def _head_config(self):
        if self.head_arguments is None:
            raise NotImplementedError(
                f"{type(self).__name__} declares no head_arguments (nor a _head_config)"
            )
        return {name: getattr(self, name) for name in self.head_arguments}

    def outputs_at_head_positions(self, pooled_output, masked_lm_outputs=None, training=None):
        """What `self(x)` returns, from the encoder outputs its heads read (for a class
        that declares `outputs_from_head_positions`).

        Args:
            pooled_output: float tensor `[batch, hidden]`, the pooler's output.
            masked_lm_outputs: float tensor `[batch, predictions, hidden]`, the last
                block's outputs at `masked_lm_positions` (with
                `reads_masked_lm_positions` only), or None.
            training: bool. Dropout.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not declare outputs_from_head_positions"
        )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **self._head_config(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


def head_models_with(capability: str) -> tuple[type[EncoderHeadModel], ...]:
    """The public `EncoderHeadModel` classes defined so far that declare `capability`
    (one of its boolean class attributes) true, sorted by name: for messages that list
    them.

    Args:
        capability: str. `"outputs_from_head_positions"`,
            `"supports_padding_free_inference"` or `"reads_masked_lm_positions"`.
    """
    found, pending = set(), [EncoderHeadModel]
    while pending:
        for subclass in pending.pop().__subclasses__():
            pending.append(subclass)
            if not subclass.__name__.startswith("_") and getattr(subclass, capability):
                found.add(subclass)
    return tuple(sorted(found, key=lambda cls: (cls.__name__, cls.__module__)))
