"""The task registry: task families register their tasks by name, and the binaries
create them (and surface their options as flags) by name, knowing none.

Importing `keras_bert_zoo.tasks` registers every family's tasks.

Example:

```python
@register_task("glue/mrpc")
class Mrpc(SentenceTask): ...

task = create_task("glue/mrpc", data_dir="glue_data/MRPC")
```
"""

from __future__ import annotations

from collections.abc import Callable

from keras_bert_zoo.tasks.task import Task, TaskOption
from keras_bert_zoo.utils import suggestions
from keras_bert_zoo.utils.errors import UserError

_REGISTRY: dict[str, type[Task]] = {}


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: registers a `Task` subclass under `name` (`"glue/mrpc"`, ...)."""

    def decorator(cls: type[Task]) -> type[Task]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"Task {name!r} is already registered by {_REGISTRY[name]}")
        _REGISTRY[name] = cls
        # A class may be registered under several names (one per GLUE task); each
        # registered subclass knows its own.
        return cls

    return decorator


def list_tasks() -> list[str]:
    """The registered task names, sorted."""
    return sorted(_REGISTRY)


def get_task_class(name: str) -> type[Task]:
    """The class registered as `name`; a `ValueError` lists the known names."""
    if name not in _REGISTRY:
        hint = suggestions.did_you_mean(name, list_tasks())
        raise UserError(f"Unknown task {name!r}{hint}. Known tasks: {', '.join(list_tasks())}")
    return _REGISTRY[name]


def create_task(name: str, **kwargs) -> Task:
    """An instance of the task registered as `name`; `kwargs` go to its constructor."""
    cls = get_task_class(name)
    return cls(task_name=name, **kwargs)


def all_task_options() -> dict[str, TaskOption]:
    """Every option any registered task declares, by name (for the binaries' flags)."""
    options: dict[str, TaskOption] = {}
    for name in list_tasks():
        for option in _REGISTRY[name].options:
            known = options.get(option.name)
            if known is not None and (
                type(known.default) is not type(option.default) or known.default != option.default
            ):
                raise ValueError(
                    f"Task option {option.name!r} is declared twice with different defaults: "
                    f"{known.default!r} and {option.default!r} ({name})"
                )
            options[option.name] = option
    return options
