"""`UserError`: a mistake in the user's input, raised by the package where it finds one.

A file, a flag, an argument or a directory that is not what it must be is reported with
a `UserError` whose message says what and where (`path:line: ...`, `--flag=value:
...`). The tools end on one with that message alone, in one line (`utils.cli`); any
other exception is a bug and keeps its traceback. A `UserError` is a `ValueError`, so
callers of the library catch it as they always did (`except ValueError`).

The families of errors that are the user's subclass it (`InputFileError` of the task
readers, `CheckpointError`, `CorpusError`, `StrategyError`, ...). What the operating
system says about a path (`FileNotFoundError`, `PermissionError`, ...) is the user's
too without a class of ours (see `utils.cli.is_user_error`).

Example:

```python
from keras_bert_zoo.utils.errors import UserError

if batch_size < 1:
    raise UserError(f"--train_batch_size={batch_size}: must be >= 1")
```
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(ValueError):
    """A mistake in the user's input; the message says all the user needs to fix it.

    Raise it (or a subclass) for an input the user can correct: never for a bug of the
    package, which must keep its traceback.
    """
