""" "Did you mean" for a name that is not one of its choices (a task, an enum flag's value,
a task option), as absl offers for a misspelt flag name. Imports nothing heavy: the tools
use it before TensorFlow loads."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

# absl's message for an enum flag's value outside its choices.
_ENUM_VALUE_ERROR = re.compile(
    r"^flag --(?P<flag>[\w.-]+)=(?P<value>.*): value should be one of <(?P<choices>[^>]*)>$"
)


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """` (did you mean X?)` naming the choice closest to `value`, or "" when none is
    close (difflib's ratio of 0.6 or more)."""
    names = {str(choice): choice for choice in choices}
    close = difflib.get_close_matches(str(value), list(names), n=1)
    return f" (did you mean {names[close[0]]}?)" if close else ""


def with_suggestion(message: str) -> str:
    """absl's "value should be one of <a|b|c>" message with the closest choice named."""
    match = _ENUM_VALUE_ERROR.match(message)
    if match is None:
        return message
    choices = match.group("choices").split("|")
    return message + did_you_mean(match.group("value"), choices)
