"""BERT's optimizers and learning-rate schedules, from flags or Python.

What is Keras' own and what is ours, and why:

- AdamW: `keras.optimizers.AdamW` (decoupled weight decay, bias-corrected moments)
  with BERT's `epsilon=1e-6`. Keras matches `exclude_from_weight_decay(var_names=...)`
  against a variable's short name (`gamma`, `bias`), which cannot tell a LayerNorm
  `beta` from anything else; our subclass only resolves the exclusion patterns against
  the variable *path* (`transformer_layer_0/attention_layer_norm/gamma`) when it is
  built, and hands Keras the resulting variable list. The update is Keras'.
  google-research/bert's `AdamWeightDecayOptimizer` skips the bias correction; every
  current implementation (Keras, Model Garden, Hugging Face) applies it, and so do we.
- LAMB: ours. `keras.optimizers.Lamb` applies the trust ratio to every variable and
  decays weights outside it; BERT's LAMB (You et al. 2019, as in TF Addons and Model
  Garden) adds the decay to the update *before* the trust ratio and exempts LayerNorm
  and bias variables from both the decay and the layer adaptation.
- Schedules (`schedules.py`): `WarmupPolynomialDecay` is ours (no Keras schedule has
  linear warmup then polynomial decay); warmup + cosine is
  `keras.optimizers.schedules.CosineDecay`.
- Clipping by global norm: Keras' `global_clipnorm`. The training loop all-reduces the
  gradients before it calls the optimizer, so the norm Keras clips by is the norm of
  the global gradient (see `keras_bert_zoo.training.step`).
- Gradient accumulation and dynamic loss scaling happen in the training step
  (`Trainer(gradient_accumulation_steps=...)`, and a `keras.optimizers.
  LossScaleOptimizer` whose scale the step drives): under a tf.distribute strategy
  Keras' `gradient_accumulation_steps` fails ("merge_call called while defining a new
  graph", keras-team/keras #20582) and counts schedule steps in micro-batches, and
  `LossScaleOptimizer.apply` checks only the local replica's gradients for inf/NaN.

Example:

```python
import keras
from keras_bert_zoo import BertConfig
from keras_bert_zoo.models import BertClassifier, BertEncoder
from keras_bert_zoo.training import optimization

config = optimization.OptimizerConfig(
    optimizer="adamw", learning_rate=2e-5, warmup_steps=100, weight_decay=0.01
)
optimizer = optimization.create_optimizer(config, num_train_steps=1000)
encoder = BertEncoder.from_bert_config(BertConfig.from_preset("bert_tiny_uncased"))
model = BertClassifier(encoder, num_classes=2)
model.compile(
    optimizer=optimizer,
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
print(float(optimizer.learning_rate))  # 0.0 at step 0, 2e-5 at step 100, then decays
```
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import keras
import tensorflow as tf
from keras import ops

from keras_bert_zoo.training.schedules import SCHEDULES, create_learning_rate_schedule
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

# LayerNorm and bias variables are neither decayed nor layer-adapted (google-research/
# bert `exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]`). Patterns are
# regular expressions searched in a variable's path.
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")
# Added by `exclude_embeddings_from_weight_decay=True`: the word, position and segment
# tables of `BertEmbeddings` (and of Hugging Face style names).
EMBEDDING_PATTERNS = ("word_embeddings", "position_embeddings", "token_type_embeddings")

OPTIMIZERS = ("adamw", "lamb")

__all__ = [
    "DEFAULT_WEIGHT_DECAY_EXCLUSIONS",
    "EMBEDDING_PATTERNS",
    "OPTIMIZERS",
    "SCHEDULES",
    "AdamW",
    "Lamb",
    "OptimizerConfig",
    "create_learning_rate_schedule",
    "create_optimizer",
]

# The schedule class moved to `schedules` with the schedules (one release).
__getattr__ = moved_names(
    __name__, ["keras_bert_zoo.training.schedules"], only=("WarmupPolynomialDecay",)
)


def _compile_patterns(patterns: Sequence[str] | None) -> re.Pattern | None:
    patterns = tuple(patterns or ())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise UserError(f"Invalid exclusion pattern {pattern!r}: {error}") from error
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def _variable_path(variable) -> str:
    return getattr(variable, "path", None) or variable.name


def matches_any(variable, patterns: Sequence[str] | None) -> bool:
    """Whether one of the regular expressions `patterns` occurs in `variable`'s path."""
    compiled = _compile_patterns(patterns)
    return compiled is not None and compiled.search(_variable_path(variable)) is not None


