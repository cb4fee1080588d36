"""Learning-rate schedules: linear warmup, then linear (polynomial), cosine or no decay.

`WarmupPolynomialDecay` is ours (no Keras schedule has linear warmup then polynomial
decay), with google-research/bert's exact variant (`decay_from_step_zero`); warmup +
cosine is `keras.optimizers.schedules.CosineDecay`. `create_learning_rate_schedule`
picks one by name (`optimization.create_optimizer` calls it with the run's steps).

Example:

```python
from keras_bert_zoo.training import schedules

schedule = schedules.create_learning_rate_schedule("linear", 2e-5, 1000, warmup_steps=100)
float(schedule(50))  # 1e-05, halfway up the warmup
```
"""

from __future__ import annotations

import keras
from keras import ops

from keras_bert_zoo.utils.errors import UserError

SCHEDULES = ("linear", "cosine", "constant")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak_learning_rate`, then polynomial decay to a floor.

    ```
    step < warmup_steps:  lr = peak * step / warmup_steps
    otherwise:            lr = (peak - end) * (1 - p)**power + end,
                          p = min(step - warmup_steps, decay_steps) / decay_steps
    ```

    with `decay_steps = total_steps - warmup_steps`: the decay starts where the warmup
    ends, so the rate is continuous. With `decay_from_step_zero=True` it is exactly
    google-research/bert's `create_optimizer` instead: `p = min(step, total_steps) /
    total_steps` (the warmup overrides the first steps, so after the warmup the rate
    drops to `peak * (1 - warmup_steps / total_steps)`).

    Args:
        peak_learning_rate: float. Rate at the end of the warmup.
        total_steps: int. Optimizer steps of the whole run.
        warmup_steps: int. Length of the linear warmup (0 for none).
        end_learning_rate: float. Floor reached at `total_steps` and kept after it.
        power: float. 1.0 decays linearly.
        decay_from_step_zero: bool. google-research/bert's variant (see above).
        name: str.

    Example:

    ```python
    schedule = WarmupPolynomialDecay(1e-4, total_steps=1_000_000, warmup_steps=10_000)
    float(schedule(5_000))  # 5e-05
    ```
    """

    def __init__(
        self,
        peak_learning_rate,
        total_steps,
        warmup_steps=0,
        end_learning_rate=0.0,
        power=1.0,
        decay_from_step_zero=False,
        name="WarmupPolynomialDecay",
    ):
        super().__init__()
        if total_steps <= 0:
            raise UserError(f"total_steps must be positive, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise UserError(
                f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)
        self.decay_from_step_zero = bool(decay_from_step_zero)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak = ops.cast(self.peak_learning_rate, "float32")
        end = ops.cast(self.end_learning_rate, "float32")
        if self.decay_from_step_zero:
            decay_start, decay_steps = 0.0, float(self.total_steps)
        else:
            decay_start = float(self.warmup_steps)
            decay_steps = float(max(self.total_steps - self.warmup_steps, 1))
        progress = ops.minimum(ops.maximum(step - decay_start, 0.0), decay_steps) / decay_steps
        decayed = (peak - end) * ops.power(1.0 - progress, self.power) + end
        if self.warmup_steps == 0:
            return decayed
        warmup = peak * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "decay_from_step_zero": self.decay_from_step_zero,
            "name": self.name,
        }


def create_learning_rate_schedule(
    schedule: str,
    peak_learning_rate: float,
    total_steps: int,
    warmup_steps: int = 0,
    end_learning_rate: float = 0.0,
    power: float = 1.0,
    decay_from_step_zero: bool = False,
) -> keras.optimizers.schedules.LearningRateSchedule:
    """The learning-rate schedule named `schedule`.

    Args:
        schedule: `"linear"` (linear warmup, then polynomial decay with `power`; 1.0 is
            linear), `"cosine"` (linear warmup, then cosine decay) or `"constant"`
            (linear warmup, then `peak_learning_rate`).
        peak_learning_rate: float. Rate reached at the end of the warmup.
        total_steps: int. Optimizer steps of the run (warmup included).
        warmup_steps: int.
        end_learning_rate: float. Floor at the end of the decay.
        power: float. Exponent of the polynomial decay.
        decay_from_step_zero: bool. google-research/bert's linear variant (see
            `WarmupPolynomialDecay`).

    Returns:
        A Keras `LearningRateSchedule` called with the optimizer's step.
    """
    if schedule == "linear":
        return WarmupPolynomialDecay(
            peak_learning_rate,
            total_steps,
            warmup_steps,
            end_learning_rate,
            power,
            decay_from_step_zero=decay_from_step_zero,
        )
    if schedule == "constant":
        return WarmupPolynomialDecay(
            peak_learning_rate, total_steps, warmup_steps, end_learning_rate=peak_learning_rate
        )
    if schedule == "cosine":
        if not 0 <= warmup_steps < total_steps:
            raise UserError(
                f"warmup_steps must be in [0, total_steps={total_steps}), got {warmup_steps}"
            )
        alpha = end_learning_rate / peak_learning_rate if peak_learning_rate else 0.0
        if warmup_steps == 0:
            return keras.optimizers.schedules.CosineDecay(
                peak_learning_rate, decay_steps=total_steps, alpha=alpha
            )
        return keras.optimizers.schedules.CosineDecay(
            0.0,
            decay_steps=total_steps - warmup_steps,
            alpha=alpha,
            warmup_target=peak_learning_rate,
            warmup_steps=warmup_steps,
        )
    raise UserError(f"Unknown learning-rate schedule {schedule!r}; choose one of {SCHEDULES}")
