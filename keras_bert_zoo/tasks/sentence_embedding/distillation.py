"""The distillation half of `sentence_embedding` (`tasks.distillation.Distillable`): a
student embedding model learns a teacher embedding model's vectors.

The soft targets are the teacher's vectors (`SOFT_VECTORS`: their mean squared error,
through a projection the distiller learns when the widths differ). The transfer file
holds texts, as `predict_file` does: one text a line (`.txt`), or a TSV/CSV/JSONL with a
`text` column (else the `anchor_column`). Each text takes the prompt of
`predict_text_role` (a document's, by default).

A transfer example holds as many texts as a training example (2 for pairs and scored
pairs, 3 for triplets...; 1 without `--train_file`), consecutive texts of the file, the
last example completed from the file's first texts: every feature of an epoch then has
the `[texts, seq_len]` shape of the others and they batch together. In a batch, the
transfer rows' texts are more in-batch negatives of the labelled anchors; their own
rows weigh 0 in the task's loss, as every task's transfer rows do.

Example:

```python
task = tasks.create_task("sentence_embedding", train_file="pairs.tsv")
task.soft_targets()                          # "vectors"
task.read_transfer_file("texts.txt")[0].texts  # two texts of the file
```
"""

from __future__ import annotations

from keras_bert_zoo.tasks.distillation import SOFT_VECTORS, TRANSFER_EXAMPLE_ID, SoftTargetKind
from keras_bert_zoo.tasks.sentence_embedding.options import COSENT
from keras_bert_zoo.tasks.sentence_embedding.reader import TEXTS, EmbeddingExample
from keras_bert_zoo.utils.errors import UserError


class EmbeddingDistillation:
    """`Distillable`'s methods for `SentenceEmbeddingTask` (a mixin before `Task`): the
    teacher's vectors as soft targets, files of texts as transfer sets."""

    def soft_targets(self) -> SoftTargetKind:
        """`"vectors"`: the student learns the teacher's vectors by squared error."""
        return SOFT_VECTORS

    def check_distillation(self, *, hard_label_weight: float) -> None:
        """CoSENT ranks the scored pairs of a whole batch and weighs no row apart, so
        its batches cannot hold transfer rows of weight 0: scored pairs distil with
        `--hard_label_weight=0` (the teacher's vectors of their texts alone)."""
        if hard_label_weight and self.files.has("train") and self._loss_name() == COSENT:
            raise UserError(
                f"--hard_label_weight={hard_label_weight:g}: the scored pairs' CoSENT loss "
                "ranks a whole batch and weighs no row apart; distil them with "
                "--hard_label_weight=0 (the teacher's vectors of their texts) or "
                "--loss=cosine_similarity"
            )

    def read_transfer_file(self, path: str) -> list[EmbeddingExample]:
        """The texts of `path` (as `predict_file`'s) in examples of the training
        examples' number of texts (see the module docstring).

        Raises:
            FileNotFoundError: no such file.
            InputFileError: an empty text (naming `path:line`), or no text at all.
        """
        texts = self.files.text_examples(path)
        if not texts:
            raise UserError(f"{path}: no texts in the transfer file")
        width = len(self.read("train")[0].texts) if self.files.has("train") else 1
        count = -(-len(texts) // width)
        return [
            self.transfer_example(
                TRANSFER_EXAMPLE_ID.format(n),
                tuple(texts[(n * width + k) % len(texts)].texts[0] for k in range(width)),
                texts[n * width].source,
            )
            for n in range(count)
        ]

    def transfer_example(
        self, example_id: str, fields: tuple[str, ...], source: str
    ) -> EmbeddingExample:
        """An unlabelled example of the texts `fields`, each in `predict_text_role`.

        Raises:
            UserError: an empty text (naming `source`).
        """
        if not fields or not all(text.strip() for text in fields):
            raise UserError(f"{source}: empty text")
        role = self.option_values["predict_text_role"]
        return EmbeddingExample(
            example_id=example_id,
            texts=tuple(fields),
            roles=(role,) * len(fields),
            kind=TEXTS,
            source=source,
        )