# === Optimizers ===


class _BertOptimizer:
    """What `AdamW` and `Lamb` share: BERT's defaults for the moment arguments and
    weight decay, and the variables spared the decay by their path.

    Put before the Keras optimizer in the bases. `Lamb` adds the decay inside its own
    update, so Keras' decoupled decay is left off there (`decoupled_weight_decay`);
    the rate is `weight_decay_rate` either way.
    """

    default_name = None
    decoupled_weight_decay = True

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay_exclusions=DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
        name=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay if self.decoupled_weight_decay else None,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            name=name or self.default_name,
            **kwargs,
        )
        self.weight_decay_rate = float(weight_decay or 0.0)
        self.weight_decay_exclusions = tuple(weight_decay_exclusions or ())
        _compile_patterns(self.weight_decay_exclusions)

    def get_config(self):
        config = super().get_config()
        config["weight_decay_exclusions"] = list(self.weight_decay_exclusions)
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class AdamW(_BertOptimizer, keras.optimizers.AdamW):
    """Keras' AdamW, excluding variables from weight decay by their path.

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay: float. Decoupled decay rate (0.01 in BERT).
        beta_1: float. First-moment decay.
        beta_2: float. Second-moment decay.
        epsilon: float. 1e-6 as in BERT (Keras' default is 1e-7).
        weight_decay_exclusions: regular expressions; a variable whose path contains a
            match is not decayed. Defaults to LayerNorm and bias variables.
        **kwargs: other `keras.optimizers.Optimizer` arguments (`global_clipnorm`, ...).

    Example:

    ```python
    optimizer = AdamW(learning_rate=1e-4, weight_decay=0.01, global_clipnorm=1.0)
    ```
    """

    default_name = "adamw"

    def build(self, var_list):
        if self.built:
            return
        # Keras' own name patterns see only `gamma`/`beta`/`bias`; resolve ours on the
        # paths and hand Keras the variables themselves.
        self.exclude_from_weight_decay(
            var_list=[v for v in var_list if matches_any(v, self.weight_decay_exclusions)]
        )
        super().build(var_list)

    def _apply_weight_decay(self, variables):
        """Keras' decoupled decay, `w -= w * weight_decay * learning_rate` for each
        decayed variable, with the learning rate's schedule evaluated once per step.

        Keras' TensorFlow backend evaluates the schedule inside the update of each
        decayed variable: a warmup-and-decay schedule is about 20 ops, and a training
        step traced them once per decayed kernel (362 of the 4,000 ops of a two-block
        BERT's step; 40 copies for MiniLM), and ran them each step (reads of the step
        counter are not merged by Grappler). The rate is the same value for every
        variable of a step, so it is computed once, in the same cross-replica context
        where Keras updates the variables.
        """
        if self.weight_decay is None:
            return

        def decay_all(distribution, variables, **kwargs):
            learning_rate = self.learning_rate

            def decay(variable):
                if self._use_weight_decay(variable):
                    rate = tf.cast(learning_rate, variable.dtype)
                    weight_decay = tf.cast(self.weight_decay, variable.dtype)
                    variable.assign_sub(variable * weight_decay * rate)

            for variable in variables:
                if isinstance(variable, keras.Variable):
                    variable = variable.value  # the tf.Variable that strategies update
                distribution.extended.update(variable, decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_all, self._distribution_strategy, variables
        )

    def update_step(self, gradient, variable, learning_rate):
        """Keras' Adam update as TensorFlow's fused `ResourceApplyAdam` kernel.

        The same arithmetic as `keras.optimizers.Adam.update_step` (moments updated in
        place, step size `lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`, epsilon added to
        `sqrt(v)`) in one pass over each variable instead of a dozen elementwise ops,
        most of them over the 7.8M-entry word-embedding table: the bert_mini
        pretraining step's optimizer thread time went from about 80 to 45 ms, and the
        step from 68.2 to 70.6 seq/s under mixed_bfloat16 and 49.9 to 50.9 in float32
        (interleaved, 2-core AMX Xeon; benchmarks/README.md). The decoupled weight
        decay runs before this (`_apply_weight_decay`), and Keras' update serves the cases the
        kernel does not (AMSGrad, sparse or non-float32 gradients, variables without a
        resource handle).
        """
        if (
            self.amsgrad
            or not isinstance(gradient, tf.Tensor)
            or not hasattr(variable, "handle")
            or variable.dtype != tf.float32
        ):
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        scalars = self._step_scalars or self._fused_adam_scalars()
        # `.handle` of a tf.distribute variable is the current device's copy inside
        # `strategy.extended.update`, where Keras calls `update_step`.
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            lr=ops.cast(learning_rate, "float32"),
            grad=ops.cast(gradient, "float32"),
            use_locking=False,
            **scalars,
        )

    def _fused_adam_scalars(self) -> dict:
        """The scalar inputs of `ResourceApplyAdam` at this step but the learning rate
        (which Keras hands each device's update), as float32 tensors."""
        step = ops.cast(self.iterations + 1, "float32")
        return {
            "beta1_power": ops.power(ops.cast(self.beta_1, "float32"), step),
            "beta2_power": ops.power(ops.cast(self.beta_2, "float32"), step),
            "beta1": ops.cast(self.beta_1, "float32"),
            "beta2": ops.cast(self.beta_2, "float32"),
            "epsilon": ops.cast(self.epsilon, "float32"),
        }

    _step_scalars = None

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        # The kernel's scalars are the same for every variable of a step: computed once
        # here (cross-replica; the learning rate comes per device, a PerReplica value
        # under mirrored strategies) instead of ten ops per variable in `update_step`
        # (1,575 of the 13,500 ops a MiniLM fine-tune traced; the same values).
        self._step_scalars = self._fused_adam_scalars()
        try:
            super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
        finally:
            self._step_scalars = None


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class Lamb(_BertOptimizer, keras.optimizers.Lamb):
    """LAMB as BERT uses it (You et al., 2019; TF Addons / Model Garden `LAMB`).

    For each variable `w` with gradient `g` at step `t`:

    ```
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g**2
    update = (m / (1 - beta_1**t)) / (sqrt(v / (1 - beta_2**t)) + epsilon)
    update += weight_decay * w                       unless w is excluded from decay
    ratio = ||w|| / ||update|| (1 if either is 0)    unless w is excluded from adaptation
    w -= learning_rate * ratio * update
    ```

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay: float. Decay rate added to the update (0.01 in BERT).
        beta_1: float.
        beta_2: float.
        epsilon: float. 1e-6 as in BERT.
        weight_decay_exclusions: regular expressions on variable paths; matches are not
            decayed. Defaults to LayerNorm and bias variables.
        layer_adaptation_exclusions: regular expressions on variable paths; matches get
            no trust ratio (ratio 1). None takes `weight_decay_exclusions`, as in BERT.
        **kwargs: other `keras.optimizers.Optimizer` arguments (`global_clipnorm`, ...).

    Example:

    ```python
    optimizer = Lamb(learning_rate=1e-3, weight_decay=0.01)
    ```
    """

    default_name = "lamb"
    # Keras' decoupled decay (applied outside the trust ratio) stays off; the decay is
    # part of the update below.
    decoupled_weight_decay = False

    def __init__(self, *args, layer_adaptation_exclusions=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.layer_adaptation_exclusions = (
            None if layer_adaptation_exclusions is None else tuple(layer_adaptation_exclusions)
        )
        _compile_patterns(self.layer_adaptation_exclusions)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        adaptation_exclusions = (
            self.weight_decay_exclusions
            if self.layer_adaptation_exclusions is None
            else self.layer_adaptation_exclusions
        )
        # Indexed like the slots; `update_step` receives per-device tf.Variables under a
        # strategy, which have no Keras path to match against.
        self._decays = [
            self.weight_decay_rate > 0 and not matches_any(v, self.weight_decay_exclusions)
            for v in var_list
        ]
        self._adapts = [not matches_any(v, adaptation_exclusions) for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        local_step = ops.cast(self.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, dtype), local_step)
        beta_2_power = ops.power(ops.cast(self.beta_2, dtype), local_step)

        m = self._momentums[index]
        v = self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))

        m_hat = ops.divide(m, 1.0 - beta_1_power)
        v_hat = ops.divide(v, 1.0 - beta_2_power)
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        if self._decays[index]:
            update = ops.add(
                update, ops.multiply(ops.cast(self.weight_decay_rate, dtype), variable)
            )
        if self._adapts[index]:
            weight_norm = ops.sqrt(ops.sum(ops.square(variable)))
            update_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(
                ops.greater(weight_norm, 0),
                ops.where(ops.greater(update_norm, 0), weight_norm / update_norm, 1.0),
                1.0,
            )
            update = ops.multiply(ratio, update)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "weight_decay": self.weight_decay_rate,
                "layer_adaptation_exclusions": (
                    None
                    if self.layer_adaptation_exclusions is None
                    else list(self.layer_adaptation_exclusions)
                ),
            }
        )
        return config


