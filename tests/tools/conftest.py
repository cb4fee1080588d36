"""Fixtures of the tool tests: a tool's `main` run in the test's process, as its
program runs it after start-up, for the checks that need no fresh process."""

import logging
import pathlib
import sys
import warnings

import pytest
from absl import logging as absl_logging

TASKS = pathlib.Path(__file__).resolve().parents[1] / "tasks"


@pytest.fixture
def run_tool_in_process(load_tool, monkeypatch):
    """`run_tool_in_process(tool, *args) -> (exit status, stdout, stderr)`: what
    `python tools/<tool>.py <args>` prints and ends with once TensorFlow has loaded (a
    refused flag, a user error in one line, the tool's own output), through
    `finetuning_test_helpers.run_tool_as_user`. Start-up lines and C++ logs need a
    fresh process (test_tool_start.py, test_quiet_logs.py)."""
    if str(TASKS) not in sys.path:
        sys.path.insert(0, str(TASKS))
    import finetuning_test_helpers as helpers

    from keras_bert_zoo.utils import cli

    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    # What `cli.wrap` quiets for a tool's user (TensorFlow's logger, the absl handler's
    # filters, the warnings of TensorFlow and Keras), restored for the tests after.
    tensorflow_logger = logging.getLogger("tensorflow")
    level, filters = tensorflow_logger.level, warnings.filters[:]
    handler = absl_logging.get_absl_handler()
    handler_filters = handler.filters[:]

    def run(tool, *args):
        with load_tool(tool) as module:
            return helpers.run_tool_as_user(module, f"tools/{tool}.py", *args)

    yield run
    tensorflow_logger.setLevel(level)
    warnings.filters[:] = filters
    handler.filters[:] = handler_filters
