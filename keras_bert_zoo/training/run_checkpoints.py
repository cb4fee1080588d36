"""When a training run checkpoints, what it resumes from, and stopping on request.

`checkpointing.CheckpointManager` is the format (atomic directories, a manifest, the
newest readable one restored); this is the loop's use of it.

Exact resume: a checkpoint holds every model variable with the dropout seed generators'
states, every optimizer variable (step, slots, so the learning-rate position; the loss
scale), the global step, and the input position: with `input_state="iterator"` each
worker's plain `tf.data` iterator state (tf.distribute iterators cannot be checkpointed,
so the loop feeds replicas from plain iterators, one input pipeline per worker, like
`distribute_datasets_from_function`); with `input_state="skip"` nothing, and on resume
the rebuilt pipeline skips the batches the restored steps consumed (for deterministic
pipelines whose buffers are too big to save, such as a `cache()`d fine-tuning set). The
same command, rerun after a SIGKILL at any point, ends with bitwise the same weights as
an uninterrupted run (tested on CPU, with and without XLA).

Stopping: SIGINT (Ctrl-C) or SIGTERM (a preemption notice) during `Trainer.train` stops
the loop at the next step (one worker breaks out of its compiled loop at once; several
workers agree at the end of the loop, so they stop at the same step); while the step is
traced, at once. A second Ctrl-C ends the process at once (`utils.interrupts`).

What this module does:

- restore: the newest readable checkpoint of `model_dir/checkpoints/`, with this
  worker's tf.data iterator in `input_state="iterator"`; the workers agree on the
  smallest step any of them restored (one that found none makes it an error), and
  restore that step;
- save: every `checkpoint_every` steps, at the end, when `checkpoint_every_seconds`
  passed (as Estimator's `save_checkpoints_secs`), and on a stop request; each one
  records the input mode, the accumulation and replica count, and whether the step's
  evaluation is still to be done (stopped between the step and its evaluation);
- stop: a SIGINT or SIGTERM (`utils.interrupts.StopRequests`) saves the step reached,
  unless it is saved already or no step has run (a fresh start stopped before its first
  step leaves nothing), and raises `utils.interrupts.Interrupted`; the same command
  resumes from it.

Example:

```python
checkpoints = RunCheckpoints(
    "/tmp/run", model=model, global_step=step_variable, agreement=WorkerAgreement(strategy),
)
restored_step = checkpoints.restore()  # None: a fresh start
checkpoints.begin()
...
if checkpoints.due(step, num_steps) or checkpoints.time_due():
    checkpoints.save(step)
```
"""

from __future__ import annotations

import logging
import os
import signal
import time

import keras
import tensorflow as tf

from keras_bert_zoo.training import distribute
from keras_bert_zoo.training.checkpointing import CheckpointManager
from keras_bert_zoo.utils import interrupts, run_layout

logger = logging.getLogger(__name__)

INPUT_STATES = ("iterator", "skip")


