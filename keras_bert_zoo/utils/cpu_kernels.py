"""Which CPU kernels a job runs on: oneDNN and XLA, chosen for the kind of CPU.

TensorFlow's fp32 matrix products run on one of two kernel libraries: Eigen (its own)
or oneDNN (Intel's). It turns oneDNN on by default only on Linux CPUs with
neural-network features (AVX512_VNNI, AVX_VNNI, AVX512_BF16, AMX: its 2.9 release
notes); elsewhere (an AVX2 CPU, an AVX-512 CPU without VNNI) a job runs on Eigen unless
`TF_ENABLE_ONEDNN_OPTS=1` is set before TensorFlow is imported. XLA (`jit_compile`)
fuses a whole step, but its CPU matrix product is Eigen's whatever the setting. Which is
fastest depends on the CPU and on the step: the choice below was measured per kind
(docs/speed.md; `benchmarks/plateau_check.py`, `benchmarks/predict_kernels.py`).

The tools call `choose()` and `apply()` before they import TensorFlow and log
`KernelChoice.describe()`; `--onednn=auto|on|off` and `--jit_compile` / `--nojit_compile`
force either way, and a `TF_ENABLE_ONEDNN_OPTS` already in the environment is the
user's and stays. This module imports nothing of TensorFlow (it must run before it).
"""

from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Iterable, Mapping

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
ONEDNN_SETTINGS = ("auto", "on", "off")

# CPU kinds, from the flags of /proc/cpuinfo (x86-64 Linux), most capable first.
AMX_OR_BF16 = "AVX512_BF16/AMX"
AVX512_VNNI = "AVX-512 with VNNI"
AVX512 = "AVX-512"
AVX2 = "AVX2"
OTHER = "other"


@dataclasses.dataclass(frozen=True)
class KindChoice:
    """What is chosen on one kind of CPU, and the measurement that chose it.

    Args:
        onednn: bool. Run TensorFlow's oneDNN kernels.
        training_xla: bool. Compile the training step with XLA.
        inference_xla: bool. Compile evaluation's and prediction's forward pass with XLA.
        why: str. The figures that chose it, for the log line.
    """

    onednn: bool
    training_xla: bool
    inference_xla: bool
    why: str


# The table of docs/speed.md (keep the two equal). Kinds with no
# measurement take the nearest measured kind's choice and say so.
CHOICES: Mapping[str, KindChoice] = {
    AVX2: KindChoice(
        onednn=True,
        training_xla=False,
        inference_xla=True,
        why="measured on an AVX2 AMD EPYC: oneDNN trains 1.19x faster (10.0 against 8.4 "
        "seq/s), XLA trains slower (7.6) and predicts 1.27x faster (95 against 75)",
    ),
    AVX512: KindChoice(
        onednn=True,
        training_xla=False,
        inference_xla=True,
        why="not measured: as on AVX2 (where TensorFlow also leaves oneDNN off)",
    ),
    AVX512_VNNI: KindChoice(
        onednn=True,
        training_xla=False,
        inference_xla=False,
        # keras-hub's fastest there: 8.09 seq/s; XLA for training not measured, off as on
        # AVX2. The log line stays short (docs/speed.md, has the rest).
        why="measured on a 2-core AVX-512 VNNI Xeon: the graph predicts 1.20x faster than "
        "XLA (9.13 against 7.61 seq/s)",
    ),
    AMX_OR_BF16: KindChoice(
        onednn=True,
        training_xla=False,
        inference_xla=True,
        why="TensorFlow's default oneDNN; XLA predicts 1.12x faster (218 against 195 seq/s "
        "on an AMX Intel Xeon)",
    ),
}


def read_cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not: macOS, Windows)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_kind(flags: Iterable[str]) -> str:
    """The kind of CPU its flags say (one of the `CHOICES` kinds, or `OTHER`)."""
    flags = frozenset(flags)
    if flags & {"amx_tile", "amx_bf16", "amx_int8", "avx512_bf16"}:
        return AMX_OR_BF16
    if "avx512f" in flags:
        return AVX512_VNNI if "avx512_vnni" in flags else AVX512
    if "avx2" in flags:
        return AVX2
    return OTHER


