"""Regression targets as the sentence tasks read them from text files."""

from __future__ import annotations

import math

from keras_bert_zoo.tasks.sentence.readers import InputFileError


def parse_score(value: str, where: str, column: str = "score") -> float:
    """`value` as a finite float, or an `InputFileError` at `where` (`path:line`) that
    calls the value by its `column` name (`"score"`, `"label"`)."""
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise InputFileError(f"{where}: the {column} {value!r} is not a finite number")
    return score
