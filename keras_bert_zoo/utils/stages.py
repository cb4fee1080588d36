"""Long steps that say what they do while they do it.

A tool that loads a model, traces a graph or converts it can be busy for minutes
without a line. `stage(logger, "Tracing %s", name)` logs the line when the step starts
and, while it runs, `... still tracing serving_default (30 s)` every `every` seconds
(from a daemon thread: TensorFlow's C++ work releases the GIL, and Python code yields
it); when it ends, nothing more, or the time it took when that was long.

Example:

```python
import logging
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)
with stage(logger, "Loading %s", path):
    model = load(path)
```
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

# Seconds between the "still ..." lines of a long step.
HEARTBEAT_SECONDS = 15.0


def _lowered(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


@contextlib.contextmanager
def stage(
    logger: logging.Logger,
    message: str,
    *args,
    every: float = HEARTBEAT_SECONDS,
    announce: bool = True,
):
    """Logs `message % args` now, then `"... still <message> (N s)"` every `every`
    seconds until the block ends, and `"... <message>: done in N s"` if it ended (no
    exception) after more than `every`.

    Args:
        logger: where the lines go (at INFO).
        message, args: the step, as a logging format and its arguments.
        every: seconds between the lines while it runs (0: none).
        announce: log the first and the last line (False: the caller says what the step
            is and what it gave, in its words; only the "still" lines).
    """
    text = message % args if args else message
    if announce:
        # stacklevel 3: the line names the caller's `with` (past contextlib), not this module.
        logger.info("%s", text, stacklevel=3)
    start = time.monotonic()
    done = threading.Event()

    def beat():
        while not done.wait(every):
            logger.info("... still %s (%d s)", _lowered(text), time.monotonic() - start)

    beating = threading.Thread(target=beat, name="stage-heartbeat", daemon=True)
    if every > 0:
        beating.start()
    try:
        yield
    finally:
        done.set()
        if beating.is_alive():
            beating.join(timeout=1)
    seconds = time.monotonic() - start  # (not after an exception: the step did not end)
    if announce and every > 0 and seconds >= every:
        logger.info("... %s: done in %d s", _lowered(text), seconds, stacklevel=3)
