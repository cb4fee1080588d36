"""CoNLL-2003 English NER (`conll2003`): the official column files or tensorflow-datasets.

The nine tags of PER/ORG/LOC/MISC are fixed, in IOB1 (the original files) or IOB2;
everything else (windows, metric, predictions, serving) is `TokenClassificationTask`'s.

Example (the rest of the flow is `task.py`'s):

```python
from keras_bert_zoo import tasks

task = tasks.create_task("conll2003", data_dir="conll2003/")  # eng.train, eng.testa, ...
print(task.tags)  # the nine tags, in label order
train = task.read("train")  # TaggedSentence(words, tags), -DOCSTART- lines skipped
```
"""

from __future__ import annotations

import logging

from keras_bert_zoo.tasks._shared import as_text, prepared_tfds_builder
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.tagging.options import TAG_SCHEME_OPTION, WINDOW_STRIDE_OPTION
from keras_bert_zoo.tasks.tagging.reader import TaggedSentence
from keras_bert_zoo.tasks.tagging.task import TokenClassificationTask
from keras_bert_zoo.utils.errors import UserError

CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@register_task("conll2003")
class Conll2003Task(TokenClassificationTask):
    """CoNLL-2003 English NER (`conll2003`).

    Reads the official column files `token POS chunk NER` (`eng.train`, `eng.testa`,
    `eng.testb`) or the common copies (`train.txt`, `valid.txt`, `test.txt`), with the
    original IOB1 tags or IOB2 ones (detected for the strict figures, or `tag_scheme`);
    without `data_dir`, the tensorflow-datasets `conll2003` prepared in
    `tfds_data_dir`. Tags: the nine of PER/ORG/LOC/MISC; any other is an error.
    The test split (eng.testb) is labelled, so predict mode also scores it.
    """

    options = (TAG_SCHEME_OPTION, WINDOW_STRIDE_OPTION)
    split_files = {
        "train": ("eng.train", "train.txt"),
        "dev": ("eng.testa", "valid.txt", "dev.txt"),
        "test": ("eng.testb", "test.txt"),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.option_values["tag_scheme"] == "raw":
            raise UserError("conll2003 tags are IOB1 or IOB2; tag_scheme='raw' does not apply")
        self._tags = CONLL2003_TAGS

    def _column_options(self) -> dict:
        return {"word_column": 0, "tag_column": -1, "delimiter": "auto"}

    def _tags_source(self) -> str:
        return "CoNLL-2003 NER tags"

    def load_state(self, state) -> None:
        scheme = dict(state).get("tag_scheme")
        if state and scheme not in ("IOB1", "IOB2"):
            raise UserError(f"conll2003: the saved tag_scheme {scheme!r} is not IOB1 or IOB2")
        super().load_state(state)

    def read(self, split: str) -> list[TaggedSentence]:
        if self.data_dir is not None:
            return super().read(split)
        if split not in self._examples_cache:
            self._examples_cache[split] = self._read_tfds(split)
        return list(self._examples_cache[split])

    def _read_tfds(self, split: str) -> list[TaggedSentence]:
        from keras_bert_zoo.data import tfds_dataset

        builder = prepared_tfds_builder("conll2003", self.tfds_data_dir)
        names = builder.info.features["ner"].feature.names
        unknown = sorted(set(names) - set(CONLL2003_TAGS))
        if unknown:
            raise UserError(f"tensorflow-datasets conll2003: unknown NER tags {unknown}")
        sentences = []
        for index, record in enumerate(tfds_dataset(builder, split).as_numpy_iterator()):
            sentences.append(
                TaggedSentence(
                    example_id=f"{split}-{index}",
                    words=tuple(as_text(word) for word in record["tokens"]),
                    tags=tuple(names[tag] for tag in record["ner"]),
                    source=f"tfds conll2003 {split}[{index}]",
                )
            )
        logging.info("Read %d sentences of tfds conll2003 %s", len(sentences), split)
        return sentences
