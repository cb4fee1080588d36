"""Runs one benchmark in child processes with oneDNN off and on, alternated.

`TF_ENABLE_ONEDNN_OPTS` is read when TensorFlow is imported, so each setting needs its
own process. `alternate(script, args, rounds)` starts `script --child ...` with
`TF_ENABLE_ONEDNN_OPTS=0` and `=1` in turn (the order swapped every round, so that a
busy moment of the shared CPU does not always fall on the same setting); each child
prints one line `RESULT <json>` of `{configuration: seq/s}`, and the medians per setting
come back, with every round's figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

RESULT = "RESULT "


def cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return []


def cpu_description() -> str:
    """The CPU's model name and the flags that decide TensorFlow's oneDNN default."""
    name = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line for line in f if line.startswith("model name")).split(":", 1)[1]
    except (OSError, StopIteration):
        pass
    flags = cpu_flags()
    isa = [
        f
        for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")
        if f in flags
    ]
    return f"{name.strip()}, {os.cpu_count()} CPUs; ISA: {' '.join(isa)}"


def onednn_reported() -> str:
    """Whether TensorFlow (imported by now) runs its oneDNN kernels."""
    from tensorflow.python.util import _pywrap_util_port

    return "on" if _pywrap_util_port.IsMklEnabled() else "off"


def report(results: dict[str, float]) -> None:
    """The child's last line: its results for the parent."""
    print(RESULT + json.dumps(results), flush=True)


def alternate(script: str, args: list[str], rounds: int, settings=("0", "1")):
    """`{setting: {configuration: [seq/s of each round]}}` of `rounds` alternated runs."""
    figures: dict[str, dict[str, list[float]]] = {setting: {} for setting in settings}
    for round_index in range(rounds):
        order = settings if round_index % 2 == 0 else tuple(reversed(settings))
        for setting in order:
            env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="2")
            print(f"\n# round {round_index + 1}, TF_ENABLE_ONEDNN_OPTS={setting}", flush=True)
            child = subprocess.run(
                [sys.executable, script, "--child", *args],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for line in child.stdout.splitlines():
                if line.startswith(RESULT):
                    for name, value in json.loads(line[len(RESULT) :]).items():
                        figures[setting].setdefault(name, []).append(value)
                else:
                    print(line, flush=True)
            child.check_returncode()
    return figures


def summary_rows(figures) -> list[list[str]]:
    """Table rows: configuration, then per setting the median and every round's figure."""
    names = list(dict.fromkeys(name for per in figures.values() for name in per))
    rows = []
    for name in names:
        row = [name]
        for setting in figures:
            values = figures[setting].get(name, [])
            row.append(
                f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"
                if values
                else "-"
            )
        rows.append(row)
    return rows
