"""How long a tool takes to start: TensorFlow and Keras imported as a tool imports
them (`utils.startup.start_tool`: without the modules no tool uses), beside the plain
`import keras, tensorflow` of a process that does not block them. Both in fresh
processes, alternated, `--repeats` times each; prints the medians and their ratio.

    python benchmarks/tool_start.py --repeats=5

Measured on the 2-core CI machine (scikit-learn installed, as the test extra has it):
see docs/speed.md.
"""

from __future__ import annotations

import pathlib
import statistics
import subprocess
import sys
import time

from absl import app, flags

flags.DEFINE_integer("repeats", 5, "Fresh processes of each kind.")
FLAGS = flags.FLAGS

# The module is loaded from its file: importing the package in a process that is not a
# tool would import TensorFlow (and scikit-learn) first.
QUIET_IMPORT = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_zoo/utils/quiet_import.py"
AS_A_TOOL = (
    "import importlib.util\n"
    f"spec = importlib.util.spec_from_file_location('quiet_import', {str(QUIET_IMPORT)!r})\n"
    "quiet_import = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(quiet_import)\n"
    "with quiet_import.without_modules_tools_do_not_use():\n"
    "    import keras, tensorflow\n"
)
PLAIN = "import keras, tensorflow\n"


def _seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def main(argv):
    del argv
    times = {"as a tool": [], "plain": []}
    for _ in range(FLAGS.repeats):
        times["as a tool"].append(_seconds(AS_A_TOOL))
        times["plain"].append(_seconds(PLAIN))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:>10}: {value:6.2f} s (median of {FLAGS.repeats})")
    print(f"ratio plain / as a tool: {medians['plain'] / medians['as a tool']:.2f}")


if __name__ == "__main__":
    app.run(main)
