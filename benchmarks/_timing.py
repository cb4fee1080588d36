"""Timing helpers shared by the benchmarks: warm-up, median of N repeats, sequences/s.

Noisy shared machines move single timings a lot, so every number a benchmark reports is
the median of several timed calls taken after untimed warm-up calls. When several
configurations are compared, `time_round_robin` interleaves their timed calls (config A,
B, C, A, B, C, ...) so that a slow period of the machine hits all of them alike instead
of the one that happened to run then.

Example:

```python
from benchmarks._timing import seq_per_s, time_callable

timing = time_callable(lambda: model(inputs), warmup=2, repeats=7)
print(f"{seq_per_s(8, timing.median):.2f} seq/s, spread {timing.spread:.0%}")
```
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of the timed calls of one configuration."""

    seconds: tuple[float, ...]
    warmup_seconds: tuple[float, ...] = ()
    cpu_seconds: tuple[float, ...] = ()

    @property
    def cpu_median(self) -> float | None:
        """Median process CPU seconds (all threads) per timed call, if recorded.

        On a machine shared with other jobs, wall time grows with their load while the
        CPU time a call needs moves much less (spinning worker threads still count), so
        it is a second, steadier view of the same calls.
        """
        return statistics.median(self.cpu_seconds) if self.cpu_seconds else None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def spread(self) -> float:
        """(max - min) / median of the timed calls: a rough noise indicator."""
        return (max(self.seconds) - min(self.seconds)) / self.median

    @property
    def first_call(self) -> float | None:
        """Seconds of the first warm-up call (tracing/compilation included), if any."""
        return self.warmup_seconds[0] if self.warmup_seconds else None


def seq_per_s(batch_size: int, seconds: float) -> float:
    """Throughput in sequences per second of one batch of `batch_size` taking `seconds`."""
    return batch_size / seconds


def _timed_call(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _timed_call_with_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    cpu_start, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu_start


def warm_up(fn: Callable[[], object], calls: int) -> tuple[float, ...]:
    """Runs `fn` `calls` times untimed (tracing, XLA compilation, caches); returns seconds."""
    return tuple(_timed_call(fn) for _ in range(calls))


def time_callable(
    fn: Callable[[], object], warmup: int = 2, repeats: int = 7, number: int = 1
) -> Timing:
    """Times `fn` after `warmup` calls; each of `repeats` samples is the mean of `number` calls.

    `fn` must block until its result is computed (convert to numpy, or call a
    framework's synchronize) or the timing measures only the dispatch.
    """
    if repeats < 1 or number < 1:
        raise ValueError("repeats and number must be >= 1")
    warmup_seconds = warm_up(fn, warmup)
    samples, cpu_samples = [], []
    for _ in range(repeats):
        gc.collect()
        calls = [_timed_call_with_cpu(fn) for _ in range(number)]
        samples.append(sum(wall for wall, _ in calls) / number)
        cpu_samples.append(sum(cpu for _, cpu in calls) / number)
    return Timing(tuple(samples), warmup_seconds, tuple(cpu_samples))


def time_round_robin(
    fns: Mapping[str, Callable[[], object]],
    warmup: int = 2,
    repeats: int = 7,
    on_warmed: Callable[[str, tuple[float, ...]], None] | None = None,
) -> dict[str, Timing]:
    """Times several callables side by side, interleaving their timed calls.

    Every callable is first warmed up (`warmup` calls each, one after the other; then
    `on_warmed(name, seconds)` is called, e.g. to print compile times). Then `repeats`
    rounds each call every callable once; the order rotates from round to round so no
    configuration always runs right after the same neighbour.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    names = list(fns)
    warmups = {}
    for name in names:
        warmups[name] = warm_up(fns[name], warmup)
        if on_warmed is not None:
            on_warmed(name, warmups[name])
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu_samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            wall, cpu = _timed_call_with_cpu(fns[name])
            samples[name].append(wall)
            cpu_samples[name].append(cpu)
    return {
        name: Timing(tuple(samples[name]), warmups[name], tuple(cpu_samples[name]))
        for name in names
    }


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain Markdown table (pipes), columns padded for reading in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        return (
            "| "
            + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            + " |"
        )

    separator = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(cells[0]), separator] + [line(row) for row in cells[1:]])
