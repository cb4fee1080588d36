"""One `--distribution_strategy` flag for every training binary.

`get_strategy` builds the tf.distribute strategy a flag names; the training loop
(`keras_bert_zoo.training.trainer`) drives every one of them the same way, with
`strategy.run` over per-replica batches. What was checked here (Keras 3.15,
TensorFlow 2.21, CPU):

- `one_device`: `fit` works. Our loop works, XLA compiles the whole step.
- `mirrored` (2 logical CPU devices): `fit` works, but with the optimizer's
  `gradient_accumulation_steps` it fails with "merge_call called while defining a new
  graph" (keras-team/keras #20582). Our loop works, with XLA on the forward/backward
  pass, and gives one device's loss trajectory for the same global batch.
- `multi_worker_mirrored` (2 worker processes on 127.0.0.1): `fit` fails with
  "Attempt to convert a value ({'input_word_ids': PerReplica:{...}" (keras-team/keras
  #20585). Our loop works and gives one device's loss trajectory.
- `tpu`: not testable on a CPU machine; the same loop (TPU functions are XLA-compiled);
  a missing or unreachable TPU fails at `get_strategy` with a message.
- parameter servers: Keras 3 does not support `ParameterServerStrategy`
  (keras-team/keras #18624); asking for one fails at once with a message.

Global batch sizes are flags; `per_replica_batch_size` splits them, and each worker's
input pipeline reads its own shard (`tf.distribute.InputContext`).

Several workers must run the same steps (their collectives pair up), so whatever one
worker decides alone (a stop request, a checkpoint due by time, the step it restored)
they agree on between compiled loops: `WorkerAgreement` (a barrier, the smallest step, a
flag true on any worker), each one collective, nothing at all with one worker.

The TPU path is `TPUClusterResolver(tpu)` -> `experimental_connect_to_cluster` ->
`initialize_tpu_system` -> `TPUStrategy`; `--tpu` is a TPU name, a `grpc://` address or
`local` (a TPU VM).

`multi_worker_mirrored` reads the cluster from `TF_CONFIG` (one JSON object per
process: `{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker",
"index": i}}`), and must be created before any other TensorFlow op runs in the process.

Example:

```python
from keras_bert_zoo.training import distribute

strategy = distribute.get_strategy("mirrored", num_gpus=2)
with strategy.scope():
    model = ...  # build and compile the model here
print(distribute.per_replica_batch_size(32, strategy))  # 16
```
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")

_UNSUPPORTED = {
    "parameter_server": "Keras 3 does not support ParameterServerStrategy "
    "(keras-team/keras #18624)",
    "central_storage": "CentralStorageStrategy was removed from TensorFlow 2",
}


class StrategyError(UserError):
    """A strategy that cannot be built here; the message says why and what to do."""


def _gpus(num_gpus: int | None) -> list[str]:
    physical = tf.config.list_logical_devices("GPU")
    if num_gpus is None:
        return [device.name for device in physical]
    if num_gpus > len(physical):
        raise StrategyError(
            f"--num_gpus={num_gpus} but only {len(physical)} GPU(s) are visible "
            f"({[d.name for d in physical] or 'none'})"
        )
    return [device.name for device in physical[:num_gpus]]


def read_tf_config() -> dict:
    """The parsed `TF_CONFIG`, checked for the fields multi-worker training needs."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError(
            "--distribution_strategy=multi_worker_mirrored needs the TF_CONFIG environment "
            'variable, e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}'
        )
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({error}): {raw!r}") from error
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise StrategyError(f"TF_CONFIG needs 'cluster' and 'task' objects, got {raw!r}")
    if "ps" in cluster:
        raise StrategyError(
            "TF_CONFIG lists parameter servers ('ps'): " + _UNSUPPORTED["parameter_server"]
        )
    workers = list(cluster.get("worker", [])) + list(cluster.get("chief", []))
    if not workers:
        raise StrategyError(f"TF_CONFIG's cluster lists no 'worker' (or 'chief'): {raw!r}")
    task_type, index = task.get("type"), task.get("index")
    if task_type not in ("worker", "chief") or not isinstance(index, int):
        raise StrategyError(
            f"TF_CONFIG's task must be {{'type': 'worker' or 'chief', 'index': int}}, got {task}"
        )
    if index >= len(cluster.get(task_type, [])):
        raise StrategyError(
            f"TF_CONFIG's task index {index} is outside cluster[{task_type!r}] "
            f"({len(cluster.get(task_type, []))} entries)"
        )
    return config


