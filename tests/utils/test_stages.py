"""A long step says what it does while it does it (issue 47, point 7: the export tool
was silent for its first 104 s): a line when it starts, one every few seconds while it
runs, and how long it took when that was long."""

import logging
import time

from keras_bert_zoo.utils.stages import HEARTBEAT_SECONDS, stage


def test_a_long_stage_logs_while_it_runs(caplog):
    logger = logging.getLogger("keras_bert_zoo.test_stages")
    with caplog.at_level(logging.INFO, logger=logger.name):
        with stage(logger, "Tracing %s", "serving_default", every=0.2):
            time.sleep(0.7)
        with stage(logger, "Writing the SavedModel", every=0.2):
            pass
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0] == "Tracing serving_default"
    still = [line for line in lines if line.startswith("... still tracing serving_default (")]
    assert 2 <= len(still) <= 4, lines
    assert any(line.startswith("... tracing serving_default: done in") for line in lines)
    # A short step: its line only.
    assert lines[-1] == "Writing the SavedModel", lines
    assert 10 <= HEARTBEAT_SECONDS <= 20


def test_a_stage_the_caller_announces_logs_only_while_it_runs(caplog):
    logger = logging.getLogger("keras_bert_zoo.test_stages")
    with caplog.at_level(logging.INFO, logger=logger.name):
        with stage(logger, "evaluating step %d", 9, every=0.2, announce=False):
            time.sleep(0.5)
    lines = [record.getMessage() for record in caplog.records]
    assert lines and all(line.startswith("... still evaluating step 9 (") for line in lines), lines