# === From a config ===


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """Everything `create_optimizer` needs; `TrainingOptions.optimizer_config()` fills it
    from a job's settings.

    Attributes:
        optimizer: `"adamw"` or `"lamb"`.
        learning_rate: peak learning rate.
        schedule: `"linear"`, `"cosine"` or `"constant"` (see
            `create_learning_rate_schedule`).
        warmup_steps: linear warmup length in optimizer steps. When None,
            `warmup_proportion` of the run's steps.
        warmup_proportion: fraction of the run used for warmup when `warmup_steps` is
            None (0.1 in BERT fine-tuning).
        end_learning_rate: floor of the decay.
        decay_power: exponent of the `"linear"` schedule's polynomial decay.
        decay_from_step_zero: google-research/bert's exact linear schedule.
        weight_decay: decay rate (0.01 in BERT; 0 disables).
        weight_decay_exclusions: regular expressions on variable paths exempt from the
            decay (and from LAMB's layer adaptation).
        exclude_embeddings_from_weight_decay: also exempt the embedding tables.
        beta_1, beta_2, epsilon: Adam/LAMB moments and epsilon (1e-6 as in BERT).
        clip_norm: clip gradients to this global norm (1.0 in BERT); None or 0 disables.
        loss_scale: wrap in a dynamic `keras.optimizers.LossScaleOptimizer`. None turns it
            on when the global dtype policy is `mixed_float16`.
    """

    optimizer: str = "adamw"
    learning_rate: float = 1e-4
    schedule: str = "linear"
    warmup_steps: int | None = None
    warmup_proportion: float = 0.0
    end_learning_rate: float = 0.0
    decay_power: float = 1.0
    decay_from_step_zero: bool = False
    weight_decay: float = 0.01
    weight_decay_exclusions: tuple[str, ...] = DEFAULT_WEIGHT_DECAY_EXCLUSIONS
    exclude_embeddings_from_weight_decay: bool = False
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float | None = 1.0
    loss_scale: bool | None = None

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise UserError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise UserError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.learning_rate <= 0:
            raise UserError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise UserError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise UserError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.weight_decay < 0:
            raise UserError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and self.clip_norm < 0:
            raise UserError(f"clip_norm must be >= 0, got {self.clip_norm}")

    def resolved_warmup_steps(self, total_steps: int) -> int:
        if self.warmup_steps is not None:
            return int(self.warmup_steps)
        return int(total_steps * self.warmup_proportion)

    def exclusions(self) -> tuple[str, ...]:
        patterns = tuple(self.weight_decay_exclusions)
        if self.exclude_embeddings_from_weight_decay:
            patterns += EMBEDDING_PATTERNS
        return patterns


