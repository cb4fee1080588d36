"""The registered task names, readable without TensorFlow.

`tools/run_finetuning.py` checks `--task` against them before it imports TensorFlow
(about 10 s on a CPU), so a typo is reported at once; the registry
(`tasks.list_tasks()`) stays the truth, and a test keeps this list equal to it. This
file imports nothing, so the tool can load it by path without running the package's
`__init__` (which imports TensorFlow); it offers the closest name as
`utils.suggestions` does, with difflib alone.
"""

import difflib

TASK_NAMES = (
    "conll2003",
    "extractive_qa",
    "glue/cola",
    "glue/mnli",
    "glue/mrpc",
    "glue/qnli",
    "glue/qqp",
    "glue/rte",
    "glue/sst2",
    "glue/stsb",
    "glue/wnli",
    "multiple_choice",
    "sentence_embedding",
    "squad_v1.1",
    "squad_v2.0",
    "swag",
    "text_classification",
    "token_classification",
)


def unknown_task_message(arguments: list[str]) -> str | None:
    """The error for a `--task=NAME` / `--task NAME` among `arguments` that names no task,
    or None (also when the flag is absent or written another way: absl then parses it,
    and the registry checks it)."""
    for index, argument in enumerate(arguments):
        if argument.startswith("--task="):
            name = argument[len("--task=") :]
        elif argument == "--task" and index + 1 < len(arguments):
            name = arguments[index + 1]
        else:
            continue
        if name and name not in TASK_NAMES:
            close = difflib.get_close_matches(name, TASK_NAMES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"--task={name}: no such task{hint}; choose from {', '.join(TASK_NAMES)}"
    return None
