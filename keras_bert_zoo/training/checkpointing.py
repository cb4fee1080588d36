"""Training checkpoints: atomic, the last N kept, corrupt ones skipped on restore.

Layout under `<model_dir>/checkpoints/`:

```
ckpt-00001000/                  one directory per checkpoint, renamed into place whole
  state.index, state.data-*     every model variable (dropout seed states included),
                                every optimizer variable (step, slots, loss scale) and
                                the trainer's own variables
  input-worker-0.index, .data-* the input pipeline's tf.data iterator (iterator mode)
  checkpoint.json               step, variable manifest, file sizes (written last)
ckpt-00001000.worker-1/         other workers' iterators (multi-worker runs only)
```

Variables are saved by position in `model.variables` / `optimizer.variables`, with
their paths and shapes in `checkpoint.json`: Keras 3 models are not tracked by
`tf.train.Checkpoint`'s object graph (only the optimizer's copy of the trainable
variables is), `save_weights` skips the dropout seed generators, and positions do not
depend on the auto-generated layer names (`seed_generator_7`) that vary with what else
the process built. A checkpoint whose manifest disagrees with the model is refused with
the first differing variable named.

A checkpoint is written into a hidden temporary directory and renamed (utils.atomic),
so a kill leaves either the whole checkpoint or none. On restore, candidates are tried
newest first; one with a missing or short file (sizes are recorded) or one TensorFlow
cannot read (CRC mismatch, truncation) is reported by path and the previous one is used.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Sequence

import tensorflow as tf

from keras_bert_zoo.utils import run_layout
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
_NAME = re.compile(r"^ckpt-(\d+)$")
_META = "checkpoint.json"
_STATE = "state"


class CheckpointCorruptError(RuntimeError):
    """A checkpoint on disk that cannot be read back; the message names the path."""


class CheckpointMismatchError(UserError):
    """A readable checkpoint written by a different model or optimizer."""


class CheckpointDiskFullError(UserError):
    """The disk filled while a checkpoint was written: the partial one is removed, the
    ones before it are whole, and the message says so (a tool ends on it in one line)."""


# What a full disk raises: TensorFlow's writers, ResourceExhaustedError; Python's, an
# OSError with one of these numbers (a quota counts as full too).
_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def _is_disk_full(error: BaseException) -> bool:
    if isinstance(error, tf.errors.ResourceExhaustedError):
        return True
    return isinstance(error, OSError) and error.errno in _DISK_FULL_ERRNOS


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}"


def _input_prefix(worker: int) -> str:
    return f"input-worker-{worker}"


def _manifest(variables: Sequence) -> list[list]:
    return [
        [getattr(v, "path", None) or v.name, list(v.shape), str(getattr(v.dtype, "name", v.dtype))]
        for v in variables
    ]


def _loose(path: str) -> str:
    # Auto-generated layer names carry process-wide counters (seed_generator_3).
    return re.sub(r"_\d+(?=/|$)", "", path)


def _file_sizes(directory: str) -> dict[str, int]:
    return {
        name: os.path.getsize(os.path.join(directory, name))
        for name in sorted(os.listdir(directory))
        if name != _META and os.path.isfile(os.path.join(directory, name))
    }


def _check_sizes(directory: str, expected: dict[str, int]) -> None:
    for name, size in sorted(expected.items()):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise CheckpointCorruptError(f"{path} is missing")
        actual = os.path.getsize(path)
        if actual != size:
            raise CheckpointCorruptError(
                f"{path} has {actual} bytes, the checkpoint recorded {size} (truncated or "
                "overwritten)"
            )


def checkpoint_steps(directory: str) -> list[int]:
    """Steps of the complete checkpoints (`ckpt-N` directories) in `directory`, sorted."""
    if not os.path.isdir(directory):
        return []
    steps = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match and os.path.isdir(os.path.join(directory, name)):
            steps.append(int(match.group(1)))
    return sorted(steps)


def read_checkpoint_metadata(checkpoint_dir: str) -> dict:
    """The `checkpoint.json` of one checkpoint directory, after checking its file sizes."""
    path = os.path.join(checkpoint_dir, _META)
    try:
        with open(path, encoding="utf-8") as f:
            metadata = json.load(f)
    except FileNotFoundError as error:
        raise CheckpointCorruptError(f"{path} is missing") from error
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointCorruptError(f"{path} is unreadable: {error}") from error
    if metadata.get("format_version") != FORMAT_VERSION:
        raise CheckpointMismatchError(
            f"{path} has format_version {metadata.get('format_version')!r}; this "
            f"version of keras_bert_zoo reads {FORMAT_VERSION}"
        )
    _check_sizes(checkpoint_dir, metadata.get("files", {}))
    return metadata


class CheckpointManager:
    """Writes and restores the training state of one run.

    Args:
        directory: the checkpoint directory (`<model_dir>/checkpoints`).
        model_variables: `model.variables` (the dropout seed states included).
        optimizer_variables: `optimizer.variables` (a `LossScaleOptimizer`'s include its
            scale and the inner optimizer's).
        trainer_variables: the loop's own variables by name (`{"global_step": ...}`).
        max_to_keep: how many checkpoints to keep (older ones are deleted).
        is_chief: whether this process writes the shared state (multi-worker: worker 0).
        worker_index: this process's input pipeline.
        num_workers: number of input pipelines (processes).
        barrier: callable that returns when every worker has called it (multi-worker).
    """

    def __init__(
        self,
        directory: str,
        *,
        model_variables: Sequence,
        optimizer_variables: Sequence,
        trainer_variables: dict,
        max_to_keep: int = 3,
        is_chief: bool = True,
        worker_index: int = 0,
        num_workers: int = 1,
        barrier=None,
    ):
        if max_to_keep < 1:
            raise UserError(f"max_to_keep must be >= 1, got {max_to_keep}")
        self.directory = os.path.abspath(directory)
        self.max_to_keep = max_to_keep
        self.is_chief = is_chief
        self.worker_index = worker_index
        self.num_workers = num_workers
        self._barrier = barrier or (lambda: None)
        self._model_variables = list(model_variables)
        self._optimizer_variables = list(optimizer_variables)
        self._trainer_names = sorted(trainer_variables)
        self._state = tf.train.Checkpoint(
            model=list(self._model_variables),
            optimizer=list(self._optimizer_variables),
            trainer=[trainer_variables[name] for name in self._trainer_names],
        )
        if is_chief:
            os.makedirs(self.directory, exist_ok=True)
            self._remove_stale_temporaries()

    # === Listing ===

    def steps(self) -> list[int]:
        """Steps of the complete checkpoints on disk, oldest first."""
        return checkpoint_steps(self.directory)

    def path(self, step: int) -> str:
        return os.path.join(self.directory, checkpoint_name(step))

    def latest_step(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def _remove_stale_temporaries(self):
        # A kill during a write leaves `.ckpt-N.tmp-*` behind (utils.atomic's names).
        for name in os.listdir(self.directory):
            if name.startswith(".ckpt-") and ".tmp-" in name:
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    # === Writing ===

    def save(self, step: int, iterator=None, extra_metadata: dict | None = None) -> str:
        """Writes the state at `step` (and this worker's `iterator`); returns the path.

        Raises:
            CheckpointDiskFullError: the disk filled during the write (nothing of this
                checkpoint is left; the message names the newest whole one).
        """
        try:
            return self._save(step, iterator, extra_metadata)
        except (tf.errors.ResourceExhaustedError, OSError) as error:
            if not _is_disk_full(error):
                raise
            raise CheckpointDiskFullError(self._disk_full_message(step)) from error

    def _disk_full_message(self, step: int) -> str:
        """One line: where the disk filled, the space a checkpoint needs, what is kept."""
        latest = self.latest_step()
        needed = self._checkpoint_bytes(latest)
        free = shutil.disk_usage(self.directory).free
        kept = (
            f"nothing is lost: {self.path(latest)} (step {latest}) is whole and the same "
            "command resumes from it"
            if latest is not None
            else "no checkpoint of this run was written yet: the same command starts over"
        )
        return (
            f"No space left on the device of {self.directory} writing the checkpoint of step "
            f"{step} (a checkpoint needs about {needed / 1e6:,.0f} MB, {free / 1e6:,.0f} MB "
            f"are free); {kept} once there is room"
        )

    def _checkpoint_bytes(self, step: int | None) -> int:
        """The bytes of the checkpoint of `step` as its manifest recorded them, or (none
        readable) of the variables a checkpoint holds."""
        if step is not None:
            try:
                return sum(self.read_metadata(step).get("files", {}).values())
            except (CheckpointCorruptError, CheckpointMismatchError):
                pass
        variables = (*self._model_variables, *self._optimizer_variables)
        return sum(
            math.prod(variable.shape) * tf.as_dtype(variable.dtype).size for variable in variables
        )

    def _save(self, step: int, iterator, extra_metadata: dict | None) -> str:
        final = self.path(step)
        start = time.time()
        if self.num_workers > 1 and self.worker_index != 0 and iterator is not None:
            with atomic_directory(f"{final}.worker-{self.worker_index}", merge=False) as temp:
                prefix = os.path.join(temp, _input_prefix(self.worker_index))
                tf.train.Checkpoint(iterator=iterator).write(prefix)
                write_json_atomically(os.path.join(temp, _META), {"files": _file_sizes(temp)})
        # Worker checkpoints are complete before the chief's directory (the one restore
        # looks for) appears.
        self._barrier()
        if self.is_chief:
            if os.path.exists(final):
                shutil.rmtree(final)  # a rerun reaching the same step after a restore
            with atomic_directory(final, merge=False) as temp:
                self._state.write(os.path.join(temp, _STATE))
                if iterator is not None:
                    prefix = os.path.join(temp, _input_prefix(self.worker_index))
                    tf.train.Checkpoint(iterator=iterator).write(prefix)
                metadata = {
                    "format_version": FORMAT_VERSION,
                    "step": int(step),
                    "time": time.time(),
                    "num_workers": self.num_workers,
                    "input_state": "iterator" if iterator is not None else "none",
                    "files": _file_sizes(temp),
                    "model_variables": _manifest(self._model_variables),
                    "optimizer_variables": _manifest(self._optimizer_variables),
                    "trainer_variables": self._trainer_names,
                    **(extra_metadata or {}),
                }
                write_json_atomically(os.path.join(temp, _META), metadata, indent=1)
            self._delete_old()
            logger.info("Saved checkpoint %s in %.1fs", final, time.time() - start)
        self._barrier()
        return final

    def _delete_old(self):
        steps = self.steps()
        for step in steps[: max(0, len(steps) - self.max_to_keep)]:
            path = self.path(step)
            shutil.rmtree(path, ignore_errors=True)
            for name in os.listdir(self.directory):
                if name.startswith(checkpoint_name(step) + ".worker-"):
                    shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    # === Reading ===

    def read_metadata(self, step: int) -> dict:
        return read_checkpoint_metadata(self.path(step))

    def _check_manifest(self, metadata: dict, directory: str):
        for kind, variables in (
            ("model", self._model_variables),
            ("optimizer", self._optimizer_variables),
        ):
            saved = metadata.get(f"{kind}_variables", [])
            here = _manifest(variables)
            if len(saved) != len(here):
                raise CheckpointMismatchError(
                    f"{directory} holds {len(saved)} {kind} variables, this {kind} has "
                    f"{len(here)}: it was written by a different {kind} configuration"
                )
            for index, (old, new) in enumerate(zip(saved, here, strict=True)):
                if old[1:] != new[1:] or _loose(old[0]) != _loose(new[0]):
                    raise CheckpointMismatchError(
                        f"{directory}: {kind} variable {index} is {old[0]} {old[1]} {old[2]} "
                        f"there and {new[0]} {new[1]} {new[2]} here; the checkpoint was "
                        f"written by a different {kind}"
                    )
        if metadata.get("trainer_variables") != self._trainer_names:
            raise CheckpointMismatchError(
                f"{directory} has trainer variables {metadata.get('trainer_variables')}, "
                f"expected {self._trainer_names}"
            )

    def _restore_step(self, step: int, iterator) -> dict:
        directory = self.path(step)
        metadata = self.read_metadata(step)
        self._check_manifest(metadata, directory)
        if iterator is not None and metadata.get("input_state") != "iterator":
            raise CheckpointMismatchError(
                f"{directory} holds no input-pipeline state (it was written with "
                "input_state='skip'); resume with the same input_state"
            )
        if metadata.get("num_workers", 1) != self.num_workers:
            raise CheckpointMismatchError(
                f"{directory} was written by {metadata.get('num_workers')} workers, this run "
                f"has {self.num_workers}: the input positions cannot be mapped"
            )
        input_directory = directory
        if iterator is not None and self.worker_index != 0:
            input_directory = f"{directory}.worker-{self.worker_index}"
            worker_meta = os.path.join(input_directory, _META)
            try:
                with open(worker_meta, encoding="utf-8") as f:
                    _check_sizes(input_directory, json.load(f).get("files", {}))
            except (OSError, json.JSONDecodeError) as error:
                raise CheckpointCorruptError(f"{worker_meta} is unreadable: {error}") from error
        try:
            self._state.read(os.path.join(directory, _STATE)).assert_consumed()
            if iterator is not None:
                prefix = os.path.join(input_directory, _input_prefix(self.worker_index))
                tf.train.Checkpoint(iterator=iterator).read(prefix).assert_consumed()
        except (tf.errors.OpError, AssertionError, ValueError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CheckpointCorruptError(
                f"{directory} could not be read: {type(error).__name__}: {first_line}"
            ) from error
        return metadata

    def restore(self, iterator=None, step: int | None = None) -> dict | None:
        """Restores the newest readable checkpoint (or exactly `step`).

        Args:
            iterator: this worker's tf.data iterator, restored from the same checkpoint.
            step: restore this step only (no fallback).

        Returns:
            The restored checkpoint's metadata, or None when there is none.

        Raises:
            CheckpointMismatchError: the checkpoint belongs to another model or setup.
            CheckpointCorruptError: `step` was given and cannot be read.
        """
        if step is not None:
            return self._restore_step(step, iterator)
        for candidate in reversed(self.steps()):
            try:
                metadata = self._restore_step(candidate, iterator)
            except CheckpointCorruptError as error:
                logger.warning(
                    "Checkpoint %s is unusable: %s. Falling back to the previous checkpoint.",
                    self.path(candidate),
                    error,
                )
                continue
            logger.info("Restored checkpoint %s (step %d)", self.path(candidate), candidate)
            return metadata
        return None


def _is_seed_state(entry_path: str) -> bool:
    # Keras' SeedGenerator variable; Dropout(rate=0) has none, so models that differ
    # only in dropout differ in these.
    return entry_path.rsplit("/", 1)[-1] == "seed_generator_state"


def _read_model_weights(model, checkpoint_dir: str) -> int:
    metadata = read_checkpoint_metadata(checkpoint_dir)
    saved = [
        (index, entry)
        for index, entry in enumerate(metadata.get("model_variables", []))
        if not _is_seed_state(entry[0])
    ]
    here = [
        (variable, entry)
        for variable, entry in zip(model.variables, _manifest(model.variables), strict=True)
        if not _is_seed_state(entry[0])
    ]
    if len(saved) != len(here):
        raise CheckpointMismatchError(
            f"{checkpoint_dir} holds {len(saved)} model weights, this model has {len(here)}"
        )
    for (_, old), (_, new) in zip(saved, here, strict=True):
        if old[1:] != new[1:] or _loose(old[0]) != _loose(new[0]):
            raise CheckpointMismatchError(
                f"{checkpoint_dir}: weight {old[0]} {old[1]} {old[2]} there, {new[0]} {new[1]} "
                f"{new[2]} here; the checkpoint was written by a different model"
            )
    try:
        reader = tf.train.load_checkpoint(os.path.join(checkpoint_dir, _STATE))
        # Every tensor is read before the first assignment: all or nothing.
        values = [
            reader.get_tensor(f"model/{index}/.ATTRIBUTES/VARIABLE_VALUE") for index, _ in saved
        ]
    except tf.errors.OpError as error:
        raise CheckpointCorruptError(
            f"{checkpoint_dir} could not be read: {type(error).__name__}: "
            f"{str(error).strip().splitlines()[0]}"
        ) from error
    for (variable, _), value in zip(here, values, strict=True):
        variable.assign(value)
    return int(metadata["step"])


def load_checkpoint_weights(model, path: str) -> int:
    """Loads the model weights of a training checkpoint into `model`; returns its step.

    For inference or export from a training run: `model` may differ from the trained one
    in dtype policy (a float32 copy of a `mixed_bfloat16` or loss-scaled `mixed_float16`
    run: their variables are float32 either way) and in dropout (the dropout RNG states
    are skipped), and needs no optimizer. The newest readable checkpoint is used, falling
    back past corrupt ones like a resumed run.

    Args:
        model: a built model of the same architecture as the trained one.
        path: a `Trainer` model_dir, its `checkpoints/` directory, or one `ckpt-N`
            directory.

    Raises:
        FileNotFoundError: no checkpoint under `path`.
        CheckpointMismatchError: the checkpoint holds another architecture.
        CheckpointCorruptError: `path` names one checkpoint and it cannot be read.
    """
    path = os.path.abspath(os.fspath(path))
    if _NAME.match(os.path.basename(path)) and os.path.isdir(path):
        return _read_model_weights(model, path)
    directory = os.path.join(path, run_layout.CHECKPOINTS_DIR)
    if not os.path.isdir(directory):
        directory = path
    steps = checkpoint_steps(directory)
    if not steps:
        raise FileNotFoundError(f"No training checkpoint (ckpt-N directory) under {path}")
    for step in reversed(steps):
        candidate = os.path.join(directory, checkpoint_name(step))
        try:
            return _read_model_weights(model, candidate)
        except CheckpointCorruptError as error:
            logger.warning(
                "Checkpoint %s is unusable: %s. Trying the previous one.", candidate, error
            )
    raise FileNotFoundError(f"No readable training checkpoint under {path}")