def _tpu_strategy(tpu: str | None) -> tf.distribute.Strategy:
    if not tpu:
        raise StrategyError(
            "--distribution_strategy=tpu needs --tpu: a Cloud TPU name, a grpc:// address, "
            "or 'local' on a TPU VM"
        )
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as error:
        raise StrategyError(
            f"Could not reach or initialize the TPU --tpu={tpu!r}: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error
    return tf.distribute.TPUStrategy(resolver)


def get_strategy(
    name: str = "one_device",
    *,
    tpu: str | None = None,
    num_gpus: int | None = None,
) -> tf.distribute.Strategy:
    """The tf.distribute strategy `name` describes.

    Args:
        name: `"one_device"` (the first GPU, or the CPU), `"mirrored"` (the GPUs of this
            machine, or every logical CPU device when there is no GPU),
            `"multi_worker_mirrored"` (a cluster from `TF_CONFIG`) or `"tpu"`.
        tpu: the TPU for `"tpu"`.
        num_gpus: how many GPUs to use; None uses all visible ones (`one_device`: the
            first, 0 forces the CPU).

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        StrategyError: an unknown or unsupported strategy, a missing or bad
            `TF_CONFIG`, no TPU, or too few GPUs.
    """
    if name in _UNSUPPORTED:
        raise StrategyError(
            f"--distribution_strategy={name} is not supported: {_UNSUPPORTED[name]}"
        )
    if name not in STRATEGIES:
        raise StrategyError(
            f"Unknown --distribution_strategy={name!r}; choose one of {', '.join(STRATEGIES)}"
        )
    if num_gpus is not None and num_gpus < 0:
        raise StrategyError(f"--num_gpus must be >= 0, got {num_gpus}")
    if name == "one_device":
        gpus = _gpus(None if num_gpus is None else min(num_gpus, 1)) if num_gpus != 0 else []
        device = gpus[0] if gpus else "/cpu:0"
        logger.info("Training on one device: %s", device)
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        devices = _gpus(num_gpus) if num_gpus != 0 else []
        if not devices:
            devices = [device.name for device in tf.config.list_logical_devices("CPU")]
        logger.info("MirroredStrategy over %s", devices)
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker_mirrored":
        read_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu)


# === Worker layout ===


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """Number of processes (input pipelines) feeding `strategy`."""
    # The values `distribute_datasets_from_function` gives its InputContext; the
    # collective strategy has no public accessor for them.
    return int(getattr(strategy.extended, "_num_workers", 1))


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This process's index among `num_workers(strategy)` (the chief is 0)."""
    return int(getattr(strategy.extended, "_id_in_cluster", 0))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, summaries and exports."""
    return bool(strategy.extended.should_checkpoint)


def is_single_device(strategy: tf.distribute.Strategy) -> bool:
    """Whether `strategy` is one device or no strategy at all, whose `merge_call`s are
    plain calls (so XLA may compile a step that updates variables)."""
    if isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return True
    # The default strategy (no scope) has no public class.
    return type(strategy).__name__ == "_DefaultDistributionStrategy"


def per_replica_batch_size(global_batch_size: int, strategy: tf.distribute.Strategy) -> int:
    """`global_batch_size` split evenly across the strategy's replicas."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size <= 0 or global_batch_size % replicas:
        raise UserError(
            f"The global batch size {global_batch_size} must be a positive multiple of the "
            f"number of replicas ({replicas})"
        )
    return global_batch_size // replicas


def input_context(strategy: tf.distribute.Strategy) -> tf.distribute.InputContext:
    """This worker's `InputContext`: one input pipeline per worker."""
    return tf.distribute.InputContext(
        num_input_pipelines=num_workers(strategy),
        input_pipeline_id=worker_index(strategy),
        num_replicas_in_sync=strategy.num_replicas_in_sync,
    )


# === What the workers agree on ===


class WorkerAgreement:
    """What the workers of `strategy` agree on between compiled loops (one worker: each
    answer is its own, with no collective).

    Args:
        strategy: the strategy the workers train under.
    """

    def __init__(self, strategy: tf.distribute.Strategy):
        self.strategy = strategy
        self.num_workers = num_workers(strategy)
        self._barrier_fn = None

    def barrier(self) -> None:
        """Returns once every worker has called it."""
        if self.num_workers == 1:
            return
        if self._barrier_fn is None:
            strategy = self.strategy

            @tf.function
            def barrier():
                ones = strategy.run(lambda: tf.constant(1.0))
                return strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

            self._barrier_fn = barrier
        self._barrier_fn()

    def smallest(self, step: int) -> int:
        """The smallest of every worker's `step` (e.g. the step each one restored)."""
        if self.num_workers == 1:
            return step
        strategy = self.strategy
        value = tf.constant([step], tf.int64)
        per_replica = strategy.run(lambda: tf.identity(value))
        return int(tf.reduce_min(strategy.gather(per_replica, axis=0)).numpy())

    def true_on_any(self, flags: Sequence[bool]) -> list[bool]:
        """Each flag, true when it is true on any worker (one collective for all)."""
        if self.num_workers == 1:
            return [bool(flag) for flag in flags]
        strategy = self.strategy
        value = tf.constant([[int(bool(flag)) for flag in flags]], tf.int64)
        per_replica = strategy.run(lambda: tf.identity(value))
        gathered = strategy.gather(per_replica, axis=0)
        return [bool(flag) for flag in tf.reduce_max(gathered, axis=0).numpy()]
