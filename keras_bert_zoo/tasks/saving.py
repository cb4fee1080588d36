"""A fine-tuned task model on disk: everything a later eval, predict or export run needs.

`tools/run_finetuning.py` writes one such directory (and the trainer's best one), and
`tools/export_saved_model.py` reads it, so neither needs the training data again:

```
model.keras    the task model (encoder + head), Keras format, uncompiled: architecture
               and weights only (the optimizer state is in the run's training
               checkpoints, which a resumed run reads; nothing that reads this needs it)
vocab.txt      the WordPiece vocabulary
task.json      the task's registry name, settings, options and `state()`, and the
               tokenizer's casing and longest word; enough to rebuild the task and its
               preprocessor
```

Example:

```python
from keras_bert_zoo import tasks

tasks.save_finetuned(output_dir, task, model, tokenizer)
finetuned = tasks.load_finetuned(output_dir)
answers = tasks.predict(finetuned.task, finetuned.model, examples, finetuned.preprocessor)
```
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import keras

from keras_bert_zoo.models.model_files import load_inference_model, save_inference_model
from keras_bert_zoo.tasks.registry import create_task
from keras_bert_zoo.tasks.task import TASK_DESCRIPTION_FORMAT_VERSION, Task
from keras_bert_zoo.utils.atomic import atomic_directory
from keras_bert_zoo.utils.errors import UserError

MODEL_FILE = "model.keras"
VOCAB_FILE = "vocab.txt"
TASK_FILE = "task.json"
FORMAT_VERSION = TASK_DESCRIPTION_FORMAT_VERSION


@dataclasses.dataclass
class FinetunedModel:
    """A task, its trained model, and the tokenizer and preprocessor it was trained with.

    `model` is the model as trained (a sentence embedder's takes groups of texts);
    `inference_model` is the one that serves, what `preprocessor`'s batches go into.
    """

    task: Task
    model: keras.Model
    tokenizer: Any
    preprocessor: Any
    directory: str

    @property
    def inference_model(self) -> keras.Model:
        """The model an export serves (`Servable.serving_model`): the trained model
        itself for most tasks, a sentence embedder's embedder (one text a row)."""
        return self.task.serving_model(self.model)


def task_description(task: Task, tokenizer) -> dict[str, Any]:
    """The JSON that rebuilds `task` (and its preprocessor) without its training data:
    `task.description(tokenizer)`, which task.json holds."""
    return task.description(tokenizer)


def save_finetuned(directory: str, task: Task, model: keras.Model, tokenizer) -> str:
    """Writes `model.keras`, `vocab.txt` and `task.json` to `directory`, atomically.

    The three files land together (a reader never sees a model beside another run's
    task.json); an existing directory has them replaced and keeps its other files.
    """
    from keras_bert_zoo.text.vocab import write_vocab

    directory = os.fspath(directory)
    with atomic_directory(directory) as temp_dir:
        save_inference_model(model, os.path.join(temp_dir, MODEL_FILE))
        write_vocab(os.path.join(temp_dir, VOCAB_FILE), tokenizer.get_vocabulary())
        with open(os.path.join(temp_dir, TASK_FILE), "w", encoding="utf-8") as f:
            json.dump(task_description(task, tokenizer), f, indent=2, sort_keys=True)
            f.write("\n")
    return directory


def read_task_description(directory: str) -> dict[str, Any]:
    path = os.path.join(os.fspath(directory), TASK_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{directory}: no {TASK_FILE}; expected a directory written by "
            "tools/run_finetuning.py (model.keras, vocab.txt, task.json)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            description = json.load(f)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}: not valid JSON ({error})") from error
    for key in ("task_name", "max_seq_length", "options", "state", "lowercase"):
        if key not in description:
            raise UserError(f"{path}: missing field {key!r}")
    if description.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise UserError(
            f"{path}: format_version {description['format_version']} is newer than this "
            f"keras_bert_zoo reads ({FORMAT_VERSION})"
        )
    return description


def task_from_description(description: dict[str, Any], data_dir: str | None = None) -> Task:
    """The task `description` names, with its saved options and state restored."""
    task = create_task(
        description["task_name"],
        data_dir=data_dir,
        max_seq_length=description["max_seq_length"],
        encoding=description.get("encoding", "utf-8"),
        **description["options"],
    )
    task.load_state(description["state"])
    return task


def finetuned_tokenizer(directory: str, description: dict[str, Any]):
    """The tokenizer of a fine-tuned directory (its `vocab.txt` and `task.json`'s casing
    and word-length limit), without loading its model."""
    from keras_bert_zoo.text import BertTokenizer
    from keras_bert_zoo.text.tokenizer import HUGGING_FACE_MAX_CHARS_PER_WORD

    return BertTokenizer(
        os.path.join(os.fspath(directory), VOCAB_FILE),
        lowercase=description["lowercase"],
        # Directories written before the limit was recorded were tokenized with 100.
        max_chars_per_token=description.get("max_chars_per_token", HUGGING_FACE_MAX_CHARS_PER_WORD),
    )


def load_finetuned(directory: str, data_dir: str | None = None) -> FinetunedModel:
    """Reads a directory written by `save_finetuned`.

    Args:
        directory: the directory.
        data_dir: where the task reads data from in this run (eval/predict), or None.
    """
    directory = os.fspath(directory)
    description = read_task_description(directory)
    for name in (MODEL_FILE, VOCAB_FILE):
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(f"{directory}: no {name}")
    task = task_from_description(description, data_dir=data_dir)
    tokenizer = finetuned_tokenizer(directory, description)
    model = load_inference_model(os.path.join(directory, MODEL_FILE))
    preprocessor = task.make_preprocessor(tokenizer)
    return FinetunedModel(task, model, tokenizer, preprocessor, directory)