class RunCheckpoints:
    """The checkpoints of one training run (see the module docstring).

    Args:
        model_dir: the run directory (`checkpoints/` goes there).
        model: the compiled model: its variables and its optimizer's are saved.
        global_step: the loop's step variable, saved with them.
        agreement: the workers' `distribute.WorkerAgreement`.
        input_state: `"iterator"` (the tf.data iterator is saved) or `"skip"`.
        every: steps between checkpoints (0: only at the end).
        every_seconds: also save when this much time passed since the last save (0:
            never by time).
        keep: how many checkpoints to keep.
        metadata: what each checkpoint records besides the manager's own (the loop's
            accumulation and replica count).
    """

    def __init__(
        self,
        model_dir: str,
        *,
        model: keras.Model,
        global_step: tf.Variable,
        agreement: distribute.WorkerAgreement,
        input_state: str = "iterator",
        every: int = 1000,
        every_seconds: float = 600,
        keep: int = 3,
        metadata: dict | None = None,
    ):
        strategy = agreement.strategy
        self.manager = CheckpointManager(
            os.path.join(model_dir, run_layout.CHECKPOINTS_DIR),
            model_variables=model.variables,
            optimizer_variables=model.optimizer.variables,
            trainer_variables={"global_step": global_step},
            max_to_keep=keep,
            is_chief=distribute.is_chief(strategy),
            worker_index=distribute.worker_index(strategy),
            num_workers=agreement.num_workers,
            barrier=agreement.barrier,
        )
        self.agreement = agreement
        self.global_step = global_step
        self.input_state = input_state
        self.every = every
        self.every_seconds = every_seconds
        self.metadata = dict(metadata or {})
        self.restored_metadata: dict = {}
        self.restored_step: int | None = None
        self.last_save_time = time.time()

    @property
    def directory(self) -> str:
        return self.manager.directory

    def begin(self):
        """The run's steps start: time-based saves count from here."""
        self.last_save_time = time.time()

    def _iterator(self, iterator):
        return iterator if self.input_state == "iterator" else None

    # === Restore ===

    def restore(self, iterator=None) -> int | None:
        """The step restored from `model_dir`, the same on every worker, or None.

        Args:
            iterator: this worker's tf.data iterator (`input_state="iterator"`), made
                before the restore fills it.
        """
        iterator = self._iterator(iterator)
        metadata = self.manager.restore(iterator=iterator)
        self.restored_metadata = metadata or {}
        restored_step = None if metadata is None else int(self.global_step.numpy())
        found = -1 if restored_step is None else restored_step
        agreed = self.agreement.smallest(found)
        self.restored_step = restored_step
        if agreed == found:
            return restored_step
        if agreed < 0:
            raise RuntimeError(
                "Workers disagree on the checkpoint to resume from: another worker found "
                "none it could read. Remove the unreadable checkpoints and rerun"
            )
        self.restored_metadata = self.manager.restore(iterator=iterator, step=agreed)
        self.restored_step = agreed
        return agreed

    @property
    def pending_evaluation(self) -> bool:
        """Whether the restored checkpoint's evaluation was still to be done."""
        return bool(self.restored_metadata.get("pending_evaluation"))

    # === Save ===

    def due(self, step: int, num_steps: int) -> bool:
        """Whether `step` is checkpointed by count (every `every` steps, and the last)."""
        return step == num_steps or bool(self.every and step % self.every == 0)

    def time_due(self) -> bool:
        """Whether `every_seconds` passed since the last save (or the run's start)."""
        every = self.every_seconds
        return bool(every) and time.time() - self.last_save_time >= every

    def save(self, step: int, iterator=None, *, pending_evaluation: bool = False):
        """Saves the state at `step` (every worker calls it; the chief writes the state).

        Args:
            step: the global step.
            iterator: this worker's tf.data iterator (saved with `input_state="iterator"`).
            pending_evaluation: the step's evaluation is still to be done (a stop request
                came before it): the rerun does it.
        """
        self.manager.save(
            step,
            iterator=self._iterator(iterator),
            extra_metadata={
                "input_mode": self.input_state,
                **self.metadata,
                "pending_evaluation": pending_evaluation,
            },
        )
        self.last_save_time = time.time()

    def stop(self, step: int, num_steps: int, iterator=None, *, signal_number, pending_evaluation):
        """Saves `step` (unless saved already, or a fresh start's step 0) and raises
        `Interrupted`.

        Args:
            step, num_steps: the step reached and the run's last one.
            iterator: as `save`'s.
            signal_number: the signal that asked to stop; None when another worker was
                asked (the workers stop together).
            pending_evaluation: as `save`'s.

        Raises:
            utils.interrupts.Interrupted: always.
        """
        if signal_number is None:
            signal_number = signal.SIGTERM
        name = interrupts.signal_name(signal_number)
        if step == 0 and self.restored_step is None:
            # Nothing was trained: a checkpoint of the initial weights would only take
            # the time and the disk of one.
            raise interrupts.Interrupted(
                f"stopped at step 0 of {num_steps} ({name}), before the first step: nothing "
                "to save; the same command starts the run",
                signal_number,
            )
        if self.manager.latest_step() != step:
            self.save(step, iterator, pending_evaluation=pending_evaluation)
        raise interrupts.Interrupted(
            f"stopped at step {step} of {num_steps} ({name}); the same command resumes",
            signal_number,
        )

    def last_good_state(self) -> str:
        """What a run stopped by a non-finite loss leaves on disk, for its message."""
        latest = self.manager.latest_step()
        if latest is None:
            return "No checkpoint had been written yet."
        return (
            f"The newest checkpoint, {self.manager.path(latest)} (step {latest}), holds the "
            "last good state and was left as it was."
        )
