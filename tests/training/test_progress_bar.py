"""What the progress bar shows on an 80-column terminal: every line fits, log lines
(evaluations, checkpoints) start on their own line instead of being glued onto the bar,
and the bar shows the loss and metrics, not `step: 6.0000`. The terminal is emulated:
stdout is a stream that says it is a terminal (so Keras redraws the bar in place with
\\r and \\b), the log handler writes to the same stream, and the text is replayed as a
terminal would show it."""

import io
import logging
import os
import re
import shutil

import keras
import pytest
from test_trainer import build, dataset_fn_of, token5_data, trainer


def _size(columns):
    return os.terminal_size((columns, 24))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _screen(text: str) -> list[str]:
    """The lines a terminal shows for `text` (carriage returns and backspaces applied,
    colours removed)."""
    shown = []
    for line in text.split("\n"):
        cells, position = [], 0
        for char in line:
            if char == "\r":
                position = 0
            elif char == "\b":
                position = max(0, position - 1)
            else:
                cells[position : position + 1] = [char]
                position += 1
        shown.append(re.sub(r"\x1b\[[0-9;]*m", "", "".join(cells)).rstrip())
    return [line for line in shown if line]


@pytest.mark.slow
def test_the_bar_fits_80_columns_and_log_lines_start_their_own_line(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=None: _size(80))
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    package_logger = logging.getLogger("keras_bert_zoo")
    package_logger.addHandler(handler)
    # setLevel, not the attribute: it also clears the loggers' cached levels (an earlier
    # test's log call at WARNING would keep "eval at step 4" out).
    level = package_logger.level
    package_logger.setLevel(logging.INFO)
    try:
        x, y = token5_data()
        model = build(steps=12)
        run = trainer(model, tmp_path, progress="bar", steps_per_loop=2, checkpoint_every=4)
        run.train(
            dataset_fn_of(x, y, batch=8),
            12,
            eval_fn=lambda model: {"accuracy": 0.5},
            eval_every=4,
        )
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(level)
    lines = _screen(terminal.getvalue())
    bars = [line for line in lines if re.match(r"\s*\d+/12 ", line)]
    logs = [line for line in lines if line.startswith("LOG ")]
    assert bars and any("eval at step 4" in line for line in logs), lines
    # Every line is a bar or a log line: nothing glued onto the bar.
    assert len(bars) + len(logs) == len(lines), lines
    assert max(len(line) for line in lines if line in bars) <= 80, bars
    assert all("loss:" in bar and "step:" not in bar for bar in bars), bars
    assert all("learning_rate" not in bar for bar in bars), bars


@pytest.mark.parametrize(("columns", "expected"), [(40, 1), (80, 2), (200, 2)])
def test_the_bar_keeps_what_fits_the_terminal(monkeypatch, columns, expected):
    from keras_bert_zoo.training import reporting

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=None: _size(columns))
    logs = {
        "step": 6,
        "loss": 0.5,
        "learning_rate": 1e-4,
        "accuracy": 0.25,
        "next_sentence_accuracy": 0.5,
    }
    values = reporting.bar_values(logs, 1000)
    names = [name for name, _ in values]
    # The loss always, then the metrics while the line fits the terminal (at most 80).
    assert names == ["loss", "accuracy"][:expected]
    bar = keras.utils.Progbar(1000, width=reporting.BAR_WIDTH, stateless_metrics=())
    printed = io.StringIO()
    monkeypatch.setattr("sys.stdout", printed)
    bar.update(999, values=values)
    assert max(len(line) for line in _screen(printed.getvalue())) <= min(columns, 80) or (
        expected == 1
    )
