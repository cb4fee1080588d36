"""`BertEncoder`: the BERT Transformer stack as a functional Keras model."""

import contextlib
import warnings

import keras
import tensorflow as tf

from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES, INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS
from keras_bert_zoo.layers.activations import check_activation
from keras_bert_zoo.layers.attention import attention_head_size
from keras_bert_zoo.layers.embeddings import BertEmbeddings
from keras_bert_zoo.layers.transformer import TransformerEncoderBlock


def encoder_inputs(batch_shape=(None, None), prefix=""):
    """The three named int32 inputs every BERT model takes."""
    return {
        name: keras.Input(batch_shape=batch_shape, dtype="int32", name=prefix + name)
        for name in ENCODER_INPUT_NAMES
    }


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEncoder(keras.Model):
    """BERT (Devlin et al., 2018): embeddings, `num_layers` encoder blocks, pooler.

    Inputs (a dict of int32 `[batch, seq_len]` tensors):
        input_word_ids: WordPiece ids, `[CLS] A [SEP] B [SEP]` then padding.
        input_mask: 1 for real tokens, 0 for padding.
        input_type_ids: segment ids, 0 for A and 1 for B.

    Outputs (a dict):
        sequence_output: `[batch, seq_len, hidden_size]`, the last block's output.
        pooled_output: `[batch, hidden_size]`, `tanh(Dense(sequence_output[:, 0]))`.
        encoder_outputs: list of `num_layers` tensors, every block's output.

    Args:
        vocab_size: int. Number of WordPiece tokens.
        hidden_size: int. Width H.
        num_layers: int. Number L of encoder blocks.
        num_heads: int. Number A of attention heads.
        intermediate_size: int. Feed-forward width.
        hidden_act: str. `"gelu"` (exact erf), `"gelu_approximate"` (tanh, as in
            google-research/bert), `"relu"`, `"tanh"` or `"linear"`.
        hidden_dropout: float. Dropout on embeddings and sub-layer outputs.
        attention_dropout: float. Dropout on attention probabilities.
        max_position_embeddings: int. Longest supported sequence.
        type_vocab_size: int. Number of segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon.
        dtype: a dtype policy name (`"float32"`, `"mixed_bfloat16"`,
            `"mixed_float16"`) or `keras.DTypePolicy`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder

    encoder = BertEncoder.untrained("bert_tiny_uncased")
    inputs = {
        "input_word_ids": np.array([[101, 7592, 102, 0]]),
        "input_mask": np.array([[1, 1, 1, 0]]),
        "input_type_ids": np.zeros((1, 4), "int32"),
    }
    outputs = encoder.predict(inputs)
    print(outputs["sequence_output"].shape, outputs["pooled_output"].shape)
    ```
    """

    # The callable inference calls go through while `route_inference` is open; None:
    # the padded graph.
    _inference_route = None

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        intermediate_size=3072,
        hidden_act="gelu_approximate",
        hidden_dropout=0.1,
        attention_dropout=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        dtype=None,
        **kwargs,
    ):
        check_activation(hidden_act, "hidden_act")
        attention_head_size(hidden_size, num_heads)

        # === Layers ===
        self.embeddings = BertEmbeddings(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=hidden_dropout,
            dtype=dtype,
            name="embeddings",
        )
        self.transformer_layers = [
            TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_size=intermediate_size,
                activation=hidden_act,
                hidden_dropout=hidden_dropout,
                attention_dropout=attention_dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                initializer_range=initializer_range,
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )
            for index in range(num_layers)
        ]
        self.pooler_dense = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=dtype,
            name="pooler_dense",
        )

        # === Functional Model ===
        inputs = encoder_inputs()
        outputs = self.run_layers(
            inputs[INPUT_WORD_IDS], inputs[INPUT_TYPE_IDS], inputs[INPUT_MASK]
        )
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)
        # Functional.__init__ ignores `dtype`; without this the model reports (and
        # serializes) "float32" while its layers run the mixed policy, so a saved
        # mixed-precision encoder would reload as float32.
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

    @property
    def inference_route(self):
        """The callable that answers this encoder's inference calls while a
        `route_inference` block is open, else None (the padded graph)."""
        return self._inference_route

    @contextlib.contextmanager
    def route_inference(self, route):
        """While open, inference calls (`training` false) of this encoder on a batch
        with padding answer `route(inputs)` instead of running the padded graph.

        The exporter traces the served graph inside such a block
        (`keras_bert_zoo.models.padding_free.padding_free_inference` routes through a
        `PaddingFreeEncoder`). Training calls, batches without padding, and every call
        after the block run the padded graph. Blocks nest: leaving one restores the
        route before it.

        Args:
            route: callable, the encoder's input dict -> a dict of its outputs
                (`sequence_output`, `pooled_output`, `encoder_outputs`), or None for
                the padded graph.
        """
        previous = self._inference_route
        # Not Keras' __setattr__: the route is often a model wrapping this encoder
        # (`PaddingFreeEncoder`), which Keras would track as a sublayer of the layer it
        # wraps (a cycle).
        object.__setattr__(self, "_inference_route", route)
        try:
            yield self
        finally:
            object.__setattr__(self, "_inference_route", previous)

    def call(self, inputs, training=None, mask=None):
        # Training always runs the padded graph (`route_inference`).
        inference_call = self._inference_route
        if inference_call is None or training:
            return super().call(inputs, training=training, mask=mask)
        # A batch without padding (every single request) gains nothing from gathering
        # its real tokens: it runs the padded graph (PaddingFreeEncoder cost +3% of the
        # batch-1 p50 of a served float32 MiniLM, the check nothing measurable).
        return tf.cond(
            tf.reduce_all(tf.not_equal(inputs[INPUT_MASK], 0)),
            lambda: super(BertEncoder, self).call(inputs, training=False, mask=mask),
            lambda: inference_call(inputs),
        )

    def run_layers(
        self,
        word_ids,
        type_ids,
        attention_mask,
        *,
        layout=None,
        position_ids=None,
        output_positions=None,
        training=None,
    ):
        """The encoder's layer loop: embeddings, the blocks, the pooler.

        It builds the functional graph, and `PaddingFreeEncoder` runs it on the real
        tokens of a batch: with a `layout` (`keras_bert_zoo.layers.TokenLayout`) the
        ids are those tokens only (`[1, num_tokens]`, with their `position_ids`), each
        block runs `call_packed`, and every output comes back in the padded layout.

        With `output_positions` (int `[batch, P]`, column 0 all zeros: the [CLS]
        position), the last block computes its outputs at those positions only
        (`TransformerEncoderBlock.call_at`): `sequence_output` and the last
        `encoder_outputs` entry are then `[batch, P, hidden]`, the padded outputs read
        at `output_positions`, and the pooler reads column 0. Training steps whose
        heads read a few positions use it (`keras_bert_zoo.models.head_positions`).

        Returns:
            dict of `sequence_output`, `pooled_output`, `encoder_outputs`.
        """
        if layout is not None and output_positions is not None:
            raise ValueError(
                "BertEncoder.run_layers takes `layout` (packed rows) or `output_positions`, "
                "not both"
            )
        hidden_states = self.embeddings(
            word_ids, type_ids, position_ids=position_ids, training=training
        )
        encoder_outputs = []
        for index, block in enumerate(self.transformer_layers):
            if output_positions is not None and index == len(self.transformer_layers) - 1:
                hidden_states = block.call_at(
                    hidden_states, output_positions, attention_mask, training=training
                )
                encoder_outputs.append(hidden_states)
            elif layout is None:
                hidden_states = block(hidden_states, attention_mask, training=training)
                encoder_outputs.append(hidden_states)
            else:
                hidden_states = block.call_packed(hidden_states, layout, training=training)
                encoder_outputs.append(layout.to_padded(hidden_states))
        sequence_output = encoder_outputs[-1]
        return {
            "sequence_output": sequence_output,
            "pooled_output": self.pooler_dense(sequence_output[:, 0, :]),
            "encoder_outputs": encoder_outputs,
        }

    @property
    def embedding_table(self):
        """The word embedding variable `[vocab_size, hidden_size]`."""
        return self.embeddings.embedding_table

    @property
    def bert_config(self) -> BertConfig:
        """The `BertConfig` this encoder was built from (`pad_token_id`, not an encoder
        argument, at its default)."""
        names = BertConfig.encoder_argument_names()
        return BertConfig(**{name: getattr(self, name) for name in names})

    @classmethod
    def from_bert_config(cls, config: BertConfig, **kwargs):
        """Builds a randomly initialized encoder from a `BertConfig`."""
        return cls(**config.encoder_kwargs(), **kwargs)

    @classmethod
    def untrained(cls, preset: str, **kwargs):
        """A randomly initialized encoder of a preset's shape (see `list_presets()`).

        Presets are shapes only; pretrained weights come from
        `keras_bert_zoo.from_pretrained(path)`.
        """
        return cls.from_bert_config(BertConfig.from_preset(preset), **kwargs)

    @classmethod
    def from_preset(cls, name: str, **kwargs):
        """Deprecated (one release): `BertEncoder.untrained(name)`, which this is.

        keras-hub's `from_preset` loads pretrained weights; this one never did.
        """
        warnings.warn(
            "BertEncoder.from_preset builds random weights and is deprecated: use "
            "BertEncoder.untrained(name) for that, or keras_bert_zoo.from_pretrained(path) "
            "for pretrained weights.",
            DeprecationWarning,
            stacklevel=2,
        )
        return cls.untrained(name, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            **self.bert_config.encoder_kwargs(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)