def create_optimizer(config: OptimizerConfig, num_train_steps: int) -> keras.optimizers.Optimizer:
    """The optimizer `config` describes, with its learning-rate schedule.

    Call it inside the strategy scope the model is built in.

    Args:
        config: an `OptimizerConfig`.
        num_train_steps: optimizer steps of the run (after gradient accumulation: one
            step per global batch), for the schedule.

    Returns:
        `AdamW` or `Lamb` (with `global_clipnorm`), wrapped in a
        `keras.optimizers.LossScaleOptimizer` when loss scaling is on.
    """
    if num_train_steps <= 0:
        raise UserError(f"num_train_steps must be positive, got {num_train_steps}")
    schedule = create_learning_rate_schedule(
        config.schedule,
        config.learning_rate,
        num_train_steps,
        warmup_steps=config.resolved_warmup_steps(num_train_steps),
        end_learning_rate=config.end_learning_rate,
        power=config.decay_power,
        decay_from_step_zero=config.decay_from_step_zero,
    )
    common = dict(
        learning_rate=schedule,
        weight_decay=config.weight_decay,
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
        weight_decay_exclusions=config.exclusions(),
        global_clipnorm=config.clip_norm or None,
    )
    optimizer = AdamW(**common) if config.optimizer == "adamw" else Lamb(**common)
    loss_scale = config.loss_scale
    if loss_scale is None:
        loss_scale = keras.config.dtype_policy().name == "mixed_float16"
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