def tensorflow_onednn_default(flags: Iterable[str]) -> bool:
    """Whether TensorFlow turns oneDNN on by itself on this CPU (Linux x86-64: the
    neural-network features; off elsewhere, and on Windows)."""
    if platform.system() != "Linux":
        return False
    features = {"avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"}
    return bool(frozenset(flags) & features)


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """The kernels of one process, and why.

    Args:
        cpu_kind: str. The CPU's kind (`cpu_kind`).
        onednn: bool | None. oneDNN on or off; None where nothing is known (another
            architecture): TensorFlow's own default.
        onednn_reason: str. Why: the setting that decided (`--onednn`, the environment,
            TensorFlow's default, the measured table).
        training_jit_compile: bool. XLA for the training step.
        inference_jit_compile: bool. XLA for evaluation and prediction.
        jit_reason: str. Why (`--jit_compile`, or the table).
        env_value: str | None. What `apply()` sets `TF_ENABLE_ONEDNN_OPTS` to (None:
            nothing, the environment already says or TensorFlow's default is the choice).
    """

    cpu_kind: str
    onednn: bool | None
    onednn_reason: str
    training_jit_compile: bool
    inference_jit_compile: bool
    jit_reason: str
    env_value: str | None = None

    def describe(self) -> str:
        """Two log lines: what was chosen, and why."""
        onednn = {True: "on", False: "off", None: "TensorFlow's default"}[self.onednn]
        xla = {
            (True, True): "XLA for training and inference",
            (False, True): "XLA for inference, not for training",
            (True, False): "XLA for training, not for inference",
            (False, False): "no XLA",
        }[(self.training_jit_compile, self.inference_jit_compile)]
        return (
            f"CPU kernels ({self.cpu_kind} CPU): oneDNN {onednn}, {xla}\n"
            f"  oneDNN: {self.onednn_reason}; XLA: {self.jit_reason}"
        )


def choose(
    onednn: str = "auto",
    jit_compile: bool | None = None,
    *,
    flags: Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> KernelChoice:
    """The kernels for this CPU.

    Args:
        onednn: "auto" (the table, unless `TF_ENABLE_ONEDNN_OPTS` is set), "on", "off".
        jit_compile: None (auto: the table) or the user's True/False, for training and
            inference alike.
        flags: the CPU's flags (default: /proc/cpuinfo's).
        environ: the environment (default: `os.environ`).
    """
    if onednn not in ONEDNN_SETTINGS:
        raise ValueError(f"onednn must be one of {ONEDNN_SETTINGS}, got {onednn!r}")
    flags = read_cpu_flags() if flags is None else frozenset(flags)
    environ = os.environ if environ is None else environ
    kind = cpu_kind(flags)
    table = CHOICES.get(kind)
    default_on = tensorflow_onednn_default(flags)
    env_value = None
    if onednn != "auto":
        wanted = onednn == "on"
        reason = f"--onednn={onednn}"
        env_value = "1" if wanted else "0"
    elif environ.get(ONEDNN_ENV, "").strip():
        setting = environ[ONEDNN_ENV].strip()
        wanted = setting.lower() in ("1", "true", "t", "yes", "on")
        reason = f"{ONEDNN_ENV}={setting} in the environment"
    elif table is None:
        wanted = default_on if flags else None
        reason = "TensorFlow's default (no measurement for this CPU)"
    else:
        wanted = table.onednn
        if wanted == default_on:
            reason = f"TensorFlow's default on this CPU{', measured faster' if wanted else ''}"
        else:
            env_value = "1" if wanted else "0"
            reason = (
                f"{ONEDNN_ENV}={env_value} (TensorFlow leaves it "
                f"{'off' if default_on is False else 'on'} on this CPU)"
            )
        reason = f"{reason}: {table.why}"
    if jit_compile is not None:
        training_xla = inference_xla = bool(jit_compile)
        jit_reason = f"--{'' if jit_compile else 'no'}jit_compile"
    elif table is None:
        training_xla = inference_xla = False
        jit_reason = "no measurement for this CPU, none chosen (--jit_compile forces it)"
    else:
        training_xla, inference_xla = table.training_xla, table.inference_xla
        jit_reason = "as measured fastest for this CPU (--jit_compile / --nojit_compile force it)"
    return KernelChoice(
        cpu_kind=kind,
        onednn=wanted,
        onednn_reason=reason,
        training_jit_compile=training_xla,
        inference_jit_compile=inference_xla,
        jit_reason=jit_reason,
        env_value=env_value,
    )


_chosen: KernelChoice | None = None


def apply(choice: KernelChoice, environ=None) -> None:
    """Sets `TF_ENABLE_ONEDNN_OPTS` as `choice` says (before TensorFlow is imported:
    TensorFlow reads it once) and records `choice` as this process's (`chosen()`)."""
    global _chosen
    environ = os.environ if environ is None else environ
    if choice.env_value is not None:
        environ[ONEDNN_ENV] = choice.env_value
    _chosen = choice


def chosen() -> KernelChoice | None:
    """The choice a tool applied in this process, or None (a library user's process:
    TensorFlow's and Keras' defaults)."""
    return _chosen


def training_jit_compile(setting: bool | None) -> bool:
    """XLA for the training step: `setting` (a job's `jit_compile`) when given, else the
    tool's choice for this CPU (`chosen()`), else none."""
    if setting is not None:
        return bool(setting)
    return bool(_chosen is not None and _chosen.training_jit_compile)


def inference_jit_compile(model) -> bool:
    """XLA for `model`'s forward pass in evaluation and prediction: the tool's choice
    for this CPU (`chosen()`: `--jit_compile` / `--nojit_compile` included), else the
    model's own `jit_compile` (Keras': on GPUs, off on CPU-only machines)."""
    if _chosen is not None:
        return _chosen.inference_jit_compile
    return bool(getattr(model, "jit_compile", False))
