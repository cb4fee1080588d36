"""Ctrl-C and preemption notices (SIGINT, SIGTERM) as a request to stop at a safe point.

A long job (the training loop) asks `StopRequests` whether to stop between its steps.
While it is active, the first SIGINT or SIGTERM is recorded instead of killing the
process: the job saves what it has and raises `Interrupted`, which the tools turn into
one line and the shell's exit status for that signal (130 for SIGINT, 143 for SIGTERM).
A second SIGINT ends the process at once; a second SIGTERM changes nothing (a scheduler
may repeat its notice), SIGKILL or SIGINT then end it at once.

Python runs a signal handler only when the main thread is back in the interpreter, not
while it waits in a compiled TensorFlow loop that may last minutes. So the signal is
also written to a wake-up pipe (`signal.set_wakeup_fd`), and a watcher thread, which
is woken at once, says what happens next on stderr and calls the job's `on_request`
(the Trainer sets a variable that its compiled loop reads at every step).

While the main thread runs Python code that may be abandoned (tracing the training
step: no step has run, nothing to save), the job wraps it in `abandoning()`: a stop
request then raises `StopRequested` there at once, instead of waiting for the code to
finish.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# What the first signal does when the job does not say (`StopRequests(describe=...)`).
NEXT_STEP = "stopping at the next step, with a checkpoint"


class Interrupted(Exception):
    """A job stopped on a signal, after saving what a rerun resumes from.

    Attributes:
        signal_number: the signal that asked it to stop.
        exit_status: the shell's status for a process ended by that signal (128 + N).
    """

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = int(signal_number)
        self.exit_status = 128 + self.signal_number


class StopRequested(KeyboardInterrupt):
    """Raised in the main thread by a stop request inside `StopRequests.abandoning()`.

    A `KeyboardInterrupt` (a `BaseException`): code that catches `Exception` (such as
    autograph's conversion fallbacks while a `tf.function` is traced) lets it through.

    Attributes:
        signal_number: the signal.
    """

    def __init__(self, signal_number: int):
        super().__init__(signal_name(signal_number))
        self.signal_number = int(signal_number)


def signal_name(signal_number: int) -> str:
    return signal.Signals(signal_number).name


def first_signal_message(signal_number: int, what_happens: str = NEXT_STEP) -> str:
    """The line the first signal prints: what happens now, and what stops the process at
    once instead, for that signal (Ctrl-C is the terminal's SIGINT; a SIGTERM comes from
    `kill` or a scheduler, which may repeat it)."""
    name = signal_name(signal_number)
    if signal_number == signal.SIGINT:
        at_once = "Ctrl-C again stops at once, without one"
    else:
        pid = os.getpid()
        at_once = (
            f"another {name} changes nothing; `kill -INT {pid}` or `kill -KILL {pid}` stops "
            "at once, without one"
        )
    return f"{name}: {what_happens}; {at_once}"


class StopRequests:
    """Records SIGINT and SIGTERM while active (a context manager).

    Args:
        on_request: called once, from the watcher thread, when the first signal
            arrives (e.g. to set a variable a compiled loop reads); may be None.
        describe: `fn() -> str`, what the job does on the first signal at that moment
            (default `NEXT_STEP`), for the line it prints.

    Attributes:
        signal_number: the first signal received, or None.
        active: whether the handlers are installed (only the main thread can install
            them; elsewhere nothing is recorded and signals act as before).
    """

    def __init__(
        self,
        on_request: Callable[[], None] | None = None,
        describe: Callable[[], str] | None = None,
    ):
        self.on_request = on_request
        self.describe = describe
        self.signal_number: int | None = None
        self.active = False
        self._abandoning = False
        self._previous_handlers = {}
        self._previous_wakeup_fd = -1
        self._pipe = None
        self._watcher = None

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is not threading.main_thread():
            return self
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        self._pipe = (read_fd, write_fd)
        for number in HANDLED_SIGNALS:
            self._previous_handlers[number] = signal.signal(number, self._handle)
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, name="stop-requests", daemon=True)
        self._watcher.start()
        self.active = True
        return self

    def __exit__(self, *exc_info) -> None:
        if not self.active:
            return
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for number, handler in self._previous_handlers.items():
            signal.signal(number, handler)
        read_fd, write_fd = self._pipe
        os.close(write_fd)  # the watcher's read returns b"" and it ends
        self._watcher.join(timeout=5)
        os.close(read_fd)
        self.active = False

    @contextlib.contextmanager
    def abandoning(self):
        """While active, a stop request (or one already made) raises `StopRequested` in
        the main thread, for code that may be left unfinished (see the module
        docstring). Only where the handlers are installed."""
        if not self.active:
            yield
            return
        self._abandoning = True
        try:
            if self.signal_number is not None:
                raise StopRequested(self.signal_number)
            yield
        finally:
            self._abandoning = False

    def _handle(self, number, frame) -> None:
        # The Python-level handler, in the main thread: the watcher has already seen the
        # signal; this keeps Python's default (KeyboardInterrupt, or termination) from
        # running, and leaves code that may be abandoned.
        del frame
        if self._abandoning and number in HANDLED_SIGNALS:
            self._abandoning = False  # raised once
            raise StopRequested(self.signal_number or number)

    def _what_happens(self) -> str:
        if self.describe is None:
            return NEXT_STEP
        try:
            return self.describe()
        except Exception:  # the line must come whatever the job's state
            return NEXT_STEP

    def _watch(self) -> None:
        read_fd = self._pipe[0]
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number not in HANDLED_SIGNALS:
                    continue
                if self.signal_number is None:
                    self.signal_number = number
                    message = first_signal_message(number, self._what_happens())
                    sys.stderr.write(f"\n{message}\n")
                    sys.stderr.flush()
                    if self.on_request is not None:
                        self.on_request()
                elif number == signal.SIGINT:
                    sys.stderr.write("\nSIGINT again: stopped at once, without a checkpoint\n")
                    sys.stderr.flush()
                    os._exit(128 + number)
