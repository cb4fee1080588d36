"""SWAG (`swag`): 4-way grounded commonsense inference, from the official CSVs or
tensorflow-datasets.

Context = `sent1`, choice i = `sent2 + " " + ending_i` (`startphrase` is `sent1 + " "
+ sent2`); the join happens inside `MultipleChoicePreprocessor`, so the exported
model takes SWAG's own fields `sent1`, `sent2`, `ending0` ... `ending3`. Everything
else (metric, state, predictions) is `MultipleChoiceTask`'s.

Example (the rest of the flow is `task.py`'s):

```python
from keras_bert_zoo import tasks

task = tasks.create_task("swag", data_dir="swagaf/data")  # train.csv, val.csv, test.csv
dev = task.read("dev")  # MultipleChoiceExample(context=sent1, choice_prefix=sent2, ...)
print(task.text_fields)  # ("sent1", "sent2", "ending0", ..., "ending3"): what is served
```
"""

from __future__ import annotations

import logging

import tensorflow as tf

from keras_bert_zoo.tasks._shared import as_text, prepared_tfds_builder
from keras_bert_zoo.tasks.multiple_choice.reader import (
    SWAG_ENDINGS,
    SWAG_NUM_CHOICES,
    MultipleChoiceExample,
    parse_label,
    read_swag_csv,
)
from keras_bert_zoo.tasks.multiple_choice.task import MultipleChoiceTask
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.utils.errors import UserError


@register_task("swag")
class SwagTask(MultipleChoiceTask):
    """SWAG (`swag`): 4-way grounded commonsense inference.

    Reads the official CSVs `train.csv`, `val.csv` (split `dev`) and `test.csv`
    (unlabelled) from `data_dir`, or, without `data_dir`, a tensorflow-datasets `swag`
    prepared in `tfds_data_dir` (features `sent1`, `sent2`, `ending0..3`, `label`;
    splits `train`, `validation`, `test`; label -1 marks unlabelled records).
    """

    text_fields = ("sent1", "sent2", *SWAG_ENDINGS)
    split_files = {
        "train": ("train.csv",),
        "dev": ("val.csv", "dev.csv"),
        "test": ("test.csv",),
    }
    tfds_splits = {"train": ("train",), "dev": ("validation", "val", "dev"), "test": ("test",)}

    @property
    def num_choices(self) -> int:
        return SWAG_NUM_CHOICES

    def read(self, split: str) -> list[MultipleChoiceExample]:
        if split not in self._examples_cache:
            if self.data_dir is not None:
                examples = read_swag_csv(self.split_path(split), split, encoding=self.encoding)
            else:
                examples = self._read_tfds(split)
            self._examples_cache[split] = examples
        return list(self._examples_cache[split])

    def _known_num_choices(self) -> int | None:
        return SWAG_NUM_CHOICES

    def _serving_segments(self, texts):
        sent1, sent2, *endings = texts
        return sent1, tf.stack(endings, axis=1), sent2

    def _item_fields(self, item: tuple) -> dict:
        # `(sent1, sent2, ending0, ..., ending3)`: each ending continues sent2.
        return {"context": item[0], "choices": tuple(item[2:]), "choice_prefix": item[1]}

    def _read_tfds(self, split: str) -> list[MultipleChoiceExample]:
        from keras_bert_zoo.data import tfds_dataset

        if split not in self.tfds_splits:
            raise UserError(f"swag: unknown split {split!r}; splits: {sorted(self.tfds_splits)}")
        builder = prepared_tfds_builder("swag", self.tfds_data_dir)
        available = set(builder.info.splits.keys())
        names = [name for name in self.tfds_splits[split] if name in available]
        if not names:
            raise UserError(
                f"tensorflow-datasets swag has no split for {split!r} "
                f"(looked for {self.tfds_splits[split]}, found {sorted(available)})"
            )
        features = set(builder.info.features.keys())
        missing = [name for name in ("sent1", "sent2", *SWAG_ENDINGS) if name not in features]
        if missing:
            raise UserError(f"tensorflow-datasets swag lacks features {missing}")
        id_feature = next((n for n in ("fold-ind", "fold_ind") if n in features), None)
        examples = []
        for index, record in enumerate(tfds_dataset(builder, names[0]).as_numpy_iterator()):
            where = f"tfds swag {names[0]}[{index}]"
            endings = tuple(as_text(record[name]) for name in SWAG_ENDINGS)
            for name, ending in zip(SWAG_ENDINGS, endings, strict=True):
                if not ending.strip():
                    raise UserError(f"{where}: {name} is empty")
            label = int(record["label"]) if "label" in record else -1
            examples.append(
                MultipleChoiceExample(
                    example_id=as_text(record[id_feature]) if id_feature else str(index),
                    context=as_text(record["sent1"]),
                    choices=endings,
                    label=None if label < 0 else parse_label(label, SWAG_NUM_CHOICES, where),
                    choice_prefix=as_text(record["sent2"]),
                    source=where,
                )
            )
        logging.info("Read %d examples of tfds swag %s", len(examples), names[0])
        return examples
