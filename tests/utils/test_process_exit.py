"""A tool's process ends when its work is done (issue 47, point 7): not after the
interpreter's teardown, which can wait up to a minute for tf.data's threads as it frees
a pipeline's iterator; the `atexit` handlers still run. When something else is still
running (a non-daemon thread), the normal exit waits for it as before."""

import pathlib
import subprocess
import sys
import time

import child_process
import pytest

TOOL = '''
import atexit
import sys
import threading
import time

from keras_bert_zoo.utils import cli


class SlowTeardown:
    """Freed at the interpreter's teardown, slowly: as a tf.data iterator can be. (What
    it needs is kept on it: modules' globals may be gone by then.)"""

    def __init__(self):
        self.sleep = time.sleep
        self.seconds = 0 if "thread" in sys.argv else 30  # that test waits for its thread

    def __del__(self):
        self.sleep(self.seconds)


KEPT = SlowTeardown()


def main(argv):
    atexit.register(lambda: print("atexit ran", flush=True))
    if "thread" in argv:
        def late():
            time.sleep(2)
            print("thread done", flush=True)
        threading.Thread(target=late).start()
    print("done", flush=True)


if __name__ == "__main__":
    cli.run(main)
'''


def _run(tmp_path, *args):
    tool = pathlib.Path(tmp_path) / "slow_teardown_tool.py"
    tool.write_text(TOOL, encoding="utf-8")
    started = time.time()
    completed = subprocess.run(
        [sys.executable, str(tool), *args],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        timeout=300,
    )
    return completed, time.time() - started


@pytest.mark.slow
def test_a_tool_ends_when_its_work_is_done_not_after_the_teardown(tmp_path):
    completed, seconds = _run(tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.splitlines() == ["done", "atexit ran"]
    # The 30 s of teardown were skipped (the import of TensorFlow takes most of the rest).
    assert seconds < 25, seconds


@pytest.mark.slow
def test_a_running_thread_is_waited_for_as_before(tmp_path):
    completed, _ = _run(tmp_path, "thread")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "thread done" in completed.stdout.splitlines()
