"""Knowledge distillation: a student task model trained on a frozen teacher's outputs.

The math, top to bottom (Hinton et al., 2015; DistilBERT, Sanh et al., 2019; TinyBERT,
Jiao et al., 2020):

```
loss = hard_label_weight   * task_loss(labels, student)             unlabelled rows weigh 0
     + soft_target_weight  * T^2 * KL(softmax(teacher / T) || softmax(student / T))
                                   (or, for vectors, MSE(teacher_vectors, student_vectors V))
     + hidden_state_weight * MSE(teacher_block[t], student_block[s] W)   for (s, t) in the layer map
     + attention_weight    * KL(teacher_attention[t] || student_attention[s])
```

The task's loss keeps its own reduction (Keras' mean over the batch), so in a batch that
mixes labelled and unlabelled transfer rows the hard-label term is the labelled rows' loss
times their share of the batch; the other terms average over every row.

The soft-target term takes the form of the task's outputs (`tasks.base.SOFT_TARGET_KINDS`):
a distribution per row over classes or choices, per real token over tag classes, per
span head over the real positions; independent sigmoids for multi-label heads; the
teacher's score by squared error for regression; an embedding model's vectors by
their mean squared error (sentence-transformers' `MSELoss`, Reimers & Gurevych, 2020),
through `V`, a learned projection to the teacher's width when the student's vectors
are narrower or wider (used by the loss alone: the student serves its own vectors).
`W` is a learned projection when the
student's hidden size differs from the teacher's (TinyBERT's `W_h`, one for every
mapped layer); attention distributions are recomputed from each mapped block's input
with its own query and key projections, so the encoder's outputs stay what serving
exports. The teacher runs in inference mode in the same step, or not at all when the
batch carries its outputs (`x["teacher_outputs"]`, computed once by
`data.teacher_outputs`; the soft-target term only).

Each term is a `keras.losses.Loss` (`"mean_with_sample_weight"` over real rows or
tokens), so Keras scales it for the strategy as it does the task's own loss.

`keras.distillation.Distiller` (Keras 3.15) was tried first and is not the base: it
ignores `sample_weight` (unlabelled transfer rows would train on dummy labels), its
`LogitsDistillation` softmaxes every output over its last axis with no mask (a
regression head's one logit gives a loss of exactly 0; tag and span heads average over
padding), its `FeatureDistillation` reads layers of a functional graph by name (our
blocks live inside the encoder) with no projection between sizes, its weights are tied
(`w` and `1 - w`), and it tracks the teacher, whose weights would then fill every
training checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS, TEACHER_OUTPUTS
from keras_bert_zoo.utils.errors import UserError

# Soft-target kinds (tasks.base declares the same names for the tasks' outputs).
CLASSES = "classes"
LABELS = "labels"
SCORE = "score"
POSITIONS = "positions"
TOKEN_CLASSES = "token_classes"
VECTORS = "vectors"
KINDS = (CLASSES, LABELS, SCORE, POSITIONS, TOKEN_CLASSES, VECTORS)
# Matched by squared error, without a temperature.
_REGRESSED = (SCORE, VECTORS)
_PER_TOKEN = (POSITIONS, TOKEN_CLASSES)

# A logit no real position comes near: padded positions leave the span distributions.
_MASKED_LOGIT = -1e9


# === Losses ===


def _kl_from_logits(teacher_logits, student_logits, axis=-1):
    """KL(softmax(teacher) || softmax(student)) along `axis`."""
    teacher_log_probs = tf.nn.log_softmax(teacher_logits, axis=axis)
    student_log_probs = tf.nn.log_softmax(student_logits, axis=axis)
    return tf.reduce_sum(
        tf.exp(teacher_log_probs) * (teacher_log_probs - student_log_probs), axis=axis
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SoftTargetLoss(keras.losses.Loss):
    """The teacher's outputs as soft targets: `T^2 * KL` of the temperature-scaled
    distributions (the gradient then keeps its size as T changes, Hinton et al.), or the
    squared error to the teacher's score, or to its vectors (`vectors`: the mean over the
    vector's width of `[..., dim]` outputs, one term per vector, e.g. `[batch, texts]`).

    Called as `loss(teacher_outputs, student_outputs, sample_weight=mask)`; for
    `token_classes` and `positions` outputs, `sample_weight` is the input mask
    (`[batch, seq_len]`): padded tokens count for nothing.

    Args:
        kind: one of `KINDS`.
        temperature: float > 0. Softens both distributions.
        name: the loss's name.
    """

    def __init__(self, kind: str, temperature: float = 1.0, name: str | None = None, **kwargs):
        if kind not in KINDS:
            raise UserError(f"soft target kind {kind!r} is not one of {KINDS}")
        if not temperature > 0:
            raise UserError(f"temperature must be positive, got {temperature}")
        kwargs.setdefault("reduction", "mean_with_sample_weight")
        super().__init__(name=name or f"soft_{kind}_loss", **kwargs)
        self.kind = kind
        self.temperature = float(temperature)

    def call(self, y_true, y_pred):
        teacher = tf.cast(y_true, tf.float32)
        student = tf.cast(y_pred, tf.float32)
        if self.kind in _REGRESSED:
            return tf.reduce_mean(tf.square(student - teacher), axis=-1)
        scale = self.temperature**2
        teacher = teacher / self.temperature
        student = student / self.temperature
        if self.kind == LABELS:
            teacher_probs = tf.sigmoid(teacher)
            # Binary KL per unit: sigmoid cross-entropy minus the teacher's own entropy.
            cross = tf.nn.sigmoid_cross_entropy_with_logits(labels=teacher_probs, logits=student)
            entropy = tf.nn.sigmoid_cross_entropy_with_logits(labels=teacher_probs, logits=teacher)
            return scale * tf.reduce_mean(cross - entropy, axis=-1)
        # CLASSES: [batch, classes]; TOKEN_CLASSES: [batch, seq, classes] (per token);
        # POSITIONS: [batch, seq], masked by `mask_positions` before.
        return scale * _kl_from_logits(teacher, student)

    def get_config(self):
        return {**super().get_config(), "kind": self.kind, "temperature": self.temperature}


def mask_positions(logits, input_mask):
    """Span logits with the padded positions out of the softmax."""
    return tf.where(tf.cast(input_mask, tf.bool), tf.cast(logits, tf.float32), _MASKED_LOGIT)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class HiddenStateLoss(keras.losses.Loss):
    """Mean squared error between a teacher block's outputs and a student block's
    (projected to the teacher's width), per token: `sample_weight` is the input mask."""

    def __init__(self, name="hidden_state_loss", **kwargs):
        kwargs.setdefault("reduction", "mean_with_sample_weight")
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        difference = tf.cast(y_pred, tf.float32) - tf.cast(y_true, tf.float32)
        return tf.reduce_mean(tf.square(difference), axis=-1)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class AttentionLoss(keras.losses.Loss):
    """KL between a teacher block's and a student block's attention distributions,
    `[batch, heads, query, key]` probabilities; per query token (averaged over heads):
    `sample_weight` is the input mask. Different head counts compare the distributions
    averaged over heads."""

    def __init__(self, name="attention_loss", **kwargs):
        kwargs.setdefault("reduction", "mean_with_sample_weight")
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        teacher = tf.cast(y_true, tf.float32)
        student = tf.cast(y_pred, tf.float32)
        if teacher.shape[1] != student.shape[1]:
            teacher = tf.reduce_mean(teacher, axis=1, keepdims=True)
            student = tf.reduce_mean(student, axis=1, keepdims=True)
        tiny = 1e-12  # masked keys have probability 0 in both
        per_query = tf.reduce_sum(
            teacher * (tf.math.log(teacher + tiny) - tf.math.log(student + tiny)), axis=-1
        )
        return tf.reduce_mean(per_query, axis=1)


def attention_probabilities(block, block_input, input_mask):
    """`[batch, heads, query, key]` attention probabilities of a
    `TransformerEncoderBlock` on `block_input`, as its attention computes them (scores
    and softmax in float32, padded keys masked)."""
    attention = block.attention
    query = tf.cast(attention.query(block_input), tf.float32)
    key = tf.cast(attention.key(block_input), tf.float32)
    scores = tf.einsum("bqnh,bknh->bnqk", query, key) / math.sqrt(attention.head_size)
    key_mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
    return tf.nn.softmax(scores + (1.0 - key_mask) * -10000.0, axis=-1)


# === Students ===


def evenly_spaced_layers(num_teacher_layers: int, count: int) -> list[int]:
    """`count` of `num_teacher_layers` blocks, from the first, evenly spaced: 3 of 6 is
    `[0, 2, 4]` (DistilBERT's every other layer), 2 of 6 is `[0, 3]`."""
    if not 1 <= count <= num_teacher_layers:
        raise UserError(f"a student of {count} layers from a {num_teacher_layers}-layer teacher")
    return [index * num_teacher_layers // count for index in range(count)]


def default_layer_map(num_student_layers: int, num_teacher_layers: int) -> list[tuple[int, int]]:
    """TinyBERT's uniform map: student block `s` learns teacher block
    `(s + 1) * L / M - 1` (the last block learns the last block)."""
    return [
        (student, (student + 1) * num_teacher_layers // num_student_layers - 1)
        for student in range(num_student_layers)
    ]


def layer_subset_student(teacher, layers: Sequence[int], build_model: Callable):
    """A student task model made of the teacher's embeddings, the teacher's blocks
    `layers` (in that order), its pooler and its heads, their weights copied
    (DistilBERT's initialization).

    Args:
        teacher: the fine-tuned task model (an `EncoderHeadModel`).
        layers: indices of the teacher's blocks the student keeps.
        build_model: `encoder -> task model` (the task's `build_model`).
    """
    from keras_bert_zoo.models.encoder import BertEncoder

    encoder = teacher.encoder
    num_layers = len(encoder.transformer_layers)
    bad = [index for index in layers if not 0 <= index < num_layers]
    if bad or not layers:
        raise UserError(
            f"--student_layers={','.join(map(str, layers))}: the teacher has blocks 0 to "
            f"{num_layers - 1}"
        )
    config = {**encoder.get_config(), "num_layers": len(layers)}
    for key in ("name", "trainable"):
        config.pop(key, None)
    student = build_model(BertEncoder.from_config(config))
    copy_weights(teacher, student, layers)
    return student


def copy_weights(teacher, student, layers: Sequence[int]) -> None:
    """Copies the teacher's weights into `student` (see `layer_subset_student`)."""
    source, target = teacher.encoder, student.encoder
    target.embeddings.set_weights(source.embeddings.get_weights())
    for student_index, teacher_index in enumerate(layers):
        target.transformer_layers[student_index].set_weights(
            source.transformer_layers[teacher_index].get_weights()
        )
    target.pooler_dense.set_weights(source.pooler_dense.get_weights())
    teacher_heads = _head_layers(teacher, source)
    for name, layer in _head_layers(student, target).items():
        if name not in teacher_heads:
            raise UserError(f"the teacher has no layer {name!r} for the student's head")
        layer.set_weights(teacher_heads[name].get_weights())


def _head_layers(model, encoder) -> dict[str, Any]:
    """`{name: layer}` of the heads of `model`: every layer with weights besides
    `encoder`. A nested model that holds the encoder (an embedding model's
    `BertSentenceEmbedder` inside its `BertTextGroupEmbedder`) is searched in turn."""
    heads = {}
    for layer in model.layers:
        if layer is encoder or not layer.weights:
            continue
        if isinstance(layer, keras.Model) and any(inner is encoder for inner in layer.layers):
            heads.update(_head_layers(layer, encoder))
        else:
            heads[layer.name] = layer
    return heads


# === The model that trains the student ===


def _encoder_view(task_model):
    """A functional model of `task_model`'s inputs to its outputs and its encoder's
    block outputs, from one forward pass (the encoder's node in the task model's graph
    already computes them; the task model reads its pooled or sequence output)."""
    encoder = task_model.encoder
    node = encoder._inbound_nodes[0]
    # The encoder's call returns {sequence_output, pooled_output, encoder_outputs}: the
    # node holds them flat, in the dict's tree order.
    encoder_outputs = keras.tree.pack_sequence_as(
        {
            "encoder_outputs": [None] * len(encoder.transformer_layers),
            "pooled_output": None,
            "sequence_output": None,
        },
        node.outputs,
    )["encoder_outputs"]
    return keras.Model(
        task_model.input,
        {"outputs": task_model.output, "encoder_outputs": encoder_outputs},
        name=f"{task_model.name}_view",
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TaskDistiller(keras.Model):
    """Trains `student` (a task model) on `teacher`'s outputs and the task's labels.

    `call` is the student's; `compute_loss` adds the terms of the module docstring. The
    teacher is frozen and not tracked: training checkpoints hold the student and the
    projections only (`hidden_state_projection`; `vector_projection`, for `vectors`
    soft targets when the student's vectors are not the teacher's width). Compile it
    with the task's loss (the hard-label term).

    Args:
        teacher: the fine-tuned task model.
        student: the task model to train (the same task; any size).
        soft_targets: the task's `soft_targets()`: one kind, or `{output: kind}`.
        temperature: float > 0.
        hard_label_weight, soft_target_weight, hidden_state_weight, attention_weight:
            weights of the four terms (>= 0; a zero term is not computed).
        layer_map: `[(student_block, teacher_block), ...]` for the hidden-state and
            attention terms (default `default_layer_map`).

    Example:

    ```python
    distiller = TaskDistiller(teacher, student, soft_targets="classes", temperature=2.0)
    distiller.compile(optimizer="adam", loss=task.loss())
    distiller.fit(dataset)  # (x, y, sample_weight): weight 0 for unlabelled rows
    student = distiller.student
    ```

    A batch whose `x` holds the teacher's outputs under `"teacher_outputs"` (the
    structure of the teacher's outputs) trains on those and does not run the teacher.
    """

    def __init__(
        self,
        teacher,
        student,
        soft_targets,
        temperature: float = 1.0,
        hard_label_weight: float = 1.0,
        soft_target_weight: float = 1.0,
        hidden_state_weight: float = 0.0,
        attention_weight: float = 0.0,
        layer_map: Sequence[tuple[int, int]] | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        weights = {
            "hard_label_weight": hard_label_weight,
            "soft_target_weight": soft_target_weight,
            "hidden_state_weight": hidden_state_weight,
            "attention_weight": attention_weight,
        }
        for name, value in weights.items():
            if value < 0:
                raise UserError(f"--{name} must be >= 0, got {value}")
        if not any(weights.values()):
            raise UserError(f"every loss weight is 0 ({', '.join(weights)}): nothing to train")
        # Not tracked (object.__setattr__): the teacher is frozen and already on disk.
        teacher.trainable = False
        object.__setattr__(self, "teacher", teacher)
        self.student = student
        self.soft_targets = soft_targets
        self.temperature = float(temperature)
        self.hard_label_weight = float(hard_label_weight)
        self.soft_target_weight = float(soft_target_weight)
        self.hidden_state_weight = float(hidden_state_weight)
        self.attention_weight = float(attention_weight)
        self.uses_blocks = bool(hidden_state_weight or attention_weight)

        self.soft_losses = keras.tree.map_structure(
            lambda kind: SoftTargetLoss(kind, temperature), soft_targets
        )
        self.projection = None
        if self.uses_blocks and VECTORS in keras.tree.flatten(soft_targets):
            raise UserError(
                "--hidden_state_weight and --attention_weight read a task model's encoder "
                "blocks; an embedding student learns the teacher's vectors (keep them 0)"
            )
        if self.uses_blocks:
            student_layers = len(student.encoder.transformer_layers)
            teacher_layers = len(teacher.encoder.transformer_layers)
            self.layer_map = [
                (int(s), int(t))
                for s, t in (layer_map or default_layer_map(student_layers, teacher_layers))
            ]
            for s, t in self.layer_map:
                if not (0 <= s < student_layers and 0 <= t < teacher_layers):
                    raise UserError(
                        f"--layer_map pair {s}:{t}: the student has blocks 0 to "
                        f"{student_layers - 1}, the teacher 0 to {teacher_layers - 1}"
                    )
            object.__setattr__(self, "teacher_view", _encoder_view(teacher))
            self.student_view = _encoder_view(student)
            student_width = student.encoder.hidden_size
            teacher_width = teacher.encoder.hidden_size
            if student_width != teacher_width:
                self.projection = keras.layers.Dense(
                    teacher_width, name="hidden_state_projection", dtype="float32"
                )
                self.projection.build((None, None, student_width))
        self.vector_projection = self._vector_projection(teacher, student)
        self.hidden_state_loss = HiddenStateLoss()
        self.attention_loss = AttentionLoss()

    def _vector_projection(self, teacher, student):
        """The Dense layer from the student's vectors to the teacher's width, when a
        `vectors` soft target has two widths; else None."""
        if not self.soft_target_weight or VECTORS not in keras.tree.flatten(self.soft_targets):
            return None
        if isinstance(self.soft_targets, dict):
            raise UserError("vectors soft targets are one output's, not an output dict's")
        student_width, teacher_width = student.output.shape[-1], teacher.output.shape[-1]
        if student_width == teacher_width:
            return None
        projection = keras.layers.Dense(teacher_width, name="vector_projection", dtype="float32")
        projection.build((None, student_width))
        return projection

    def call(self, inputs, training=None):
        if isinstance(inputs, dict) and TEACHER_OUTPUTS in inputs:
            inputs = {key: value for key, value in inputs.items() if key != TEACHER_OUTPUTS}
        if self.uses_blocks:
            return self.student_view(inputs, training=training)
        return self.student(inputs, training=training)

    def _split(self, y_pred):
        """`(task outputs, block outputs or None)` of `call`'s result."""
        if self.uses_blocks:
            return y_pred["outputs"], y_pred["encoder_outputs"]
        return y_pred, None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if y_pred is None:
            y_pred = self(x, training=training)
        student_outputs, student_blocks = self._split(y_pred)
        total = tf.constant(0.0)
        if self.hard_label_weight:
            hard = super().compute_loss(x, y, student_outputs, sample_weight, training=training)
            total += self.hard_label_weight * tf.cast(hard, tf.float32)
        mask = x[INPUT_MASK]
        cached = x.get(TEACHER_OUTPUTS) if isinstance(x, dict) else None
        if cached is not None and self.uses_blocks:
            raise UserError(
                "cached teacher outputs hold no blocks: the hidden-state and attention "
                "terms need the teacher in the step"
            )
        if cached is not None:
            teacher_outputs, teacher_blocks = cached, None
        elif self.uses_blocks:
            teacher_outputs, teacher_blocks = self._split(self.teacher_view(x, training=False))
        elif self.soft_target_weight:
            teacher_outputs, teacher_blocks = self.teacher(x, training=False), None
        if self.soft_target_weight:  # labels alone (weight 0) need no teacher
            teacher_outputs = tf.nest.map_structure(tf.stop_gradient, teacher_outputs)
            total += self.soft_target_weight * self._soft_target_loss(
                teacher_outputs, student_outputs, mask
            )
        if self.uses_blocks:
            # Multiple choice folds [batch, choices, seq] into rows of the encoder.
            token_mask = tf.reshape(mask, [-1, tf.shape(mask)[-1]])
            if self.hidden_state_weight:
                total += self.hidden_state_weight * self._hidden_state_loss(
                    teacher_blocks, student_blocks, token_mask
                )
            if self.attention_weight:
                total += self.attention_weight * self._attention_loss(
                    x, teacher_blocks, student_blocks, token_mask
                )
        return total

    def _soft_target_loss(self, teacher_outputs, student_outputs, mask):
        def one(loss, teacher, student):
            if loss.kind == POSITIONS:
                teacher, student = mask_positions(teacher, mask), mask_positions(student, mask)
                return loss(teacher, student)
            if loss.kind == TOKEN_CLASSES:
                return loss(teacher, student, sample_weight=tf.cast(mask, tf.float32))
            if loss.kind == VECTORS and self.vector_projection is not None:
                student = self.vector_projection(tf.cast(student, tf.float32))
            return loss(teacher, student)

        if isinstance(self.soft_losses, dict):
            return tf.add_n(
                [
                    one(loss, teacher_outputs[name], student_outputs[name])
                    for name, loss in sorted(self.soft_losses.items())
                ]
            )
        return one(self.soft_losses, teacher_outputs, student_outputs)

    def _hidden_state_loss(self, teacher_blocks, student_blocks, token_mask):
        weight = tf.cast(token_mask, tf.float32)
        terms = []
        for s, t in self.layer_map:
            student = tf.cast(student_blocks[s], tf.float32)
            if self.projection is not None:
                student = self.projection(student)
            terms.append(
                self.hidden_state_loss(
                    tf.stop_gradient(teacher_blocks[t]), student, sample_weight=weight
                )
            )
        return tf.add_n(terms) / len(terms)

    def _attention_loss(self, x, teacher_blocks, student_blocks, token_mask):
        weight = tf.cast(token_mask, tf.float32)
        terms = []
        for s, t in self.layer_map:
            student_input = self._block_input(self.student.encoder, x, student_blocks, s)
            teacher_input = self._block_input(self.teacher.encoder, x, teacher_blocks, t)
            student_probs = attention_probabilities(
                self.student.encoder.transformer_layers[s], student_input, token_mask
            )
            teacher_probs = attention_probabilities(
                self.teacher.encoder.transformer_layers[t], teacher_input, token_mask
            )
            terms.append(
                self.attention_loss(
                    tf.stop_gradient(teacher_probs), student_probs, sample_weight=weight
                )
            )
        return tf.add_n(terms) / len(terms)

    @staticmethod
    def _block_input(encoder, x, blocks, index):
        """The input of block `index`: the previous block's output, or for block 0 the
        embeddings (computed again, in inference mode)."""
        if index > 0:
            return blocks[index - 1]
        word_ids = tf.reshape(x[INPUT_WORD_IDS], [-1, tf.shape(x[INPUT_WORD_IDS])[-1]])
        type_ids = tf.reshape(x[INPUT_TYPE_IDS], [-1, tf.shape(x[INPUT_TYPE_IDS])[-1]])
        return encoder.embeddings(word_ids, type_ids, training=False)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        student_outputs, _ = self._split(y_pred)
        return super().compute_metrics(x, y, student_outputs, sample_weight)

    def get_config(self) -> dict[str, Any]:
        # Trained through the runner and saved as its student (`.student`): the pair
        # itself is not a model file.
        raise NotImplementedError("save TaskDistiller.student, the model it trains")
