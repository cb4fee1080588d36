"""What a training run is doing: the line a stop request prints, how long a loop of
steps may run before it reports, and the parts of one run (`Run`).

A run goes through `TRACING` (the loop is traced before its first call: a stop request
abandons it at once, no step has run), `FIRST_STEP` (the first call instantiates the
function, XLA compiles the step; a stop request is honoured before the first step),
then `TRAINING` and `EVALUATING` in turn. The first loop reports after
`FIRST_REPORT_SECONDS` of steps, the others after `progress_every_seconds`: a
progress line comes soon and often whatever `steps_per_loop` is.

Example:

```python
phase = RunPhase(progress_every_seconds=30)
phase.doing = TRACING
phase.what_a_stop_does(step=0)  # "stopping now, while the training step is traced (...)"
phase.loop_limit()  # 30.0 (5.0 in FIRST_STEP)
```
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from keras_bert_zoo.utils import interrupts

if TYPE_CHECKING:  # the parts import nothing of this module; annotations only
    from keras_bert_zoo.training.evaluation import Evaluation
    from keras_bert_zoo.training.reporting import Reporter
    from keras_bert_zoo.training.run_checkpoints import RunCheckpoints

TRACING, FIRST_STEP, TRAINING, EVALUATING = "tracing", "first step", "training", "evaluating"

# The first loop of a run reports after this many seconds of steps (or after its first
# step, when that takes longer): what the user sees first is the step's speed and loss.
FIRST_REPORT_SECONDS = 5.0


class RunPhase:
    """The phase of one `Trainer.train` call (see the module docstring).

    Args:
        progress_every_seconds: a loop's time limit (0: none; the first loop's too).

    Attributes:
        doing: `TRACING`, `FIRST_STEP`, `TRAINING` or `EVALUATING` (read from the stop
            requests' watcher thread).
    """

    def __init__(self, progress_every_seconds: float):
        self.progress_every_seconds = float(progress_every_seconds)
        self.doing = TRAINING

    def what_a_stop_does(self, step: int) -> str:
        """What a stop request does now, at `step`, for the line it prints."""
        since = f"no step has run since step {step}: nothing to save"
        if self.doing == TRACING:
            return f"stopping now, while the training step is traced ({since})"
        if self.doing == FIRST_STEP:
            return f"stopping once the training step has compiled, before its first step ({since})"
        if self.doing == EVALUATING:
            return f"stopping after the evaluation of step {step}, with a checkpoint"
        return interrupts.NEXT_STEP

    def loop_limit(self) -> float:
        """The next loop's time limit in seconds (`inf`: none)."""
        if not self.progress_every_seconds:
            return float("inf")
        if self.doing == FIRST_STEP:
            return min(FIRST_REPORT_SECONDS, self.progress_every_seconds)
        return self.progress_every_seconds


def loop_steps(step: int, num_steps: int, steps_per_loop: int, every: tuple[int, ...]) -> int:
    """The steps of the next loop from `step`: `steps_per_loop`, fewer at the end, and a
    loop stops at the next multiple of each nonzero `every` (checkpoints, evaluations:
    both happen between loops)."""
    steps = min(steps_per_loop, num_steps - step)
    for interval in every:
        if interval:
            steps = min(steps, interval - step % interval)
    return steps


@dataclasses.dataclass
class Run:
    """The parts of one `Trainer.train` call and the step it reached."""

    num_steps: int
    step: int
    checkpoints: RunCheckpoints
    evaluation: Evaluation
    reporter: Reporter
