"""Ending a tool's process as soon as its work is done, not a minute later.

A tool's last line can be followed by up to a minute of silence before the shell gets
its prompt back: at interpreter shutdown Python frees TensorFlow's objects one by one,
and freeing a `tf.data` iterator waits for its pipeline's threads, among them the
autotuning thread, which may be asleep for up to a minute between two rounds of tuning
(seen with gdb in `RootDataset::Iterator::~Iterator`, waiting for a `tf.data`
thread-pool thread parked in `model::Model::OptimizeLoop`). Nothing of the tool's
output depends on that teardown: its files are written and closed, its summaries
flushed.

`exit_at_once(status)` runs what Python runs at exit that matters (the `atexit`
handlers: logging's flush, the removal of autograph's temporary files, ...), flushes
the standard streams and ends the process with `os._exit`, skipping the teardown. It
does so only when nothing else is running that the normal exit would wait for: no other
non-daemon thread, no child process; otherwise it returns and the normal exit follows.
`utils.cli.run` calls it when a tool's `main` is done (also after a user error or a
stop on a signal).
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import sys
import threading


def safe_to_exit_at_once() -> bool:
    """Whether the process has nothing left that a normal exit would wait for: the
    main thread is the only non-daemon thread and no child process is running."""
    if threading.current_thread() is not threading.main_thread():
        return False
    others = [
        thread
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
    ]
    return not others and not multiprocessing.active_children()


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing more to write
            pass


def exit_status(code) -> int:
    """The process status of a `SystemExit` code: None is 0, an int itself, anything
    else (a message, which is written to stderr) 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_at_once(status: int) -> None:
    """Ends the process with `status` now, after the `atexit` handlers and a flush of
    the standard streams, when `safe_to_exit_at_once()`; else returns (see the module
    docstring)."""
    _flush_streams()
    if not safe_to_exit_at_once():
        return
    try:
        atexit._run_exitfuncs()  # noqa: SLF001 (what the interpreter would run first)
    finally:
        logging.shutdown()
        _flush_streams()
        os._exit(status)
