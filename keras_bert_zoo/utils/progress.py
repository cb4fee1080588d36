"""A long pass's progress lines: `embedded 1200 of 50000 passages (41/s), ETA 0:20:00`,
one every `PROGRESS_SECONDS`, and what the whole pass took when it took that long; and
`format_eta`, the one ETA format of every progress line (the training loop's too).

The search tools' embedders (a corpus's or the queries' vectors) and re-ranker (a
cross-encoder over every query's top-k pairs) run for minutes on a large input with no
Keras progress bar of their own (their batches come from the prediction engine).

Example:

```python
progress = ProgressLog(len(texts), "passages", verb="embedded")
for done in range(0, len(texts), 64):
    progress.update(done)
progress.finish()
```
"""

from __future__ import annotations

import datetime
import logging
import math
import time

logger = logging.getLogger(__name__)

# Seconds between two progress lines of a long pass.
PROGRESS_SECONDS = 15.0


def format_eta(seconds: float) -> str:
    """`H:MM:SS`, or `?` while no rate is known."""
    if not math.isfinite(seconds):
        return "?"
    return str(datetime.timedelta(seconds=int(seconds)))


class ProgressLog:
    """Logs `<verb> <done> of <total> <what> (<rate>/s), ETA ...` every `PROGRESS_SECONDS`.

    Args:
        total: the items of the pass.
        what: what the items are (`texts`, `pairs`).
        verb: what is done to them (`embedded`, `re-scored`).
    """

    def __init__(self, total: int, what: str, verb: str):
        self.total, self.what, self.verb = total, what, verb
        self.start = self.last = time.monotonic()

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS or done >= self.total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate else float("nan")
        logger.info(
            "%s %d of %d %s (%.0f/s), ETA %s",
            self.verb,
            done,
            self.total,
            self.what,
            rate,
            format_eta(eta),
        )

    def finish(self) -> float:
        """The pass's seconds, logged when a progress line could have been."""
        seconds = time.monotonic() - self.start
        if seconds >= PROGRESS_SECONDS:
            logger.info(
                "%s %d %s in %.0f s (%.0f/s)",
                self.verb,
                self.total,
                self.what,
                seconds,
                self.total / seconds,
            )
        return seconds
